/**
 * Console page benchmark (issue 37): the server time of the console's pages with BENCH_CONSOLE_KEYS keys (default
 * 100,000) in one API, the figure docs/benchmarks.md reports.
 *
 * On each store of BENCH_STORES, keyhaven runs as a child process (compiled, as bench:verify runs it); an API is
 * created, BENCH_CONSOLE_KEYS hash-only keys are imported into it (`POST /v1/migrations.createKeys`, 100 per request,
 * 4 in flight; key i is named `customer-<i>` and owned by `cust-<i>`), then one plaintext key, which is verified
 * 500 times (and 100 times with a wrong key) so that the charts have rows. The bench then signs in to the console
 * with the root key (bench/console.session.ts) and opens each page below BENCH_CONSOLE_SAMPLES times (default 30,
 * after 5 not counted), one after another:
 *   - overview:     /console/                     (verifications of 24 h by outcome, the APIs and their key counts)
 *   - key list:     /console/apis/<apiId>         (the first page of the keys table, its chart, its top keys)
 *   - key list p5:  the fifth page, reached through the pages' own "Next page" links (cursor paging)
 *   - search name:  /console/apis/<apiId>?q=customer-77777
 *   - search owner: /console/apis/<apiId>?q=cust-4242
 *   - key page:     /console/keys/<keyId>         (the verified key: every field, its chart)
 * Reported per page: the server's own time (its `Server-Timing: page;dur=`: the page's core calls and rendering)
 * p50/p95/max, and the round trip p50 seen by this process. The table is printed and written to
 * bench/results/console-<ts>.json.
 *
 * Run:   npm run bench:console
 * Environment:
 *   BENCH_CONSOLE_KEYS     keys in the API (default 100000)
 *   BENCH_CONSOLE_SAMPLES  measured openings of each page (default 30)
 *   BENCH_CONSOLE_ANALYZE_WAIT_S  on PostgreSQL, the pages are measured again once autovacuum has analysed the keys
 *                          the import wrote: the longest wait for that (default 180 s)
 *   BENCH_STORES           comma-separated subset of "postgres,pglite" (default both)
 *   BENCH_DATABASE_URL     PostgreSQL server to create the bench database on
 *                          (default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import postgres from "postgres";
import { signInToConsole } from "./console.session.js";
import {
  Cleanup,
  createDatabase,
  DEFAULT_DATABASE_URL,
  describeError,
  environmentInfo,
  envList,
  envPositive,
  formatMs,
  formatTable,
  handleInterrupts,
  httpCall,
  openAdmin,
  post,
  reportOutcome,
  sleep,
  startKeyhaven,
  summarizeLatencies,
  writeResults,
} from "./lib.js";

type StoreKind = "postgres" | "pglite";
type PageResult = {
  /** The store, and for PostgreSQL's second pass ", analysed". */
  store: string;
  page: string;
  path: string;
  samples: number;
  serverMs: ReturnType<typeof summarizeLatencies>;
  roundTripP50Ms: number;
  bytes: number;
};

const IMPORT_BATCH = 100;
const IMPORTS_IN_FLIGHT = 4;

