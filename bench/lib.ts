/**
 * What the benchmarks share: the clean-up registry, scratch PostgreSQL databases, child servers (keyhaven itself,
 * compiled as production runs it, or another script run with `node --import tsx`) on a free port, percentiles, the
 * result table, signal handling and the results file, and an autocannon load with every 2xx answer's time. Used by
 * every bench/*.bench.ts but ratelimit-memory.bench.ts.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import postgres from "postgres";

export const REPO_ROOT = fileURLToPath(new URL("..", import.meta.url));
export const RESULTS_DIR = path.join(REPO_ROOT, "bench", "results");
export const DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres";
export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";
const SERVER_START_TIMEOUT_MS = 120_000;
const SERVER_STOP_TIMEOUT_MS = 30_000;

// ---------------------------------------------------------------------------------------------------------------
// Clean-up: everything created is registered here and undone in reverse order, even on error

export class Cleanup {
  private readonly steps: { label: string; run: () => Promise<unknown> }[] = [];

  add(label: string, run: () => Promise<unknown>): () => Promise<void> {
    const step = { label, run };
    this.steps.push(step);
    // The returned function runs the step now (once) and forgets it.
    return async () => {
      const i = this.steps.indexOf(step);
      if (i === -1) return;
      this.steps.splice(i, 1);
      await step.run();
    };
  }

  async runAll(): Promise<void> {
    while (this.steps.length > 0) {
      const step = this.steps.pop()!;
      try {
        await step.run();
      } catch (err) {
        console.error(`clean-up failed (${step.label}): ${describeError(err)}`);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Interruption: the first SIGINT/SIGTERM asks the run to stop and clean up; a later one exits at once

let interruptedFlag = false;

/** True once a signal asked the run to stop. */
export function interrupted(): boolean {
  return interruptedFlag;
}

/**
 * The first signal stops the run and cleans up. tsx and npm relay the terminal's signal again, so only a signal
 * sent later than that (a second Ctrl-C) exits at once, without cleaning up.
 */
export function handleInterrupts(whatHappensNext: string): void {
  let firstSignalAt = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interruptedFlag) {
      if (performance.now() - firstSignalAt > 1_000) process.exit(130);
      return;
    }
    interruptedFlag = true;
    firstSignalAt = performance.now();
    console.error(`\n${signal}: ${whatHappensNext}, then cleaning up (again to exit at once)`);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}

// ---------------------------------------------------------------------------------------------------------------
// PostgreSQL databases

export type Admin = postgres.Sql;

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Creates an empty `keyhaven_bench_<random>` database; returns its URL and a function that drops it. */
export async function createDatabase(admin: Admin, baseUrl: string, cleanup: Cleanup) {
  const name = `keyhaven_bench_${randomBytes(6).toString("hex")}`;
  await admin.unsafe(`create database ${name}`);
  const drop = cleanup.add(`drop database ${name}`, () => admin.unsafe(`drop database if exists ${name} with (force)`));
  return { name, url: withDatabase(baseUrl, name), drop };
}

// ---------------------------------------------------------------------------------------------------------------
// Child servers

/** Children still running; if this process exits anyway (a forced exit), they are sent SIGTERM on the way out. */
const liveChildren = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of liveChildren) child.kill("SIGTERM");
});

export type ChildServer = {
  url: string;
  /** The child's process id (undefined if it could not start). */
  pid: number | undefined;
  /** Why the child is gone, if it is. */
  exitReason(): string | undefined;
  /** The last lines the child wrote (stdout and stderr). */
  output(): string;
  stop(): Promise<void>;
};

/** Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`; 100 on Linux unless it says otherwise). */
let clockTicks: number | undefined;
function clockTicksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/**
 * CPU seconds (user and system) that a process, or one of its threads (`thread`: its id; a process's main thread has
 * the process's id), has used so far, read from /proc (Linux, same machine, 10 ms resolution); undefined where
 * there is no such file (another system, a process gone, a server on another machine).
 */
