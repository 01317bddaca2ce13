import type { Harness } from "./helper.js";

/**
 * What the database holds: per table of the public schema, its row count and a hash of its contents. Tests that
 * send requests which must change nothing compare two snapshots. verification_counts, key_verifications_log, key_last_used and
 * root_key_last_used are left out: the analytics and last-used flushers write them in the background (a refused
 * request's root key did authenticate, and a refused verification is a use of the key). keyhaven_epoch is included: a refused request must not move it (that would
 * empty every replica's caches), so its triggers are row-level (migration root_key_epoch).
 */
export async function tableSnapshot(h: Harness): Promise<Record<string, string>> {
  const rows = await h.sql<{ tablename: string }>(`select tablename from pg_tables where schemaname = 'public' order by tablename`);
  const background = new Set(["verification_counts", "key_verifications_log", "key_last_used", "root_key_last_used"]);
  const tables = rows.map((r) => r.tablename).filter((t) => !background.has(t));
  const parts = tables.map(
    (t) => `select '${t}' as t, count(*)::text as n, md5(coalesce(string_agg(x::text, '|' order by x::text), '')) as d from "${t}" x`,
  );
  const counts = await h.sql<{ t: string; n: string; d: string }>(parts.join(" union all "));
  return Object.fromEntries(counts.map((r) => [r.t, `${r.n} rows, ${r.d}`]));
}
