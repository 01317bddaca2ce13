/**
 * Verification benchmark: how many `POST /v1/keys.verifyKey` requests per second keyhaven answers, at what latency,
 * next to a ceiling measured in the same run: the same request to a minimal Fastify 5 server that answers a fixed
 * ~300-byte JSON body (bench/fixed-response.server.ts), i.e. what HTTP through Fastify costs on this machine.
 *
 * Load comes from autocannon (in this process, one thread), `connections` keep-alive connections each sending
 * `{"key": "<plaintext>"}` back to back, for BENCH_SECONDS at every level of BENCH_CONNECTIONS. Each measurement is
 * preceded by a warm-up of 2 s at the same connections (not counted) in which every answer must be a 200 with
 * `valid: true`, or the scenario fails; after each keyhaven measurement one more verification must still be valid.
 *
 * Targets, each a child process (keyhaven compiled, `node dist/cli/main.js`, the others `node --import tsx`) so that the load generator does not share its
 * event loop (they still share this machine's CPUs, and so does PostgreSQL):
 *   - ceiling:  bench/fixed-response.server.ts.
 *   - postgres: keyhaven on a fresh `keyhaven_bench_<random>` database on BENCH_DATABASE_URL's server.
 *   - pglite:   keyhaven on a fresh KEYHAVEN_DATA_DIR under the OS temp directory.
 *   - postgres+redis, pglite+redis (only when BENCH_REDIS is set): the same with REDIS_URL, so that rate limits are
 *     counted in Redis rather than in keyhaven's memory.
 * On each keyhaven target, an API is created with POST /v1/apis.createApi and one key per kind with
 * POST /v1/migrations.createKeys (plaintext), using the root key passed in KEYHAVEN_ROOT_KEY. Key kinds:
 *   - plain:   no `remaining` and no rate limit (a read of the key and its workspace, permissions and limits).
 *   - limited: `remaining: 2000000000` and a rate limit `{ limit: 1e9, refillRate: 1e9, refillInterval: 60000 }`,
 *              so each verification also goes through the rate limiter and the atomic decrement of `remaining`.
 *
 * v2 round: after v1's measurement of a key at each level in BENCH_V2_CONNECTIONS (default 50), the same key is
 * measured through `POST /v2/keys.verifyKey` (`Authorization: Bearer <root key>`, body `{"key": …}`, every warm-up
 * answer a 200 with `data.valid: true`) at the same connections, and the report gives v2's requests/s as a share of
 * v1's (issue 14's target: v2 within 10% of v1). v2 always authenticates the root key, which v1 without one skips.
 *
 * Reported per scenario: requests/s (2xx answers per second), the share of the ceiling at the same connections,
 * latency p50/p99 (from every 2xx answer's own time, in fractions of a millisecond), non-2xx answers and connection
 * errors (timeouts included). The table is printed at the end, followed by the target: at 50 connections on
 * PostgreSQL, at least 40% of the ceiling with p99 under 10 ms (reported as met or not, never a failure of the
 * process). The results are written to bench/results/verify-<ts>.json.
 *
 * Run:   npm run bench:verify                      (60 s per scenario: about 16 minutes with the defaults)
 *        BENCH_SECONDS=5 npm run bench:verify      (a quick run)
 *        npm run bench                             (the import benchmark, then this one)
 * Environment:
 *   BENCH_SECONDS        seconds per measurement, after the 2 s warm-up (default 60; shared with the import bench)
 *   BENCH_CONNECTIONS    comma-separated connection counts (default "1,10,50")
 *   BENCH_V2_CONNECTIONS comma-separated connection counts (of BENCH_CONNECTIONS) at which v2 is measured too
 *                        (default "50"; "0" for none)
 *   BENCH_KEYS           comma-separated subset of "plain,limited" (default both)
 *   BENCH_STORES         comma-separated subset of "postgres,pglite" (default both; shared with the import bench)
 *   BENCH_ANALYTICS      comma-separated subset of "on,off" (default both): keyhaven's KEYHAVEN_ANALYTICS; "off"
 *                        adds the PostgreSQL targets again with verification analytics not recorded, to compare
 *   BENCH_DATABASE_URL   PostgreSQL server to create the bench database on
 *                        (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_REDIS          unset (default), "0", "false" or "off": no Redis runs; "1", "true" or "on": also run every
 *                        store with REDIS_URL=redis://127.0.0.1:6379; a redis:// or rediss:// URL: with that one
 *   DATABASE_POOL_SIZE   passed through to keyhaven when set (keyhaven's default is 4)
 *   BENCH_VERIFICATION_LOG_DAYS  passed to keyhaven as KEYHAVEN_VERIFICATION_LOG_DAYS when set ("0": no raw
 *                        verification log; unset: keyhaven's default, 7), since no KEYHAVEN_ variable of ours passes
 *   BENCH_CONSOLE        "off" (default) or "alternate": each v1 measurement of a keyhaven target is then made
 *                        BENCH_CONSOLE_ROUNDS times (default 2) with no console user and as often with one beside
 *                        it, alternated (none, browsing, none, browsing): a scripted console session
 *                        (bench/console.session.ts, signed in with the root key) opening the overview, the API's
 *                        key list and a key page in turn, BENCH_CONSOLE_PAUSE_MS (default 250) after each page. The
 *                        report gives browsing's requests/s and p99 against none's (issue 37: no measurable slow-down)
 *   BENCH_SERVER_NODE_ARGS  extra node flags for the keyhaven child (not the ceiling), space-separated
 *                        (e.g. "--cpu-prof --cpu-prof-dir=/tmp/verify-prof" to profile the server; combine with
 *                        BENCH_STORES, BENCH_KEYS and BENCH_CONNECTIONS to profile one scenario)
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { redactUrl } from "../src/storage/client.js";
import { browseConsole, signInToConsole } from "./console.session.js";
import {
  type Admin,
  type ChildServer,
  Cleanup,
  createDatabase,
  DEFAULT_DATABASE_URL,
  describeError,
  envIntList,
  environmentInfo,
  envList,
  envPositive,
  envServerNodeArgs,
  failureLine,
  formatCount,
  formatMs,
  formatShare,
  formatTable,
  handleInterrupts,
  httpCall,
  indent,
  interrupted,
  type LatencySummary,
  loadJsonPost,
  measurementLine,
  median,
  openAdmin,
  post,
  readRedisSetting,
  reportOutcome,
  round,
  startFixedResponseServer,
  startKeyhaven,
  summarizeLatencies,
  writeResults,
} from "./lib.js";

const VERIFY_ROUTE = "/v1/keys.verifyKey";
const VERIFY_ROUTE_V2 = "/v2/keys.verifyKey";
const WARMUP_SECONDS = 2;
/** What the output reports as met or not: at this many connections on PostgreSQL. */
const TARGET = { connections: 50, minShareOfCeiling: 0.4, maxP99Ms: 10 } as const;