export function cpuSecondsOf(pid: number, thread?: number): number | undefined {
  try {
    const stat = readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, "utf8");
    // The fields after the command name (in parentheses, and free to hold spaces): utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks / clockTicksPerSecond() : undefined;
  } catch {
    return undefined;
  }
}

/**
 * CPU per request over a measured stretch, from /proc: the server's main thread (keyhaven's JavaScript, and PGlite's
 * work, which runs on it) with the share of the stretch it was busy, the server's whole process (its other threads
 * too: the garbage collector's, libuv's), and PostgreSQL's client backends on the server's database (a local
 * PostgreSQL only). On one thread busy throughout, throughput is about 1 / the thread's time per request.
 */
export type CpuPerRequest = { threadUs: number; threadBusy: number; processUs: number; postgresUs?: number };
/** What cpuPerRequest compares: CPU seconds so far of a server's main thread and process, and of PostgreSQL's backends by pid. */
export type CpuSnapshot = { thread?: number; process?: number; backends?: Map<number, number> };

/**
 * The CPU seconds so far of the server `pid` (its main thread and its process) and, with `probe` (a connection to the
 * server's database), of each client backend on that database but the probe's: the server's connections
 * (autovacuum's workers, which may analyse a table meanwhile, are not counted).
 */
export async function cpuSnapshot(pid: number | undefined, probe?: postgres.Sql): Promise<CpuSnapshot> {
  if (pid === undefined) return {};
  let backends: Map<number, number> | undefined;
  if (probe) {
    const rows = await probe<{ pid: number }[]>`
      select pid from pg_stat_activity
      where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()`;
    backends = new Map();
    for (const row of rows) {
      const seconds = cpuSecondsOf(row.pid);
      if (seconds !== undefined) backends.set(row.pid, seconds);
    }
  }
  return { thread: cpuSecondsOf(pid, pid), process: cpuSecondsOf(pid), backends };
}

/** CPU per request between two snapshots around `requests` answered in `seconds` (undefined where /proc was not read). */
export function cpuPerRequest(before: CpuSnapshot, after: CpuSnapshot, requests: number, seconds: number): CpuPerRequest | undefined {
  if (before.thread === undefined || after.thread === undefined || before.process === undefined || after.process === undefined)
    return undefined;
  if (requests === 0 || seconds <= 0) return undefined;
  const perRequest = (cpuSeconds: number) => round((cpuSeconds * 1e6) / requests, 1);
  const cpu: CpuPerRequest = {
    threadUs: perRequest(after.thread - before.thread),
    threadBusy: round((after.thread - before.thread) / seconds, 3),
    processUs: perRequest(after.process - before.process),
  };
  if (after.backends && after.backends.size > 0) {
    // A backend that started during the stretch counts from zero; one that ended is left out (a pool keeps its own).
    let backendSeconds = 0;
    for (const [pid, s] of after.backends) backendSeconds += s - (before.backends?.get(pid) ?? 0);
    cpu.postgresUs = perRequest(backendSeconds);
  }
  return cpu;
}

/**
 * The medians of CPU figures over measurements (`undefined` for one that had no /proc readings): each figure where
 * every measurement has it, else left out.
 */
export function medianCpu(cpus: readonly (CpuPerRequest | undefined)[]): Partial<CpuPerRequest> {
  const figure = (get: (c: CpuPerRequest) => number | undefined, digits: number) => {
    const values = cpus.map((c) => (c ? get(c) : undefined));
    return values.length > 0 && values.every((v) => v !== undefined) ? round(median(values as number[]), digits) : undefined;
  };
  const threadUs = figure((c) => c.threadUs, 1);
  const threadBusy = figure((c) => c.threadBusy, 3);
  const processUs = figure((c) => c.processUs, 1);
  const postgresUs = figure((c) => c.postgresUs, 1);
  return {
    ...(threadUs !== undefined && { threadUs }),
    ...(threadBusy !== undefined && { threadBusy }),
    ...(processUs !== undefined && { processUs }),
    ...(postgresUs !== undefined && { postgresUs }),
  };
}

