import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import net from "node:net";
import { Redis } from "ioredis";

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

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

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
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await client.ping();
      break;
    } catch (err) {
      if (Date.now() > deadline || child.exitCode !== null) {
        child.kill("SIGKILL");
        client.disconnect();
        throw new Error(`redis-server on port ${port} did not start: ${String(err)}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
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
