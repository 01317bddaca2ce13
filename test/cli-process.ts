import { type ChildProcess, spawn } from "node:child_process";
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

/** Runs `keyhaven <args>` with only PATH and HOME from this environment plus `env`. */
export function keyhaven(args: string[], env: Record<string, string> = {}): Cli {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
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