/** "CPU per request: the server's thread 41.8 µs (busy 98.0%), its process 43.1 µs, PostgreSQL 4.0 µs". */
export function formatCpu(cpu: CpuPerRequest): string {
  return (
    `CPU per request: the server's thread ${cpu.threadUs} µs (busy ${formatShare(cpu.threadBusy)}), its process ${cpu.processUs} µs` +
    (cpu.postgresUs === undefined ? "" : `, PostgreSQL ${cpu.postgresUs} µs`)
  );
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address ? address.port : 0;
      probe.close(() => (port > 0 ? resolve(port) : reject(new Error("could not find a free port"))));
    });
  });
}

/**
 * Environment for a child: ours without any keyhaven setting (nor the variables named in `remove`), plus
 * `settings`. DATABASE_POOL_SIZE passes.
 */
export function childEnv(settings: Record<string, string>, remove: readonly string[] = []): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith("KEYHAVEN_") || ["DATABASE_URL", "PORT", "HOST", "LOG_LEVEL", ...remove].includes(name)) delete env[name];
  }
  return { ...env, ...settings };
}

export type ChildServerOptions = {
  /** The directory it runs in (default: this checkout). */
  cwd?: string;
  /** Names the child in messages ("keyhaven exited …"). */
  name: string;
  /**
   * The script and its arguments, run as `node <nodeArgs> --import tsx <script…>` from the repository root (or
   * `node <nodeArgs> <script…>` when `compiled`).
   */
  script: string[];
  /** The script is JavaScript: no TypeScript loader. */
  compiled?: boolean;
  nodeArgs: string[];
  /** The child's environment besides PORT and HOST (see childEnv). */
  env: Record<string, string>;
  /** Variables of ours that the child must not inherit. */
  removeEnv?: readonly string[];
  /** The request that answers 200 once the child is ready. */
  ready: { method: "GET" | "POST"; path: string; body?: string };
  cleanup: Cleanup;
};

/** Starts a child server on a free port of 127.0.0.1 and waits until it is ready; stopping it is registered. */
export async function startChildServer(opts: ChildServerOptions): Promise<ChildServer> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [...opts.nodeArgs, ...(opts.compiled ? [] : ["--import", "tsx"]), ...opts.script], {
    cwd: opts.cwd ?? REPO_ROOT,
    env: childEnv({ ...opts.env, PORT: String(port), HOST: "127.0.0.1" }, opts.removeEnv),
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group: Ctrl-C reaches only the benchmark, which then stops the child itself (once, gracefully).
    detached: true,
  });
  liveChildren.add(child);

  let tail = "";
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString("utf8")).slice(-16_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  let exitReason: string | undefined;
  const exited = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      exitReason = `${opts.name} exited (${signal ?? `code ${code}`})`;
      liveChildren.delete(child);
      resolve();
    });
    child.once("error", (err) => {
      exitReason = `${opts.name} could not start: ${err.message}`;
      resolve();
    });
  });

  const stop = opts.cleanup.add(`stop ${opts.name} (pid ${child.pid})`, async () => {
    if (exitReason !== undefined) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), SERVER_STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
  });

  const server: ChildServer = { url: `http://127.0.0.1:${port}`, pid: child.pid, exitReason: () => exitReason, output: () => tail, stop };
  try {
    await waitUntilReady(server, opts.name, opts.ready);
  } catch (err) {
    await stop();
    throw new Error(`${describeError(err)}\n--- ${opts.name} output ---\n${tail}`);
  }
  return server;
}

