/**
 * Standalone rate-limit benchmark: how many `POST /v1/ratelimits.limit` decisions per second keyhaven answers on
 * PostgreSQL, at what latency, with counters in process memory and in Redis, next to a ceiling measured in the same
 * run: the same request body POSTed to the minimal Fastify 5 server of bench/fixed-response.server.ts (it parses
 * the JSON body and answers a fixed ~300-byte body), i.e. what HTTP through Fastify costs on this machine.
 *
 * Load comes from autocannon (in this process, one thread): `connections` keep-alive connections each sending the
 * same limit call back to back for BENCH_SECONDS, after a 2 s warm-up (not counted) in which every answer must be a
 * 200 with `success: true`, or the scenario fails. The limit is 1e9 per 60 s window, so every call is a full
 * decision (namespace and override lookup, root-key check, counter charged) that passes.
 *
 * Targets, each a child process (keyhaven compiled, `node dist/cli/main.js`, the others `node --import tsx`) (they share this machine's CPUs with the load
 * generator and PostgreSQL):
 *   - ceiling:        bench/fixed-response.server.ts (the body goes to its only route, /v1/keys.verifyKey).
 *   - postgres:       keyhaven on a fresh `keyhaven_bench_<random>` database, counters in its memory.
 *   - postgres+redis: the same with REDIS_URL, counters in Redis (one Lua round trip per decision).
 * Namespace kinds (BENCH_NAMESPACES):
 *   - plain:     a namespace without overrides.
 *   - overrides: a namespace with 100 overrides (50 exact for other identifiers, 49 wildcards that do not match,
 *                and `bench_*`, which matches and sets the limit), so every decision also picks an override.
 *
 * Reported per scenario: decisions/s (2xx answers per second), the share of the ceiling at the same connections,
 * latency p50/p99 (every 2xx answer's own time), non-2xx answers and connection errors. The table is printed at the
 * end and written to bench/results/ratelimit-<ts>.json.
 *
 * Run:   npm run bench:ratelimit                   (60 s per scenario: about 5 minutes with the defaults)
 *        BENCH_SECONDS=5 npm run bench:ratelimit   (a quick run)
 * Environment:
 *   BENCH_SECONDS        seconds per measurement, after the 2 s warm-up (default 60; shared with the other benches)
 *   BENCH_CONNECTIONS    comma-separated connection counts (default "50")
 *   BENCH_NAMESPACES     comma-separated subset of "plain,overrides" (default both)
 *   BENCH_DATABASE_URL   PostgreSQL server to create the bench database on
 *                        (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_REDIS          a redis:// or rediss:// URL for the +redis target (default redis://127.0.0.1:6379);
 *                        "0", "false" or "off" skips it
 *   DATABASE_POOL_SIZE   passed through to keyhaven when set (keyhaven's default is 4)
 */
import { randomBytes } from "node:crypto";
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
  environmentInfo,
  envIntList,
  envList,
  envPositive,
  readRedisSetting,
  formatTable,
  handleInterrupts,
  interrupted,
  type LatencySummary,
  loadJsonPost,
  measurementLine,
  failureLine,
  startFixedResponseServer,
  openAdmin,
  post,
  reportOutcome,
  round,
  startKeyhaven,
  summarizeLatencies,
  writeResults,
  formatCount,
  formatMs,
  formatShare,
} from "./lib.js";

const LIMIT_ROUTE = "/v1/ratelimits.limit";
const CEILING_ROUTE = "/v1/keys.verifyKey";
const WARMUP_SECONDS = 2;

type NamespaceKind = "plain" | "overrides";
type Target = { label: "postgres" | "postgres+redis"; redisUrl: string | undefined };

type Settings = {
  seconds: number;
  connections: number[];
  namespaces: NamespaceKind[];
  databaseUrl: string;
  redisUrl: string | undefined;
  keyhavenPoolSize: string;
};

type ScenarioResult = {
  target: string;
  namespace: NamespaceKind | "fixed";
  connections: number;
  durationS: number;
  decisions: number;
  decisionsPerSecond: number;
  shareOfCeiling?: number;
  latencyMs: LatencySummary;
  non2xx: number;
  errors: number;
  timeouts: number;
  warmupRequests: number;
};

type Failure = { target: string; namespace?: NamespaceKind | "fixed"; connections?: number; error: string };
type Report = { results: ScenarioResult[]; failures: Failure[] };

function readSettings(env: NodeJS.ProcessEnv): Settings {
  return {
    seconds: envPositive(env, "BENCH_SECONDS", 60),
    connections: envIntList(env, "BENCH_CONNECTIONS", "50", 1, 1000),
    namespaces: envList(env, "BENCH_NAMESPACES", ["plain", "overrides"] as const),
    databaseUrl: env.BENCH_DATABASE_URL?.trim() || DEFAULT_DATABASE_URL,
    redisUrl: readRedisSetting(env.BENCH_REDIS, "on"),
    keyhavenPoolSize: env.DATABASE_POOL_SIZE?.trim() || "4 (keyhaven's default)",
  };
}

