import { getTableName, type SQL, Subquery, sql } from "drizzle-orm";
import type { PgTable } from "drizzle-orm/pg-core";

/**
 * A FROM item that stands for `table`, under the table's own name, holding only the rows `match` selects: put it
 * where `.from(table)` was, and the query's columns, joins and conditions read as before.
 *
 * `match` is an equality on a unique column (`hash = any(…)`, `id = …`): its index finds the rows, and nothing else
 * is in the materialized CTE, so no other index can serve it. The CTE is planned apart from the rest of the query
 * (an optimisation fence): the query cannot start anywhere else, whatever the table's statistics say. Without it,
 * right after a bulk import nobody analysed (PGlite has no autovacuum at all), the verification lookup was planned
 * from `apis` through keys_live_by_api_idx, reading every key of the API to find one hash (issue 13, 585 ms a lookup
 * among 1,000,000 keys). Conditions on other columns (`deleted_at_m is null`) go in the outer query's WHERE, outside
 * the fence: inside, a partial index matching them (keys_live_by_api_idx is `where deleted_at_m is null`) could be
 * read whole and intersected with the unique one.
 *
 * It is a subquery named as the table (drizzle then accepts the table's columns in the select list, and renders
 * `(…) "keys"`), typed as the table: it has the table's columns under the table's name. `withColumns` adds columns
 * computed from the matched rows as a set (keys.columns.ts, keyAggregatesOf): CTEs after `matched` in the same WITH,
 * and the columns and joins they give each row (read them as `"keys"."column"`).
 */
export function indexFirst<T extends PgTable>(
  table: T,
  match: SQL,
  withColumns?: (matched: SQL) => { ctes: SQL; columns: SQL; joins: SQL },
): T {
  const name = getTableName(table);
  const matched = sql`with matched as materialized (select * from ${sql.identifier(name)} where ${match})`;
  if (!withColumns) return new Subquery(sql`${matched} select * from matched`, {}, name) as unknown as T;
  const added = withColumns(sql`matched`);
  const rows = sql`${matched}, ${added.ctes} select matched.*, ${added.columns} from matched ${added.joins}`;
  return new Subquery(rows, {}, name) as unknown as T;
}