async function waitUntilReady(server: ChildServer, name: string, ready: ChildServerOptions["ready"]): Promise<void> {
  const deadline = performance.now() + SERVER_START_TIMEOUT_MS;
  for (;;) {
    const reason = server.exitReason();
    if (reason !== undefined) throw new Error(reason);
    try {
      const res = await httpCall(`${server.url}${ready.path}`, {
        method: ready.method,
        ...(ready.body !== undefined && { body: ready.body, headers: { "content-type": "application/json" } }),
        timeoutMs: 2_000,
      });
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (performance.now() > deadline) throw new Error(`${name} did not answer ${ready.path} within ${SERVER_START_TIMEOUT_MS} ms`);
    await sleep(100);
  }
}

/**
 * How keyhaven runs in the benchmarks: compiled, as production runs it (`dist/cli/main.js`, what `npm start` runs),
 * unless BENCH_SERVER_SOURCE=tsx runs the sources through tsx (what `npm run dev` does; its loader adds work to
 * every call). The compiled tree is brought up to date once per benchmark process (`tsc -b`, incremental: well
 * under a second when nothing changed), so a benchmark never measures an older build than the sources.
 */
function keyhavenEntry(): { script: string; compiled: boolean } {
  const source = process.env.BENCH_SERVER_SOURCE?.trim() || "dist";
  if (source === "tsx") return { script: "src/cli/main.ts", compiled: false };
  if (source !== "dist") throw new Error(`BENCH_SERVER_SOURCE must be "dist" or "tsx", got ${JSON.stringify(source)}`);
  if (!built) {
    execFileSync(process.execPath, [path.join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc"), "-b", "tsconfig.build.json"], {
      cwd: REPO_ROOT,
      stdio: "inherit",
    });
    built = true;
  }
  return { script: "dist/cli/main.js", compiled: true };
}
let built = false;

/**
 * Starts keyhaven (`node dist/cli/main.js serve`, see keyhavenEntry) on a store given by `storeEnv` (DATABASE_URL or
 * KEYHAVEN_DATA_DIR), with the root key given and a fresh encryption key; ready once /v1/liveness answers 200.
 */
export async function startKeyhaven(
  storeEnv: Record<string, string>,
  rootKey: string,
  nodeArgs: string[],
  cleanup: Cleanup,
  removeEnv: readonly string[] = [],
  /** Another checkout whose compiled tree (`dist/`, built there beforehand) runs instead of this one's: a baseline. */
  checkout?: string,
): Promise<ChildServer> {
  const entry = checkout === undefined ? keyhavenEntry() : { script: "dist/cli/main.js", compiled: true };
  return startChildServer({
    name: checkout === undefined ? "keyhaven" : `keyhaven (${checkout})`,
    ...(checkout !== undefined && { cwd: checkout }),
    script: [entry.script, "serve"],
    compiled: entry.compiled,
    nodeArgs,
    env: {
      ...storeEnv,
      LOG_LEVEL: "warn",
      KEYHAVEN_ROOT_KEY: rootKey,
      KEYHAVEN_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
    },
    removeEnv,
    ready: { method: "GET", path: "/v1/liveness" },
    cleanup,
  });
}

/** Connections kept open between the calls of `httpCall` (idle ones do not keep the benchmark's process alive). */
const keepAliveAgent = new http.Agent({ keepAlive: true });
/** No benchmark call waits longer than this for its answer. */
const CALL_TIMEOUT_MS = 60_000;

/**
 * One HTTP call on kept-alive connections; answers the status and the body's text. Through node:http rather than
 * fetch: a benchmark's own calls share the machine with the server they measure (bench:churn's side writer even runs
 * in the load generator's process), and fetch cost 3–4× the CPU per call (0.8–1.4 ms against 0.2–0.4 ms on the slow
 * 2-core machine of docs/benchmarks.md), CPU the machine's two cores then lacked for the load itself.
 */
export function httpCall(
  url: string,
  opts: { method: "GET" | "POST"; headers?: Record<string, string>; body?: string; timeoutMs?: number; withHeaders?: boolean },
): Promise<{ status: number; text: string; headers?: http.IncomingHttpHeaders }> {
  const timeoutMs = opts.timeoutMs ?? CALL_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...opts.headers };
    if (opts.body !== undefined) headers["content-length"] = Buffer.byteLength(opts.body);
    const req = http.request(url, { method: opts.method, agent: keepAliveAgent, timeout: timeoutMs, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("error", reject);
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          text: Buffer.concat(chunks).toString("utf8"),
          ...(opts.withHeaders === true && { headers: res.headers }),
        }),
      );
    });
    req.on("timeout", () => req.destroy(new Error(`${opts.method} ${url}: no answer in ${timeoutMs / 1000} s`)));
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** POSTs a JSON body with the root key; answers the status and the parsed body (or its text when not JSON). */
export async function post(server: ChildServer, rootKey: string, route: string, body: string): Promise<{ status: number; json: unknown }> {
  const { status, text } = await httpCall(`${server.url}${route}`, {
    method: "POST",
    headers: { authorization: `Bearer ${rootKey}`, "content-type": "application/json" },
    body,
  });
  let json: unknown = text;
  try {
    json = JSON.parse(text);
  } catch {
    // keep the text, for the error message
  }
  return { status, json };
}

