/**
 * Budgets benchmark (issue 13 §0 and §4): how fast keyhaven verifies keys that carry a usage budget (`remaining`),
 * next to keys that carry none and to a ceiling measured in the same rounds: the same request to a minimal Fastify 5
 * server that answers a fixed body (bench/fixed-response.server.ts).
 *
 * Scenarios, each `POST /v1/keys.verifyKey` from autocannon (in this process), BENCH_CONNECTIONS keep-alive
 * connections back to back for BENCH_SECONDS after a 2 s warm-up whose every answer must be `valid: true`:
 *   - ceiling:   the fixed-response server.
 *   - plain:     200 keys without `remaining` nor rate limit, each request's key chosen at random.
 *   - remaining: 200 keys with `remaining: 2000000000`, each request's key chosen at random: every verification
 *                spends a use, so what is measured is how spends of different keys share statements and commits.
 *   - refill:    as remaining, each key also refilled monthly (`refill: { interval: "monthly", amount: 2000000000,
 *                refillDay: 1 }`, usage-based billing's usual budget): every statement that reads or spends such a key
 *                computes its refill boundary (migration refill_boundary_inline).
 *   - hot:       one key with `remaining: 2000000000` and a rate limit that never refuses
 *                (`{ limit: 1e9, refillRate: 1e9, refillInterval: 60000 }`): one row's lock and commit.
 *   - v2-remaining: as remaining, through `POST /v2/keys.verifyKey` (with the root key): every answer VALID with
 *                `credits`.
 *   - v2-refused: 200 keys with `remaining: 2000000000` and a rate limit of 1 per minute, through v2: all but one
 *                verification per key and minute are RATE_LIMITED, each answered with the key's `credits`, which
 *                a refusal reads (nothing is spent). A flood of refusals must cost the database no more than a
 *                flood of valid ones (issue 34 §1): compare its `pg µs` with v2-remaining's.
 * Every keyhaven store (BENCH_STORES) runs in its own child process (compiled, `node dist/cli/main.js`, as bench/verify.bench.ts
 * does), all started before the first round and kept until the last. Rounds (BENCH_ROUNDS) go through every
 * scenario in turn, each round starting one scenario later than the one before, so that a machine whose load
 * changes during the run weighs on every scenario alike; each keyhaven figure is compared with the ceiling of the
 * same round. The 1-minute load average is sampled at the end of each measurement.
 *
 * Reported: per round and scenario, req/s (2xx answers per second), the share of the round's ceiling, p50/p99 from
 * every 2xx answer's own time, non-2xx answers, errors, the load average and the server's CPU per request (from
 * /proc, on Linux: its main thread, with how busy it was, its process, and PostgreSQL's backends serving it); then
 * per scenario the median over rounds; then the target: `remaining` on PostgreSQL at ≥ 30% of the ceiling with p99 < 20 ms (reported, never a
 * failure of the process). Results: bench/results/budgets-<ts>.json.
 *
 * Run:   npm run bench:budgets                     (3 rounds × 5 scenarios × (2 s + 30 s): about 8 minutes)
 *        BENCH_SECONDS=10 npm run bench:budgets
 * Environment:
 *   BENCH_SECONDS        seconds per measurement, after the 2 s warm-up (default 30)
 *   BENCH_CONNECTIONS    connections (default 50)
 *   BENCH_ROUNDS         rounds (default 3)
 *   BENCH_STORES         comma-separated subset of "postgres,pglite" (default "postgres")
 *   BENCH_DATABASE_URL   PostgreSQL server to create the bench database on
 *                        (default postgres://postgres@127.0.0.1:5432/postgres)
 *   DATABASE_POOL_SIZE   passed through to keyhaven when set (keyhaven's default is 4)
 *   BENCH_SERVER_NODE_ARGS  extra node flags for the keyhaven children, space-separated
 *   BENCH_KEY_KINDS      comma-separated subset of "plain,remaining,refill,hot,v2-remaining,v2-refused" (default all;
 *                        e.g. one kind to profile it)
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres, { type Sql } from "postgres";
import { redactUrl } from "../src/storage/client.js";
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
  failureLine,
  formatCount,
  formatCpu,
  formatMs,
  formatShare,
  formatTable,
  handleInterrupts,
  interrupted,
  type LatencySummary,
  loadJsonPost,
  measurementLine,
  median,
  medianCpu,
  openAdmin,
  post,
  reportOutcome,
  round,
  startFixedResponseServer,
  startKeyhaven,
  summarizeLatencies,
  writeResults,
} from "./lib.js";

const VERIFY_ROUTE = "/v1/keys.verifyKey";
const V2_VERIFY_ROUTE = "/v2/keys.verifyKey";
const WARMUP_SECONDS = 2;
const KEYS_PER_SET = 200;
/** migrations.createKeys takes at most this many keys per call. */
const KEYS_PER_IMPORT = 100;
const TARGET = { store: "postgres", keyKind: "remaining", minShareOfCeiling: 0.3, maxP99Ms: 20 } as const;

