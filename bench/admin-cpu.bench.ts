/**
 * Admin CPU benchmark (issue 13 §3): how much of keyhaven's CPU one admin call costs, per route, measured with the
 * server process's own CPU time (`process_cpu_seconds_total` from GET /metrics) over a fixed number of calls, not
 * with throughput: CPU time per call does not depend much on what else the machine runs, req/s does.
 *
 * For each store, keyhaven is started (a child process, compiled: `node dist/cli/main.js serve`, LOG_LEVEL=warn; see lib.ts keyhavenEntry),
 * an API and one key are created, every route is warmed up (BENCH_WARMUP calls each, not counted, in steps of
 * WARMUP_STEP calls whose CPU per call is reported as the warm-up curve), and the idle CPU rate is measured over
 * BENCH_IDLE_SECONDS (timers, the pool's keep-alives). Then,
 * for each route and each concurrency in BENCH_CONCURRENCY, BENCH_CALLS calls are made by that many workers, each
 * sending its next call when the previous one is answered (every answer must be a 200), with /metrics read before
 * and after. Reported: server CPU ms per call = (CPU after − CPU before − idle rate × elapsed) / calls, and its user
 * and system parts (process_cpu_user/system_seconds_total: system is the kernel's work, mostly socket I/O), calls/s,
 * latency p50/p99 as the client saw it, and the machine's 1-minute load when the measurement ended (figures at a load
 * above 3 are indicative only: the server's CPU then includes more cache misses and context switches).
 *
 * Routes:
 *   - createKey: POST /v1/keys.createKey `{ apiId, name }` (a new key per call)
 *   - updateKey: POST /v1/keys.updateKey `{ keyId, name }` (the same key, a new name per call)
 *   - getKey:    GET  /v1/keys.getKey?keyId=…
 *   - getApi:    GET  /v1/apis.getApi?apiId=…
 * Target (issue 13): createKey and updateKey ≤ 0.5 ms of CPU per call at concurrency 1 (reported, never asserted).
 *
 * Run:   npm run bench:admin-cpu
 *        BENCH_CALLS=500 npm run bench:admin-cpu                 (a quick run)
 *        BENCH_STORES=postgres,pglite npm run bench:admin-cpu    (also on the embedded store)
 * Environment:
 *   BENCH_CALLS          calls per route and concurrency (default 2000)
 *   BENCH_WARMUP         warm-up calls per route before measuring (default 4000). The process's CPU includes V8's
 *                        compiler threads: a fresh keyhaven spends 0.8–0.9 ms per createKey over its first 500 calls
 *                        (0.2–0.3 of it on those threads) and 0.25–0.3 ms once the route's code is compiled, after
 *                        about 3,000 calls (docs/benchmarks.md). The target is the steady state a running server
 *                        spends; the warm-up curve shows the start.
 *   BENCH_CONCURRENCY    comma-separated concurrencies (default "1,4")
 *   BENCH_ROUTES         comma-separated subset of "createKey,updateKey,getKey,getApi" (default all)
 *   BENCH_STORES         comma-separated subset of "postgres,pglite" (default "postgres")
 *   BENCH_IDLE_SECONDS   length of the idle baseline (default 3)
 *   BENCH_DATABASE_URL   PostgreSQL server to create the bench database on
 *                        (default postgres://postgres@127.0.0.1:5432/postgres)
 *   DATABASE_POOL_SIZE   passed through to keyhaven when set (keyhaven's default is 4)
 *   BENCH_BASELINE       another checkout (its `dist/` built there, e.g. `git worktree add --detach ../old <commit>` and
 *                        `npm run build` in it) measured in the same run: both builds on their own fresh stores, each
 *                        route and concurrency in BENCH_ROUNDS rounds taking turns (ABBA), so load weighs on both alike;
 *                        reports each build and this build's change in CPU and p50 against the baseline
 *   BENCH_ROUNDS         rounds of a BENCH_BASELINE run (default 10), of BENCH_CALLS / BENCH_ROUNDS calls each
 *   BENCH_SERVER_NODE_ARGS  extra node flags for the keyhaven child, space-separated (e.g.
 *                        "--cpu-prof --cpu-prof-dir=/tmp/admin-prof" to profile the server; combine with BENCH_ROUTES)
 * The results are written to bench/results/admin-cpu-<ts>.json.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
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
  formatMs,
  formatTable,
  handleInterrupts,
  httpCall,
  interrupted,
  openAdmin,
  post,
  reportOutcome,
  round,
  sleep,
  startKeyhaven,
  summarizeLatencies,
  writeResults,
} from "./lib.js";

const ROUTES = ["createKey", "updateKey", "getKey", "getApi"] as const;
type RouteName = (typeof ROUTES)[number];
type StoreKind = "postgres" | "pglite";
/** What the output reports as met or not, at concurrency 1. */
const TARGET_CPU_MS = 0.5;
const TARGET_ROUTES: readonly RouteName[] = ["createKey", "updateKey"];