// ---------------------------------------------------------------------------------------------------------------
// Statistics

/** The median of `values` (any order, not changed): the middle one, or the mean of the two middle ones; NaN when none. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The p-th percentile (nearest rank) of values sorted in ascending order; NaN when there are none. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export type LatencySummary = { p50: number; p90: number; p99: number; max: number; mean: number };

/** p50, p90, p99, max and mean of `values` (any order, not changed), rounded to 0.01. */
export function summarizeLatencies(values: readonly number[] | Float64Array): LatencySummary {
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  const mean = sorted.length === 0 ? NaN : sum / sorted.length;
  return {
    p50: round(percentile(sorted, 50), 2),
    p90: round(percentile(sorted, 90), 2),
    p99: round(percentile(sorted, 99), 2),
    max: round(percentile(sorted, 100), 2),
    mean: round(mean, 2),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Report

/**
 * A plain-text table: the columns in `numeric` are right-aligned, the others left-aligned, except that the last
 * column is not padded unless it is numeric.
 */
export function formatTable(header: string[], rows: string[][], numeric: ReadonlySet<number>): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (numeric.has(i) ? c.padStart(widths[i]!) : i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** Where the run happened, for the results file. */
export function environmentInfo(postgresVersion: string | undefined) {
  return {
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    postgres: postgresVersion,
    commit: gitCommit(),
  };
}

/** Writes `report` to bench/results/<prefix>-<startedAt>.json; answers the file's path. */
export async function writeResults(prefix: string, startedAt: Date, report: unknown): Promise<string> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${prefix}-${startedAt.toISOString().replace(/[:.]/g, "-")}.json`);
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}

/**
 * The end of a benchmark's run: prints each failed scenario (named by `where`) and the run's own failure, and sets
 * the exit code: 1 for any failure, 130 when interrupted (what was being measured is not reported).
 */
export function reportOutcome<F extends { error: string }>(
  failure: unknown,
  failures: F[],
  where: (f: F) => (string | number | undefined)[],
  interruptedNote = "the measurement in progress is not reported",
): void {
  if (failures.length > 0) {
    console.error(`\n${failures.length} scenario(s) failed:`);
    for (const f of failures) console.error(`  ${where(f).filter(Boolean).join(" ")}:\n${indent(f.error)}`);
  }
  if (failure !== undefined) {
    console.error(`\nbenchmark failed: ${failure instanceof Error ? (failure.stack ?? failure.message) : String(failure)}`);
    process.exitCode = 1;
  } else if (interrupted()) {
    console.error(`\nbenchmark interrupted: ${interruptedNote}`);
    process.exitCode = 130;
  } else if (failures.length > 0) {
    process.exitCode = 1;
  }
}

export function indent(text: string): string {
  return text.replace(/^/gm, "    ");
}

export function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: unknown }).cause;
  if (cause instanceof Error) return `${err.message}: ${(cause as { code?: string }).code ?? cause.message}`;
  return err.message;
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function gitCommit(): string | undefined {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], {
      cwd: REPO_ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Settings from the environment (a wrong value stops the benchmark with a message naming the variable)

export function envPositive(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number, got "${raw}"`);
  return value;
}

/** BENCH_SERVER_NODE_ARGS: extra node flags for the keyhaven children, space-separated (none when unset). */
export function envServerNodeArgs(env: NodeJS.ProcessEnv): string[] {
  return (env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter((a) => a !== "");
}

/** A comma-separated subset of `allowed`, in `allowed`'s order; `fallback` when unset. */
export function envList<T extends string>(
  env: NodeJS.ProcessEnv,
  name: string,
  allowed: readonly T[],
  fallback: readonly T[] = allowed,
): T[] {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === "") return [...fallback];
  const items = raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  const wrong = items.filter((s) => !(allowed as readonly string[]).includes(s));
  if (wrong.length > 0 || items.length === 0) throw new Error(`${name} must list some of ${allowed.join(", ")}, got "${raw}"`);
  return allowed.filter((a) => items.includes(a));
}

/** Comma-separated integers from `min` to `max`, each once; `fallback` (the same syntax) when unset. */
export function envIntList(env: NodeJS.ProcessEnv, name: string, fallback: string, min: number, max: number): number[] {
  const raw = env[name]?.trim() || fallback;
  const values = [...new Set(raw.split(",").map((s) => Number(s.trim())))];
  if (values.some((n) => !Number.isInteger(n) || n < min || n > max)) {
    throw new Error(`${name} must be comma-separated integers from ${min} to ${max}, got "${raw}"`);
  }
  return values;
}

/** The admin connection for scratch databases (closed by `cleanup`) and the server's version, when PostgreSQL is used. */
export async function openAdmin(databaseUrl: string, needed: boolean, cleanup: Cleanup) {
  if (!needed) return { admin: undefined, postgresVersion: undefined };
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  cleanup.add("close the PostgreSQL admin connection", () => admin.end({ timeout: 5 }));
  const [row] = await admin<{ server_version: string }[]>`show server_version`;
  return { admin, postgresVersion: row?.server_version };
}

// ---------------------------------------------------------------------------------------------------------------
// Load: autocannon against one URL, with every 2xx answer's time kept

export type Load = {
  result: autocannon.Result;
  /** Times of the 2xx answers, in milliseconds. */
  latenciesMs: number[];
  /** A body that failed `check`, if one did. */
  badAnswer: string | undefined;
};

/**
 * `connections` keep-alive connections each POSTing `body` back to back for `seconds` (one in flight per
 * connection), or, when `bodies` is given, one of `bodies` chosen at random for each request, or, when `nextBody`
 * is, the body it makes for each request. A signal (see handleInterrupts) cuts the run short.
 */
export function loadJsonPost(opts: {
  url: string;
  body: string;
  /** When given (and not empty), each request's body is one of these, chosen at random, instead of `body`. */
  bodies?: readonly string[];
  /** When given, each request's body is what it returns (a key chosen among more than a list would hold). */
  nextBody?: () => string;
  headers?: Record<string, string>;
  connections: number;
  seconds: number;
  /** When given, every answer's body is checked (and a failing one counted in autocannon's `mismatches`). */
  check?: (body: string) => boolean;
}): Promise<Load> {
  return new Promise((resolve, reject) => {
    const latenciesMs: number[] = [];
    let badAnswer: string | undefined;
    let watch: NodeJS.Timeout | undefined;
    const check = opts.check;
    const bodies = opts.bodies;
    const nextBody =
      opts.nextBody ?? (bodies !== undefined && bodies.length > 0 ? () => bodies[Math.floor(Math.random() * bodies.length)]! : undefined);
    const instance = autocannon(
      {
        url: opts.url,
        method: "POST",
        headers: { "content-type": "application/json", ...opts.headers },
        body: opts.body,
        connections: opts.connections,
        pipelining: 1,
        duration: opts.seconds,
        timeout: 10,
        ...(nextBody && { requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, body: nextBody() }) }] }),
        ...(check && {
          verifyBody: (body: string | Buffer | undefined) => {
            const text = body === undefined ? "" : body.toString();
            if (check(text)) return true;
            badAnswer ??= text.slice(0, 300);
            return false;
          },
        }),
      },
      (err: unknown, result: autocannon.Result) => {
        clearInterval(watch);
        if (err) reject(err instanceof Error ? err : new Error(String(err)));
        else resolve({ result, latenciesMs, badAnswer });
      },
    );
    instance.on("response", (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) latenciesMs.push(responseTime);
    });
    watch = setInterval(() => {
      if (interrupted()) instance.stop();
    }, 200);
  });
}