type StoreKind = "postgres" | "pglite";
type KeyKind = "plain" | "remaining" | "refill" | "hot" | "v2-remaining" | "v2-refused";
const KEY_KINDS: readonly KeyKind[] = ["plain", "remaining", "refill", "hot", "v2-remaining", "v2-refused"];
/** The kinds verified through v2 (with the root key), the others through v1. */
const isV2 = (kind: KeyKind | "fixed") => kind === "v2-remaining" || kind === "v2-refused";

type Settings = {
  seconds: number;
  connections: number;
  rounds: number;
  stores: StoreKind[];
  databaseUrl: string;
  keyhavenPoolSize: string;
  serverNodeArgs: string[];
  keyKinds: KeyKind[];
};

type Scenario = { store: StoreKind | "ceiling"; keyKind: KeyKind | "fixed" };
/**
 * keyhaven on one store, its keys by kind, its root key (v2 verifies with it), and on PostgreSQL a connection to its
 * database (for the backends' CPU).
 */
type Target = { server: ChildServer; keys: Map<KeyKind, string[]>; rootKey: string; probe?: Sql };

type Measurement = Scenario & {
  round: number;
  connections: number;
  durationS: number;
  requests: number;
  requestsPerSecond: number;
  shareOfCeiling?: number;
  latencyMs: LatencySummary;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** The 1-minute load average at the end of the measurement. */
  loadAverage: number;
  /** The server's CPU per request (/proc; absent where it cannot be read): keyhaven's, or the ceiling server's. */
  cpu?: CpuPerRequest;
};

type Failure = { store: string; keyKind?: string; round?: number; error: string };

function readSettings(env: NodeJS.ProcessEnv): Settings {
  return {
    seconds: envPositive(env, "BENCH_SECONDS", 30),
    connections: Math.round(envPositive(env, "BENCH_CONNECTIONS", 50)),
    rounds: Math.round(envPositive(env, "BENCH_ROUNDS", 3)),
    stores: envList(env, "BENCH_STORES", ["postgres", "pglite"] as const, ["postgres"]),
    databaseUrl: env.BENCH_DATABASE_URL?.trim() || DEFAULT_DATABASE_URL,
    keyhavenPoolSize: env.DATABASE_POOL_SIZE?.trim() || "4 (keyhaven's default)",
    serverNodeArgs: envServerNodeArgs(env),
    keyKinds: envList(env, "BENCH_KEY_KINDS", KEY_KINDS, [...KEY_KINDS]),
  };
}

const isValidAnswer = (body: string): boolean => {
  try {
    return (JSON.parse(body) as { valid?: unknown }).valid === true;
  } catch {
    return false;
  }
};

