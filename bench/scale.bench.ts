/**
 * Scale benchmark (issue 13 §2 and §4 "Scale"): import BENCH_SCALE_KEYS keys into one API, then verify keys chosen
 * at random among all of them next to a hot set of BENCH_HOT_KEYS keys, with no manual ANALYZE in between.
 *
 * For each store of BENCH_STORES (a fresh `keyhaven_bench_<random>` database on BENCH_DATABASE_URL's server, and a
 * fresh KEYHAVEN_DATA_DIR for PGlite), keyhaven runs as a child process (compiled: `node dist/cli/main.js serve`):
 *   1. Import: BENCH_IMPORT_CONCURRENCY workers post `POST /v1/migrations.createKeys` batches of 100 keys by hash
 *      (`sha256_base64` of `sk_scale_<run>_<i>`, the fastest import path) until BENCH_SCALE_KEYS are in; the rate
 *      is reported overall and per 100,000 keys (to see a slow-down as the table grows).
 *   2. Right after, verification by `POST /v1/keys.verifyKey` at BENCH_CONNECTIONS connections (autocannon in this
 *      process, a new random key per request): "random" picks among all the imported keys (most miss the
 *      verification cache, which holds 50,000 keys, so each is a lookup in the store), "hot" among the first
 *      BENCH_HOT_KEYS (all cached after the first round). Rounds alternate, random first (the store as the import
 *      left it), BENCH_ROUNDS of each, BENCH_SECONDS each after a 2 s warm-up; every answer must be a 200 with
 *      `valid: true`. On PostgreSQL, whether autovacuum has analysed `keys` yet is reported at each round.
 * Reported: import keys/s, then per round req/s, p50/p99, the load average and the CPU per verification (from /proc,
 * on Linux: keyhaven's main thread, where its JavaScript and PGlite run, with how busy it was; the whole keyhaven
 * process; PostgreSQL's backends serving it), and random/hot (the target is at least 0.5) next to the main thread's
 * time per verification of each kind: on the embedded store, busy throughout, random/hot follows hot/random of those
 * times. The table is printed at the end and written to bench/results/scale-<ts>.json.
 *
 * Run:   npm run bench:scale                                    (1,000,000 keys: long)
 *        BENCH_SCALE_KEYS=200000 BENCH_SECONDS=10 npm run bench:scale
 * Environment:
 *   BENCH_SCALE_KEYS          keys imported (default 1000000)
 *   BENCH_HOT_KEYS            the hot set (default 1000)
 *   BENCH_SECONDS             seconds per verification round, after a 2 s warm-up (default 20)
 *   BENCH_ROUNDS              rounds of each kind, alternated (default 3)
 *   BENCH_CONNECTIONS         verification connections (default 50)
 *   BENCH_IMPORT_CONCURRENCY  createKeys requests in flight (default 4)
 *   BENCH_STORES              comma-separated subset of "postgres,pglite" (default both)
 *   BENCH_DATABASE_URL        PostgreSQL server (default postgres://postgres@127.0.0.1:5432/postgres)
 *   DATABASE_POOL_SIZE        passed through to keyhaven when set
 *   BENCH_VERIFICATION_LOG_DAYS  passed to keyhaven as KEYHAVEN_VERIFICATION_LOG_DAYS when set ("0": no raw log)
 *   BENCH_PGLITE_SHARED_BUFFERS_MB  the embedded store's buffer pool (KEYHAVEN_PGLITE_SHARED_BUFFERS_MB; unset: keyhaven's
 *                             default, 128 MB, smaller than the 234 MB of keys and hash index of 1,000,000 keys)
 *   BENCH_SERVER_NODE_ARGS    extra node flags for the keyhaven child, space-separated
 *                             (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof")
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import type { Sql } from "postgres";
import {
  type Admin,
  type ChildServer,
  Cleanup,
  type CpuPerRequest,
  cpuPerRequest,
  cpuSnapshot,
  createDatabase,
  DEFAULT_DATABASE_URL,
  describeError,
  environmentInfo,
  envList,
  envPositive,
  envServerNodeArgs,
  formatCount,
  formatCpu,
  formatMs,
  formatShare,
  formatTable,
  handleInterrupts,
  interrupted,
  type LatencySummary,
  loadJsonPost,
  medianCpu,
  openAdmin,
  post,
  reportOutcome,
  round,
  startKeyhaven,
  summarizeLatencies,
  writeResults,
} from "./lib.js";

const BATCH_SIZE = 100;
const SLICE_KEYS = 100_000;
const WARMUP_SECONDS = 2;
type StoreKind = "postgres" | "pglite";
type Kind = "random" | "hot";

type Settings = {
  keys: number;
  hotKeys: number;
  seconds: number;
  rounds: number;
  connections: number;
  importConcurrency: number;
  stores: StoreKind[];
  databaseUrl: string;
  serverNodeArgs: string[];
  pgliteSharedBuffersMb: number | undefined;
};

type ImportResult = { keys: number; seconds: number; keysPerSecond: number; slices: { upTo: number; keysPerSecond: number }[] };
type Round = {
  kind: Kind;
  round: number;
  requestsPerSecond: number;
  latencyMs: LatencySummary;
  non2xx: number;
  errors: number;
  load: number[];
  /** PostgreSQL: whether `keys` had been analysed (by autovacuum) when the round started. */
  keysAnalysed?: boolean;
  /** Where the round's CPU went, per verification answered (/proc; absent where it cannot be read). */
  cpu?: CpuPerRequest;
};
type StoreResult = { store: StoreKind; import: ImportResult; rounds: Round[]; randomOverHot: number };
type Failure = { store: StoreKind; error: string };

