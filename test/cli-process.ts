import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { afterAll, beforeAll } from "vitest";
import { migrateAndRun, openPglite, type Store } from "../src/storage/client.js";

/** Real `keyhaven` processes for the CLI and deployment tests, started as a user would run them. */

export const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url));

export type Cli = {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

const children = new Set<ChildProcess>();
const detached = new Set<ChildProcess>();

/**
 * Runs `command args` in the project root with only PATH and HOME from this environment plus `env`. `detached`
 * gives it a process group of its own, so that killAll also reaches any process it leaves behind.
 */
export function spawnProcess(command: string, args: string[], env: Record<string, string> = {}, options: { detached?: boolean } = {}): Cli {
  const child = spawn(command, args, {
    cwd: PROJECT_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? os.tmpdir(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: options.detached ?? false,
  });
  children.add(child);
  if (options.detached) detached.add(child);
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => {
      // A detached child's group may outlive it: killAll still has to look.
      if (!options.detached) children.delete(child);
      resolve({ code, signal });
    }),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

/**
 * Runs `keyhaven <args>` through the package's bin entry, as `npx keyhaven` and the production command do: the
 * compiled dist/, which test/global-setup.ts builds from the current sources before any test file runs; through
 * `launcher` when given (a command that ends by running its arguments, e.g. `unshare -m sh -c '…; exec "$@"' sh`).
 */
export function keyhaven(args: string[], env: Record<string, string> = {}, launcher: string[] = []): Cli {
  const command = [...launcher, process.execPath, "bin/keyhaven.mjs", ...args];
  return spawnProcess(command[0]!, command.slice(1), env);
}

/** Runs `keyhaven <args>` to its end: its exit code and everything it printed. */
export async function runKeyhaven(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; out: string; err: string }> {
  const cli = keyhaven(args, env);
  const [code] = (await once(cli.child, "close")) as [number | null];
  return { code, out: cli.stdout(), err: cli.stderr() };
}

/**
 * One `keyhaven <command>` suite's scaffolding: `run(args, env)` runs the command to its end, and `dir()` is a
 * temporary directory made before the suite's first test and removed, with all in it, after its last (so call this
 * inside the describe).
 */
export function commandSuite(command: string, prefix: string) {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return { dir: () => dir, run: (args: string[], env: Record<string, string>) => runKeyhaven([command, ...args], env) };
}

/**
 * A migrated embedded store in `dataDir` with what `seed` writes into it (closed again), and its key file
 * `encryption.key` holding `keyFileText`.
 */
export async function embeddedStore(dataDir: string, keyFileText: string, mode = 0o600, seed?: (store: Store) => Promise<void>) {
  const store = await openPglite(dataDir);
  try {
    await migrateAndRun(store, undefined, async () => {});
    await seed?.(store);
  } finally {
    await store.close();
  }
  const keyFile = path.join(dataDir, "encryption.key");
  writeFileSync(keyFile, keyFileText);
  chmodSync(keyFile, mode);
  return { dataDir, keyFile };
}

/** Whether any process is left in the process group `pgid` (a detached child's pid). */
export function processGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw err;
  }
}

/** SIGKILLs every keyhaven process still running (the whole group of a detached one). */
export function killAll(): void {
  for (const child of children) {
    if (detached.has(child)) {
      if (processGroupAlive(child.pid!)) process.kill(-child.pid!, "SIGKILL");
    } else if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
    }
  }
  children.clear();
  detached.clear();
}

/** Resolves with stdout once the start-up banner is complete; fails early if the process exits first. */
export async function started(cli: Cli, seconds = 45): Promise<string> {
  await until("listening", () => cli.stdout().includes("operator routes:"), cli, seconds);
  return cli.stdout();
}

/**
 * Resolves once `check` holds, tried again at each chunk `proc` prints (the event, not a polling interval, so that
 * a test acting at "N keys done" acts there); fails at once if `proc` exits first, or after `seconds`.
 */
export function until(what: string, check: () => boolean, proc: Cli, seconds = 45): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const streams = [proc.child.stdout!, proc.child.stderr!];
    const finish = (err?: Error) => {
      clearTimeout(timer);
      for (const stream of streams) stream.off("data", onData);
      proc.child.off("exit", onExit);
      if (err) reject(err);
      else resolve();
    };
    const onData = () => {
      if (check()) finish();
    };
    const onExit = () => finish(check() ? undefined : new Error(`exited before ${what}:\n${proc.stdout()}\n${proc.stderr()}`));
    const timer = setTimeout(
      () => finish(new Error(`not ${what} within ${seconds} s:\n${proc.stdout()}\n${proc.stderr()}`)),
      seconds * 1000,
    );
    for (const stream of streams) stream.on("data", onData);
    proc.child.on("exit", onExit);
    if (check()) finish();
    else if (proc.child.exitCode !== null || proc.child.signalCode !== null) onExit();
  });
}

export async function withinSeconds<T>(promise: Promise<T>, seconds: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not done within ${seconds} s`)), seconds * 1000);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A new, empty database on the server of `templateUrl` (the test run's PostgreSQL), for real processes to migrate. */
export async function emptyDatabase(templateUrl: string, prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(5).toString("hex")}`;
  const admin = postgres(templateUrl.replace(/\/[^/]+$/, "/postgres"), { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  return {
    url: templateUrl.replace(/\/[^/]+$/, `/${name}`),
    async drop() {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}