const limitBody = (namespace: string) => JSON.stringify({ namespace, identifier: "bench_user_1", limit: 1_000_000_000, duration: 60_000 });

const passes = (body: string): boolean => {
  try {
    return (JSON.parse(body) as { success?: unknown }).success === true;
  } catch {
    return false;
  }
};

async function measure(
  scenario: { target: string; namespace: NamespaceKind | "fixed"; connections: number },
  url: string,
  body: string,
  headers: Record<string, string>,
  check: ((body: string) => boolean) | undefined,
  settings: Settings,
): Promise<ScenarioResult> {
  const warmup = await loadJsonPost({
    url,
    body,
    headers,
    connections: scenario.connections,
    seconds: WARMUP_SECONDS,
    ...(check && { check }),
  });
  const w = warmup.result;
  if (w.non2xx > 0 || w.mismatches > 0 || w.errors > 0 || w.requests.total === 0) {
    throw new Error(
      `warm-up: ${w.requests.total} answers, ${w.non2xx} non-2xx, ${w.mismatches} without success: true, ${w.errors} errors` +
        (warmup.badAnswer !== undefined ? `; for example: ${warmup.badAnswer}` : ""),
    );
  }
  const run = await loadJsonPost({ url, body, headers, connections: scenario.connections, seconds: settings.seconds });
  const r = run.result;
  const durationS = r.duration > 0 ? r.duration : settings.seconds;
  return {
    ...scenario,
    durationS,
    decisions: run.latenciesMs.length,
    decisionsPerSecond: Math.round(run.latenciesMs.length / durationS),
    latencyMs: summarizeLatencies(run.latenciesMs),
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    warmupRequests: w.requests.total,
  };
}

function logResult(r: ScenarioResult): void {
  console.log(measurementLine(r.decisionsPerSecond, "decisions/s", r));
}

function fail(report: Report, failure: Failure): void {
  report.failures.push(failure);
  const connections = failure.connections === undefined ? undefined : `c=${failure.connections}`;
  console.log(failureLine([failure.target, failure.namespace, connections], failure.error));
}

async function runCeiling(settings: Settings, report: Report, cleanup: Cleanup): Promise<void> {
  const server = await startFixedResponseServer(CEILING_ROUTE, limitBody("ready"), cleanup);
  try {
    for (const connections of settings.connections) {
      if (interrupted()) return;
      const scenario = { target: "ceiling", namespace: "fixed" as const, connections };
      console.log(`▶ ceiling c=${connections}`);
      try {
        const result = await measure(scenario, `${server.url}${CEILING_ROUTE}`, limitBody("bench"), {}, undefined, settings);
        if (interrupted()) return;
        report.results.push(result);
        logResult(result);
      } catch (err) {
        fail(report, { ...scenario, error: describeError(err) });
      }
    }
  } finally {
    await server.stop();
  }
}

/** Creates the namespace (by a first limit call) and, for `overrides`, its 100 overrides. */
async function prepareNamespace(server: ChildServer, rootKey: string, kind: NamespaceKind): Promise<string> {
  const name = `bench-${kind}`;
  const first = await post(server, rootKey, LIMIT_ROUTE, limitBody(name));
  if (first.status !== 200) throw new Error(`ratelimits.limit answered ${first.status}: ${JSON.stringify(first.json)}`);
  if (kind === "overrides") {
    const identifiers = [
      ...Array.from({ length: 50 }, (_, i) => `other_user_${i}`),
      ...Array.from({ length: 49 }, (_, i) => `tenant_${i}_*`),
      "bench_*",
    ];
    for (const identifier of identifiers) {
      const set = await post(
        server,
        rootKey,
        "/v1/ratelimits.setOverride",
        JSON.stringify({ namespaceName: name, identifier, limit: 1_000_000_000, duration: 60_000 }),
      );
      if (set.status !== 200) throw new Error(`ratelimits.setOverride answered ${set.status}: ${JSON.stringify(set.json)}`);
    }
  }
  return name;
}

