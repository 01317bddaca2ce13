import { counterKey, decide, type LimitCheck, type LimitOutcome, type RateLimiter, windowOf } from "./ratelimiter.js";

/** Counters in this process's memory: for one process, or when REDIS_URL is not set. */
export class MemoryRateLimiter implements RateLimiter {
  readonly kind = "memory";
  private readonly counters = new Map<string, { count: number; expiresAt: number }>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(sweepEveryMs = 60_000) {
    this.sweeper = setInterval(() => this.sweep(Date.now()), sweepEveryMs);
    this.sweeper.unref();
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
        else this.counters.set(keys[i]!, { count: c.cost, expiresAt: windowOf(c.duration, now).reset });
      });
    }
    return outcomes;
  }

  private sweep(now: number) {
    for (const [k, v] of this.counters) if (v.expiresAt <= now) this.counters.delete(k);
  }

  async close() {
    clearInterval(this.sweeper);
  }
}
