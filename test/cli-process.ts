import { type ChildProcess, spawn } from "node:child_process";
import net from "node:net";
import os from "node:os";
import { fileURLToPath } from "node:url";

/** Real `keyhaven` processes for the CLI tests, started as a user would run them. */

export const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url));

export type Cli = {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

const children = new Set<ChildProcess>();

/**
 * Runs `keyhaven <args>` with only PATH and HOME from this environment plus `env`; through `launcher` when given
 * (a command that ends by running its arguments, e.g. `unshare -m sh -c '…; exec "$@"' sh`).
 */
export function keyhaven(args: string[], env: Record<string, string> = {}, launcher: string[] = []): Cli {
  const command = [...launcher, process.execPath, "--import", "tsx", "src/cli/main.ts", ...args];
  const child = spawn(command[0]!, command.slice(1), {
    cwd: PROJECT_ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? os.tmpdir(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => {
      children.delete(child);
      resolve({ code, signal });
    }),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** SIGKILLs every keyhaven process still running. */
export function killAll(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  children.clear();
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once the start-up banner is complete; fails early if the process exits first. */
export async function started(cli: Cli): Promise<string> {
  const deadline = Date.now() + 45_000;
  while (!cli.stdout().includes("operator routes:")) {
    if (cli.child.exitCode !== null || cli.child.signalCode !== null) {
      throw new Error(`keyhaven exited before listening:\n${cli.stdout()}\n${cli.stderr()}`);
    }
    if (Date.now() > deadline) throw new Error(`keyhaven did not start in time:\n${cli.stdout()}\n${cli.stderr()}`);
    await sleep(50);
  }
  return cli.stdout();
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
