import { getTableName, type SQL, Subquery, sql } from "drizzle-orm";
import type { PgTable } from "drizzle-orm/pg-core";

/**
 * A FROM item that stands for `table`, under the table's own name, holding only the rows `match` selects: put it
 * where `.from(table)` was, and the query's columns, joins and conditions read as before.
 *
 * `match` is an equality on a unique column (`hash = any(…)`, `id = …`): its index finds the rows, and nothing else
 * is in the materialized CTE (indexFirstCte), so no other index can serve it. The CTE is planned apart from the rest
 * of the query (an optimisation fence): the query cannot start anywhere else, whatever the table's statistics say.
 * Without it, right after a bulk import nobody analysed (PGlite has no autovacuum at all), the verification lookup
 * was planned from `apis` through keys_live_by_api_idx, reading every key of the API to find one hash (issue 13,
 * 585 ms a lookup among 1,000,000 keys). Conditions on other columns (`deleted_at_m is null`) go in the outer
 * query's WHERE, outside the fence: inside, a partial index matching them (keys_live_by_api_idx is
 * `where deleted_at_m is null`) could be read whole and intersected with the unique one.
 *
 * It is a subquery named as the table (drizzle then accepts the table's columns in the select list, and renders
 * `(…) "keys"`), typed as the table: it has the table's columns under the table's name.
 */
export function indexFirst<T extends PgTable>(table: T, match: SQL): T {
  const rows = sql`with ${indexFirstCte("matched", table, match)} select * from matched`;
  return new Subquery(rows, {}, getTableName(table)) as unknown as T;
}

/**
 * The fence itself, for a statement that writes its own WITH: `name as materialized (select * from table where
 * match)`, a CTE of the rows `match` selects through its unique index (see indexFirst). Read it as the table by
 * naming it so (`from matched "keys"`), and keep conditions on other columns outside it.
 */
export function indexFirstCte(name: string, table: PgTable, match: SQL): SQL {
  return sql`${sql.identifier(name)} as materialized (select * from ${sql.identifier(getTableName(table))} where ${match})`;
}
