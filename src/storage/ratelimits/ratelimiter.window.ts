import { hash } from "node:crypto";
// The defaults are declared with the configuration they default (config.ts), so that reading the configuration
// loads no limiter.
import { DEFAULT_ADHOC_COUNTERS_PER_WORKSPACE, DEFAULT_COUNTERS_PER_WORKSPACE } from "../../config.js";
import type { DependencyState } from "../dependency.js";

// The counting every backend shares (fixed windows, counter ids, the all-or-nothing decision) and the limiter's
// interface. Below the backends (memory.ratelimiter.ts, redis.ratelimiter.ts) and the factory that picks one
// (ratelimiter.ts), so neither backend imports the factory.

/**
 * One limit to check: `cost` units against `limit` per fixed window of `duration` ms, counted under `identifier`
 * in the counters of `workspaceId`. Every counter belongs to one workspace, and each workspace holds at most its
 * quota of live counters (CounterQuotas): making room evicts only that workspace's own counters, so no workspace's
 * traffic can reset, evict or fail another's. `adHoc` counters (limits a verification names with their own limit
 * and duration: anyone holding a key may make them up) are held in a budget of their own, so that making room for
 * them evicts only ad-hoc counters, never a configured limit's.
 */
export type LimitCheck = {
  workspaceId: string;
  name: string;
  identifier: string;
  limit: number;
  duration: number;
  cost: number;
  adHoc?: boolean;
};

/** Live counters one workspace may hold: of configured limits, and of ad-hoc ones besides. */
export type CounterQuotas = { configured: number; adHoc: number };

/** A quota of counters as a backend is given one: a number is the same quota for both budgets. */
export function quotasOf(quotas: number | CounterQuotas): CounterQuotas {
  return typeof quotas === "number" ? { configured: quotas, adHoc: quotas } : quotas;
}

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

export { DEFAULT_ADHOC_COUNTERS_PER_WORKSPACE, DEFAULT_COUNTERS_PER_WORKSPACE };
export const DEFAULT_COUNTER_QUOTAS: CounterQuotas = Object.freeze({
  configured: DEFAULT_COUNTERS_PER_WORKSPACE,
  adHoc: DEFAULT_ADHOC_COUNTERS_PER_WORKSPACE,
});

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