type Settings = {
  calls: number;
  warmup: number;
  concurrency: number[];
  routes: RouteName[];
  stores: StoreKind[];
  idleSeconds: number;
  databaseUrl: string;
  serverNodeArgs: string[];
  keyhavenPoolSize: string;
  /** BENCH_BASELINE: another checkout, built, measured in the same run, round by round with this one. */
  baseline: string | undefined;
  rounds: number;
};

type Result = {
  /** With BENCH_BASELINE: which build the row measured. */
  build?: Build;
  store: StoreKind;
  route: RouteName;
  concurrency: number;
  calls: number;
  elapsedS: number;
  callsPerSecond: number;
  /** Server CPU over the measurement, before subtracting the idle rate. */
  serverCpuMs: number;
  /** What the idle rate accounts for over the same time. */
  idleCpuMs: number;
  cpuMsPerCall: number;
  /** The same, split: user (JavaScript, the parsers, the engine) and system (the kernel: socket reads and writes). */
  userCpuMsPerCall: number;
  systemCpuMsPerCall: number;
  latencyMs: ReturnType<typeof summarizeLatencies>;
  /** The machine's 1-, 5- and 15-minute load averages when the measurement ended. */
  load: number[];
};

type Build = "this" | "baseline";

type Failure = { store: string; route?: RouteName; concurrency?: number; error: string };

/** Warm-up calls per step of the warm-up curve. */
const WARMUP_STEP = 500;

/** A route's warm-up: the server's CPU per call (ms, idle rate not subtracted) over each step of WARMUP_STEP calls. */
type WarmupCurve = { store: StoreKind; route: RouteName; callsPerStep: number; cpuMsPerCall: number[] };

function readSettings(env: NodeJS.ProcessEnv): Settings {
  return {
    calls: Math.round(envPositive(env, "BENCH_CALLS", 2000)),
    warmup: Math.round(envPositive(env, "BENCH_WARMUP", 4000)),
    concurrency: envIntList(env, "BENCH_CONCURRENCY", "1,4", 1, 256),
    routes: envList(env, "BENCH_ROUTES", ROUTES),
    stores: envList(env, "BENCH_STORES", ["postgres", "pglite"] as const, ["postgres"]),
    idleSeconds: envPositive(env, "BENCH_IDLE_SECONDS", 3),
    databaseUrl: env.BENCH_DATABASE_URL?.trim() || DEFAULT_DATABASE_URL,
    serverNodeArgs: envServerNodeArgs(env),
    keyhavenPoolSize: env.DATABASE_POOL_SIZE?.trim() || "4 (keyhaven's default)",
    baseline: env.BENCH_BASELINE?.trim() ? path.resolve(env.BENCH_BASELINE.trim()) : undefined,
    rounds: Math.round(envPositive(env, "BENCH_ROUNDS", 10)),
  };
}

type Cpu = { total: number; user: number; system: number };

