/**
 * The memory one rate-limit counter costs, in process memory (MemoryRateLimiter) and in Redis (RedisRateLimiter
 * against a redis-server this script starts on a free port): heap or used_memory before and after N counters of one
 * workspace, each under a 256-character name. Run: node --expose-gc --import tsx bench/ratelimit-memory.bench.ts
 * (COUNTERS=200000 by default). The figures in docs/operations.md and docs/benchmarks.md come from here.
 */
import { MemoryRateLimiter } from "../src/storage/ratelimits/memory.ratelimiter.js";
import type { LimitCheck } from "../src/storage/ratelimits/ratelimiter.js";
import { RedisRateLimiter } from "../src/storage/ratelimits/redis.ratelimiter.js";
import { startRedisServer } from "../test/redis-server.js";

const N = Number(process.env.COUNTERS ?? 200_000);
const BATCH = 20;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");

const counter = (i: number): LimitCheck => ({
  workspaceId: "ws_3zZ8Bq5YJpC1vQ2mLr7NxD",
  name: `${"n".repeat(250)}-${String(i).padStart(5, "0")}`.slice(-256),
  identifier: "key_3zZ8Bq5YJpC1vQ2mLr7NxD",
  limit: 10,
  duration: 2_592_000_000,
  cost: 1,
});

async function fill(check: (batch: LimitCheck[]) => Promise<unknown>) {
  for (let i = 0; i < N; i += BATCH) await check(Array.from({ length: BATCH }, (_, j) => counter(i + j)));
}

async function measureMemory() {
  const limiter = new MemoryRateLimiter(60_000, N);
  gc!();
  const before = process.memoryUsage().heapUsed;
  await fill((b) => limiter.check(b));
  gc!();
  const after = process.memoryUsage().heapUsed;
  const held = limiter.size();
  await limiter.close();
  return { counters: held, bytesPerCounter: Math.round((after - before) / held) };
}

async function measureRedis() {
  const redis = await startRedisServer();
  try {
    const limiter = new RedisRateLimiter(redis.url, "keyhaven:rl:", N);
    await limiter.check([{ ...counter(-1), workspaceId: "ws_warmup" }]);
    const before = await redis.usedMemory();
    await fill((b) => limiter.check(b));
    const after = await redis.usedMemory();
    const held = await redis.client.zcard(`keyhaven:rl:{${counter(0).workspaceId}}`);
    await limiter.close();
    return { counters: held, bytesPerCounter: Math.round((after - before) / held) };
  } finally {
    await redis.stop();
  }
}

console.log(JSON.stringify({ memory: await measureMemory(), redis: await measureRedis() }));