async function main(): Promise<void> {
  const env = process.env;
  const keyCount = Math.floor(envPositive(env, "BENCH_CONSOLE_KEYS", 100_000));
  const samples = Math.floor(envPositive(env, "BENCH_CONSOLE_SAMPLES", 30));
  const analyzeWaitSeconds = envPositive(env, "BENCH_CONSOLE_ANALYZE_WAIT_S", 180);
  const stores = envList(env, "BENCH_STORES", ["postgres", "pglite"] as const);
  const databaseUrl = env.BENCH_DATABASE_URL?.trim() || DEFAULT_DATABASE_URL;
  const startedAt = new Date();
  const cleanup = new Cleanup();
  handleInterrupts("the bench database and data directories are removed");
  const results: PageResult[] = [];
  const failures: { store: string; error: string }[] = [];
  let failure: unknown;
  try {
    const admin = await openAdmin(databaseUrl, stores.includes("postgres"), cleanup);
    for (const store of stores) {
      try {
        results.push(...(await runStore(store, { keyCount, samples, analyzeWaitSeconds, databaseUrl, admin: admin.admin }, cleanup)));
      } catch (err) {
        failures.push({ store, error: describeError(err) });
        console.log(`✗ ${store}: ${describeError(err)}`);
      }
    }
    const rows = results.map((r) => [
      r.store,
      r.page,
      String(r.samples),
      formatMs(r.serverMs.p50),
      formatMs(r.serverMs.p90),
      formatMs(r.serverMs.max),
      formatMs(r.roundTripP50Ms),
      `${Math.round(r.bytes / 1024)} KiB`,
    ]);
    console.log(`\nConsole pages with ${keyCount.toLocaleString("en")} keys in one API (server time from Server-Timing)\n`);
    console.log(
      formatTable(["store", "page", "n", "p50 ms", "p90 ms", "max ms", "round trip p50", "size"], rows, new Set([2, 3, 4, 5, 6, 7])),
    );
    const file = await writeResults("console", startedAt, {
      startedAt,
      environment: environmentInfo(admin.postgresVersion),
      settings: { keyCount, samples, stores },
      results,
      failures,
    });
    console.log(`\nresults: ${file}`);
  } catch (err) {
    failure = err;
  } finally {
    await cleanup.runAll();
  }
  reportOutcome(failure, failures, (f) => [f.store]);
}