/** The ceiling's server (bench/fixed-response.server.ts), ready once `route` answers `readyBody`. */
export function startFixedResponseServer(route: string, readyBody: string, cleanup: Cleanup): Promise<ChildServer> {
  return startChildServer({
    name: "fixed-response server",
    script: ["bench/fixed-response.server.ts"],
    nodeArgs: [],
    env: {},
    ready: { method: "POST", path: route, body: readyBody },
    cleanup,
  });
}

/** One measurement's progress line: rate, share of the ceiling, latency, failures. */
export function measurementLine(
  rate: number,
  unit: string,
  r: { shareOfCeiling?: number; latencyMs: LatencySummary; non2xx: number; errors: number },
): string {
  return (
    `  ${rate.toLocaleString("en-US")} ${unit}` +
    (r.shareOfCeiling === undefined ? "" : ` (${(r.shareOfCeiling * 100).toFixed(1)}% of the ceiling)`) +
    `, p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms, ${r.non2xx} non-2xx, ${r.errors} errors`
  );
}

/** A failed scenario's progress line; `where` names it (target, kind, connections), undefined parts left out. */
export function failureLine(where: (string | number | undefined)[], error: string): string {
  const named = where.filter((s) => s !== undefined).join(" ");
  return `  ✗ ${named}: ${error.split("\n")[0]}`;
}

