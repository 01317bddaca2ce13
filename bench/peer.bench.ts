/**
 * Peer benchmark: keyhaven's key verification next to better-auth's API-key plugin on the same PostgreSQL server,
 * and both next to the fixed-response ceiling (bench/fixed-response.server.ts), in alternating rounds.
 *
 * Targets, each a child process (keyhaven compiled, `node dist/cli/main.js`, the others `node --import tsx`) (they share this machine's CPUs with the load
 * generator and PostgreSQL), all started once and kept running for every round:
 *   - ceiling:  bench/fixed-response.server.ts, POST /v1/keys.verifyKey answering a fixed ~300-byte body.
 *   - keyhaven: keyhaven on a fresh `keyhaven_bench_<random>` database, its default settings (analytics on, rate
 *               limits in memory, DATABASE_POOL_SIZE 4 unless set), POST /v1/keys.verifyKey {"key"}. BENCH_KEYS
 *               plain keys (no `remaining`, no rate limit) imported with POST /v1/migrations.createKeys.
 *   - peer:     bench/peer.server.ts: better-auth 1.7 with @better-auth/api-key (bench/peer.auth.ts: the plugin's
 *               rate limit off, keys hashed, no `remaining`) on another fresh `keyhaven_bench_<random>` database
 *               whose tables its own migration creates, through a `pg` pool of the same size as keyhaven's;
 *               POST /verify {"key"} → auth.api.verifyApiKey. BENCH_KEYS keys created with auth.api.createApiKey.
 *
 * Every request's key is one of the target's BENCH_KEYS keys, chosen at random. Each measurement is preceded by a
 * warm-up of 2 s at the same connections (not counted) in which every answer must be a 200 with `valid: true`, or
 * the scenario fails. A round measures the ceiling, then keyhaven and the peer, in alternating order (keyhaven
 * first in odd rounds, the peer first in even ones), at each level of BENCH_CONNECTIONS; there are BENCH_ROUNDS
 * rounds. The load average (1 min) is read before and after every measurement.
 *
 * Reported: a table per round and target (req/s = 2xx answers per second, the share of the same round's ceiling,
 * p50/p99 from every 2xx answer's own time, non-2xx, errors, load), then per connections the median over rounds
 * of each target's req/s and p99 and of the keyhaven/peer req/s ratio. The results are written to
 * bench/results/peer-<ts>.json.
 *
 * Run:   npm run bench:peer                        (60 s per measurement: about 10 minutes with the defaults)
 *        BENCH_SECONDS=10 npm run bench:peer       (a quicker run)
 * Environment:
 *   BENCH_SECONDS        seconds per measurement, after the 2 s warm-up (default 60)
 *   BENCH_ROUNDS         rounds (default 3)
 *   BENCH_CONNECTIONS    comma-separated connection counts (default "50")
 *   BENCH_KEYS           keys created in each system (default 200)
 *   BENCH_DATABASE_URL   PostgreSQL server to create both bench databases on
 *                        (default postgres://postgres@127.0.0.1:5432/postgres)
 *   DATABASE_POOL_SIZE   the pool size of both keyhaven and the peer (default 4, keyhaven's default)
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { redactUrl } from "../src/storage/client.js";
import {
  type Admin,
  type ChildServer,
  Cleanup,
  createDatabase,
  DEFAULT_DATABASE_URL,
  describeError,
  envIntList,
  envPositive,
  environmentInfo,
  failureLine,
  formatCount,
  formatMs,
  formatShare,
  formatTable,
  handleInterrupts,
  httpCall,
  interrupted,
  type LatencySummary,
  loadJsonPost,
  measurementLine,
  openAdmin,
  post,
  REPO_ROOT,
  reportOutcome,
  round,
  startChildServer,
  startFixedResponseServer,
  startKeyhaven,
  summarizeLatencies,
  writeResults,
} from "./lib.js";

const KEYHAVEN_ROUTE = "/v1/keys.verifyKey";
const PEER_ROUTE = "/verify";
const WARMUP_SECONDS = 2;
const DEFAULT_POOL_SIZE = "4";
/** The most keys POST /v1/migrations.createKeys takes at once. */
const IMPORT_BATCH = 100;

type TargetName = "ceiling" | "keyhaven" | "peer";

type Settings = {
  seconds: number;
  rounds: number;
  connections: number[];
  keyCount: number;
  databaseUrl: string;
  poolSize: string;
};

