import { hash } from "node:crypto";
import type { DependencyState } from "../dependency.js";

// The counting every backend shares (fixed windows, counter ids, the all-or-nothing decision) and the limiter's
// interface. Below the backends (memory.ratelimiter.ts, redis.ratelimiter.ts) and the factory that picks one
// (ratelimiter.ts), so neither backend imports the factory.

/**
 * One limit to check: `cost` units against `limit` per fixed window of `duration` ms, counted under `identifier`
 * in the counters of `workspaceId`. Every counter belongs to one workspace, and each workspace holds at most its
 * quota of live counters (`countersPerWorkspace`): making room evicts only that workspace's own counters, so no
 * workspace's traffic can reset, evict or fail another's.
 */
export type LimitCheck = {
  workspaceId: string;
  name: string;
  identifier: string;
  limit: number;
  duration: number;
  cost: number;
};

export type LimitOutcome = { name: string; limit: number; passed: boolean; remaining: number; reset: number };

/**
 * Fixed windows: window = floor(now / duration), reset = (window + 1) * duration. A check passes when
 * `current + cost <= limit` (a limit of 0 never passes). Several limits are checked all-or-nothing: when any one
 * fails, none is charged.
 */
export interface RateLimiter {
  readonly kind: "memory" | "redis";
  check(checks: LimitCheck[], now?: number): Promise<LimitOutcome[]>;
  close(): Promise<void>;
  /** Redis only: resolves when Redis answers PING within `timeoutMs`, rejects otherwise (readiness). */
  ping?(timeoutMs: number): Promise<void>;
  /** Redis only: whether Redis answers, as commands found (logs changes of state). */
  readonly state?: DependencyState;
  /** Redis only: whether the connection is up right now, without a round trip (the metrics gauge). */
  isConnected?(): boolean;
}

// Declared with the configuration it defaults (config.ts), so that reading the configuration loads no limiter.
export { DEFAULT_COUNTERS_PER_WORKSPACE } from "../../config.js";

/** The longest window a request may ask for (ad-hoc limits in verifyKey, ratelimits.limit): 30 days, as upstream v2. */
export const MAX_WINDOW_MS = 2_592_000_000;

export function windowOf(duration: number, now: number) {
  const window = Math.floor(now / duration);
  return { window, reset: (window + 1) * duration };
}

/**
 * A counter's id within its workspace: a digest (128 bits) of what it counts, so that a counter costs the same
 * memory however long the names and identifiers it was asked under (up to 512 characters each).
 */
export function counterId(c: LimitCheck, window: number): string {
  return hash("sha256", `${c.identifier}\u0000${c.name}\u0000${c.duration}\u0000${window}`, "base64url").slice(0, 22);
}

/** Decides pass or fail for every check from the counts before it, the same way in every backend. */
export function decide(checks: LimitCheck[], currents: number[], now: number) {
  const passed = checks.map((c, i) => c.limit > 0 && currents[i]! + c.cost <= c.limit);
  const all = passed.every(Boolean);
  const outcomes: LimitOutcome[] = checks.map((c, i) => {
    const after = all ? currents[i]! + c.cost : currents[i]!;
    return {
      name: c.name,
      limit: c.limit,
      passed: passed[i]!,
      remaining: Math.max(0, c.limit - after),
      reset: windowOf(c.duration, now).reset,
    };
  });
  return { all, outcomes };
}