/**
 * BENCH_REDIS: a redis:// URL, 1/true/on/yes (the local Redis) or 0/false/off/no (none); unset or empty means
 * `whenUnset`.
 */
export function readRedisSetting(raw: string | undefined, whenUnset: "on" | "off"): string | undefined {
  const value = (raw?.trim() ?? "").toLowerCase();
  if (value === "") return whenUnset === "on" ? DEFAULT_REDIS_URL : undefined;
  if (["1", "true", "on", "yes"].includes(value)) return DEFAULT_REDIS_URL;
  if (["0", "false", "off", "no"].includes(value)) return undefined;
  if (/^rediss?:\/\//.test(raw!.trim())) return raw!.trim();
  throw new Error(`BENCH_REDIS must be a redis:// URL, 1/true/on or 0/false/off, got "${raw}"`);
}

/** A count for a report table: rounded, with thousands separators; "—" when not measured. */
export function formatCount(v: number): string {
  return Number.isFinite(v) ? Math.round(v).toLocaleString("en-US") : "—";
}

/** Milliseconds for a report table, with `digits` decimals; "—" when not measured. */
export function formatMs(v: number, digits = 2): string {
  return Number.isFinite(v) ? v.toFixed(digits) : "—";
}

/** A share (0..1) as a percentage with one decimal, "—" when there is none. */
export function formatShare(share: number | undefined): string {
  return share === undefined ? "—" : `${(share * 100).toFixed(1)}%`;
}
