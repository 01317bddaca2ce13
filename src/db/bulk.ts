import { type SQL, sql } from "drizzle-orm";
import { type Db, rowsOf } from "./client.js";

/** Column name → PostgreSQL type, as the rows' JSON is read back by `json_to_recordset`. */
export type RecordsetColumns = Record<string, string>;

/**
 * Inserts many rows with one statement and one parameter: the rows travel as a JSON array that PostgreSQL
 * unpacks with `json_to_recordset`. The cost stays flat in the number of columns and rows (no thousands of
 * bind parameters), and it works the same on postgres.js and PGlite. Table and column names come from code only.
 */
export async function insertRecordset<Row extends object, Out = unknown>(
  db: Db,
  table: string,
  columns: RecordsetColumns,
  rows: Row[],
  tail: SQL = sql``,
): Promise<Out[]> {
  if (rows.length === 0) return [];
  const names = Object.keys(columns).map((n) => `"${n}"`);
  const definitions = Object.entries(columns).map(([n, type]) => `"${n}" ${type}`);
  const list = sql.raw(names.join(", "));
  const result = await db.execute(
    sql`insert into ${sql.raw(`"${table}"`)} (${list})
        select ${list} from json_to_recordset(${JSON.stringify(rows)}::json) as r(${sql.raw(definitions.join(", "))})
        ${tail}`,
  );
  return rowsOf<Out>(result);
}

/**
 * A text[] parameter that travels as one JSON string, the same on postgres.js and PGlite: `= any(textArray(xs))`
 * binds one parameter however many values there are (`inArray` binds one each, and fails past 65,535).
 */
export function textArray(values: string[]): SQL {
  return sql`array(select json_array_elements_text(${JSON.stringify(values)}::json))`;
}
