/**
 * The server half of `keyhaven import --from-unkey` (issue 36 wants 100,000 keys copied at 1,000 keys/s or more, in
 * requests of 1,000 keys): POST /v2/keyhaven.copyFromUnkey with BENCH_KEYS keys in requests of BENCH_BATCH, one
 * request at a time as the CLI sends them, to keyhaven as a child process (compiled), on PostgreSQL (a fresh
 * `keyhaven_bench_<random>` database on BENCH_DATABASE_URL's server) and on PGlite (a fresh KEYHAVEN_DATA_DIR).
 * Each key carries what a copied Unkey key typically has: a name, a small meta, credits with a daily refill, one
 * rate limit, one role and one permission; every BENCH_PLAINTEXT_EVERY-th key its plaintext (the others pending).
 * Then the same requests again (everything unchanged: a resumed or repeated run), then with every key's name and rate
 * limit changed (everything updated).
 *
 * Reported per store and pass: keys/s overall, request latency p50/p99 and the slowest request. The rows in `keys`
 * are checked through keyhaven.getCopyStatus at the end. Results go to bench/results/copy-<ts>.json.
 *
 * Run:   npx tsx bench/copy.bench.ts
 * Environment:
 *   BENCH_KEYS             keys in all (default 100000)
 *   BENCH_BATCH            keys per request (default 1000, the route's maximum)
 *   BENCH_PLAINTEXT_EVERY  every n-th key has its plaintext (default 2; 0: none)
 *   BENCH_STORES           comma-separated subset of "postgres,pglite" (default both)
 *   BENCH_DATABASE_URL     PostgreSQL server (default postgres://postgres@127.0.0.1:5432/postgres)
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import postgres from "postgres";
import {
  Cleanup,
  createDatabase,
  DEFAULT_DATABASE_URL,
  describeError,
  environmentInfo,
  envPositive,
  formatTable,
  handleInterrupts,
  post,
  round,
  startKeyhaven,
  summarizeLatencies,
  writeResults,
} from "./lib.js";

const env = process.env;
const TOTAL = envPositive(env, "BENCH_KEYS", 100_000);
const BATCH = envPositive(env, "BENCH_BATCH", 1000);
const PLAINTEXT_EVERY = Number(env.BENCH_PLAINTEXT_EVERY ?? 2);
const STORES = (env.BENCH_STORES ?? "postgres,pglite").split(",").map((s) => s.trim());
const DATABASE_URL = env.BENCH_DATABASE_URL ?? DEFAULT_DATABASE_URL;

type PassResult = { pass: string; keys: number; seconds: number; keysPerSecond: number; p50: number; p99: number; max: number };

function batches(apiId: string): string[] {
  const bodies: string[] = [];
  let n = 0;
  for (let from = 0; from < TOTAL; from += BATCH) {
    const keys = [];
    for (let i = from; i < Math.min(TOTAL, from + BATCH); i++, n++) {
      keys.push({
        id: `key_bench_${n}_${randomBytes(6).toString("hex")}`,
        apiId,
        start: "uk_ab12",
        createdAt: 1_700_000_000_000 + n,
        enabled: true,
        name: `customer ${n}`,
        meta: { plan: "pro", customer: n },
        credits: { remaining: 1000, refill: { interval: "daily", amount: 1000 } },
        ratelimits: [{ name: "requests", limit: 100, duration: 60_000, autoApply: true }],
        roles: ["bench-role"],
        permissions: ["bench.read"],
        ...(PLAINTEXT_EVERY > 0 && n % PLAINTEXT_EVERY === 0 && { plaintext: `uk_${randomBytes(16).toString("hex")}` }),
      });
    }
    bodies.push(JSON.stringify({ keys }));
  }
  return bodies;
}

async function runStore(store: string, admin: postgres.Sql | undefined, cleanup: Cleanup): Promise<PassResult[]> {
  let storeEnv: Record<string, string>;
  if (store === "postgres") {
    if (!admin) throw new Error("no PostgreSQL connection");
    storeEnv = { DATABASE_URL: (await createDatabase(admin, DATABASE_URL, cleanup)).url };
  } else {
    const dir = await mkdtemp(path.join(os.tmpdir(), "keyhaven-bench-"));
    cleanup.add(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
    storeEnv = { KEYHAVEN_DATA_DIR: dir };
  }
  const rootKey = `bench_root_${randomBytes(24).toString("base64url")}`;
  const server = await startKeyhaven(storeEnv, rootKey, [], cleanup, ["REDIS_URL"]);
  try {
    const apiId = `api_bench_${randomBytes(6).toString("hex")}`;
    const setup = await post(
      server,
      rootKey,
      "/v2/keyhaven.copyFromUnkey",
      JSON.stringify({
        apis: [{ id: apiId, name: "bench api" }],
        permissions: [{ id: "perm_bench", name: "read", slug: "bench.read" }],
        roles: [{ id: "role_bench", name: "bench-role", permissions: ["bench.read"] }],
      }),
    );
    if (setup.status !== 200) throw new Error(`setup answered ${setup.status}: ${JSON.stringify(setup.json)}`);
    const created = batches(apiId);
    // The third pass changes every key (its name, roles, rate limit): what a copy of a workspace changed upstream does.
    const changed = created.map((body) =>
      body.replaceAll('"name":"customer ', '"name":"renamed customer ').replaceAll('"limit":100,', '"limit":200,'),
    );
    const results: PassResult[] = [];
    for (const [pass, bodies] of [
      ["create", created],
      ["again (unchanged)", created],
      ["every key changed (updated)", changed],
    ] as const) {
      const latencies: number[] = [];
      const started = performance.now();
      for (const body of bodies) {
        const t0 = performance.now();
        const res = await post(server, rootKey, "/v2/keyhaven.copyFromUnkey", body);
        latencies.push(performance.now() - t0);
        const keys = (res.json as { data?: { keys?: { skipped?: unknown[] } } }).data?.keys;
        if (res.status !== 200 || keys?.skipped?.length)
          throw new Error(`copy answered ${res.status}: ${JSON.stringify(res.json).slice(0, 500)}`);
      }
      const seconds = (performance.now() - started) / 1000;
      const summary = summarizeLatencies(latencies);
      results.push({
        pass,
        keys: TOTAL,
        seconds: round(seconds, 2),
        keysPerSecond: Math.round(TOTAL / seconds),
        p50: round(summary.p50, 1),
        p99: round(summary.p99, 1),
        max: round(summary.max, 1),
      });
      console.log(`${store} ${pass}: ${TOTAL} keys in ${seconds.toFixed(2)} s (${Math.round(TOTAL / seconds)} keys/s)`);
    }
    const status = await post(server, rootKey, "/v2/keyhaven.getCopyStatus", JSON.stringify({ apiIds: [apiId] }));
    const counted = (status.json as { data?: { keys?: number }[] }).data?.[0]?.keys;
    if (counted !== TOTAL) throw new Error(`getCopyStatus counts ${counted} keys, not ${TOTAL}`);
    return results;
  } finally {
    await server.stop();
  }
}

async function main(): Promise<void> {
  handleInterrupts("stopping after clean-up");
  const cleanup = new Cleanup();
  const startedAt = new Date();
  const admin = STORES.includes("postgres") ? postgres(DATABASE_URL, { max: 1, onnotice: () => {} }) : undefined;
  const report: Record<string, unknown> = { settings: { TOTAL, BATCH, PLAINTEXT_EVERY, STORES } };
  const rows: string[][] = [];
  try {
    const version = admin ? (await admin`show server_version`)[0]?.server_version : undefined;
    report.environment = environmentInfo(version);
    for (const store of STORES) {
      const results = await runStore(store, admin, cleanup);
      report[store] = results;
      for (const r of results)
        rows.push([store, r.pass, String(r.keys), String(r.seconds), String(r.keysPerSecond), String(r.p50), String(r.p99), String(r.max)]);
    }
    console.log(formatTable(["store", "pass", "keys", "s", "keys/s", "p50 ms", "p99 ms", "max ms"], rows, new Set([2, 3, 4, 5, 6, 7])));
    console.log(`results: ${await writeResults("copy", startedAt, report)}`);
  } catch (err) {
    console.error(describeError(err));
    process.exitCode = 1;
  } finally {
    await cleanup.runAll();
    await admin?.end();
  }
}

await main();