function readSettings(env: NodeJS.ProcessEnv): Settings {
  const positive = (name: string, fallback: number) => envPositive(env, name, fallback);
  const keys = Math.round(positive("BENCH_SCALE_KEYS", 1_000_000));
  return {
    keys,
    hotKeys: Math.min(keys, Math.round(positive("BENCH_HOT_KEYS", 1000))),
    seconds: positive("BENCH_SECONDS", 20),
    rounds: Math.round(positive("BENCH_ROUNDS", 3)),
    connections: Math.round(positive("BENCH_CONNECTIONS", 50)),
    importConcurrency: Math.round(positive("BENCH_IMPORT_CONCURRENCY", 4)),
    stores: envList(env, "BENCH_STORES", ["postgres", "pglite"] as const),
    databaseUrl: env.BENCH_DATABASE_URL?.trim() || DEFAULT_DATABASE_URL,
    serverNodeArgs: envServerNodeArgs(env),
    pgliteSharedBuffersMb: env.BENCH_PGLITE_SHARED_BUFFERS_MB?.trim()
      ? Math.round(positive("BENCH_PGLITE_SHARED_BUFFERS_MB", 128))
      : undefined,
  };
}

const RUN_ID = randomBytes(6).toString("hex");
const plaintextOf = (i: number) => `sk_scale_${RUN_ID}_${i}`;
const hashOf = (key: string) => createHash("sha256").update(key, "utf8").digest("base64");
const loadAverage = () => os.loadavg().map((v) => round(v, 2));