type StoreKind = "postgres" | "pglite";
type KeyKind = "plain" | "limited";
type Protocol = "v1" | "v2";
type Target = { store: StoreKind; redisUrl: string | undefined; analytics: "on" | "off"; label: string };

type Settings = {
  seconds: number;
  connections: number[];
  /** Levels of `connections` at which the v2 route is measured after v1's. */
  v2Connections: number[];
  keys: KeyKind[];
  stores: StoreKind[];
  databaseUrl: string;
  redisUrl: string | undefined;
  analytics: ("on" | "off")[];
  keyhavenPoolSize: string;
  /** KEYHAVEN_VERIFICATION_LOG_DAYS for keyhaven (BENCH_VERIFICATION_LOG_DAYS); undefined: its default. */
  verificationLogDays: string | undefined;
  serverNodeArgs: string[];
  /** "alternate": each v1 measurement also with a console user browsing beside it (BENCH_CONSOLE). */
  console: "off" | "alternate";
  consoleRounds: number;
  consolePauseMs: number;
};

type ScenarioResult = {
  /** "ceiling", "postgres", "pglite", "postgres+redis" or "pglite+redis". */
  store: string;
  /** "fixed" for the ceiling. */
  keyKind: KeyKind | "fixed";
  /** The verification route measured: v1's (and the ceiling's path) or v2's. */
  protocol: Protocol;
  connections: number;
  durationS: number;
  /** 2xx answers during the measurement. */
  requests: number;
  requestsPerSecond: number;
  /** requests/s ÷ the ceiling's at the same connections (keyhaven scenarios). */
  shareOfCeiling?: number;
  /** From every 2xx answer's own time. */
  latencyMs: LatencySummary;
  /** autocannon's own histogram (whole milliseconds), for comparison. */
  autocannonLatencyMs: { p50: number; p99: number; mean: number; max: number };
  non2xx: number;
  /** Connection errors, timeouts included. */
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  /** Size of one answer's body. */
  answerBytes: number;
  /** Warm-up answers, every one a 200 with valid: true. */
  warmupRequests: number;
  /** With BENCH_CONSOLE=alternate: whether a console user browsed during the measurement, and what it saw. */
  console?: "none" | "browsing";
  consolePages?: { pages: number; failures: number; serverP50Ms?: number; serverP99Ms?: number };
};

