import type { Config } from "../../config.js";
import { redactUrl } from "../client.js";
import { findDependencyFailure } from "../dependency.js";
import type { CounterQuotas, LimitCheck, LimitOutcome, RateLimiter } from "./ratelimiter.window.js";

// What callers use of the counting, so that they keep importing it from here.
export {
  type CounterQuotas,
  counterId,
  DEFAULT_ADHOC_COUNTERS_PER_WORKSPACE,
  DEFAULT_COUNTER_QUOTAS,
  DEFAULT_COUNTERS_PER_WORKSPACE,
  decide,
  type LimitCheck,
  type LimitOutcome,
  MAX_WINDOW_MS,
  type RateLimiter,
  windowOf,
} from "./ratelimiter.window.js";

export async function openRateLimiter(
  config: Pick<
    Config,
    "redisUrl" | "redisConnectTimeoutMs" | "redisCommandTimeoutMs" | "ratelimitCountersPerWorkspace" | "ratelimitAdHocCountersPerWorkspace"
  >,
): Promise<RateLimiter> {
  const quotas = counterQuotasOf(config);
  if (!config.redisUrl) {
    const { MemoryRateLimiter } = await import("./memory.ratelimiter.js");
    return new MemoryRateLimiter(undefined, quotas);
  }
  const { RedisRateLimiter } = await import("./redis.ratelimiter.js");
  return new RedisRateLimiter(config.redisUrl, undefined, quotas, {
    connectTimeoutMs: config.redisConnectTimeoutMs,
    commandTimeoutMs: config.redisCommandTimeoutMs,
  });
}

/** The quotas of counters per workspace the configuration sets (KEYHAVEN_RATELIMIT_[ADHOC_]COUNTERS_PER_WORKSPACE). */
export function counterQuotasOf(
  config: Pick<Config, "ratelimitCountersPerWorkspace" | "ratelimitAdHocCountersPerWorkspace">,
): CounterQuotas {
  return { configured: config.ratelimitCountersPerWorkspace, adHoc: config.ratelimitAdHocCountersPerWorkspace };
}

/**
 * At start: a REDIS_URL that does not answer (a typo, a wrong port, Redis not up yet) is reported now, naming it
 * (without its password), rather than discovered by the first limited verification. The process starts anyway
 * and connects as soon as Redis answers.
 */
export async function warnIfRedisUnreachable(
  limiter: RateLimiter,
  config: Pick<Config, "redisUrl" | "redisConnectTimeoutMs" | "redisCommandTimeoutMs" | "ratelimitOnRedisFailure">,
  log: { warn(obj: unknown, msg?: string): void },
): Promise<boolean> {
  if (!config.redisUrl || !limiter.ping) return true;
  try {
    await limiter.ping(config.redisConnectTimeoutMs + config.redisCommandTimeoutMs);
    return true;
  } catch (err) {
    const reason = findDependencyFailure(err)?.reason ?? (err instanceof Error ? err.message : String(err));
    const meanwhile =
      config.ratelimitOnRedisFailure === "open" ? "verifications skip the Redis-backed rate limits" : "rate-limited requests answer 503";
    log.warn(
      { redis: redactUrl(config.redisUrl), reason },
      `REDIS_URL ${redactUrl(config.redisUrl)} does not answer (${reason}); until it does, ${meanwhile}`,
    );
    return false;
  }
}

/** What asked for limits a skip is counted under: a key verification, or a standalone limit (ratelimit(s).limit, multiLimit). */
export type LimitedOperation = "verifyKey" | "limit";

/** Where skipped limits are counted (AppMetrics: keyhaven_ratelimit_skipped_total). */
export type SkipCounter = { recordRatelimitSkipped(operation: LimitedOperation): void };

/**
 * Checks `checks` on the limiter. When Redis cannot answer, KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE decides: "open"
 * returns undefined (the caller proceeds without these limits and says so) and counts the skip for `operation`,
 * "closed" lets the 503 through.
 */
export async function checkLimits(
  deps: {
    ratelimiter: RateLimiter;
    config: Pick<Config, "ratelimitOnRedisFailure">;
    clock: { now(): number };
    metrics: SkipCounter;
  },
  checks: LimitCheck[],
  operation: LimitedOperation,
): Promise<LimitOutcome[] | undefined> {
  try {
    return await deps.ratelimiter.check(checks, deps.clock.now());
  } catch (err) {
    if (deps.config.ratelimitOnRedisFailure === "open" && findDependencyFailure(err)?.dependency === "Redis") {
      deps.metrics.recordRatelimitSkipped(operation);
      return undefined;
    }
    throw err;
  }
}