async function importAll(server: ChildServer, rootKey: string, apiId: string, settings: Settings): Promise<ImportResult> {
  const batches = Math.ceil(settings.keys / BATCH_SIZE);
  let next = 0;
  let done = 0;
  const started = performance.now();
  const boundaries: number[] = [];
  const worker = async () => {
    while (!interrupted()) {
      const batch = next++;
      if (batch >= batches) return;
      const from = batch * BATCH_SIZE;
      const to = Math.min(settings.keys, from + BATCH_SIZE);
      const body = [];
      for (let i = from; i < to; i++) body.push({ apiId, hash: { value: hashOf(plaintextOf(i)), variant: "sha256_base64" } });
      const res = await post(server, rootKey, "/v1/migrations.createKeys", JSON.stringify(body));
      if (res.status !== 200) throw new Error(`migrations.createKeys answered ${res.status}: ${JSON.stringify(res.json).slice(0, 300)}`);
      const before = done;
      done += to - from;
      if (Math.floor(done / SLICE_KEYS) > Math.floor(before / SLICE_KEYS) || done === settings.keys) {
        boundaries.push(performance.now());
        const rate = Math.round(done / ((performance.now() - started) / 1000));
        console.log(`  ${formatCount(done)} keys imported (${formatCount(rate)} keys/s so far), load ${loadAverage().join(" ")}`);
      }
    }
  };
  await Promise.all(Array.from({ length: settings.importConcurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  const slices = boundaries.map((at, i) => {
    const upTo = Math.min(settings.keys, (i + 1) * SLICE_KEYS);
    const keysInSlice = upTo - i * SLICE_KEYS;
    const from = i === 0 ? started : boundaries[i - 1]!;
    return { upTo, keysPerSecond: Math.round(keysInSlice / ((at - from) / 1000)) };
  });
  return { keys: done, seconds: round(seconds, 1), keysPerSecond: Math.round(done / seconds), slices };
}

/** `connections` connections verifying a new random key of `[0, among)` per request, for `seconds`. */
async function verifyLoad(server: ChildServer, among: number, connections: number, seconds: number) {
  const { result, latenciesMs, badAnswer } = await loadJsonPost({
    url: `${server.url}/v1/keys.verifyKey`,
    body: JSON.stringify({ key: plaintextOf(0) }),
    nextBody: () => JSON.stringify({ key: plaintextOf(Math.floor(Math.random() * among)) }),
    connections,
    seconds,
    check: (body) => body.includes('"valid":true'),
  });
  return { result, latenciesMs, bad: badAnswer };
}

async function runStore(
  store: StoreKind,
  settings: Settings,
  admin: Admin | undefined,
  cleanup: Cleanup,
): Promise<StoreResult | undefined> {
  let storeEnv: Record<string, string>;
  let analysed: (() => Promise<boolean>) | undefined;
  /** PostgreSQL: a connection to the bench database, to read autovacuum's progress and the backends' CPU. */
  let probe: Sql | undefined;
  if (store === "postgres") {
    if (!admin) throw new Error("no PostgreSQL connection");
    const db = await createDatabase(admin, settings.databaseUrl, cleanup);
    storeEnv = { DATABASE_URL: db.url };
    const postgres = (await import("postgres")).default;
    const statistics = postgres(db.url, { max: 1, onnotice: () => {} });
    probe = statistics;
    cleanup.add("close the statistics probe", () => statistics.end({ timeout: 5 }));
    analysed = async () => {
      const [row] = await statistics<{ analysed: boolean }[]>`
        select coalesce(last_analyze, last_autoanalyze) is not null as analysed from pg_stat_user_tables where relname = 'keys'`;
      return row?.analysed === true;
    };
  } else {
    const dir = await mkdtemp(path.join(os.tmpdir(), "keyhaven-bench-"));
    cleanup.add(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
    storeEnv = {
      KEYHAVEN_DATA_DIR: dir,
      ...(settings.pgliteSharedBuffersMb !== undefined && { KEYHAVEN_PGLITE_SHARED_BUFFERS_MB: String(settings.pgliteSharedBuffersMb) }),
    };
  }
  const logDays = process.env.BENCH_VERIFICATION_LOG_DAYS?.trim();
  if (logDays) storeEnv = { ...storeEnv, KEYHAVEN_VERIFICATION_LOG_DAYS: logDays };
  const rootKey = `bench_root_${randomBytes(24).toString("base64url")}`;
  const server = await startKeyhaven(storeEnv, rootKey, settings.serverNodeArgs, cleanup, ["REDIS_URL"]);
  const created = await post(server, rootKey, "/v1/apis.createApi", JSON.stringify({ name: "scale" }));
  const apiId = (created.json as { apiId?: unknown } | undefined)?.apiId;
  if (created.status !== 200 || typeof apiId !== "string") throw new Error(`apis.createApi answered ${created.status}`);

  console.log(`▶ ${store}: importing ${formatCount(settings.keys)} keys, ${settings.importConcurrency} requests in flight`);
  const imported = await importAll(server, rootKey, apiId, settings);
  if (interrupted()) return undefined;
  console.log(`  ${formatCount(imported.keysPerSecond)} keys/s overall (${imported.seconds} s)`);

  const rounds: Round[] = [];
  for (let round_ = 1; round_ <= settings.rounds; round_++) {
    for (const kind of ["random", "hot"] as const) {
      if (interrupted()) return undefined;
      const among = kind === "random" ? settings.keys : settings.hotKeys;
      const keysAnalysedNow = analysed ? await analysed() : undefined;
      const warm = await verifyLoad(server, among, settings.connections, WARMUP_SECONDS);
      if (warm.bad !== undefined || warm.result.non2xx > 0) throw new Error(`warm-up: ${warm.result.non2xx} non-2xx, ${warm.bad ?? ""}`);
      const load = loadAverage();
      const cpuBefore = await cpuSnapshot(server.pid, probe);
      const run = await verifyLoad(server, among, settings.connections, settings.seconds);
      const cpuAfter = await cpuSnapshot(server.pid, probe);
      if (interrupted()) return undefined;
      if (run.bad !== undefined) throw new Error(`an answer was not valid: ${run.bad}`);
      const durationS = run.result.duration || settings.seconds;
      const r: Round = {
        kind,
        round: round_,
        requestsPerSecond: Math.round(run.latenciesMs.length / durationS),
        latencyMs: summarizeLatencies(run.latenciesMs),
        non2xx: run.result.non2xx,
        errors: run.result.errors,
        load,
        ...(keysAnalysedNow !== undefined && { keysAnalysed: keysAnalysedNow }),
      };
      const cpu = cpuPerRequest(cpuBefore, cpuAfter, run.latenciesMs.length, durationS);
      if (cpu) r.cpu = cpu;
      rounds.push(r);
      console.log(
        `  ${kind} round ${round_}: ${formatCount(r.requestsPerSecond)} req/s, p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms, ` +
          `load ${load.join(" ")}${keysAnalysedNow === undefined ? "" : `, keys analysed: ${keysAnalysedNow}`}` +
          (cpu ? `; ${formatCpu(cpu)}` : ""),
      );
    }
  }
  const total = (kind: Kind) => rounds.filter((r) => r.kind === kind).reduce((sum, r) => sum + r.requestsPerSecond, 0);
  return { store, import: imported, rounds, randomOverHot: round(total("random") / total("hot"), 3) };
}

/** The medians of a store's CPU figures over its rounds of one kind. */
const cpuOfKind = (s: StoreResult, kind: Kind) => medianCpu(s.rounds.filter((r) => r.kind === kind).map((r) => r.cpu));

function table(results: StoreResult[]): string {
  const rows = results.flatMap((s) =>
    s.rounds.map((r) => [
      s.store,
      r.kind,
      String(r.round),
      formatCount(r.requestsPerSecond),
      formatMs(r.latencyMs.p50),
      formatMs(r.latencyMs.p99),
      r.load.join(" "),
      r.keysAnalysed === undefined ? "—" : String(r.keysAnalysed),
      r.cpu ? String(r.cpu.threadUs) : "—",
      r.cpu ? formatShare(r.cpu.threadBusy) : "—",
      r.cpu?.postgresUs === undefined ? "—" : String(r.cpu.postgresUs),
    ]),
  );
  return formatTable(
    ["store", "keys", "round", "req/s", "p50 ms", "p99 ms", "load 1/5/15", "keys analysed", "thread µs", "busy", "pg µs"],
    rows,
    new Set([2, 3, 4, 5, 8, 9, 10]),
  );
}

async function main(): Promise<void> {
  const settings = readSettings(process.env);
  const startedAt = new Date();
  const cleanup = new Cleanup();
  const results: StoreResult[] = [];
  const failures: Failure[] = [];
  let failure: unknown;
  handleInterrupts("stopping the current step");
  let postgresVersion: string | undefined;
  try {
    const opened = await openAdmin(settings.databaseUrl, settings.stores.includes("postgres"), cleanup);
    postgresVersion = opened.postgresVersion;
    console.log(
      `keyhaven scale benchmark: ${formatCount(settings.keys)} keys, hot set ${formatCount(settings.hotKeys)}, ` +
        `${settings.rounds} rounds × (random, hot) of ${settings.seconds} s at c=${settings.connections}, stores ${settings.stores.join(",")}`,
    );
    for (const store of settings.stores) {
      if (interrupted()) break;
      const storeCleanup = new Cleanup();
      try {
        const result = await runStore(store, settings, opened.admin, storeCleanup);
        if (result) results.push(result);
      } catch (err) {
        failures.push({ store, error: describeError(err) });
        console.error(`  ✗ ${store}: ${describeError(err)}`);
      } finally {
        await storeCleanup.runAll();
      }
    }
  } catch (err) {
    failure = err;
  } finally {
    await cleanup.runAll();
  }
  if (results.length > 0) {
    console.log(`\n${table(results)}\n`);
    for (const s of results) {
      const slices = s.import.slices.map((x) => `${formatCount(x.keysPerSecond)}`).join(", ");
      console.log(
        `${s.store}: import ${formatCount(s.import.keysPerSecond)} keys/s (per ${formatCount(SLICE_KEYS)}: ${slices}); ` +
          `random/hot ${s.randomOverHot} (target ≥ 0.5: ${s.randomOverHot >= 0.5 ? "met" : "not met"})`,
      );
      const { threadUs: random, postgresUs: pgRandom } = cpuOfKind(s, "random");
      const { threadUs: hot, postgresUs: pgHot } = cpuOfKind(s, "hot");
      if (random !== undefined && hot !== undefined) {
        console.log(
          `  keyhaven's thread per verification (median): random ${random} µs, hot ${hot} µs (hot/random ${round(hot / random, 3)})` +
            (pgRandom === undefined || pgHot === undefined ? "" : `; PostgreSQL's backends: random ${pgRandom} µs, hot ${pgHot} µs`),
        );
      }
    }
    const file = await writeResults("scale", startedAt, {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      complete: failure === undefined && failures.length === 0 && !interrupted(),
      settings,
      environment: environmentInfo(postgresVersion),
      results,
      failures,
    });
    console.log(`\nresults: ${file}`);
  }
  reportOutcome(failure, failures, (f) => [f.store]);
}

await main();
