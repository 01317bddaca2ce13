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

type Counter = { id: string; count: number; expiresAt: number; seq: number };

/** Which of two counters goes first: the sooner to expire, then the older. */
const before = (a: Counter, b: Counter) => a.expiresAt < b.expiresAt || (a.expiresAt === b.expiresAt && a.seq < b.seq);

/**
 * One workspace's live counters: by id, and in a binary min-heap by expiry (a counter's expiry is fixed when it is
 * created), so that dropping the expired ones and evicting the soonest-expiring one cost O(log n), not a scan.
 */
class WorkspaceCounters {
  readonly byId = new Map<string, Counter>();
  private readonly heap: Counter[] = [];
  private created = 0;

  create(id: string, count: number, expiresAt: number) {
    this.add({ id, count, expiresAt, seq: this.created++ });
  }

  private add(counter: Counter) {
    this.byId.set(counter.id, counter);
    const heap = this.heap;
    let i = heap.push(counter) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(counter, heap[parent]!)) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = counter;
  }

  dropExpired(now: number) {
    while (this.heap.length > 0 && this.heap[0]!.expiresAt <= now) this.evictSoonestExpiring();
  }

  /** Removes and returns the counter that goes first (see `before`). */
  evictSoonestExpiring(): Counter | undefined {
    const heap = this.heap;
    const top = heap[0];
    if (top === undefined) return undefined;
    this.byId.delete(top.id);
    const last = heap.pop()!;
    if (heap.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && before(heap[right]!, heap[left]!) ? right : left;
      if (!before(heap[child]!, last)) break;
      heap[i] = heap[child]!;
      i = child;
    }
    heap[i] = last;
    return top;
  }
}

/** One budget of counters (configured limits', or ad-hoc ones'): each workspace's counters, and its quota of them. */
type Budget = { readonly workspaces: Map<string, WorkspaceCounters>; readonly quota: number };

/** Counters in this process's memory: for one process, or when REDIS_URL is not set. */
export class MemoryRateLimiter implements RateLimiter {
  readonly kind = "memory";
  private readonly configured: Budget;
  private readonly adHoc: Budget;
  private readonly sweeper: NodeJS.Timeout;

  constructor(sweepEveryMs = 60_000, quotas: number | CounterQuotas = DEFAULT_COUNTER_QUOTAS) {
    const { configured, adHoc } = quotasOf(quotas);
    this.configured = { workspaces: new Map(), quota: configured };
    this.adHoc = { workspaces: new Map(), quota: adHoc };
    this.sweeper = setInterval(() => this.sweep(Date.now()), sweepEveryMs);
    this.sweeper.unref();
  }

  /** Live counters held, in all workspaces or in one; in both budgets, or in one ("configured" or "adHoc"). */
  size(workspaceId?: string, budget?: "configured" | "adHoc"): number {
    let total = 0;
    for (const b of budget === undefined ? [this.configured, this.adHoc] : [this[budget]]) {
      if (workspaceId !== undefined) total += b.workspaces.get(workspaceId)?.byId.size ?? 0;
      else for (const ws of b.workspaces.values()) total += ws.byId.size;
    }
    return total;
  }

  async check(checks: LimitCheck[], now = Date.now()): Promise<LimitOutcome[]> {
    const ids = checks.map((c) => counterId(c, windowOf(c.duration, now).window));
    const currents = checks.map((c, i) => this.budgetOf(c).workspaces.get(c.workspaceId)?.byId.get(ids[i]!)?.count ?? 0);
    const { all, outcomes } = decide(checks, currents, now);
    if (all) this.charge(checks, ids, now);
    return outcomes;
  }

  private budgetOf(c: LimitCheck): Budget {
    return c.adHoc === true ? this.adHoc : this.configured;
  }

  /**
   * Charges every check. Memory is bounded per workspace and budget whatever callers send (verifyKey accepts ad-hoc
   * limits from anyone holding a key): a workspace that would exceed a budget's quota with the counters this call
   * creates in it first drops its expired counters there, then evicts its soonest-expiring (then oldest) ones of
   * that budget, which count from zero again. Another workspace's counters, and the other budget's, are never
   * touched; a counter this call charges that has to go is created again.
   */
  private charge(checks: LimitCheck[], ids: string[], now: number) {
    const charged = checks.flatMap((c, i) => (c.cost > 0 ? [Object.assign({}, c, { id: ids[i]! })] : []));
    for (const budget of [this.configured, this.adHoc]) {
      const inBudget = charged.filter((c) => this.budgetOf(c) === budget);
      for (const workspaceId of new Set(inBudget.map((c) => c.workspaceId))) {
        const ws = workspaceOf(budget, workspaceId);
        const mine = inBudget.filter((c) => c.workspaceId === workspaceId);
        const ours = new Set(mine.map((c) => c.id));
        ws.dropExpired(now);
        let needed = mine.filter((c) => !ws.byId.has(c.id)).length;
        while (needed > 0 && ws.byId.size > 0 && ws.byId.size + needed > budget.quota) {
          // An evicted counter of this call is created again below, so it needs room too.
          if (ours.has(ws.evictSoonestExpiring()!.id)) needed++;
        }
        for (const c of mine) {
          const counter = ws.byId.get(c.id);
          if (counter) counter.count += c.cost;
          else ws.create(c.id, c.cost, windowOf(c.duration, now).reset);
        }
      }
    }
  }

  private sweep(now: number) {
    for (const budget of [this.configured, this.adHoc]) {
      for (const [workspaceId, ws] of budget.workspaces) {
        ws.dropExpired(now);
        if (ws.byId.size === 0) budget.workspaces.delete(workspaceId);
      }
    }
  }

  async close() {
    clearInterval(this.sweeper);
  }
}

function workspaceOf(budget: Budget, workspaceId: string): WorkspaceCounters {
  let ws = budget.workspaces.get(workspaceId);
  if (!ws) budget.workspaces.set(workspaceId, (ws = new WorkspaceCounters()));
  return ws;
}