/** The server's CPU time so far (user, system and their sum), in milliseconds, from its Prometheus metrics. */
async function serverCpuMs(server: ChildServer): Promise<Cpu> {
  const res = await httpCall(`${server.url}/metrics`, { method: "GET" });
  const text = res.text;
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${text.slice(0, 200)}`);
  const read = (name: string) => {
    const match = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, "m").exec(text);
    if (!match) throw new Error(`/metrics has no ${name}`);
    return Number(match[1]) * 1000;
  };
  return {
    total: read("process_cpu_seconds_total"),
    user: read("process_cpu_user_seconds_total"),
    system: read("process_cpu_system_seconds_total"),
  };
}

type Fixture = { rootKey: string; apiId: string; keyId: string };

/** The request of call number `i` of a route. */
function requestOf(route: RouteName, f: Fixture, i: number): { method: "GET" | "POST"; path: string; body?: string } {
  switch (route) {
    case "createKey":
      return { method: "POST", path: "/v1/keys.createKey", body: JSON.stringify({ apiId: f.apiId, name: `bench ${i}` }) };
    case "updateKey":
      return { method: "POST", path: "/v1/keys.updateKey", body: JSON.stringify({ keyId: f.keyId, name: `bench ${i}` }) };
    case "getKey":
      return { method: "GET", path: `/v1/keys.getKey?keyId=${encodeURIComponent(f.keyId)}` };
    case "getApi":
      return { method: "GET", path: `/v1/apis.getApi?apiId=${encodeURIComponent(f.apiId)}` };
  }
}

/** `calls` calls by `concurrency` workers, each waiting for its answer; every answer must be a 200. */
async function runCalls(server: ChildServer, route: RouteName, f: Fixture, calls: number, concurrency: number, offset: number) {
  const latencies: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < calls && !interrupted()) {
      const i = offset + next++;
      const req = requestOf(route, f, i);
      const started = performance.now();
      const res = await httpCall(`${server.url}${req.path}`, {
        method: req.method,
        headers: {
          authorization: `Bearer ${f.rootKey}`,
          ...(req.body !== undefined && { "content-type": "application/json" }),
        },
        ...(req.body !== undefined && { body: req.body }),
      });
      const text = res.text;
      latencies.push(performance.now() - started);
      if (res.status !== 200) throw new Error(`${req.method} ${req.path} answered ${res.status}: ${text.slice(0, 300)}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return latencies;
}

