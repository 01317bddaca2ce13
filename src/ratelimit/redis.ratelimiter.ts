import { Redis, ReplyError } from "ioredis";
import { DependencyState, DependencyUnavailableError } from "../dependency.js";
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

/** Deadlines on Redis (REDIS_CONNECT_TIMEOUT_MS, REDIS_COMMAND_TIMEOUT_MS). */
export type RedisTimeouts = { connectTimeoutMs: number; commandTimeoutMs: number };
export const DEFAULT_REDIS_TIMEOUTS: RedisTimeouts = { connectTimeoutMs: 500, commandTimeoutMs: 500 };

/** Counters in Redis, shared by every replica (REDIS_URL). */
export class RedisRateLimiter implements RateLimiter {
  readonly kind = "redis";
  /** Whether Redis answers, as commands found; logs changes of state once (see dependency.ts). */
  readonly state = new DependencyState("Redis");
  private readonly redis: WithCheck;
  private closing = false;

  constructor(
    url: string,
    private readonly prefix = "keyhaven:rl:",
    timeouts: RedisTimeouts = DEFAULT_REDIS_TIMEOUTS,
  ) {
    const redis = new Redis(url, {
      lazyConnect: false,
      connectTimeout: timeouts.connectTimeoutMs,
      // Every command has a deadline, also one queued while (re)connecting; failed commands are not retried.
      commandTimeout: timeouts.commandTimeoutMs,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: true,
      // ioredis waits up to 2 s between reconnects by default: serving would resume that late after an outage.
      retryStrategy: (times) => Math.min(times * 50, 250),
    });
    redis.defineCommand("keyhavenCheck", { lua: CHECK_AND_CHARGE });
    // Errors surface on the command that failed; without a listener ioredis would also print each reconnect.
    redis.on("error", () => {});
    redis.on("ready", () => this.state.succeeded());
    redis.on("close", () => {
      if (!this.closing) this.state.failed(new DependencyUnavailableError("Redis", "Redis is unreachable", "connection closed"));
    });
    this.redis = redis as WithCheck;
  }

  async check(checks: LimitCheck[], now = Date.now()): Promise<LimitOutcome[]> {
    if (checks.length === 0) return [];
    const keys = checks.map((c) => this.prefix + counterKey(c, windowOf(c.duration, now).window));
    const args = checks.flatMap((c) => [c.limit, c.cost, Math.max(1, windowOf(c.duration, now).reset - now + 1000)]);
    const currents = (await this.command(() => this.redis.keyhavenCheck(keys.length, ...keys, checks.length, ...args))).map(Number);
    return decide(checks, currents, now).outcomes;
  }

  /**
   * Runs a command within its deadline, or throws DependencyUnavailableError. While Redis is known to be down
   * and not reconnected, fails at once instead of waiting out the deadline in ioredis's offline queue.
   */
  private async command<T>(run: () => Promise<T>): Promise<T> {
    if (this.state.isDown && this.redis.status !== "ready") {
      throw new DependencyUnavailableError("Redis", "Redis is unreachable", `connection ${this.redis.status}`);
    }
    try {
      return await run();
    } catch (err) {
      // An error reply is Redis answering (a bug of ours, not an outage): a 500 as any other.
      if (err instanceof ReplyError) throw err;
      const reason = err instanceof Error ? err.message : String(err);
      const failure = new DependencyUnavailableError("Redis", "Redis is unreachable", reason);
      this.state.failed(failure);
      // A frozen connection (the server stopped, the network partitioned) never answers again: reconnect.
      if (reason === "Command timed out" && this.redis.status === "ready") this.redis.disconnect(true);
      throw failure;
    }
  }

  async ping(timeoutMs: number): Promise<void> {
    // While connecting, the PING waits in ioredis's offline queue and goes out on connect; the timeout bounds it.
    if (this.redis.status === "end") throw new Error("Redis connection is closed");
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`Redis did not answer PING within ${timeoutMs} ms`)), timeoutMs);
    });
    const ping = this.command(() => this.redis.ping());
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
    this.closing = true;
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
