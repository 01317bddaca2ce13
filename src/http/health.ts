import { sql } from "drizzle-orm";
import type { Db } from "../storage/client.js";
import { findDependencyFailure } from "../storage/dependency.js";
import { epochSum } from "../storage/epoch.js";
import type { RateLimiter } from "../storage/ratelimits/ratelimiter.window.js";

/** How long readiness (and a /metrics scrape) waits for PostgreSQL or Redis before calling it down. */
export const HEALTH_TIMEOUT_MS = 1000;

export type ServiceState = "up" | "down" | "not configured";

/** What a probe found: up, or down with what happened, in words that hold no URL, query or value. */
export type Probe = { state: "up" } | { state: "down"; reason: string };

class ProbeTimeout extends Error {}

async function withTimeout<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  // The losing promise still settles later; it must not become an unhandled rejection.
  work.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ProbeTimeout()), timeoutMs);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// What a driver's connection-level code means, said the way an operator reads it (issue 34 §6: a refused connection
// was reported as "did not answer within 1000 ms").
const CONNECTION_WORDS: Record<string, string> = {
  ECONNREFUSED: "refused the connection",
  ECONNRESET: "closed the connection",
  EPIPE: "closed the connection",
  CONNECTION_CLOSED: "closed the connection",
  CONNECTION_ENDED: "closed the connection",
  CONNECTION_DESTROYED: "closed the connection",
  ETIMEDOUT: "did not accept a connection in time",
  CONNECT_TIMEOUT: "did not accept a connection in time",
  EHOSTUNREACH: "is unreachable (no route to its host)",
  ENETUNREACH: "is unreachable (no route to its host)",
  ENOTFOUND: "could not be found (its host name does not resolve)",
  EAI_AGAIN: "could not be found (its host name does not resolve)",
  "57P01": "is shutting down",
  "57P02": "is shutting down",
  "57P03": "is starting up",
  "53300": "has no connection slot free",
  "57014": "cancelled the statement (statement_timeout)",
};

/** The words for a connection-level code (a socket's, postgres.js's, a SQLSTATE of class 08), else undefined. */
export function connectionFailureWords(code: string): string | undefined {
  const words = CONNECTION_WORDS[code];
  if (words) return `${words} (${code})`;
  if (/^08[0-9A-Z]{3}$/.test(code)) return `refused or lost the connection (SQLSTATE ${code})`;
  return undefined;
}

/** What happened to a probe that failed, for the readiness message: never the driver's message (it may hold values). */
function describeFailure(err: unknown, timeoutMs: number): string {
  if (err instanceof ProbeTimeout) return `did not answer within ${timeoutMs} ms`;
  const unavailable = findDependencyFailure(err);
  if (unavailable) {
    if (unavailable.diskFull) return "is out of disk";
    const deadline = /^no (answer|transaction|COMMIT or ROLLBACK) within (\d+) ms/.exec(unavailable.reason);
    if (deadline) return `did not answer within ${deadline[2]} ms`;
    return connectionFailureWords(unavailable.reason.split(" ")[0]!) ?? "is unreachable";
  }
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code !== "") return connectionFailureWords(code) ?? `answered with an error (SQLSTATE ${code})`;
  }
  return `failed (${err instanceof Error ? err.name : typeof err})`;
}

/**
 * Whether the store serves: the statement every request starts with (the sum of keyhaven_epoch, one row whatever the
 * table holds), through the same pool requests use, checked for its answer. Not `select 1`, which touches no table
 * and which a broken store still answers: an embedded PGlite left broken by a statement answered every query with no
 * rows, and a store whose tables cannot be read (privileges revoked, the schema gone) answers `select 1` but no
 * request (issue 34 §1: every verification failed while readiness said ready). postgres.js reconnects on the next
 * query by itself, so "down" recovers without help.
 */
export async function probeDatabase(deps: { db: Db }, timeoutMs = HEALTH_TIMEOUT_MS): Promise<Probe> {
  let result: unknown;
  try {
    result = await withTimeout(Promise.resolve(deps.db.execute(sql`select ${epochSum} as epoch`)), timeoutMs);
  } catch (err) {
    return { state: "down", reason: describeFailure(err, timeoutMs) };
  }
  const rows = Array.isArray(result) ? result : ((result as { rows?: unknown[] } | undefined)?.rows ?? []);
  const epoch = (rows[0] as { epoch?: unknown } | undefined)?.epoch;
  if (rows.length !== 1 || typeof epoch !== "string" || !/^\d+$/.test(epoch)) {
    return { state: "down", reason: "answered wrongly (no epoch row for a query that always has one)" };
  }
  return { state: "up" };
}

/** probeDatabase's state alone (the /metrics gauge). */
export async function checkDatabase(deps: { db: Db }, timeoutMs = HEALTH_TIMEOUT_MS): Promise<"up" | "down"> {
  return (await probeDatabase(deps, timeoutMs)).state;
}

/** PING on the rate limiter's Redis, when REDIS_URL is set; ioredis keeps reconnecting in the background. */
export async function probeRedis(
  deps: { ratelimiter: Pick<RateLimiter, "kind" | "ping"> },
  timeoutMs = HEALTH_TIMEOUT_MS,
): Promise<Probe | { state: "not configured" }> {
  const { ratelimiter } = deps;
  if (ratelimiter.kind !== "redis" || !ratelimiter.ping) return { state: "not configured" };
  try {
    await ratelimiter.ping(timeoutMs);
    return { state: "up" };
  } catch (err) {
    const code = (err as { connectionCode?: unknown }).connectionCode;
    const words = typeof code === "string" ? connectionFailureWords(code) : undefined;
    return { state: "down", reason: words ?? `did not answer within ${timeoutMs} ms` };
  }
}