/** A keyhaven (this checkout's, or `checkout`'s) on a fresh store, with an API and a key to call routes on. */
async function startFixture(store: StoreKind, settings: Settings, admin: Admin | undefined, cleanup: Cleanup, checkout?: string) {
  let storeEnv: Record<string, string>;
  let dispose: () => Promise<void>;
  if (store === "postgres") {
    if (!admin) throw new Error("no PostgreSQL connection");
    const db = await createDatabase(admin, settings.databaseUrl, cleanup);
    storeEnv = { DATABASE_URL: db.url };
    dispose = db.drop;
  } else {
    const dir = await mkdtemp(path.join(os.tmpdir(), "keyhaven-bench-"));
    dispose = cleanup.add(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
    storeEnv = { KEYHAVEN_DATA_DIR: dir };
  }
  const rootKey = `bench_root_${randomBytes(24).toString("base64url")}`;
  let server: ChildServer;
  try {
    server = await startKeyhaven(storeEnv, rootKey, settings.serverNodeArgs, cleanup, ["REDIS_URL"], checkout);
  } catch (err) {
    await dispose();
    throw err;
  }
  const stop = async () => {
    try {
      await server.stop();
    } finally {
      await dispose();
    }
  };
  try {
    const created = await post(server, rootKey, "/v1/apis.createApi", JSON.stringify({ name: "bench" }));
    const apiId = (created.json as { apiId?: unknown } | undefined)?.apiId;
    if (created.status !== 200 || typeof apiId !== "string")
      throw new Error(`apis.createApi answered ${created.status}: ${JSON.stringify(created.json)}`);
    const key = await post(server, rootKey, "/v1/keys.createKey", JSON.stringify({ apiId, name: "bench updated" }));
    const keyId = (key.json as { keyId?: unknown } | undefined)?.keyId;
    if (key.status !== 200 || typeof keyId !== "string")
      throw new Error(`keys.createKey answered ${key.status}: ${JSON.stringify(key.json)}`);
    return { server, fixture: { rootKey, apiId, keyId } as Fixture, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Warms every route up (BENCH_WARMUP calls each), recording the curve; returns the calls made. */
async function warmUp(store: StoreKind, settings: Settings, server: ChildServer, fixture: Fixture, warmups: WarmupCurve[], label = "") {
  console.log(`▶ ${store}${label}: warm-up, ${settings.warmup} calls per route, CPU ms per call over each ${WARMUP_STEP}`);
  let offset = 0;
  for (const route of settings.routes) {
    const curve: WarmupCurve = { store, route, callsPerStep: WARMUP_STEP, cpuMsPerCall: [] };
    for (let done = 0; done < settings.warmup && !interrupted(); done += WARMUP_STEP) {
      const step = Math.min(WARMUP_STEP, settings.warmup - done);
      const before = await serverCpuMs(server);
      await runCalls(server, route, fixture, step, 1, offset);
      const after = await serverCpuMs(server);
      curve.cpuMsPerCall.push(round((after.total - before.total) / step, 3));
      offset += step;
    }
    warmups.push(curve);
    console.log(`  ${route}: ${curve.cpuMsPerCall.map((c) => c.toFixed(2)).join(" ")}`);
  }
  return offset;
}

/** The servers' idle CPU rates (ms per second), measured over the same BENCH_IDLE_SECONDS. */
async function idleRates(settings: Settings, servers: ChildServer[]): Promise<Cpu[]> {
  await sleep(500);
  const before = await Promise.all(servers.map(serverCpuMs));
  const started = performance.now();
  await sleep(settings.idleSeconds * 1000);
  const after = await Promise.all(servers.map(serverCpuMs));
  const seconds = (performance.now() - started) / 1000;
  return servers.map((_, i) => ({
    total: (after[i]!.total - before[i]!.total) / seconds,
    user: (after[i]!.user - before[i]!.user) / seconds,
    system: (after[i]!.system - before[i]!.system) / seconds,
  }));
}

/** What a measurement adds up: CPU (less the idle rate), time and latencies, over one or several rounds. */
type Tally = { cpu: Cpu; elapsedS: number; latencies: number[]; serverCpuMs: number };

/** Runs `calls` calls and adds what they cost to `tally`. */
async function measure(
  server: ChildServer,
  idle: Cpu,
  route: RouteName,
  fixture: Fixture,
  calls: number,
  concurrency: number,
  offset: number,
  tally: Tally,
) {
  const before = await serverCpuMs(server);
  const started = performance.now();
  const latencies = await runCalls(server, route, fixture, calls, concurrency, offset);
  const elapsedS = (performance.now() - started) / 1000;
  const after = await serverCpuMs(server);
  for (const part of ["total", "user", "system"] as const) tally.cpu[part] += after[part] - before[part] - idle[part] * elapsedS;
  tally.serverCpuMs += after.total - before.total;
  tally.elapsedS += elapsedS;
  tally.latencies.push(...latencies);
}

const emptyTally = (): Tally => ({ cpu: { total: 0, user: 0, system: 0 }, elapsedS: 0, latencies: [], serverCpuMs: 0 });

function resultOf(store: StoreKind, route: RouteName, concurrency: number, tally: Tally, idle: Cpu, build?: Build): Result {
  const n = tally.latencies.length;
  const r: Result = {
    ...(build !== undefined && { build }),
    store,
    route,
    concurrency,
    calls: n,
    elapsedS: round(tally.elapsedS, 3),
    callsPerSecond: Math.round(n / tally.elapsedS),
    serverCpuMs: round(tally.serverCpuMs, 1),
    idleCpuMs: round(idle.total * tally.elapsedS, 1),
    cpuMsPerCall: round(tally.cpu.total / n, 3),
    userCpuMsPerCall: round(tally.cpu.user / n, 3),
    systemCpuMsPerCall: round(tally.cpu.system / n, 3),
    latencyMs: summarizeLatencies(tally.latencies),
    load: os.loadavg().map((l) => round(l, 2)),
  };
  console.log(
    `  ${build === undefined ? "" : `${build.padEnd(8)} `}${route} c=${concurrency}: ${r.cpuMsPerCall.toFixed(3)} ms CPU/call (user ${r.userCpuMsPerCall.toFixed(3)}, ` +
      `system ${r.systemCpuMsPerCall.toFixed(3)}), ${r.callsPerSecond} calls/s, ` +
      `p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms, load ${r.load[0]}`,
  );
  return r;
}

async function runStore(
  store: StoreKind,
  settings: Settings,
  admin: Admin | undefined,
  results: Result[],
  warmups: WarmupCurve[],
  failures: Failure[],
  cleanup: Cleanup,
) {
  const { server, fixture, stop } = await startFixture(store, settings, admin, cleanup);
  try {
    let offset = await warmUp(store, settings, server, fixture, warmups);
    const [idle] = await idleRates(settings, [server]);
    console.log(`  idle: ${idle!.total.toFixed(2)} ms of CPU per second`);
    for (const route of settings.routes) {
      for (const concurrency of settings.concurrency) {
        if (interrupted()) return;
        try {
          const tally = emptyTally();
          await measure(server, idle!, route, fixture, settings.calls, concurrency, offset, tally);
          offset += settings.calls;
          if (interrupted()) return;
          results.push(resultOf(store, route, concurrency, tally, idle!));
        } catch (err) {
          const failure = { store, route, concurrency, error: describeError(err) };
          failures.push(failure);
          console.log(failureLine([store, route, `c=${concurrency}`], failure.error));
        }
        const died = server.exitReason();
        if (died !== undefined) throw new Error(`${died}\n--- output ---\n${server.output()}`);
      }
    }
  } finally {
    await stop();
  }
}

/**
 * BENCH_BASELINE: this build and the baseline's, each on its own fresh store, measured in the same run: each route
 * and concurrency in BENCH_ROUNDS rounds of BENCH_CALLS / BENCH_ROUNDS calls, the two builds taking turns (ABBA), so
 * that what else the machine does weighs on both alike. Reported per build, and this build's CPU and p50 against the
 * baseline's.
 */
async function runPaired(
  store: StoreKind,
  settings: Settings,
  admin: Admin | undefined,
  results: Result[],
  warmups: WarmupCurve[],
  failures: Failure[],
  cleanup: Cleanup,
) {
  const baseline = await startFixture(store, settings, admin, cleanup, settings.baseline);
  try {
    const current = await startFixture(store, settings, admin, cleanup);
    try {
      const builds = [
        {
          build: "baseline" as const,
          ...baseline,
          offset: await warmUp(store, settings, baseline.server, baseline.fixture, warmups, " baseline"),
        },
        {
          build: "this" as const,
          ...current,
          offset: await warmUp(store, settings, current.server, current.fixture, warmups, " this build"),
        },
      ];
      const idle = await idleRates(
        settings,
        builds.map((b) => b.server),
      );
      console.log(`  idle: baseline ${idle[0]!.total.toFixed(2)}, this ${idle[1]!.total.toFixed(2)} ms of CPU per second`);
      const perRound = Math.max(1, Math.round(settings.calls / settings.rounds));
      for (const route of settings.routes) {
        for (const concurrency of settings.concurrency) {
          if (interrupted()) return;
          try {
            const tallies = [emptyTally(), emptyTally()];
            for (let round = 0; round < settings.rounds && !interrupted(); round++) {
              const order = round % 2 === 0 ? [0, 1] : [1, 0];
              for (const i of order) {
                const b = builds[i]!;
                await measure(b.server, idle[i]!, route, b.fixture, perRound, concurrency, b.offset, tallies[i]!);
                b.offset += perRound;
              }
            }
            if (interrupted()) return;
            const [old, now] = builds.map((b, i) => resultOf(store, route, concurrency, tallies[i]!, idle[i]!, b.build));
            results.push(old!, now!);
            const change = (a: number, b: number) => `${b >= a ? "+" : ""}${(((b - a) / a) * 100).toFixed(1)}%`;
            console.log(
              `  ${route} c=${concurrency}: this build against the baseline: CPU ${change(old!.cpuMsPerCall, now!.cpuMsPerCall)}, ` +
                `p50 ${change(old!.latencyMs.p50, now!.latencyMs.p50)}`,
            );
          } catch (err) {
            const failure = { store, route, concurrency, error: describeError(err) };
            failures.push(failure);
            console.log(failureLine([store, route, `c=${concurrency}`], failure.error));
          }
          for (const b of builds) {
            const died = b.server.exitReason();
            if (died !== undefined) throw new Error(`${died}\n--- output ---\n${b.server.output()}`);
          }
        }
      }
    } finally {
      await current.stop();
    }
  } finally {
    await baseline.stop();
  }
}

function table(results: Result[]): string {
  const paired = results.some((r) => r.build !== undefined);
  const header = [
    ...(paired ? ["build"] : []),
    "store",
    "route",
    "conc",
    "calls",
    "calls/s",
    "CPU ms/call",
    "user",
    "system",
    "p50 ms",
    "p99 ms",
    "load 1m",
  ];
  const rows = results.map((r) => [
    ...(paired ? [r.build ?? ""] : []),
    r.store,
    r.route,
    String(r.concurrency),
    String(r.calls),
    String(r.callsPerSecond),
    formatMs(r.cpuMsPerCall, 3),
    formatMs(r.userCpuMsPerCall, 3),
    formatMs(r.systemCpuMsPerCall, 3),
    formatMs(r.latencyMs.p50),
    formatMs(r.latencyMs.p99),
    r.load[0]!.toFixed(2),
  ]);
  const numeric = [2, 3, 4, 5, 6, 7, 8, 9, 10].map((i) => (paired ? i + 1 : i));
  return formatTable(header, rows, new Set(numeric));
}

function describeTarget(results: Result[]): string {
  const lines = [`target: ${TARGET_ROUTES.join(" and ")} ≤ ${TARGET_CPU_MS} ms of server CPU per call at concurrency 1`];
  for (const r of results.filter((x) => x.concurrency === 1 && TARGET_ROUTES.includes(x.route))) {
    const met = r.cpuMsPerCall <= TARGET_CPU_MS;
    lines.push(
      `  ${r.build === undefined ? "" : `${r.build} `}${r.store} ${r.route}: ${r.cpuMsPerCall.toFixed(3)} ms (${met ? "met" : "NOT met"}; load ${r.load[0]})`,
    );
  }
  return lines.join("\n");
}

async function main(): Promise<void> {
  const settings = readSettings(process.env);
  const startedAt = new Date();
  const cleanup = new Cleanup();
  const results: Result[] = [];
  const warmups: WarmupCurve[] = [];
  const failures: Failure[] = [];
  let failure: unknown;
  handleInterrupts("stopping the current measurement");

  let postgresVersion: string | undefined;
  try {
    const opened = await openAdmin(settings.databaseUrl, settings.stores.includes("postgres"), cleanup);
    postgresVersion = opened.postgresVersion;
    console.log(
      `keyhaven admin CPU benchmark: ${settings.calls} calls per route (${settings.routes.join(",")}) at concurrency ` +
        `${settings.concurrency.join(",")}, stores ${settings.stores.join(",")}, ${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(2)}` +
        (postgresVersion ? `, PostgreSQL ${postgresVersion}` : ""),
    );
    for (const store of settings.stores) {
      if (interrupted()) break;
      try {
        const run = settings.baseline === undefined ? runStore : runPaired;
        await run(store, settings, opened.admin, results, warmups, failures, cleanup);
      } catch (err) {
        failures.push({ store, error: describeError(err) });
        console.log(failureLine([store], describeError(err)));
      }
    }
  } catch (err) {
    failure = err;
  } finally {
    await cleanup.runAll();
  }

  if (results.length > 0) {
    console.log(`\n${table(results)}`);
    console.log(
      "\nCPU ms/call: the server process's CPU (process_cpu_seconds_total) over the calls, less its idle rate, per call;" +
        " user / system: its two parts (system: the kernel's work for the process, mostly socket writes and reads);" +
        ` p50/p99: as the client saw them. keyhaven's DATABASE_POOL_SIZE: ${settings.keyhavenPoolSize}.`,
    );
    console.log(`\n${describeTarget(results)}`);
    const file = await writeResults("admin-cpu", startedAt, {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      complete: failure === undefined && failures.length === 0 && !interrupted(),
      settings,
      environment: environmentInfo(postgresVersion),
      results,
      warmups,
      failures,
    });
    console.log(`\nresults: ${path.relative(process.cwd(), file)}`);
  }
  reportOutcome(failure, failures, (f) => [f.store, f.route, f.concurrency === undefined ? undefined : `c=${f.concurrency}`]);
}

await main();