type Failure = { store: string; keyKind?: KeyKind | "fixed"; connections?: number; error: string };

// ---------------------------------------------------------------------------------------------------------------
// Settings

function readSettings(env: NodeJS.ProcessEnv): Settings {
  const seconds = envPositive(env, "BENCH_SECONDS", 60);
  const list = <T extends string>(name: string, allowed: readonly T[]) => envList(env, name, allowed);
  const connections = envIntList(env, "BENCH_CONNECTIONS", "1,10,50", 1, 1000);
  const v2 = (env.BENCH_V2_CONNECTIONS ?? "50").trim();
  const v2Connections = v2 === "0" ? [] : envIntList(env, "BENCH_V2_CONNECTIONS", "50", 1, 1000).filter((c) => connections.includes(c));
  return {
    seconds,
    connections,
    v2Connections,
    keys: list("BENCH_KEYS", ["plain", "limited"] as const),
    stores: list("BENCH_STORES", ["postgres", "pglite"] as const),
    databaseUrl: env.BENCH_DATABASE_URL?.trim() || DEFAULT_DATABASE_URL,
    redisUrl: readRedisSetting(env.BENCH_REDIS, "off"),
    analytics: list("BENCH_ANALYTICS", ["on", "off"] as const),
    keyhavenPoolSize: env.DATABASE_POOL_SIZE?.trim() || "4 (keyhaven's default)",
    verificationLogDays: env.BENCH_VERIFICATION_LOG_DAYS?.trim() || undefined,
    serverNodeArgs: envServerNodeArgs(env),
    console: envList(env, "BENCH_CONSOLE", ["off", "alternate"] as const, ["off"]).includes("alternate") ? "alternate" : "off",
    consoleRounds: Math.floor(envPositive(env, "BENCH_CONSOLE_ROUNDS", 2)),
    consolePauseMs: Math.floor(envPositive(env, "BENCH_CONSOLE_PAUSE_MS", 250)),
  };
}

function targetsOf(settings: Settings): Target[] {
  const targets: Target[] = [];
  for (const analytics of settings.analytics) {
    const suffix = analytics === "off" ? " (analytics off)" : "";
    // The analytics comparison is reported on PostgreSQL, where the aggregates are flushed to a server.
    const stores = analytics === "off" ? settings.stores.filter((s) => s === "postgres") : settings.stores;
    for (const store of stores) targets.push({ store, redisUrl: undefined, analytics, label: `${store}${suffix}` });
    if (settings.redisUrl !== undefined) {
      for (const store of stores) {
        targets.push({ store, redisUrl: settings.redisUrl, analytics, label: `${store}+redis${suffix}` });
      }
    }
  }
  return targets;
}

const isValidAnswer = (body: string): boolean => {
  try {
    return (JSON.parse(body) as { valid?: unknown }).valid === true;
  } catch {
    return false;
  }
};

/** v2's envelope: `{meta, data: {valid, …}}`. */
const isValidV2Answer = (body: string): boolean => {
  try {
    return (JSON.parse(body) as { data?: { valid?: unknown } }).data?.valid === true;
  } catch {
    return false;
  }
};

/** How a verification is sent through one protocol: its URL path, headers and the check of a valid answer. */
type Route = { protocol: Protocol; path: string; headers: Record<string, string>; isValid: (body: string) => boolean };

const v1Route: Route = { protocol: "v1", path: VERIFY_ROUTE, headers: {}, isValid: isValidAnswer };
const v2Route = (rootKey: string): Route => ({
  protocol: "v2",
  path: VERIFY_ROUTE_V2,
  headers: { authorization: `Bearer ${rootKey}` },
  isValid: isValidV2Answer,
});

