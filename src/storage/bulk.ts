import { getTableColumns, getTableName, type SQL, sql } from "drizzle-orm";
import type { PgColumn, PgTable } from "drizzle-orm/pg-core";
import { type Db, rowsOf } from "./client.js";

/**
 * Inserts many rows with one statement and one parameter: the rows travel as a JSON array that PostgreSQL
 * unpacks with `json_to_recordset`. The cost stays flat in the number of columns and rows (no thousands of
 * bind parameters), and it works the same on postgres.js and PGlite. Rows are the table's drizzle insert type
 * (its TypeScript field names); each field's column name and PostgreSQL type come from the drizzle table in
 * schema.ts, never from a list copied by hand. A field a row leaves out is not inserted (the column's default).
 */
export async function insertRecordset<T extends PgTable, Out = unknown>(
  db: Db,
  table: T,
  rows: T["$inferInsert"][],
  tail: SQL = sql``,
): Promise<Out[]> {
  if (rows.length === 0) return [];
  const columns = getTableColumns(table) as Record<string, PgColumn>;
  const fields = new Set<string>();
  for (const row of rows) for (const field of Object.keys(row)) fields.add(field);
  const used = [...fields].map((field) => {
    const column = columns[field];
    if (!column) throw new Error(`${getTableName(table)} has no column for the field ${field}`);
    return { field, column };
  });
  const list = sql.raw(used.map(({ column }) => `"${column.name}"`).join(", "));
  const selected = sql.raw(used.map(({ field }) => `"${field}"`).join(", "));
  const definitions = sql.raw(used.map(({ field, column }) => `"${field}" ${column.getSQLType()}`).join(", "));
  const result = await db.execute(
    sql`insert into ${sql.raw(`"${getTableName(table)}"`)} (${list})
        select ${selected} from json_to_recordset(${JSON.stringify(rows)}::json) as r(${definitions})
        ${tail}`,
  );
  return rowsOf<Out>(result);
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
