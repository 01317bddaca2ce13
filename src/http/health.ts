import { sql } from "drizzle-orm";
import type { Db } from "../storage/client.js";
import type { RateLimiter } from "../storage/ratelimits/ratelimiter.window.js";

/** How long readiness (and a /metrics scrape) waits for PostgreSQL or Redis before calling it down. */
export const HEALTH_TIMEOUT_MS = 1000;

export type ServiceState = "up" | "down" | "not configured";

async function withTimeout<T>(work: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  // The losing promise still settles later; it must not become an unhandled rejection.
  work.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** `select 1` on the store. postgres.js reconnects on the next query by itself, so "down" recovers without help. */
export async function checkDatabase(deps: { db: Db }, timeoutMs = HEALTH_TIMEOUT_MS): Promise<"up" | "down"> {
  try {
    await withTimeout(Promise.resolve(deps.db.execute(sql`select 1`)), timeoutMs, "the database");
    return "up";
  } catch {
    return "down";
  }
}

/** PING on the rate limiter's Redis, when REDIS_URL is set; ioredis keeps reconnecting in the background. */
export async function checkRedis(
  deps: { ratelimiter: Pick<RateLimiter, "kind" | "ping"> },
  timeoutMs = HEALTH_TIMEOUT_MS,
): Promise<ServiceState> {
  const { ratelimiter } = deps;
  if (ratelimiter.kind !== "redis" || !ratelimiter.ping) return "not configured";
  try {
    await ratelimiter.ping(timeoutMs);
    return "up";
  } catch {
    return "down";
  }
}