async function runStore(
  store: StoreKind,
  opts: {
    keyCount: number;
    samples: number;
    analyzeWaitSeconds: number;
    databaseUrl: string;
    admin: Parameters<typeof createDatabase>[0] | undefined;
  },
  cleanup: Cleanup,
): Promise<PageResult[]> {
  let storeEnv: Record<string, string>;
  /** PostgreSQL: waits up to `seconds` for the keys table's first analysis; the seconds it waited, or undefined. */
  let analysedBy: ((seconds: number) => Promise<number | undefined>) | undefined;
  if (store === "postgres") {
    if (!opts.admin) throw new Error("no PostgreSQL connection");
    const db = await createDatabase(opts.admin, opts.databaseUrl, cleanup);
    storeEnv = { DATABASE_URL: db.url };
    analysedBy = async (seconds) => {
      const sql = postgres(db.url, { max: 1, onnotice: () => {} });
      try {
        const started = performance.now();
        const [setting] = await sql<{ autovacuum: string }[]>`select current_setting('autovacuum') as autovacuum`;
        if (setting?.autovacuum !== "on") {
          // A server without autovacuum (as test servers are often set up): the ANALYZE it would have run.
          console.log("  postgres: autovacuum is off on this server; the bench runs ANALYZE itself");
          await sql`analyze keys, identities`;
          return (performance.now() - started) / 1000;
        }
        while (performance.now() - started < seconds * 1000) {
          const [row] = await sql<{ analysed: boolean }[]>`select coalesce(last_autoanalyze, last_analyze) is not null as analysed
            from pg_stat_user_tables where relname = 'keys'`;
          if (row?.analysed) return (performance.now() - started) / 1000;
          await sleep(1_000);
        }
        return undefined;
      } finally {
        await sql.end();
      }
    };
  } else {
    const dir = await mkdtemp(path.join(os.tmpdir(), "keyhaven-bench-"));
    cleanup.add(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
    storeEnv = { KEYHAVEN_DATA_DIR: dir };
  }
  const rootKey = `bench_root_${randomBytes(24).toString("base64url")}`;
  const server = await startKeyhaven({ ...storeEnv, KEYHAVEN_ANALYTICS: "on" }, rootKey, [], cleanup, ["REDIS_URL"]);
  try {
    const created = await post(server, rootKey, "/v1/apis.createApi", JSON.stringify({ name: "bench console" }));
    const apiId = (created.json as { apiId?: string }).apiId;
    if (created.status !== 200 || apiId === undefined) throw new Error(`apis.createApi answered ${created.status}`);

    const importStarted = performance.now();
    let next = 0;
    const worker = async () => {
      while (next < opts.keyCount) {
        const from = next;
        next += IMPORT_BATCH;
        const batch = [];
        for (let i = from; i < Math.min(from + IMPORT_BATCH, opts.keyCount); i++) {
          const value = createHash("sha256")
            .update(`bench-console-${i}-${randomBytes(8).toString("hex")}`)
            .digest("base64");
          batch.push({ apiId, name: `customer-${i}`, externalId: `cust-${i}`, hash: { value, variant: "sha256_base64" } });
        }
        const res = await post(server, rootKey, "/v1/migrations.createKeys", JSON.stringify(batch));
        if (res.status !== 200) throw new Error(`migrations.createKeys answered ${res.status}: ${JSON.stringify(res.json).slice(0, 300)}`);
      }
    };
    await Promise.all(Array.from({ length: IMPORTS_IN_FLIGHT }, worker));
    console.log(`▶ ${store}: ${opts.keyCount} keys imported in ${((performance.now() - importStarted) / 1000).toFixed(1)} s`);

    const plaintext = `bench_console_${randomBytes(18).toString("base64url")}`;
    const one = await post(server, rootKey, "/v1/migrations.createKeys", JSON.stringify([{ apiId, plaintext, name: "verified" }]));
    const keyId = (one.json as { keyIds?: string[] }).keyIds?.[0];
    if (keyId === undefined) throw new Error(`the verified key could not be imported: ${one.status}`);
    const verify = (key: string) =>
      httpCall(`${server.url}/v1/keys.verifyKey`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ key }),
      });
    for (let i = 0; i < 500; i++) await verify(plaintext);
    for (let i = 0; i < 100; i++) await verify(`${plaintext}x`);
    await sleep(3_000); // the analytics recorder flushes in the background

    const session = await signInToConsole(server, rootKey);
    const firstList = await session.open(`/apis/${apiId}`);
    if (firstList.status !== 200) throw new Error(`the key list answered ${firstList.status}`);
    let pageFive = `/apis/${apiId}`;
    for (let i = 0; i < 4; i++) {
      const page = await session.open(pageFive);
      const href = /<nav class="pager"[^>]*>\s*<a href="\/console([^"]+)"/.exec(page.html)?.[1];
      if (href === undefined) throw new Error(`page ${i + 1} of the key list has no next page`);
      pageFive = href.replace(/&amp;/g, "&");
    }
    const pages: [string, string][] = [
      ["overview", "/"],
      ["key list", `/apis/${apiId}`],
      ["key list p5", pageFive],
      ["search name", `/apis/${apiId}?q=customer-77777`],
      ["search owner", `/apis/${apiId}?q=cust-4242`],
      ["key page", `/keys/${keyId}`],
    ];
    const results = await measurePages(store, pages, session, opts.samples);
    if (analysedBy !== undefined) {
      // PostgreSQL's autovacuum analyses the table the import filled within a minute or two (autovacuum_naptime, 1
      // min by default); until then the planner knows nothing of the 100,000 keys. The pages again, once it has.
      const waited = await analysedBy(opts.analyzeWaitSeconds);
      console.log(`  postgres: keys analysed ${waited === undefined ? "NOT within the wait" : `after ${waited.toFixed(0)} s more`}`);
      results.push(...(await measurePages(`${store}, analysed`, pages, session, opts.samples)));
    }
    return results;
  } catch (err) {
    throw new Error(`${describeError(err)}\n--- keyhaven output ---\n${server.output()}`);
  } finally {
    await server.stop();
  }
}

/** Each page opened `samples` times after 5 unmeasured openings: its server time (Server-Timing) and round trip. */
async function measurePages(
  store: string,
  pages: [string, string][],
  session: Awaited<ReturnType<typeof signInToConsole>>,
  samples: number,
): Promise<PageResult[]> {
  const results: PageResult[] = [];
  for (const [page, pagePath] of pages) {
    const server: number[] = [];
    const trips: number[] = [];
    let bytes = 0;
    for (let i = 0; i < samples + 5; i++) {
      const res = await session.open(pagePath);
      if (res.status !== 200) throw new Error(`${page} (${pagePath}) answered ${res.status}`);
      if (i < 5) continue;
      server.push(res.serverMs);
      trips.push(res.roundTripMs);
      bytes = Buffer.byteLength(res.html);
    }
    const result = {
      store,
      page,
      path: pagePath,
      samples: server.length,
      serverMs: summarizeLatencies(server),
      roundTripP50Ms: summarizeLatencies(trips).p50,
      bytes,
    };
    console.log(`  ${store} ${page}: p50 ${formatMs(result.serverMs.p50)} ms, max ${formatMs(result.serverMs.max)} ms`);
    results.push(result);
  }
  return results;
}

await main();
