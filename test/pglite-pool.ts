import { readFileSync } from "node:fs";
import type { PGlite } from "@electric-sql/pglite";
import { inject } from "vitest";
import { pgliteStore, type Store } from "../src/storage/client.js";
import { startPglite } from "../src/storage/pgliteParsers.js";

/**
 * Migrated in-memory PGlite instances, reused by the test files a worker runs one after another. Starting one
 * (initdb, the backend, the migrations) cost about 2 s of CPU on the slow machine of docs/benchmarks.md: 41% of
 * `npm test`'s CPU when every harness started its own. A store's `close` hands its instance back emptied to what
 * migrating left: every table of the public schema truncated and the migrations' own rows written again, session
 * state discarded, statistics reset. An instance whose schema a test changed (a renamed table, a dropped trigger, a
 * fault constraint left behind), or that does not answer, is closed instead of reused.
 */

/** Instances kept idle per worker; more only cost memory (each holds its own PostgreSQL). */
const MAX_IDLE = 2;
/** How long emptying an instance may take before it is closed instead (a transaction a test left open). */
const RESET_DEADLINE_MS = 10_000;

const idle: PGlite[] = [];
let reference: Promise<{ reset: string; schema: string }> | undefined;

/** Everything of the public schema a test could change, as one hash (compared before an instance is reused). */
const SCHEMA_FINGERPRINT = `select md5(string_agg(x, '|' order by x)) as fingerprint from (
  select c.relname || ':' || c.relkind::text || ':' || coalesce(array_to_string(c.reloptions, ','), '') as x
    from pg_class c where c.relnamespace = 'public'::regnamespace
  union all select a.attrelid::regclass::text || '.' || a.attname || ':' || format_type(a.atttypid, a.atttypmod)
      || ':' || a.attnotnull || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    from pg_attribute a join pg_class c on c.oid = a.attrelid
    left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
    where c.relnamespace = 'public'::regnamespace and a.attnum > 0 and not a.attisdropped
  union all select conrelid::regclass::text || '.' || conname || ':' || pg_get_constraintdef(oid) || ':' || convalidated
    from pg_constraint where connamespace = 'public'::regnamespace
  union all select tgrelid::regclass::text || '.' || tgname || ':' || tgenabled::text || ':' || pg_get_triggerdef(oid)
    from pg_trigger where not tgisinternal
  union all select p.proname || ':' || md5(p.prosrc) from pg_proc p where p.pronamespace = 'public'::regnamespace
  union all select n.nspname from pg_namespace n
) s`;

async function fingerprint(client: PGlite): Promise<string> {
  return (await client.query<{ fingerprint: string }>(SCHEMA_FINGERPRINT)).rows[0]!.fingerprint;
}

/**
 * What emptying needs, read once from the first migrated instance: the public tables to truncate, and the rows the
 * migrations wrote (as inserts of their JSON).
 */
async function referenceOf(client: PGlite): Promise<{ reset: string; schema: string }> {
  const tables = (
    await client.query<{ name: string }>(`select quote_ident(tablename) as name from pg_tables where schemaname = 'public' order by 1`)
  ).rows.map((r) => r.name);
  const seeds: string[] = [];
  for (const table of tables) {
    const { rows } = await client.query<{ rows: string | null }>(`select json_agg(t)::text as rows from ${table} t`);
    const json = rows[0]!.rows;
    if (json !== null) seeds.push(`insert into ${table} select * from json_populate_recordset(null::${table}, $seed$${json}$seed$)`);
  }
  // DISCARD ALL resets the session's settings to the server's defaults; PGlite set some at start (search_path).
  const settings = (
    await client.query<{ set: string }>(`select format('set %I to %L', name, setting) as set from pg_settings where source = 'session'`)
  ).rows.map((r) => r.set);
  const reset = [
    ...settings,
    `truncate ${tables.join(", ")} restart identity cascade`,
    ...seeds,
    `delete from pg_statistic where starelid in (select oid from pg_class where relnamespace = 'public'::regnamespace)`,
    "select pg_stat_reset()",
  ].join(";\n");
  return { reset, schema: await fingerprint(client) };
}

/** The migrated data directory test/global-setup.ts made for the run, read once per worker. */
let templateDir: Blob | undefined;

/** A new migrated instance: the run's template data directory loaded (no initdb, no migrations to run). */
async function migrated(): Promise<PGlite> {
  templateDir ??= new Blob([readFileSync(inject("pgliteTemplateFile"))]);
  return startPglite("memory://", undefined, templateDir);
}

/** The instance behind each store handed out (the store's own `$client` is a wrapper of it). */
const instanceOfStore = new WeakMap<Store, PGlite>();

/** Whether `store`'s instance waits in this worker's idle list (for the pool's own test). */
export function isIdle(store: Store): boolean {
  return idle.includes(instanceOfStore.get(store)!);
}

async function release(client: PGlite): Promise<void> {
  if (client.closed) return;
  let timer: NodeJS.Timeout | undefined;
  try {
    const ref = await reference!;
    const emptied = (async () => {
      // On its own: DISCARD ALL cannot run in the transaction a multi-statement exec is.
      await client.exec("discard all");
      await client.exec(ref.reset);
      return (await fingerprint(client)) === ref.schema;
    })();
    const deadline = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), RESET_DEADLINE_MS);
    });
    if ((await Promise.race([emptied, deadline])) && idle.length < MAX_IDLE) {
      idle.push(client);
      return;
    }
  } catch {
    // Not reusable: closed below.
  } finally {
    clearTimeout(timer);
  }
  await client.close().catch(() => {});
}

/**
 * A migrated, empty embedded store, as `openPglite("memory://")` and the migrations make one; its `close` hands the
 * instance back for the next caller in this worker.
 */
export async function pooledPglite(): Promise<Store> {
  const client = idle.pop() ?? (await migrated());
  reference ??= referenceOf(client);
  await reference;
  const store = pgliteStore(client, "embedded PGlite in memory (nothing is kept)", () => release(client));
  instanceOfStore.set(store, client);
  return store;
}