type ScenarioResult = {
  round: number;
  target: TargetName;
  connections: number;
  durationS: number;
  /** 2xx answers during the measurement. */
  requests: number;
  requestsPerSecond: number;
  /** requests/s ÷ the same round's ceiling at the same connections. */
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
  /** Warm-up answers, every one a 200 with valid: true. */
  warmupRequests: number;
  /** The 1-minute load average before and after the measurement. */
  load: { before: number; after: number };
};

type Failure = { target: TargetName; round?: number; connections?: number; error: string };

type Running = { name: TargetName; server: ChildServer; route: string; bodies: string[] };

type Report = { results: ScenarioResult[]; failures: Failure[]; answerBytes: Partial<Record<TargetName, number>> };

// ---------------------------------------------------------------------------------------------------------------
// Settings

function readSettings(env: NodeJS.ProcessEnv): Settings {
  const keyCount = envPositive(env, "BENCH_KEYS", 200);
  const rounds = envPositive(env, "BENCH_ROUNDS", 3);
  if (!Number.isInteger(keyCount) || keyCount > 10_000)
    throw new Error(`BENCH_KEYS must be an integer from 1 to 10000, got "${env.BENCH_KEYS}"`);
  if (!Number.isInteger(rounds)) throw new Error(`BENCH_ROUNDS must be a positive integer, got "${env.BENCH_ROUNDS}"`);
  return {
    seconds: envPositive(env, "BENCH_SECONDS", 60),
    rounds,
    connections: envIntList(env, "BENCH_CONNECTIONS", "50", 1, 1000),
    keyCount,
    databaseUrl: env.BENCH_DATABASE_URL?.trim() || DEFAULT_DATABASE_URL,
    poolSize: env.DATABASE_POOL_SIZE?.trim() || DEFAULT_POOL_SIZE,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Answers

const isValidAnswer = (body: string): boolean => {
  try {
    return (JSON.parse(body) as { valid?: unknown }).valid === true;
  } catch {
    return false;
  }
};

async function verifyOnce(target: Running, body: string): Promise<{ status: number; text: string; bytes: number; valid: boolean }> {
  const { status, text } = await httpCall(`${target.server.url}${target.route}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  return { status, text, bytes: Buffer.byteLength(text), valid: status === 200 && isValidAnswer(text) };
}

/** Every key verifies once, one after the other, before any load: a key that does not stops the benchmark. */
async function checkEveryKey(target: Running): Promise<number> {
  let bytes = 0;
  for (const body of target.bodies) {
    const answer = await verifyOnce(target, body);
    if (!answer.valid) throw new Error(`${target.name}: a key does not verify: ${answer.status} ${answer.text.slice(0, 300)}`);
    bytes = answer.bytes;
  }
  return bytes;
}

const keyBodies = (keys: readonly string[]) => keys.map((key) => JSON.stringify({ key }));

// ---------------------------------------------------------------------------------------------------------------
// Targets

async function startKeyhavenTarget(settings: Settings, admin: Admin, cleanup: Cleanup): Promise<Running> {
  const db = await createDatabase(admin, settings.databaseUrl, cleanup);
  const rootKey = `bench_root_${randomBytes(24).toString("base64url")}`;
  // An ambient REDIS_URL must not move keyhaven's rate-limit counters to Redis: the peer has none.
  const server = await startKeyhaven({ DATABASE_URL: db.url, DATABASE_POOL_SIZE: settings.poolSize }, rootKey, [], cleanup, ["REDIS_URL"]);
  const created = await post(server, rootKey, "/v1/apis.createApi", JSON.stringify({ name: "bench" }));
  const apiId = (created.json as { apiId?: unknown } | undefined)?.apiId;
  if (created.status !== 200 || typeof apiId !== "string") {
    throw new Error(`apis.createApi answered ${created.status}: ${JSON.stringify(created.json)}`);
  }
  const keys = Array.from({ length: settings.keyCount }, () => `bench_plain_${randomBytes(18).toString("base64url")}`);
  // migrations.createKeys takes at most IMPORT_BATCH keys a request.
  for (let from = 0; from < keys.length; from += IMPORT_BATCH) {
    const batch = keys.slice(from, from + IMPORT_BATCH);
    const imported = await post(
      server,
      rootKey,
      "/v1/migrations.createKeys",
      JSON.stringify(batch.map((plaintext, i) => ({ apiId, plaintext, name: `bench plain ${from + i}` }))),
    );
    const keyIds = (imported.json as { keyIds?: unknown } | undefined)?.keyIds;
    if (imported.status !== 200 || !Array.isArray(keyIds) || keyIds.length !== batch.length) {
      throw new Error(`migrations.createKeys answered ${imported.status}: ${JSON.stringify(imported.json).slice(0, 500)}`);
    }
  }
  return { name: "keyhaven", server, route: KEYHAVEN_ROUTE, bodies: keyBodies(keys) };
}

async function startPeerTarget(settings: Settings, admin: Admin, cleanup: Cleanup): Promise<Running> {
  const db = await createDatabase(admin, settings.databaseUrl, cleanup);
  const server = await startChildServer({
    name: "peer (better-auth)",
    script: ["bench/peer.server.ts"],
    nodeArgs: [],
    env: { DATABASE_URL: db.url, DATABASE_POOL_SIZE: settings.poolSize },
    ready: { method: "GET", path: "/ready" },
    cleanup,
  });
  const { status, text } = await httpCall(`${server.url}/setup/keys`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ count: settings.keyCount }),
  });
  let keys: unknown;
  try {
    keys = (JSON.parse(text) as { keys?: unknown }).keys;
  } catch {
    // reported below
  }
  if (status !== 200 || !Array.isArray(keys) || keys.length !== settings.keyCount || keys.some((k) => typeof k !== "string")) {
    throw new Error(`peer /setup/keys answered ${status}: ${text.slice(0, 500)}\n--- peer output ---\n${server.output()}`);
  }
  return { name: "peer", server, route: PEER_ROUTE, bodies: keyBodies(keys as string[]) };
}

// ---------------------------------------------------------------------------------------------------------------
// Measurement

const load1 = () => round(os.loadavg()[0]!, 2);

/** Warm-up (every answer checked), then the measurement, each request with one of the target's keys at random. */
async function measure(target: Running, roundNo: number, connections: number, settings: Settings): Promise<ScenarioResult> {
  const url = `${target.server.url}${target.route}`;
  const body = target.bodies[0]!;
  const warmup = await loadJsonPost({ url, body, bodies: target.bodies, connections, seconds: WARMUP_SECONDS, check: isValidAnswer });
  const w = warmup.result;
  if (w.non2xx > 0 || w.mismatches > 0 || w.errors > 0 || w.requests.total === 0) {
    throw new Error(
      `warm-up: ${w.requests.total} answers, ${w.non2xx} non-2xx, ${w.mismatches} without valid: true, ${w.errors} errors` +
        (warmup.badAnswer !== undefined ? `; for example: ${warmup.badAnswer}` : ""),
    );
  }

  const before = load1();
  const run = await loadJsonPost({ url, body, bodies: target.bodies, connections, seconds: settings.seconds });
  const after = load1();
  const r = run.result;
  const durationS = r.duration > 0 ? r.duration : settings.seconds;
  const statusCodes: Record<string, number> = {};
  for (const [code, s] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = s.count ?? 0;
  return {
    round: roundNo,
    target: target.name,
    connections,
    durationS,
    requests: run.latenciesMs.length,
    requestsPerSecond: Math.round(run.latenciesMs.length / durationS),
    latencyMs: summarizeLatencies(run.latenciesMs),
    autocannonLatencyMs: { p50: r.latency.p50, p99: r.latency.p99, mean: r.latency.mean, max: r.latency.max },
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    statusCodes,
    warmupRequests: w.requests.total,
    load: { before, after },
  };
}

/** The order of a round: the ceiling first, then keyhaven and the peer, keyhaven first in odd rounds. */
function roundOrder(roundNo: number): TargetName[] {
  return roundNo % 2 === 1 ? ["ceiling", "keyhaven", "peer"] : ["ceiling", "peer", "keyhaven"];
}

async function runRounds(targets: Map<TargetName, Running>, settings: Settings, report: Report): Promise<void> {
  for (let roundNo = 1; roundNo <= settings.rounds; roundNo++) {
    for (const connections of settings.connections) {
      for (const name of roundOrder(roundNo)) {
        if (interrupted()) return;
        const target = targets.get(name)!;
        console.log(`▶ round ${roundNo} ${name} c=${connections} (load ${load1()})`);
        try {
          const result = await measure(target, roundNo, connections, settings);
          if (interrupted()) return; // a measurement cut short is not reported
          const ceiling = report.results.find((x) => x.target === "ceiling" && x.round === roundNo && x.connections === connections);
          if (name !== "ceiling" && ceiling && ceiling.requestsPerSecond > 0) {
            result.shareOfCeiling = round(result.requestsPerSecond / ceiling.requestsPerSecond, 4);
          }
          report.results.push(result);
          console.log(`${measurementLine(result.requestsPerSecond, "req/s", result)}, load ${result.load.before}→${result.load.after}`);
        } catch (err) {
          fail(report, { target: name, round: roundNo, connections, error: describeError(err) });
        }
        const died = target.server.exitReason();
        if (died !== undefined) throw new Error(`${died}\n--- output ---\n${target.server.output()}`);
      }
    }
  }
}

function fail(report: Report, failure: Failure): void {
  report.failures.push(failure);
  const where = [failure.target, failure.round === undefined ? undefined : `round ${failure.round}`];
  if (failure.connections !== undefined) where.push(`c=${failure.connections}`);
  console.log(failureLine(where, failure.error));
}

// ---------------------------------------------------------------------------------------------------------------
// Report

function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function table(results: ScenarioResult[]): string {
  const header = ["round", "target", "conn", "req/s", "% ceiling", "p50 ms", "p99 ms", "non-2xx", "errors", "load"];
  const rows = results.map((r) => [
    String(r.round),
    r.target,
    String(r.connections),
    formatCount(r.requestsPerSecond),
    formatShare(r.shareOfCeiling),
    formatMs(r.latencyMs.p50),
    formatMs(r.latencyMs.p99),
    formatCount(r.non2xx),
    formatCount(r.errors),
    `${r.load.before.toFixed(2)}→${r.load.after.toFixed(2)}`,
  ]);
  return formatTable(header, rows, new Set([0, 2, 3, 4, 5, 6, 7, 8]));
}

type Summary = {
  connections: number;
  rounds: number;
  medianRequestsPerSecond: Partial<Record<TargetName, number>>;
  medianP99Ms: Partial<Record<TargetName, number>>;
  /** keyhaven req/s ÷ peer req/s, per round where both were measured. */
  keyhavenOverPeer: number[];
  medianKeyhavenOverPeer?: number;
  medianShareOfCeiling: Partial<Record<"keyhaven" | "peer", number>>;
  loadRange: { min: number; max: number };
};

function summarize(results: ScenarioResult[], connections: number): Summary {
  const at = results.filter((r) => r.connections === connections);
  const of = (t: TargetName) => at.filter((r) => r.target === t);
  const medianRequestsPerSecond: Summary["medianRequestsPerSecond"] = {};
  const medianP99Ms: Summary["medianP99Ms"] = {};
  for (const t of ["ceiling", "keyhaven", "peer"] as const) {
    if (of(t).length === 0) continue;
    medianRequestsPerSecond[t] = Math.round(median(of(t).map((r) => r.requestsPerSecond)));
    medianP99Ms[t] = round(median(of(t).map((r) => r.latencyMs.p99)), 2);
  }
  const keyhavenOverPeer: number[] = [];
  for (const k of of("keyhaven")) {
    const p = of("peer").find((r) => r.round === k.round);
    if (p && p.requestsPerSecond > 0) keyhavenOverPeer.push(round(k.requestsPerSecond / p.requestsPerSecond, 3));
  }
  const medianShareOfCeiling: Summary["medianShareOfCeiling"] = {};
  for (const t of ["keyhaven", "peer"] as const) {
    const shares = of(t).flatMap((r) => (r.shareOfCeiling === undefined ? [] : [r.shareOfCeiling]));
    if (shares.length > 0) medianShareOfCeiling[t] = round(median(shares), 4);
  }
  const loads = at.flatMap((r) => [r.load.before, r.load.after]);
  return {
    connections,
    rounds: new Set(at.map((r) => r.round)).size,
    medianRequestsPerSecond,
    medianP99Ms,
    keyhavenOverPeer,
    ...(keyhavenOverPeer.length > 0 && { medianKeyhavenOverPeer: round(median(keyhavenOverPeer), 3) }),
    medianShareOfCeiling,
    loadRange: { min: loads.length ? Math.min(...loads) : NaN, max: loads.length ? Math.max(...loads) : NaN },
  };
}

function describeSummary(s: Summary): string {
  const rate = (t: TargetName) => formatCount(s.medianRequestsPerSecond[t] ?? NaN);
  const p99 = (t: TargetName) => formatMs(s.medianP99Ms[t] ?? NaN);
  const lines = [
    `c=${s.connections}, median of ${s.rounds} round(s), load ${s.loadRange.min.toFixed(2)}–${s.loadRange.max.toFixed(2)}` +
      `${s.loadRange.max > 3 ? " (above 3: indicative only)" : ""}:`,
    `  ceiling  ${rate("ceiling")} req/s, p99 ${p99("ceiling")} ms`,
    `  keyhaven ${rate("keyhaven")} req/s (${formatShare(s.medianShareOfCeiling.keyhaven)} of the ceiling), p99 ${p99("keyhaven")} ms`,
    `  peer     ${rate("peer")} req/s (${formatShare(s.medianShareOfCeiling.peer)} of the ceiling), p99 ${p99("peer")} ms`,
  ];
  if (s.medianKeyhavenOverPeer !== undefined) {
    lines.push(
      `  keyhaven/peer req/s: ${s.medianKeyhavenOverPeer.toFixed(2)}× (per round: ${s.keyhavenOverPeer.map((x) => x.toFixed(2)).join(", ")})`,
    );
  }
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const settings = readSettings(process.env);
  const startedAt = new Date();
  const cleanup = new Cleanup();
  const report: Report = { results: [], failures: [], answerBytes: {} };
  let failure: unknown;
  let postgresVersion: string | undefined;

  handleInterrupts("stopping the current measurement");

  try {
    const opened = await openAdmin(settings.databaseUrl, true, cleanup);
    const admin = opened.admin!;
    postgresVersion = opened.postgresVersion;
    const measurements = settings.rounds * settings.connections.length * 3;
    const minutes = (measurements * (settings.seconds + WARMUP_SECONDS)) / 60;
    console.log(
      `keyhaven peer benchmark (better-auth API keys): ${settings.rounds} round(s) × 3 targets × connections ` +
        `${settings.connections.join(",")} = ${measurements} measurements of ${WARMUP_SECONDS} s warm-up + ` +
        `${settings.seconds} s (about ${Math.max(1, Math.ceil(minutes))} min), ${settings.keyCount} keys per system, ` +
        `pool size ${settings.poolSize}, ${os.cpus().length} CPUs, PostgreSQL ${postgresVersion}, load ${load1()}`,
    );

    const targets = new Map<TargetName, Running>();
    const ceilingBodies = keyBodies([`bench_${randomBytes(18).toString("base64url")}`]);
    const ceiling = await startFixedResponseServer(KEYHAVEN_ROUTE, ceilingBodies[0]!, cleanup);
    targets.set("ceiling", { name: "ceiling", server: ceiling, route: KEYHAVEN_ROUTE, bodies: ceilingBodies });
    console.log(`starting keyhaven and creating ${settings.keyCount} keys`);
    targets.set("keyhaven", await startKeyhavenTarget(settings, admin, cleanup));
    console.log(`starting the peer (better-auth) and creating ${settings.keyCount} keys`);
    targets.set("peer", await startPeerTarget(settings, admin, cleanup));
    for (const target of targets.values()) report.answerBytes[target.name] = await checkEveryKey(target);

    await runRounds(targets, settings, report);
  } catch (err) {
    failure = err;
  } finally {
    await cleanup.runAll();
  }

  const summaries = settings.connections.map((c) => summarize(report.results, c));
  if (report.results.length > 0) {
    console.log(`\n${table(report.results)}`);
    console.log(
      `\nreq/s: 2xx answers per second; % ceiling: of the fixed-response server's req/s in the same round at the same ` +
        `connections; p50/p99: per request, from autocannon's own timing; load: 1-minute load average before→after.` +
        `\nanswer sizes (bytes): ${Object.entries(report.answerBytes)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ")}; DATABASE_POOL_SIZE ${settings.poolSize} for keyhaven and the peer.`,
    );
    for (const s of summaries) console.log(`\n${describeSummary(s)}`);
    const file = await writeResults("peer", startedAt, {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      complete: failure === undefined && report.failures.length === 0 && !interrupted(),
      ...(failure !== undefined && { error: describeError(failure) }),
      settings: { ...settings, databaseUrl: redactUrl(settings.databaseUrl), warmupSeconds: WARMUP_SECONDS },
      environment: environmentInfo(postgresVersion),
      peer: peerVersions(),
      answerBytes: report.answerBytes,
      summaries,
      results: report.results,
      failures: report.failures,
    });
    console.log(`results written to ${path.relative(process.cwd(), file)}`);
  }

  reportOutcome(failure, report.failures, (f) => [
    f.target,
    f.round === undefined ? undefined : `round ${f.round}`,
    f.connections === undefined ? undefined : `c=${f.connections}`,
  ]);
}

/** The installed versions of what the peer runs, for the results file. */
function peerVersions(): Record<string, string | undefined> {
  const versions: Record<string, string | undefined> = {};
  for (const name of ["better-auth", "@better-auth/api-key", "@better-auth/core", "pg"]) {
    try {
      const manifest = JSON.parse(readFileSync(path.join(REPO_ROOT, "node_modules", name, "package.json"), "utf8")) as { version?: string };
      versions[name] = manifest.version;
    } catch {
      versions[name] = undefined;
    }
  }
  return versions;
}

await main();