/** v2's answer (`{meta, data}`): VALID, or (v2-refused) RATE_LIMITED, each with the key's credits. */
const isV2Answer =
  (refusals: boolean) =>
  (body: string): boolean => {
    try {
      const data = (JSON.parse(body) as { data?: { code?: unknown; credits?: unknown } }).data;
      const codeOk = data?.code === "VALID" || (refusals && data?.code === "RATE_LIMITED");
      return codeOk && typeof data?.credits === "number";
    } catch {
      return false;
    }
  };

function importKeyOf(kind: KeyKind, apiId: string, plaintext: string): Record<string, unknown> {
  if (kind === "plain") return { apiId, plaintext, name: "bench plain" };
  const budget = { apiId, plaintext, name: `bench ${kind}`, remaining: 2_000_000_000 };
  if (kind === "remaining" || kind === "v2-remaining") return budget;
  if (kind === "v2-refused") return { ...budget, ratelimit: { limit: 1, refillRate: 1, refillInterval: 60_000 } };
  if (kind === "refill") return { ...budget, refill: { interval: "monthly", amount: 2_000_000_000, refillDay: 1 } };
  return { ...budget, ratelimit: { limit: 1_000_000_000, refillRate: 1_000_000_000, refillInterval: 60_000 } };
}

/** keyhaven on a fresh store, with an API and the keys of every kind (their plaintexts). */
async function startTarget(store: StoreKind, settings: Settings, admin: Admin | undefined, cleanup: Cleanup): Promise<Target> {
  let storeEnv: Record<string, string>;
  let probe: Sql | undefined;
  if (store === "postgres") {
    if (!admin) throw new Error("no PostgreSQL connection");
    const url = (await createDatabase(admin, settings.databaseUrl, cleanup)).url;
    storeEnv = { DATABASE_URL: url };
    const connection = postgres(url, { max: 1, onnotice: () => {} });
    probe = connection;
    cleanup.add("close the CPU probe", () => connection.end({ timeout: 5 }));
  } else {
    const dir = await mkdtemp(path.join(os.tmpdir(), "keyhaven-bench-"));
    cleanup.add(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
    storeEnv = { KEYHAVEN_DATA_DIR: dir };
  }
  const rootKey = `bench_root_${randomBytes(24).toString("base64url")}`;
  const server = await startKeyhaven(storeEnv, rootKey, settings.serverNodeArgs, cleanup, ["REDIS_URL"]);
  try {
    const created = await post(server, rootKey, "/v1/apis.createApi", JSON.stringify({ name: "bench" }));
    const apiId = (created.json as { apiId?: unknown } | undefined)?.apiId;
    if (created.status !== 200 || typeof apiId !== "string") {
      throw new Error(`apis.createApi answered ${created.status}: ${JSON.stringify(created.json)}`);
    }
    const keys = new Map<KeyKind, string[]>();
    for (const kind of KEY_KINDS) {
      const count = kind === "hot" ? 1 : KEYS_PER_SET;
      const plaintexts = Array.from({ length: count }, () => `bench_${kind}_${randomBytes(18).toString("base64url")}`);
      for (let i = 0; i < count; i += KEYS_PER_IMPORT) {
        const chunk = plaintexts.slice(i, i + KEYS_PER_IMPORT);
        const imported = await post(
          server,
          rootKey,
          "/v1/migrations.createKeys",
          JSON.stringify(chunk.map((p) => importKeyOf(kind, apiId, p))),
        );
        if (imported.status !== 200) throw new Error(`migrations.createKeys answered ${imported.status}: ${JSON.stringify(imported.json)}`);
      }
      keys.set(kind, plaintexts);
    }
    return { server, keys, rootKey, ...(probe && { probe }) };
  } catch (err) {
    throw new Error(`${describeError(err)}\n--- keyhaven output ---\n${server.output()}`);
  }
}

/** Warm-up (every answer checked), then the measurement; each request's key at random among `keys`. */
async function measure(
  scenario: Scenario,
  roundNo: number,
  server: ChildServer,
  keys: string[],
  settings: Settings,
  probe: Sql | undefined,
  rootKey: string | undefined,
): Promise<Measurement> {
  const v2 = isV2(scenario.keyKind);
  const url = `${server.url}${v2 ? V2_VERIFY_ROUTE : VERIFY_ROUTE}`;
  const bodies = keys.map((key) => JSON.stringify({ key }));
  const headers: Record<string, string> = v2 && rootKey !== undefined ? { authorization: `Bearer ${rootKey}` } : {};
  const load = { url, body: bodies[0]!, bodies, headers, connections: settings.connections };
  const check = v2 ? isV2Answer(scenario.keyKind === "v2-refused") : isValidAnswer;
  const warmup = await loadJsonPost({ ...load, seconds: WARMUP_SECONDS, check });
  const w = warmup.result;
  if (w.non2xx > 0 || w.mismatches > 0 || w.errors > 0 || w.requests.total === 0) {
    throw new Error(
      `warm-up: ${w.requests.total} answers, ${w.non2xx} non-2xx, ${w.mismatches} not as expected, ${w.errors} errors` +
        (warmup.badAnswer !== undefined ? `; for example: ${warmup.badAnswer}` : ""),
    );
  }
  const cpuBefore = await cpuSnapshot(server.pid, probe);
  const run = await loadJsonPost({ ...load, seconds: settings.seconds });
  const cpuAfter = await cpuSnapshot(server.pid, probe);
  const r = run.result;
  const durationS = r.duration > 0 ? r.duration : settings.seconds;
  const cpu = cpuPerRequest(cpuBefore, cpuAfter, run.latenciesMs.length, durationS);
  return {
    ...scenario,
    round: roundNo,
    connections: settings.connections,
    durationS,
    requests: run.latenciesMs.length,
    requestsPerSecond: Math.round(run.latenciesMs.length / durationS),
    latencyMs: summarizeLatencies(run.latenciesMs),
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    loadAverage: round(os.loadavg()[0]!, 2),
    ...(cpu && { cpu }),
  };
}

/** A scenario's medians over its rounds, those of its CPU per request included (where /proc was read). */
type Summary = Scenario &
  Partial<CpuPerRequest> & {
    rounds: number;
    requestsPerSecond: number;
    shareOfCeiling?: number;
    p50Ms: number;
    p99Ms: number;
    loadAverage: number;
  };

function summarize(results: Measurement[], scenarios: Scenario[]): Summary[] {
  return scenarios.flatMap((s) => {
    const of = results.filter((r) => r.store === s.store && r.keyKind === s.keyKind);
    if (of.length === 0) return [];
    const shares = of.map((r) => r.shareOfCeiling).filter((v): v is number => v !== undefined);
    return [
      {
        ...s,
        rounds: of.length,
        requestsPerSecond: Math.round(median(of.map((r) => r.requestsPerSecond))),
        ...(shares.length > 0 && { shareOfCeiling: round(median(shares), 4) }),
        p50Ms: round(median(of.map((r) => r.latencyMs.p50)), 2),
        p99Ms: round(median(of.map((r) => r.latencyMs.p99)), 2),
        loadAverage: round(median(of.map((r) => r.loadAverage)), 2),
        ...medianCpu(of.map((r) => r.cpu)),
      },
    ];
  });
}

function roundsTable(results: Measurement[]): string {
  const header = ["round", "store", "keys", "req/s", "% ceiling", "p50 ms", "p99 ms", "non-2xx", "errors", "load"];
  const rows = results.map((r) => [
    String(r.round),
    r.store,
    r.keyKind,
    formatCount(r.requestsPerSecond),
    formatShare(r.shareOfCeiling),
    formatMs(r.latencyMs.p50),
    formatMs(r.latencyMs.p99),
    formatCount(r.non2xx),
    formatCount(r.errors),
    r.loadAverage.toFixed(2),
  ]);
  return formatTable(header, rows, new Set([0, 3, 4, 5, 6, 7, 8, 9]));
}

function summaryTable(summaries: Summary[]): string {
  const header = ["store", "keys", "rounds", "req/s", "% ceiling", "p50 ms", "p99 ms", "load", "thread µs", "busy", "pg µs"];
  const rows = summaries.map((s) => [
    s.store,
    s.keyKind,
    String(s.rounds),
    formatCount(s.requestsPerSecond),
    formatShare(s.shareOfCeiling),
    formatMs(s.p50Ms),
    formatMs(s.p99Ms),
    s.loadAverage.toFixed(2),
    s.threadUs === undefined ? "—" : String(s.threadUs),
    formatShare(s.threadBusy),
    s.postgresUs === undefined ? "—" : String(s.postgresUs),
  ]);
  return formatTable(header, rows, new Set([2, 3, 4, 5, 6, 7, 8, 9, 10]));
}

function describeTarget(summaries: Summary[], results: Measurement[]) {
  const s = summaries.find((x) => x.store === TARGET.store && x.keyKind === TARGET.keyKind);
  const clean = results
    .filter((r) => r.store === TARGET.store && r.keyKind === TARGET.keyKind)
    .every((r) => r.non2xx === 0 && r.errors === 0);
  const head =
    `target: ${TARGET.keyKind} keys on ${TARGET.store} at ≥ ${TARGET.minShareOfCeiling * 100}% of the ceiling and ` +
    `p99 < ${TARGET.maxP99Ms} ms (medians over rounds, no non-2xx or errors)`;
  if (!s || s.shareOfCeiling === undefined) return { text: `${head}\n  not measured`, met: false, measured: false };
  const shareMet = s.shareOfCeiling >= TARGET.minShareOfCeiling;
  const p99Met = s.p99Ms < TARGET.maxP99Ms;
  const met = shareMet && p99Met && clean;
  const yes = (ok: boolean) => (ok ? "met" : "NOT met");
  return {
    text: `${head}\n  ${formatShare(s.shareOfCeiling)} of the ceiling (${yes(shareMet)}), p99 ${formatMs(s.p99Ms)} ms (${yes(p99Met)}) → ${met ? "target met" : "target NOT met"}`,
    met,
    measured: true,
    shareOfCeiling: s.shareOfCeiling,
    p99Ms: s.p99Ms,
  };
}

async function main(): Promise<void> {
  const settings = readSettings(process.env);
  const startedAt = new Date();
  const cleanup = new Cleanup();
  const results: Measurement[] = [];
  const failures: Failure[] = [];
  let failure: unknown;
  let postgresVersion: string | undefined;
  handleInterrupts("stopping the current measurement");

  const scenarios: Scenario[] = [
    { store: "ceiling", keyKind: "fixed" },
    ...settings.stores.flatMap((store) => settings.keyKinds.map((keyKind) => ({ store, keyKind }))),
  ];
  try {
    const opened = await openAdmin(settings.databaseUrl, settings.stores.includes("postgres"), cleanup);
    postgresVersion = opened.postgresVersion;
    const minutes = (settings.rounds * scenarios.length * (settings.seconds + WARMUP_SECONDS)) / 60;
    console.log(
      `keyhaven budgets benchmark: ${settings.rounds} rounds × ${scenarios.length} scenarios of ${WARMUP_SECONDS} s warm-up + ` +
        `${settings.seconds} s (about ${Math.max(1, Math.ceil(minutes))} min), ${settings.connections} connections, ` +
        `stores ${settings.stores.join(",")}, ${os.cpus().length} CPUs` +
        (postgresVersion ? `, PostgreSQL ${postgresVersion}` : ""),
    );

    const ceiling = await startFixedResponseServer(VERIFY_ROUTE, JSON.stringify({ key: "ready" }), cleanup);
    const targets = new Map<StoreKind, Target>();
    for (const store of settings.stores) targets.set(store, await startTarget(store, settings, opened.admin, cleanup));

    for (let roundNo = 1; roundNo <= settings.rounds && !interrupted(); roundNo++) {
      const shift = (roundNo - 1) % scenarios.length;
      const order = [...scenarios.slice(shift), ...scenarios.slice(0, shift)];
      const measured: Measurement[] = [];
      for (const scenario of order) {
        if (interrupted()) break;
        console.log(`▶ round ${roundNo} ${scenario.store} ${scenario.keyKind}`);
        const target = scenario.store === "ceiling" ? undefined : targets.get(scenario.store);
        const server = target?.server ?? ceiling;
        const keys = target?.keys.get(scenario.keyKind as KeyKind) ?? ["bench"];
        try {
          const m = await measure(scenario, roundNo, server, keys, settings, target?.probe, target?.rootKey);
          if (interrupted()) break; // a measurement cut short is not reported
          measured.push(m);
          console.log(
            `${measurementLine(m.requestsPerSecond, "req/s", m)}, load ${m.loadAverage.toFixed(2)}${m.cpu ? `; ${formatCpu(m.cpu)}` : ""}`,
          );
        } catch (err) {
          failures.push({ store: scenario.store, keyKind: scenario.keyKind, round: roundNo, error: describeError(err) });
          console.log(failureLine([scenario.store, scenario.keyKind, `round ${roundNo}`], describeError(err)));
        }
        const died = server.exitReason();
        if (died !== undefined) throw new Error(`${died}\n--- output ---\n${server.output()}`);
      }
      const ceilingOfRound = measured.find((m) => m.store === "ceiling");
      for (const m of measured) {
        if (m.store !== "ceiling" && ceilingOfRound && ceilingOfRound.requestsPerSecond > 0) {
          m.shareOfCeiling = round(m.requestsPerSecond / ceilingOfRound.requestsPerSecond, 4);
        }
      }
      // In scenario order, so that the rounds' tables line up.
      results.push(...scenarios.flatMap((s) => measured.filter((m) => m.store === s.store && m.keyKind === s.keyKind)));
    }
  } catch (err) {
    failure = err;
  } finally {
    await cleanup.runAll();
  }

  if (results.length > 0) {
    const summaries = summarize(results, scenarios);
    const target = describeTarget(summaries, results);
    console.log(`\n${roundsTable(results)}\n\nmedians over rounds:\n${summaryTable(summaries)}`);
    console.log(
      `\nreq/s: 2xx answers per second; % ceiling: of the fixed-response server's req/s in the same round;` +
        ` p50/p99: per request; load: 1-minute load average at the end of the measurement;` +
        ` thread µs / busy / pg µs: CPU per request of the server's main thread (and how busy it was) and of PostgreSQL's backends serving it.` +
        `\nkeyhaven's DATABASE_POOL_SIZE: ${settings.keyhavenPoolSize}; ${KEYS_PER_SET} keys per set, each request's key at random.`,
    );
    console.log(`\n${target.text}`);
    const file = await writeResults("budgets", startedAt, {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      complete: failure === undefined && failures.length === 0 && !interrupted(),
      ...(failure !== undefined && { error: describeError(failure) }),
      settings: { ...settings, databaseUrl: redactUrl(settings.databaseUrl), warmupSeconds: WARMUP_SECONDS, keysPerSet: KEYS_PER_SET },
      environment: environmentInfo(postgresVersion),
      target: { ...TARGET, ...target },
      summaries,
      results,
      failures,
    });
    console.log(`results written to ${path.relative(process.cwd(), file)}`);
  }

  reportOutcome(failure, failures, (f) => [f.store, f.keyKind, f.round === undefined ? undefined : `round ${f.round}`]);
}

await main();
