import { getTableColumns, getTableName, type SQL, sql } from "drizzle-orm";
import type { PgColumn, PgTable } from "drizzle-orm/pg-core";
import { type Db, rowsOf } from "./client.js";

/**
 * The most rows one statement of insertRecordset carries: more go in further statements (in the caller's
 * transaction, if any), so that no statement grows with the request. 1,000 rows of a link table are about 150 KB
 * of JSON; a request's 10,000 links (core/rbac/rbac.bounds.ts) are ten statements.
 */
export const MAX_ROWS_PER_STATEMENT = 1_000;

/**
 * Inserts many rows with one parameter per statement: the rows travel as a JSON array that PostgreSQL unpacks
 * with `json_to_recordset`, at most MAX_ROWS_PER_STATEMENT rows a statement, in order. The cost stays flat in the
 * number of columns and rows (no thousands of bind parameters), and it works the same on postgres.js and PGlite.
 * Rows are the table's drizzle insert type (its TypeScript field names); each field's column name and PostgreSQL
 * type come from the drizzle table in schema.ts, never from a list copied by hand. A field a row leaves out is not
 * inserted (the column's default). Returns what `tail`'s `returning` answers, of every statement in order.
 */
export async function insertRecordset<T extends PgTable, Out = unknown>(
  db: Db,
  table: T,
  rows: T["$inferInsert"][],
  tail: SQL = sql``,
  /** What the first statement begins with (a data-modifying CTE, `with … `, written in that statement). */
  head: SQL = sql``,
): Promise<Out[]> {
  if (rows.length <= MAX_ROWS_PER_STATEMENT) return insertRecordsetOnce<T, Out>(db, table, rows, tail, head);
  const out: Out[] = [];
  for (let from = 0; from < rows.length; from += MAX_ROWS_PER_STATEMENT) {
    const first = from === 0 ? head : sql``;
    out.push(...(await insertRecordsetOnce<T, Out>(db, table, rows.slice(from, from + MAX_ROWS_PER_STATEMENT), tail, first)));
  }
  return out;
}

async function insertRecordsetOnce<T extends PgTable, Out>(
  db: Db,
  table: T,
  rows: T["$inferInsert"][],
  tail: SQL,
  head: SQL,
): Promise<Out[]> {
  if (rows.length === 0) return [];
  return rowsOf<Out>(await db.execute(sql`${head}${recordsetInsert(table, rows, tail)}`));
}

/** insertRecordset's statement for at most MAX_ROWS_PER_STATEMENT rows, unsent: for a CTE of another statement. */
export function recordsetInsert<T extends PgTable>(table: T, rows: T["$inferInsert"][], tail: SQL = sql``): SQL {
  const used = usedColumns(table, rows);
  const list = sql.raw(used.map(({ column }) => `"${column.name}"`).join(", "));
  const selected = sql.raw(used.map(({ field }) => `"${field}"`).join(", "));
  return sql`insert into ${sql.raw(`"${getTableName(table)}"`)} (${list})
        select ${selected} from ${recordsetOf(table, rows, "r", used)}
        ${tail}`;
}

/**
 * `json_to_recordset(<rows>) as <alias>(…)`: the rows as a relation of one parameter, each field a column named by
 * its TypeScript field (`<alias>."keyId"`) and typed as schema.ts types its column, for a statement that reads them
 * (an UPDATE … FROM, a join). Every row should give the same fields: one a row leaves out is null.
 */
export function recordsetOf<T extends PgTable>(
  table: T,
  rows: Partial<T["$inferInsert"]>[],
  alias: string,
  used: { field: string; column: PgColumn }[] = usedColumns(table, rows),
): SQL {
  const definitions = sql.raw(used.map(({ field, column }) => `"${field}" ${column.getSQLType()}`).join(", "));
  return sql`json_to_recordset(${JSON.stringify(rows)}::json) as ${sql.raw(alias)}(${definitions})`;
}

function usedColumns<T extends PgTable>(table: T, rows: Partial<T["$inferInsert"]>[]): { field: string; column: PgColumn }[] {
  const columns = getTableColumns(table) as Record<string, PgColumn>;
  const fields = new Set<string>();
  for (const row of rows) for (const field of Object.keys(row)) fields.add(field);
  return [...fields].map((field) => {
    const column = columns[field];
    if (!column) throw new Error(`${getTableName(table)} has no column for the field ${field}`);
    return { field, column };
  });
}

/**
 * A text[] parameter that travels as one JSON string, the same on postgres.js and PGlite: `= any(textArray(xs))`
 * binds one parameter however many values there are (`inArray` binds one each, and fails past 65,535).
 */
export function textArray(values: readonly string[]): SQL {
  return jsonTextArray(sql`${JSON.stringify(values)}`);
}

/** The text[] of a JSON array of strings given as SQL (a placeholder of a prepared statement, say): textArray's form. */
export function jsonTextArray(json: SQL): SQL {
  return sql`array(select json_array_elements_text(${json}::json))`;
}