async function runKeyhaven(target: Target, settings: Settings, admin: Admin, report: Report, cleanup: Cleanup): Promise<void> {
  const db = await createDatabase(admin, settings.databaseUrl, cleanup);
  const storeEnv: Record<string, string> = { DATABASE_URL: db.url };
  if (target.redisUrl !== undefined) storeEnv.REDIS_URL = target.redisUrl;
  try {
    const rootKey = `bench_root_${randomBytes(24).toString("base64url")}`;
    // An ambient REDIS_URL must not turn the memory target into a Redis one.
    const server = await startKeyhaven(storeEnv, rootKey, [], cleanup, ["REDIS_URL"]);
    try {
      for (const kind of settings.namespaces) {
        const namespace = await prepareNamespace(server, rootKey, kind);
        for (const connections of settings.connections) {
          if (interrupted()) return;
          const scenario = { target: target.label, namespace: kind, connections };
          console.log(`▶ ${target.label} ${kind} c=${connections}`);
          try {
            const result = await measure(
              scenario,
              `${server.url}${LIMIT_ROUTE}`,
              limitBody(namespace),
              { authorization: `Bearer ${rootKey}` },
              passes,
              settings,
            );
            if (interrupted()) return;
            const ceiling = report.results.find((r) => r.target === "ceiling" && r.connections === connections);
            if (ceiling && ceiling.decisionsPerSecond > 0) {
              result.shareOfCeiling = round(result.decisionsPerSecond / ceiling.decisionsPerSecond, 4);
            }
            report.results.push(result);
            logResult(result);
          } catch (err) {
            fail(report, { ...scenario, error: describeError(err) });
          }
          const died = server.exitReason();
          if (died !== undefined) throw new Error(died);
        }
      }
    } catch (err) {
      throw new Error(`${describeError(err)}\n--- keyhaven output ---\n${server.output()}`);
    } finally {
      await server.stop();
    }
  } finally {
    await db.drop();
  }
}

function table(results: ScenarioResult[]): string {
  const n = formatCount;
  const ms = formatMs;
  const header = ["target", "namespace", "conn", "decisions/s", "% ceiling", "p50 ms", "p99 ms", "non-2xx", "errors"];
  const rows = results.map((r) => [
    r.target,
    r.namespace,
    String(r.connections),
    n(r.decisionsPerSecond),
    formatShare(r.shareOfCeiling),
    ms(r.latencyMs.p50),
    ms(r.latencyMs.p99),
    n(r.non2xx),
    n(r.errors),
  ]);
  return formatTable(header, rows, new Set([2, 3, 4, 5, 6, 7, 8]));
}

async function main(): Promise<void> {
  const settings = readSettings(process.env);
  const startedAt = new Date();
  const cleanup = new Cleanup();
  const report: Report = { results: [], failures: [] };
  let failure: unknown;
  handleInterrupts("stopping the current measurement");

  let postgresVersion: string | undefined;
  try {
    const opened = await openAdmin(settings.databaseUrl, true, cleanup);
    postgresVersion = opened.postgresVersion;
    const targets: Target[] = [{ label: "postgres", redisUrl: undefined }];
    if (settings.redisUrl !== undefined) targets.push({ label: "postgres+redis", redisUrl: settings.redisUrl });
    const scenarios = settings.connections.length * (1 + targets.length * settings.namespaces.length);
    const minutes = (scenarios * (settings.seconds + WARMUP_SECONDS)) / 60;
    console.log(
      `keyhaven ratelimits.limit benchmark: ${scenarios} scenarios of ${WARMUP_SECONDS} s warm-up + ${settings.seconds} s ` +
        `(about ${minutes < 1 ? "1" : Math.ceil(minutes)} min), connections ${settings.connections.join(",")}, ` +
        `namespaces ${settings.namespaces.join(",")}, targets ${targets.map((t) => t.label).join(",")}, ` +
        `${os.cpus().length} CPUs, PostgreSQL ${postgresVersion}`,
    );
    try {
      await runCeiling(settings, report, cleanup);
    } catch (err) {
      fail(report, { target: "ceiling", error: describeError(err) });
    }
    for (const target of targets) {
      if (interrupted()) break;
      try {
        await runKeyhaven(target, settings, opened.admin!, report, cleanup);
      } catch (err) {
        fail(report, { target: target.label, error: describeError(err) });
      }
    }
  } catch (err) {
    failure = err;
  } finally {
    await cleanup.runAll();
  }

  if (report.results.length > 0) {
    console.log(`\n${table(report.results)}`);
    console.log(
      `\ndecisions/s: 2xx answers per second; % ceiling: of the fixed-response Fastify server's answers/s at the same` +
        ` connections; p50/p99: per request, from autocannon's own timing.` +
        `\nkeyhaven's DATABASE_POOL_SIZE: ${settings.keyhavenPoolSize}.`,
    );
    const file = await writeResults("ratelimit", startedAt, {
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
      results: report.results,
      failures: report.failures,
    });
    console.log(`results written to ${path.relative(process.cwd(), file)}`);
  }

  reportOutcome(failure, report.failures, (f) => [f.target, f.namespace, f.connections === undefined ? undefined : `c=${f.connections}`]);
}

await main();
