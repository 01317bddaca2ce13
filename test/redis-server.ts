import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { Redis } from "ioredis";
import { freePort, waitFor } from "./wait.js";

/** Whether this machine has a redis-server binary (tests that start their own Redis skip without one). */
export const hasRedisServer = (() => {
  try {
    execFileSync("redis-server", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

export type OwnRedis = {
  url: string;
  /** A client of this Redis, for INFO, CONFIG and assertions. */
  client: Redis;
  usedMemory(): Promise<number>;
  stop(): Promise<void>;
};

/**
 * A redis-server of the caller's own on a free loopback port, without persistence, with `args` (e.g.
 * `["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"]`). Never the shared Redis: stopping or filling this
 * one disturbs no other test.
 */
export async function startRedisServer(args: string[] = []): Promise<OwnRedis> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", ...args],
    { stdio: "ignore" },
  );
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const client = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: null, retryStrategy: () => 50 });
  client.on("error", () => {});
  try {
    await waitFor(
      `redis-server on port ${port} started`,
      async () => {
        if (child.exitCode !== null) throw new Error(`redis-server on port ${port} exited at start`);
        return (await client.ping().catch(() => undefined)) === "PONG";
      },
      { timeoutMs: 20_000 },
    );
  } catch (err) {
    child.kill("SIGKILL");
    client.disconnect();
    throw err;
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    client,
    async usedMemory() {
      return Number(/used_memory:(\d+)/.exec(await client.info("memory"))![1]);
    },
    async stop() {
      client.disconnect();
      child.kill("SIGKILL");
      await exited;
    },
  };
}
