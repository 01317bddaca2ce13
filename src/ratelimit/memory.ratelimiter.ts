import { counterKey, decide, type LimitCheck, type LimitOutcome, type RateLimiter, windowOf } from "./ratelimiter.js";

/** Counters kept at most (about 150 bytes each); see `remember`. */
export const MEMORY_RATELIMIT_COUNTERS = 1_000_000;

/** Counters in this process's memory: for one process, or when REDIS_URL is not set. */
export class MemoryRateLimiter implements RateLimiter {
  readonly kind = "memory";
  private readonly counters = new Map<string, { count: number; expiresAt: number }>();
  private readonly sweeper: NodeJS.Timeout;
  private lastSweep = 0;

  constructor(
    sweepEveryMs = 60_000,
    private readonly maxCounters = MEMORY_RATELIMIT_COUNTERS,
  ) {
    this.sweeper = setInterval(() => this.sweep(Date.now()), sweepEveryMs);
    this.sweeper.unref();
  }

  get size(): number {
    return this.counters.size;
  }

  async check(checks: LimitCheck[], now = Date.now()): Promise<LimitOutcome[]> {
    const keys = checks.map((c) => counterKey(c, windowOf(c.duration, now).window));
    const currents = keys.map((k) => this.counters.get(k)?.count ?? 0);
    const { all, outcomes } = decide(checks, currents, now);
    if (all) {
      checks.forEach((c, i) => {
        if (c.cost === 0) return;
        const entry = this.counters.get(keys[i]!);
        if (entry) entry.count += c.cost;
        else this.remember(keys[i]!, { count: c.cost, expiresAt: windowOf(c.duration, now).reset }, now);
      });
    }
    return outcomes;
  }

  /**
   * Adds a counter. Memory is bounded whatever callers send (verifyKey accepts ad-hoc limits with any name and
   * window from anyone holding a key): at the cap, expired counters are dropped first (at most one sweep a
   * second), then the oldest counter. A dropped counter starts again from zero, so a flood of distinct limits can
   * cost accuracy, never memory; Redis (REDIS_URL) has no such cap but its own maxmemory policy.
   */
  private remember(key: string, entry: { count: number; expiresAt: number }, now: number): void {
    if (this.counters.size >= this.maxCounters && now - this.lastSweep >= 1000) this.sweep(now);
    if (this.counters.size >= this.maxCounters) {
      const oldest = this.counters.keys().next().value;
      if (oldest !== undefined) this.counters.delete(oldest);
    }
    this.counters.set(key, entry);
  }

  private sweep(now: number) {
    this.lastSweep = now;
    for (const [k, v] of this.counters) if (v.expiresAt <= now) this.counters.delete(k);
  }

  async close() {
    clearInterval(this.sweeper);
  }
}