/** One verification outside the load: its status, body and whether it is valid. */
async function verifyOnce(
  server: ChildServer,
  key: string,
  route: Route = v1Route,
): Promise<{ status: number; text: string; bytes: number; valid: boolean }> {
  const { status, text } = await httpCall(`${server.url}${route.path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...route.headers },
    body: JSON.stringify({ key }),
  });
  return { status, text, bytes: Buffer.byteLength(text), valid: status === 200 && route.isValid(text) };
}

/** Warm-up (every answer checked), then the measurement. */
async function measure(
  scenario: { store: string; keyKind: KeyKind | "fixed"; connections: number },
  server: ChildServer,
  key: string,
  answerBytes: number,
  settings: Settings,
  route: Route = v1Route,
): Promise<ScenarioResult> {
  const url = `${server.url}${route.path}`;
  const body = JSON.stringify({ key });
  const headers = route.headers;
  const warmup = await loadJsonPost({
    url,
    body,
    headers,
    connections: scenario.connections,
    seconds: WARMUP_SECONDS,
    check: route.isValid,
  });
  const w = warmup.result;
  if (w.non2xx > 0 || w.mismatches > 0 || w.errors > 0 || w.requests.total === 0) {
    throw new Error(
      `warm-up: ${w.requests.total} answers, ${w.non2xx} non-2xx, ${w.mismatches} without valid: true, ${w.errors} errors` +
        (warmup.badAnswer !== undefined ? `; for example: ${warmup.badAnswer}` : ""),
    );
  }

  const run = await loadJsonPost({ url, body, headers, connections: scenario.connections, seconds: settings.seconds });
  const r = run.result;
  const durationS = r.duration > 0 ? r.duration : settings.seconds;
  const statusCodes: Record<string, number> = {};
  for (const [code, s] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = s.count ?? 0;
  return {
    ...scenario,
    protocol: route.protocol,
    durationS,
    requests: run.latenciesMs.length,
    requestsPerSecond: Math.round(run.latenciesMs.length / durationS),
    latencyMs: summarizeLatencies(run.latenciesMs),
    autocannonLatencyMs: { p50: r.latency.p50, p99: r.latency.p99, mean: r.latency.mean, max: r.latency.max },
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes,
    answerBytes,
    warmupRequests: w.requests.total,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Targets

type Report = {
  results: ScenarioResult[];
  failures: Failure[];
  answerBytes: Record<string, number>;
};

function logResult(r: ScenarioResult): void {
  console.log(measurementLine(r.requestsPerSecond, "req/s", r));
}

function fail(report: Report, failure: Failure): void {
  report.failures.push(failure);
  const connections = failure.connections === undefined ? undefined : `c=${failure.connections}`;
  console.log(failureLine([failure.store, failure.keyKind, connections], failure.error));
}

async function runCeiling(settings: Settings, report: Report, cleanup: Cleanup): Promise<void> {
  const server = await startFixedResponseServer(VERIFY_ROUTE, JSON.stringify({ key: "ready" }), cleanup);
  try {
    const sample = await verifyOnce(server, "bench");
    report.answerBytes.ceiling = sample.bytes;
    for (const connections of settings.connections) {
      if (interrupted()) return;
      const scenario = { store: "ceiling", keyKind: "fixed" as const, connections };
      console.log(`▶ ceiling c=${connections}`);
      try {
        const result = await measure(scenario, server, "bench", sample.bytes, settings);
        if (interrupted()) return; // a measurement cut short is not reported
        report.results.push(result);
        logResult(result);
      } catch (err) {
        fail(report, { ...scenario, error: describeError(err) });
      }
      const died = server.exitReason();
      if (died !== undefined) throw new Error(`${died}\n--- output ---\n${server.output()}`);
    }
  } finally {
    await server.stop();
  }
}

function importKeyOf(kind: KeyKind, apiId: string, plaintext: string): Record<string, unknown> {
  if (kind === "plain") return { apiId, plaintext, name: "bench plain" };
  return {
    apiId,
    plaintext,
    name: "bench limited",
    remaining: 2_000_000_000,
    ratelimit: { limit: 1_000_000_000, refillRate: 1_000_000_000, refillInterval: 60_000 },
  };
}

async function runKeyhaven(target: Target, settings: Settings, admin: Admin | undefined, report: Report, cleanup: Cleanup): Promise<void> {
  let storeEnv: Record<string, string>;
  let dispose: () => Promise<void>;
  if (target.store === "postgres") {
    if (!admin) throw new Error("no PostgreSQL connection");
    const db = await createDatabase(admin, settings.databaseUrl, cleanup);
    storeEnv = { DATABASE_URL: db.url };
    dispose = db.drop;
  } else {
    const dir = await mkdtemp(path.join(os.tmpdir(), "keyhaven-bench-"));
    dispose = cleanup.add(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
    storeEnv = { KEYHAVEN_DATA_DIR: dir };
  }
  if (target.redisUrl !== undefined) storeEnv.REDIS_URL = target.redisUrl;
  storeEnv.KEYHAVEN_ANALYTICS = target.analytics;
  if (settings.verificationLogDays !== undefined) storeEnv.KEYHAVEN_VERIFICATION_LOG_DAYS = settings.verificationLogDays;

  try {
    const rootKey = `bench_root_${randomBytes(24).toString("base64url")}`;
    // An ambient REDIS_URL must not turn a memory-limiter target into a Redis one.
    const server = await startKeyhaven(storeEnv, rootKey, settings.serverNodeArgs, cleanup, ["REDIS_URL"]);
    try {
      const created = await post(server, rootKey, "/v1/apis.createApi", JSON.stringify({ name: "bench" }));
      const apiId = (created.json as { apiId?: unknown } | undefined)?.apiId;
      if (created.status !== 200 || typeof apiId !== "string") {
        throw new Error(`apis.createApi answered ${created.status}: ${JSON.stringify(created.json)}`);
      }
      const plaintexts = new Map(settings.keys.map((kind) => [kind, `bench_${kind}_${randomBytes(18).toString("base64url")}`]));
      const imported = await post(
        server,
        rootKey,
        "/v1/migrations.createKeys",
        JSON.stringify(settings.keys.map((kind) => importKeyOf(kind, apiId, plaintexts.get(kind)!))),
      );
      const keyIds = (imported.json as { keyIds?: unknown } | undefined)?.keyIds;
      if (imported.status !== 200 || !Array.isArray(keyIds) || keyIds.length !== settings.keys.length) {
        throw new Error(`migrations.createKeys answered ${imported.status}: ${JSON.stringify(imported.json)}`);
      }

      const consoleSession = settings.console === "alternate" ? await signInToConsole(server, rootKey) : undefined;
      let pagesSeen: ScenarioResult["consolePages"];
      const consolePaths = ["/", `/apis/${apiId}`, `/keys/${String(keyIds[0])}`];
      for (const kind of settings.keys) {
        const key = plaintexts.get(kind)!;
        const sample = await verifyOnce(server, key);
        if (!sample.valid) throw new Error(`the ${kind} key does not verify: ${sample.status} ${sample.text.slice(0, 300)}`);
        report.answerBytes[`${target.label} ${kind}`] = sample.bytes;
        const v2 = v2Route(rootKey);
        if (settings.v2Connections.length > 0) {
          const sampleV2 = await verifyOnce(server, key, v2);
          if (!sampleV2.valid)
            throw new Error(`the ${kind} key does not verify through v2: ${sampleV2.status} ${sampleV2.text.slice(0, 300)}`);
          report.answerBytes[`${target.label} ${kind} v2`] = sampleV2.bytes;
        }
        for (const connections of settings.connections) {
          // v1's round, then (at the levels asked for) v2's on the same key, server and connections.
          const routes = settings.v2Connections.includes(connections) ? [v1Route, v2] : [v1Route];
          // With BENCH_CONSOLE=alternate, v1's round is measured with no console user and with one, alternated.
          const rounds: { route: Route; browsing?: boolean }[] = routes.flatMap((route) =>
            route.protocol === "v1" && consoleSession !== undefined
              ? Array.from({ length: settings.consoleRounds * 2 }, (_, i) => ({ route, browsing: i % 2 === 1 }))
              : [{ route }],
          );
          for (const { route, browsing } of rounds) {
            if (interrupted()) return;
            const scenario = { store: target.label, keyKind: kind, connections };
            const label = `${route.protocol === "v2" ? " v2" : ""}${browsing === undefined ? "" : browsing ? " console browsing" : " console none"}`;
            console.log(`▶ ${target.label} ${kind}${label} c=${connections}`);
            try {
              const browser = browsing && consoleSession ? browseConsole(consoleSession, consolePaths, settings.consolePauseMs) : undefined;
              const result = await measure(scenario, server, key, sample.bytes, settings, route).finally(async () => {
                if (browser === undefined) return;
                const seen = await browser.stop();
                pagesSeen = {
                  pages: seen.pages,
                  failures: seen.failures,
                  serverP50Ms: seen.serverMs?.p50,
                  serverP99Ms: seen.serverMs?.p99,
                };
              });
              if (browsing !== undefined) {
                result.console = browsing ? "browsing" : "none";
                if (browsing) result.consolePages = pagesSeen;
              }
              if (interrupted()) return; // a measurement cut short is not reported
              const after = await verifyOnce(server, key, route);
              if (!after.valid) throw new Error(`the key no longer verifies after the run: ${after.status} ${after.text.slice(0, 300)}`);
              const ceiling = report.results.find((r) => r.store === "ceiling" && r.connections === connections);
              if (ceiling && ceiling.requestsPerSecond > 0) {
                result.shareOfCeiling = round(result.requestsPerSecond / ceiling.requestsPerSecond, 4);
              }
              report.results.push(result);
              logResult(result);
            } catch (err) {
              fail(report, { ...scenario, keyKind: kind, error: `${route.protocol}: ${describeError(err)}` });
            }
            const died = server.exitReason();
            if (died !== undefined) throw new Error(died);
          }
        }
      }
    } catch (err) {
      throw new Error(`${describeError(err)}\n--- keyhaven output ---\n${server.output()}`);
    } finally {
      await server.stop();
    }
    if (report.failures.some((f) => f.store === target.label) && server.output().trim() !== "") {
      console.log(`  keyhaven output (last lines):\n${indent(server.output().trim().split("\n").slice(-20).join("\n"))}`);
    }
  } finally {
    await dispose();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Report

function table(results: ScenarioResult[]): string {
  const n = formatCount;
  const ms = formatMs;
  const header = ["store", "keys", "route", "console", "conn", "req/s", "% ceiling", "p50 ms", "p99 ms", "non-2xx", "errors"];
  const rows = results.map((r) => [
    r.store,
    r.keyKind,
    r.protocol,
    r.console ?? "",
    String(r.connections),
    n(r.requestsPerSecond),
    formatShare(r.shareOfCeiling),
    ms(r.latencyMs.p50),
    ms(r.latencyMs.p99),
    n(r.non2xx),
    n(r.errors),
  ]);
  return formatTable(header, rows, new Set([4, 5, 6, 7, 8, 9, 10]));
}

type TargetCheck = {
  keyKind: KeyKind;
  measured: boolean;
  shareOfCeiling?: number;
  p99Ms?: number;
  shareMet?: boolean;
  p99Met?: boolean;
  met: boolean;
};

function checkTarget(results: ScenarioResult[], settings: Settings): TargetCheck[] {
  return settings.keys.map((keyKind) => {
    const r = results.find(
      (x) => x.store === "postgres" && x.protocol === "v1" && x.keyKind === keyKind && x.connections === TARGET.connections,
    );
    if (!r || r.shareOfCeiling === undefined) return { keyKind, measured: false, met: false };
    const shareMet = r.shareOfCeiling >= TARGET.minShareOfCeiling;
    const p99Met = r.latencyMs.p99 < TARGET.maxP99Ms;
    return {
      keyKind,
      measured: true,
      shareOfCeiling: r.shareOfCeiling,
      p99Ms: r.latencyMs.p99,
      shareMet,
      p99Met,
      met: shareMet && p99Met && r.non2xx === 0 && r.errors === 0,
    };
  });
}

function describeTarget(checks: TargetCheck[]): string {
  const lines = [
    `target: at ${TARGET.connections} connections on PostgreSQL, ≥ ${TARGET.minShareOfCeiling * 100}% of the ceiling ` +
      `and p99 < ${TARGET.maxP99Ms} ms (with no non-2xx or errors)`,
  ];
  const width = Math.max(...checks.map((c) => c.keyKind.length));
  for (const c of checks) {
    const name = `${c.keyKind}:`.padEnd(width + 1);
    if (!c.measured) {
      lines.push(`  ${name} not measured (needs postgres in BENCH_STORES, ${TARGET.connections} in BENCH_CONNECTIONS and the ceiling)`);
      continue;
    }
    const yes = (ok: boolean | undefined) => (ok ? "met" : "NOT met");
    lines.push(
      `  ${name} ${(c.shareOfCeiling! * 100).toFixed(1)}% of the ceiling (${yes(c.shareMet)}), ` +
        `p99 ${c.p99Ms!.toFixed(2)} ms (${yes(c.p99Met)}) → ${c.met ? "target met" : "target NOT met"}`,
    );
  }
  return lines.join("\n");
}

/** Verification analytics on vs off (issue target: under 10% apart), per key kind and connections, on PostgreSQL. */
function describeAnalytics(results: ScenarioResult[]): string | undefined {
  const lines: string[] = [];
  for (const on of results.filter((r) => r.store === "postgres" && r.protocol === "v1" && r.keyKind !== "fixed")) {
    const off = results.find(
      (r) => r.store === "postgres (analytics off)" && r.protocol === "v1" && r.keyKind === on.keyKind && r.connections === on.connections,
    );
    if (!off) continue;
    const apart = Math.abs(on.requestsPerSecond - off.requestsPerSecond) / off.requestsPerSecond;
    lines.push(
      `  ${on.keyKind} c=${on.connections}: on ${Math.round(on.requestsPerSecond).toLocaleString("en-US")} req/s, ` +
        `off ${Math.round(off.requestsPerSecond).toLocaleString("en-US")} req/s: ${(apart * 100).toFixed(1)}% apart ` +
        `(${apart < 0.1 ? "met" : "NOT met"})`,
    );
  }
  if (lines.length === 0) return undefined;
  return ["analytics recording on vs off on PostgreSQL (target: under 10% apart):", ...lines].join("\n");
}

/**
 * A console user browsing vs none (BENCH_CONSOLE=alternate), per store, key and connections: the medians of each
 * side's rounds (issue 37: browsing does not slow verification measurably).
 */
function describeConsole(results: ScenarioResult[]): string | undefined {
  const lines: string[] = [];
  const groups = new Map<string, { none: ScenarioResult[]; browsing: ScenarioResult[] }>();
  for (const r of results) {
    if (r.console === undefined) continue;
    const name = `${r.store} ${r.keyKind} c=${r.connections}`;
    const group = groups.get(name) ?? { none: [], browsing: [] };
    group[r.console].push(r);
    groups.set(name, group);
  }
  for (const [name, { none, browsing }] of groups) {
    if (none.length === 0 || browsing.length === 0) continue;
    const rps = (rs: ScenarioResult[]) => median(rs.map((r) => r.requestsPerSecond));
    const p99 = (rs: ScenarioResult[]) => median(rs.map((r) => r.latencyMs.p99));
    const pages = browsing.reduce((sum, r) => sum + (r.consolePages?.pages ?? 0), 0);
    const pageP50 = median(browsing.flatMap((r) => (r.consolePages?.serverP50Ms === undefined ? [] : [r.consolePages.serverP50Ms])));
    lines.push(
      `  ${name}: none ${formatCount(rps(none))} req/s (p99 ${formatMs(p99(none))} ms), browsing ${formatCount(rps(browsing))} req/s ` +
        `(p99 ${formatMs(p99(browsing))} ms): ${((rps(browsing) / rps(none)) * 100).toFixed(1)}% of none; ` +
        `${pages} pages opened, page server time p50 ${formatMs(pageP50)} ms`,
    );
  }
  if (lines.length === 0) return undefined;
  return ["verification with a console user browsing vs none (medians of the alternated rounds):", ...lines].join("\n");
}

/** v2 vs v1 on the same store, key and connections (issue 14's target: v2 within 10% of v1's requests/s). */
function describeV2(results: ScenarioResult[]): string | undefined {
  const lines: string[] = [];
  for (const v2 of results.filter((r) => r.protocol === "v2")) {
    const v1 = results.find(
      (r) => r.protocol === "v1" && r.store === v2.store && r.keyKind === v2.keyKind && r.connections === v2.connections,
    );
    if (!v1 || v1.requestsPerSecond === 0) continue;
    const ratio = v2.requestsPerSecond / v1.requestsPerSecond;
    lines.push(
      `  ${v2.store} ${v2.keyKind} c=${v2.connections}: v1 ${formatCount(v1.requestsPerSecond)} req/s, ` +
        `v2 ${formatCount(v2.requestsPerSecond)} req/s: v2/v1 ${(ratio * 100).toFixed(1)}% ` +
        `(p99 v1 ${formatMs(v1.latencyMs.p99)} ms, v2 ${formatMs(v2.latencyMs.p99)} ms) (${ratio >= 0.9 ? "met" : "NOT met"})`,
    );
  }
  if (lines.length === 0) return undefined;
  return ["POST /v2/keys.verifyKey vs POST /v1/keys.verifyKey (target: v2 within 10% of v1):", ...lines].join("\n");
}

// ---------------------------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const settings = readSettings(process.env);
  const startedAt = new Date();
  const cleanup = new Cleanup();
  const report: Report = { results: [], failures: [], answerBytes: {} };
  let failure: unknown;

  handleInterrupts("stopping the current measurement");

  let postgresVersion: string | undefined;
  try {
    const opened = await openAdmin(settings.databaseUrl, settings.stores.includes("postgres"), cleanup);
    const admin = opened.admin;
    postgresVersion = opened.postgresVersion;

    const targets = targetsOf(settings);
    const scenarios =
      settings.connections.length * (1 + targets.length * settings.keys.length) +
      settings.v2Connections.length * targets.length * settings.keys.length;
    const minutes = (scenarios * (settings.seconds + WARMUP_SECONDS)) / 60;
    console.log(
      `keyhaven verify benchmark: ${scenarios} scenarios of ${WARMUP_SECONDS} s warm-up + ${settings.seconds} s ` +
        `(about ${minutes < 1 ? "1" : Math.ceil(minutes)} min), connections ${settings.connections.join(",")}, ` +
        `keys ${settings.keys.join(",")}, stores ${targets.map((t) => t.label).join(",")}, ${os.cpus().length} CPUs` +
        (postgresVersion ? `, PostgreSQL ${postgresVersion}` : ""),
    );

    try {
      await runCeiling(settings, report, cleanup);
    } catch (err) {
      fail(report, { store: "ceiling", error: describeError(err) });
    }
    for (const target of targets) {
      if (interrupted()) break;
      try {
        await runKeyhaven(target, settings, admin, report, cleanup);
      } catch (err) {
        fail(report, { store: target.label, error: describeError(err) });
      }
    }
  } catch (err) {
    failure = err;
  } finally {
    await cleanup.runAll();
  }

  const targetChecks = checkTarget(report.results, settings);
  if (report.results.length > 0) {
    console.log(`\n${table(report.results)}`);
    const sizes = Object.entries(report.answerBytes)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ");
    console.log(
      `\nreq/s: 2xx answers per second; % ceiling: of the fixed-response Fastify server's req/s at the same connections;` +
        ` p50/p99: per request, from autocannon's own timing.` +
        `\nanswer sizes (bytes): ${sizes}.` +
        `\nkeyhaven's DATABASE_POOL_SIZE: ${settings.keyhavenPoolSize}; KEYHAVEN_VERIFICATION_LOG_DAYS: ` +
        `${settings.verificationLogDays ?? "7 (keyhaven's default)"}; rate limits counted in ` +
        `${settings.redisUrl === undefined ? "memory" : `memory (and in Redis for the +redis stores)`}.`,
    );
    console.log(`\n${describeTarget(targetChecks)}`);
    const analyticsLines = describeAnalytics(report.results);
    if (analyticsLines) console.log(`\n${analyticsLines}`);
    const v2Lines = describeV2(report.results);
    if (v2Lines) console.log(`\n${v2Lines}`);
    const consoleLines = describeConsole(report.results);
    if (consoleLines) console.log(`\n${consoleLines}`);
    const file = await writeResults("verify", startedAt, {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      complete: failure === undefined && report.failures.length === 0 && !interrupted(),
      ...(failure !== undefined && { error: describeError(failure) }),
      settings: {
        ...settings,
        databaseUrl: redactUrl(settings.databaseUrl),
        redisUrl: settings.redisUrl === undefined ? undefined : redactUrl(settings.redisUrl),
        warmupSeconds: WARMUP_SECONDS,
      },
      environment: environmentInfo(postgresVersion),
      target: { ...TARGET, checks: targetChecks },
      answerBytes: report.answerBytes,
      results: report.results,
      failures: report.failures,
    });
    console.log(`results written to ${path.relative(process.cwd(), file)}`);
  }

  reportOutcome(failure, report.failures, (f) => [f.store, f.keyKind, f.connections === undefined ? undefined : `c=${f.connections}`]);
}

await main();
