import {
  counterId,
  DEFAULT_COUNTERS_PER_WORKSPACE,
  decide,
  type LimitCheck,
  type LimitOutcome,
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

/** Counters in this process's memory: for one process, or when REDIS_URL is not set. */
export class MemoryRateLimiter implements RateLimiter {
  readonly kind = "memory";
  private readonly workspaces = new Map<string, WorkspaceCounters>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    sweepEveryMs = 60_000,
    private readonly countersPerWorkspace = DEFAULT_COUNTERS_PER_WORKSPACE,
  ) {
    this.sweeper = setInterval(() => this.sweep(Date.now()), sweepEveryMs);
    this.sweeper.unref();
  }

  /** Live counters held, in all workspaces or in one. */
  size(workspaceId?: string): number {
    if (workspaceId !== undefined) return this.workspaces.get(workspaceId)?.byId.size ?? 0;
    let total = 0;
    for (const ws of this.workspaces.values()) total += ws.byId.size;
    return total;
  }

  async check(checks: LimitCheck[], now = Date.now()): Promise<LimitOutcome[]> {
    const ids = checks.map((c) => counterId(c, windowOf(c.duration, now).window));
    const currents = checks.map((c, i) => this.workspaces.get(c.workspaceId)?.byId.get(ids[i]!)?.count ?? 0);
    const { all, outcomes } = decide(checks, currents, now);
    if (all) this.charge(checks, ids, now);
    return outcomes;
  }

  /**
   * Charges every check. Memory is bounded per workspace whatever callers send (verifyKey accepts ad-hoc limits
   * from anyone holding a key): a workspace that would exceed its quota with the counters this call creates first
   * drops its expired counters, then evicts its soonest-expiring (then oldest) ones, which count from zero again.
   * Another workspace's counters are never touched; a counter this call charges that has to go is created again.
   */
  private charge(checks: LimitCheck[], ids: string[], now: number) {
    const charged = checks.flatMap((c, i) => (c.cost > 0 ? [Object.assign({}, c, { id: ids[i]! })] : []));
    for (const workspaceId of new Set(charged.map((c) => c.workspaceId))) {
      const ws = this.workspaceOf(workspaceId);
      const mine = charged.filter((c) => c.workspaceId === workspaceId);
      const ours = new Set(mine.map((c) => c.id));
      ws.dropExpired(now);
      let needed = mine.filter((c) => !ws.byId.has(c.id)).length;
      while (needed > 0 && ws.byId.size > 0 && ws.byId.size + needed > this.countersPerWorkspace) {
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

  private workspaceOf(workspaceId: string): WorkspaceCounters {
    let ws = this.workspaces.get(workspaceId);
    if (!ws) this.workspaces.set(workspaceId, (ws = new WorkspaceCounters()));
    return ws;
  }

  private sweep(now: number) {
    for (const [workspaceId, ws] of this.workspaces) {
      ws.dropExpired(now);
      if (ws.byId.size === 0) this.workspaces.delete(workspaceId);
    }
  }

  async close() {
    clearInterval(this.sweeper);
  }
}
