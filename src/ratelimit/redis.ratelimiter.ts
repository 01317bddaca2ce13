import { Redis } from "ioredis";
import { counterKey, decide, type LimitCheck, type LimitOutcome, type RateLimiter, windowOf } from "./ratelimiter.js";

// KEYS: one counter per limit. ARGV: n, then per limit: limit, cost, ttl ms. Reads every counter, and only when
// every limit passes charges them all: one round trip, atomic across replicas. Returns the counts before.
const CHECK_AND_CHARGE = `
local n = tonumber(ARGV[1])
local currents = {}
local ok = true
for i = 1, n do
  local current = tonumber(redis.call('GET', KEYS[i]) or '0')
  currents[i] = current
  local limit = tonumber(ARGV[2 + (i - 1) * 3])
  local cost = tonumber(ARGV[3 + (i - 1) * 3])
  if limit <= 0 or current + cost > limit then ok = false end
end
if ok then
  for i = 1, n do
    local cost = tonumber(ARGV[3 + (i - 1) * 3])
    if cost > 0 then
      redis.call('INCRBY', KEYS[i], cost)
      redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[4 + (i - 1) * 3]))
    end
  end
end
return currents
`;

type WithCheck = Redis & { keyhavenCheck(numKeys: number, ...args: (string | number)[]): Promise<number[]> };

/** Counters in Redis, shared by every replica (REDIS_URL). */
export class RedisRateLimiter implements RateLimiter {
  readonly kind = "redis";
  private readonly redis: WithCheck;

  constructor(url: string, private readonly prefix = "keyhaven:rl:") {
    const redis = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true });
    redis.defineCommand("keyhavenCheck", { lua: CHECK_AND_CHARGE });
    // Errors surface on the command that failed; without a listener ioredis would also print each reconnect.
    redis.on("error", () => {});
    this.redis = redis as WithCheck;
  }

  async check(checks: LimitCheck[], now = Date.now()): Promise<LimitOutcome[]> {
    if (checks.length === 0) return [];
    const keys = checks.map((c) => this.prefix + counterKey(c, windowOf(c.duration, now).window));
    const args = checks.flatMap((c) => [c.limit, c.cost, Math.max(1, windowOf(c.duration, now).reset - now + 1000)]);
    const currents = (await this.redis.keyhavenCheck(keys.length, ...keys, checks.length, ...args)).map(Number);
    return decide(checks, currents, now).outcomes;
  }

  async ping(timeoutMs: number): Promise<void> {
    // While connecting, the PING waits in ioredis's offline queue and goes out on connect; the timeout bounds it.
    if (this.redis.status === "end") throw new Error("Redis connection is closed");
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`Redis did not answer PING within ${timeoutMs} ms`)), timeoutMs);
    });
    const ping = this.redis.ping();
    ping.catch(() => {});
    try {
      await Promise.race([ping, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  isConnected(): boolean {
    return this.redis.status === "ready";
  }

  async close() {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
