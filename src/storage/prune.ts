import { sql } from "drizzle-orm";
import type { PgColumn, PgTable } from "drizzle-orm/pg-core";
import { type Db, rowsOf } from "./client.js";

/**
 * Deletes up to `maxRows` rows of `table` whose `createdAt` (unix ms) is before `before`; returns how many went. One
 * short statement: the rows are chosen by their ctid in a bounded subselect, so no statement holds locks on more than
 * `maxRows` rows, whatever the backlog (core/pruner.ts runs it batch by batch).
 */
export async function deleteRowsBefore(db: Db, table: PgTable, createdAt: PgColumn, before: number, maxRows: number): Promise<number> {
  const column = sql.identifier(createdAt.name);
  const [row] = rowsOf<{ deleted: number | string }>(
    await db.execute(sql`with gone as (
        delete from ${table} where ctid = any(array(
          select ctid from ${table} where ${column} < ${before} limit ${maxRows}))
        returning 1)
      select count(*)::int as deleted from gone`),
  );
  return Number(row?.deleted ?? 0);
}
