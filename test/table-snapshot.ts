import type { Harness } from "./helper.js";

/**
 * What the database holds: per table of the public schema, its row count and a hash of its contents. Tests that
 * send requests which must change nothing compare two snapshots. verification_counts is left out: the analytics
 * flusher writes it in the background. keyhaven_epoch is included: a refused request must not move it (that would
 * empty every replica's caches), so its triggers are row-level (migration root_key_epoch).
 */
export async function tableSnapshot(h: Harness): Promise<Record<string, string>> {
  const rows = await h.sql<{ tablename: string }>(`select tablename from pg_tables where schemaname = 'public' order by tablename`);
  const tables = rows.map((r) => r.tablename).filter((t) => t !== "verification_counts");
  const parts = tables.map(
    (t) => `select '${t}' as t, count(*)::text as n, md5(coalesce(string_agg(x::text, '|' order by x::text), '')) as d from "${t}" x`,
  );
  const counts = await h.sql<{ t: string; n: string; d: string }>(parts.join(" union all "));
  return Object.fromEntries(counts.map((r) => [r.t, `${r.n} rows, ${r.d}`]));
}
