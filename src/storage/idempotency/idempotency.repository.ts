import { and, eq, gte, sql } from "drizzle-orm";
import type { Db } from "../client.js";
import { deleteRowsBefore } from "../prune.js";
import { idempotencyKeys } from "../schema.js";

/** A stored answer of a request made with an Idempotency-Key, as stored (its answer sealed). */
export type IdempotencyKeyRow = typeof idempotencyKeys.$inferSelect;

/** The row of (`scope`, `keyHash`) written at or after `notBefore` (unix ms): an older one has expired. */
export async function findIdempotencyKey(
  db: Db,
  scope: string,
  keyHash: string,
  notBefore: number,
): Promise<IdempotencyKeyRow | undefined> {
  const [row] = await db
    .select()
    .from(idempotencyKeys)
    .where(and(eq(idempotencyKeys.scope, scope), eq(idempotencyKeys.keyHash, keyHash), gte(idempotencyKeys.createdAtM, notBefore)))
    .limit(1);
  return row;
}

/**
 * Stores `row` unless its (scope, key_hash) is taken; returns whether it was stored. ON CONFLICT DO NOTHING: a
 * concurrent duplicate waits for the first writer's transaction (PostgreSQL), then learns it lost without aborting
 * its own. A row of that key that has expired is replaced (its request is a new one).
 */
export async function insertIdempotencyKey(db: Db, row: IdempotencyKeyRow, expiredBefore: number): Promise<boolean> {
  const stored = await db
    .insert(idempotencyKeys)
    .values(row)
    .onConflictDoUpdate({
      target: [idempotencyKeys.scope, idempotencyKeys.keyHash],
      set: {
        fingerprint: sql`excluded.fingerprint`,
        status: sql`excluded.status`,
        answer: sql`excluded.answer`,
        createdAtM: sql`excluded.created_at_m`,
      },
      setWhere: sql`${idempotencyKeys.createdAtM} < ${expiredBefore}`,
    })
    .returning({ scope: idempotencyKeys.scope });
  return stored.length > 0;
}

/**
 * Deletes up to `maxRows` rows written before `before` (unix ms); returns how many went. One short statement on rows
 * chosen by ctid in a bounded subselect, as the audit log's pruning does.
 */
export function deleteIdempotencyKeysBefore(db: Db, before: number, maxRows: number): Promise<number> {
  return deleteRowsBefore(db, idempotencyKeys, idempotencyKeys.createdAtM, before, maxRows);
}
