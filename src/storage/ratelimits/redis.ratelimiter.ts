import { Redis, ReplyError } from "ioredis";
import { DependencyState, DependencyUnavailableError } from "../dependency.js";
import {
  type CounterQuotas,
  counterId,
  DEFAULT_COUNTER_QUOTAS,
  decide,
  type LimitCheck,
  type LimitOutcome,
  quotasOf,
  type RateLimiter,
  windowOf,
} from "./ratelimiter.window.js";

// KEYS: per limit, its counter, then its index: a sorted set of the counter ids of its workspace's budget
// (configured or ad-hoc limits) scored by expiry (a counter's key is the index's key, ':', its id). ARGV: n, then
// per limit: limit, cost, ttl ms, counter id, the quota of its index. Reads every counter, and only when every limit
// passes charges them all: one round trip, atomic across replicas. Returns the counts before.
// A counter new to its index first makes room in its own index: the index drops the expired ids, then evicts the
// soonest-expiring counters while it holds its quota. So a workspace never holds more than its quotas, an ad-hoc
// counter never evicts a configured one, and Redis never needs to evict (which could hit any workspace): memory is
// bounded by workspaces × quotas.
// Expiry is absolute (Redis's clock, set once at creation), so an index entry and its counter expire together.
const CHECK_AND_CHARGE = `
local n = tonumber(ARGV[1])
local function arg(i, field) return ARGV[1 + (i - 1) * 5 + field] end
local currents = {}
local ok = true
for i = 1, n do
  local current = tonumber(redis.call('GET', KEYS[2 * i - 1]) or '0')
  currents[i] = current
  local limit = tonumber(arg(i, 1))
  local cost = tonumber(arg(i, 2))
  if limit <= 0 or current + cost > limit then ok = false end
end
if ok then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  -- Which charged counters are new to their index, and what each index must make room for. A counter this call
  -- charges that has to go to make room is created again, so it needs room too.
  local charged, fresh, room, quota = {}, {}, {}, {}
  for i = 1, n do
    if tonumber(arg(i, 2)) > 0 then
      local index, id = KEYS[2 * i], arg(i, 4)
      charged[index .. ':' .. id] = i
      quota[index] = tonumber(arg(i, 5))
      if tonumber(redis.call('ZSCORE', index, id) or '0') <= now then
        fresh[i] = true
        room[index] = (room[index] or 0) + 1
      end
    end
  end
  for index, needed in pairs(room) do
    redis.call('ZREMRANGEBYSCORE', index, '-inf', now)
    while needed > 0 do
      local held = redis.call('ZCARD', index)
      if held == 0 or held + needed <= quota[index] then break end
      local evicted = index .. ':' .. redis.call('ZPOPMIN', index)[1]
      redis.call('DEL', evicted)
      local mine = charged[evicted]
      if mine and not fresh[mine] then
        fresh[mine] = true
        needed = needed + 1
      end
    end
  end
  for i = 1, n do
    local cost = tonumber(arg(i, 2))
    if cost > 0 then
      local counter, index = KEYS[2 * i - 1], KEYS[2 * i]
      local ttl = tonumber(arg(i, 3))
      local expiresAt
      if fresh[i] then
        expiresAt = now + ttl
        redis.call('ZADD', index, expiresAt, arg(i, 4))
        if redis.call('PTTL', index) < ttl then redis.call('PEXPIRE', index, ttl) end
      else
        expiresAt = tonumber(redis.call('ZSCORE', index, arg(i, 4)))
      end
      redis.call('INCRBY', counter, cost)
      redis.call('PEXPIREAT', counter, string.format('%.0f', expiresAt))
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
  private readonly quotas: CounterQuotas;
  private closing = false;
  /** The code of the last connection error (ECONNREFUSED, ETIMEDOUT…) while not connected since. */
  private connectionCode: string | undefined;

  constructor(
    url: string,
    private readonly prefix = "keyhaven:rl:",
    quotas: number | CounterQuotas = DEFAULT_COUNTER_QUOTAS,
    timeouts: RedisTimeouts = DEFAULT_REDIS_TIMEOUTS,
  ) {
    this.quotas = quotasOf(quotas);
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
    // Errors surface on the command that failed; without a listener ioredis would also print each reconnect. The
    // connection's own code is kept for readiness, to say what happened (ECONNREFUSED, ...) rather than only "no PONG".
    redis.on("error", (err: unknown) => {
      const code = (err as { code?: unknown }).code;
      if (typeof code === "string") this.connectionCode = code;
    });
    redis.on("ready", () => {
      this.connectionCode = undefined;
      this.state.succeeded();
    });
    redis.on("close", () => {
      if (!this.closing) this.state.failed(new DependencyUnavailableError("Redis", "Redis is unreachable", "connection closed"));
    });
    this.redis = redis as WithCheck;
  }

  async check(checks: LimitCheck[], now = Date.now()): Promise<LimitOutcome[]> {
    if (checks.length === 0) return [];
    // The workspace id in braces: a hash tag, so that a workspace's counters and indexes share a Redis Cluster slot.
    // Ad-hoc counters have an index of their own (`adhoc:`), so that they only ever evict one another.
    const indexes = checks.map((c) => `${this.prefix}${c.adHoc === true ? "adhoc:" : ""}{${c.workspaceId}}`);
    const ids = checks.map((c) => counterId(c, windowOf(c.duration, now).window));
    const keys = checks.flatMap((_, i) => [`${indexes[i]}:${ids[i]}`, indexes[i]!]);
    const args = checks.flatMap((c, i) => [
      c.limit,
      c.cost,
      Math.max(1, windowOf(c.duration, now).reset - now + 1000),
      ids[i]!,
      c.adHoc === true ? this.quotas.adHoc : this.quotas.configured,
    ]);
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
    } catch (err) {
      // Not connected: what the connection met says more than the missing PONG (health.ts words it).
      if (this.redis.status !== "ready" && this.connectionCode)
        throw Object.assign(new Error("Redis is not connected"), { connectionCode: this.connectionCode });
      throw err;
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
