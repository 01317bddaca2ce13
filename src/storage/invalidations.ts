import { LRUCache } from "lru-cache";
import { sql } from "drizzle-orm";
import { bigint, pgTable, smallint } from "drizzle-orm/pg-core";
import { Coalescer } from "./coalescer.js";
import { type Db, rowsOf, type WriteCount } from "./client.js";

/** The tag of a write that may have changed anything (a bulk write, a table without its own tags). */
export const EVERYTHING = "*";
/** More rows than this in one catch-up, and the caches are emptied instead of read row by row. */
export const MAX_INVALIDATIONS_PER_CATCH_UP = 1_000;

/** A cache whose entries carry tags; the tracker drops the entries of the tags a write logged. */
export interface Invalidatable {
  dropTagged(tags: ReadonlySet<string>): void;
  clear(): void;
}

/**
 * A tag as TaggedEntries knows it: how many times it was dropped (`generation`) and how many entries in memory carry
 * it (`entries`: the tag is forgotten with its last entry).
 */
type TagCell = { readonly tag: string; generation: number; entries: number };
/** An entry with its tags' cells and the sum of their generations when it was stored (see TaggedEntries). */
type TaggedEntry<V> = { readonly value: V; readonly cells: readonly TagCell[]; readonly stamp: number };

/** The sum of the cells' generations: it grows exactly when one of them is dropped, since generations only grow. */
function generationSum(cells: readonly TagCell[]): number {
  let sum = 0;
  for (const cell of cells) sum += cell.generation;
  return sum;
}

/** Whether one of the entry's tags was dropped since it was stored. */
function isStale(entry: TaggedEntry<unknown>): boolean {
  return generationSum(entry.cells) !== entry.stamp;
}

/**
 * Entries with tags (what their value was read from: `key:<id>`, `ws:<id>`…), least recently used dropped first
 * beyond `max`. `dropTagged` drops every entry carrying one of the tags.
 *
 * Dropping costs the same whatever the number of entries a tag carries: it counts one more generation for the tag,
 * and an entry stored under an older generation of one of its tags is stale, found so (and removed) when it is next
 * read, by `get` or `has` (`size` counts it out). Dropping entries one by one, an `api:` or `ws:` tag of 50,000 cached keys held the
 * event loop 86–106 ms on every replica at each write to that API or workspace (issue 13; docs/operations.md).
 */
export class TaggedEntries<V extends {}> implements Invalidatable {
  private readonly entries: LRUCache<string, TaggedEntry<V>>;
  /** The cells of the tags that entries in memory carry. */
  private cells = new Map<string, TagCell>();
  /** Whether a drop may have left stale entries, which `size` must not count. */
  private dropped = false;

  constructor(max: number) {
    this.entries = new LRUCache({ max, dispose: (entry) => this.release(entry.cells) });
  }

  get(key: string): V | undefined {
    return this.fresh(key, this.entries.get(key))?.value;
  }

  /** Whether the key is in memory and current (without making it more recently used). */
  has(key: string): boolean {
    return this.fresh(key, this.entries.peek(key)) !== undefined;
  }

  set(key: string, value: V, tags: readonly string[]): void {
    const cells: TagCell[] = [];
    for (const tag of tags) {
      let cell = this.cells.get(tag);
      if (cell === undefined) {
        cell = { tag, generation: 0, entries: 0 };
        this.cells.set(tag, cell);
      }
      cell.entries++;
      cells.push(cell);
    }
    this.entries.set(key, { value, cells, stamp: generationSum(cells) });
  }

  dropTagged(tags: ReadonlySet<string>): void {
    for (const tag of tags) {
      const cell = this.cells.get(tag);
      if (cell === undefined) continue;
      cell.generation++;
      this.dropped = true;
    }
  }

  clear(): void {
    // New cells first: the entries' dispose then releases only the old ones.
    this.cells = new Map();
    this.entries.clear();
    this.dropped = false;
  }

  /**
   * Entries in memory that no drop made stale: after a drop, counted one by one (only the tests ask). Stale entries
   * keep their place until read or evicted, as least recently used as when they were last read.
   */
  get size(): number {
    if (!this.dropped) return this.entries.size;
    let live = 0;
    for (const entry of this.entries.values()) if (!isStale(entry)) live++;
    return live;
  }

  /** Tags of the entries in memory, stale ones included until they are removed (what the tests of eviction count). */
  get tagsHeld(): number {
    return this.cells.size;
  }

  /** The entry found under `key`, unless a drop made it stale: then it is removed. */
  private fresh(key: string, entry: TaggedEntry<V> | undefined): TaggedEntry<V> | undefined {
    if (entry === undefined || !isStale(entry)) return entry;
    this.entries.delete(key);
    return undefined;
  }

  private release(cells: readonly TagCell[]): void {
    for (const cell of cells) {
      // A tag no entry carries is forgotten (unless clear() replaced its map meanwhile: the map holds another cell).
      if (--cell.entries === 0 && this.cells.get(cell.tag) === cell) this.cells.delete(cell.tag);
    }
  }
}

// Created by the custom migration `verification_epoch` (with its triggers), so not part of the drizzle schema.
export const epochTable = pgTable("keyhaven_epoch", {
  shard: smallint("shard").primaryKey(),
  value: bigint("value", { mode: "bigint" }).notNull(),
});

type CatchUpRow = { epoch: string | null; snapshot: string | null; pruned: boolean | null; tags: string[] | null };

type Waiter = { resolve: () => void; reject: (err: unknown) => void };

export type InvalidationStats = {
  /** Statements that read the epoch (the embedded store skips them while nothing was written: epochIfUnwritten). */
  reads: number;
  /** Catch-ups applied (the epoch had moved since the last one). */
  catchUps: number;
  /** Tags dropped from the caches, one per logged row read. */
  tagsApplied: number;
  /** Times every cache was emptied: first read, log pruned past the last read, too many rows, or a `*` row. */
  clearedAll: number;
};

/**
 * The epoch and, when it moved past `applied`, what to catch up in the same snapshot: that snapshot (to catch up from
 * next time), whether pruning may have deleted rows `prev` needed, and the tags of every transaction it sees that
 * `prev` did not (pg_visible_in_snapshot: an older xid that committed after `prev` is read too). `pruned`: pruning
 * deleted rows up to `through`, and one of them may be of a transaction `prev` did not see (at or above its xmax, or
 * in progress then). One prepared statement, the epoch read of every request: when nothing moved it reads the epoch
 * only (CASE runs no subquery of a branch not taken).
 */
function prepareEpochRead(db: Db) {
  const moved = sql`sum(${epochTable.value}) > ${sql.placeholder("applied")}::bigint`;
  const prev = sql`${sql.placeholder("prev")}::pg_snapshot`;
  return db
    .select({
      epoch: sql<string | null>`sum(${epochTable.value})::text`,
      snapshot: sql<string | null>`case when ${moved} then pg_current_snapshot()::text end`,
      pruned: sql<boolean | null>`case when ${moved} then (select p.through >= pg_snapshot_xmax(${prev})
          or exists (select 1 from pg_snapshot_xip(${prev}) x where x <= p.through)
        from keyhaven_invalidations_pruned p where p.id = 0) end`,
      // `order by xid` makes the xid index the plan even as a generic plan (postgres.js's named statements after
      // five runs), which estimates a third of the log for `xid >= $1` and scanned all of it otherwise: every
      // catch-up read the whole log, ten minutes of writes (issue 13 §1).
      tags: sql<string[] | null>`case when ${moved} then array(select tag from keyhaven_invalidations
          where xid >= pg_snapshot_xmin(${prev}) and not pg_visible_in_snapshot(xid, ${prev})
          order by xid limit ${sql.placeholder("rows")}) end`,
    })
    .from(epochTable)
    .prepare("keyhaven_epoch");
}

/**
 * Applies the invalidation log (migration `invalidation_log`) to this process's caches. One per process, owned by its
 * EpochReader (so shared by every cache that reads the epoch); its `readEpoch` is that reader's statement, so a
 * request that finds the epoch moved gets what moved it in the same round trip.
 *
 * `applied` is the epoch as of which every logged change has been applied: its snapshot is the one the log was last
 * read in. Snapshots of one PostgreSQL are ordered (a transaction visible to one is visible to every later one) and
 * the epoch counts the epoch-moving transactions a snapshot sees, so an epoch ≤ `applied` means "nothing that
 * snapshot sees is still unapplied": entries in memory then answer a request whose epoch was read after it arrived.
 * A cache stores a value read at epoch `e` only while `e ≥ applied` (the value saw everything applied), and every
 * later catch-up drops what it may have missed. A catch-up read from an older `prev` than the latest applied one
 * (two statements in flight) only drops more than needed; one whose epoch is not newer than `applied` is ignored.
 */
export class InvalidationTracker {
  applied = -1n;
  readonly stats: InvalidationStats = { reads: 0, catchUps: 0, tagsApplied: 0, clearedAll: 0 };
  /** pg_current_snapshot() of the last catch-up; null before the first (nothing to catch up from: empty all). */
  private snapshot: string | null = null;
  private readonly caches: Invalidatable[] = [];
  private readonly queue: Coalescer<Waiter>;
  private readonly statement: ReturnType<typeof prepareEpochRead>;
  /** With `writes`: the newest epoch read, and the count of finished writes before that read started. */
  private lastRead: { epoch: bigint; writes: number } | undefined;

  /**
   * `writes`: the embedded store's count of finished writes (Store.writes); without it (PostgreSQL, other writers),
   * `epochIfUnwritten` never answers.
   */
  constructor(
    db: Db,
    private readonly writes?: WriteCount,
    private readonly maxRows = MAX_INVALIDATIONS_PER_CATCH_UP,
  ) {
    this.statement = prepareEpochRead(db);
    this.queue = new Coalescer(
      async (batch) => {
        await this.readEpoch();
        for (const w of batch) w.resolve();
      },
      (batch, err) => {
        for (const w of batch) w.reject(err);
      },
    );
  }

  register(cache: Invalidatable): void {
    this.caches.push(cache);
  }

  /**
   * Resolves once every change that a statement reading `epoch` could see has been applied (at once when it already
   * is). The catch-up statement starts after the call, so it sees all of them; callers that arrive together share it.
   */
  reach(epoch: bigint): Promise<void> {
    if (epoch <= this.applied) return Promise.resolve();
    return new Promise((resolve, reject) => this.queue.add({ resolve, reject }));
  }

  /** Reads the epoch, and applies what moved it since the last catch-up before answering it. */
  async readEpoch(): Promise<bigint> {
    const prev = this.snapshot;
    const writesBefore = this.writes?.value;
    this.stats.reads++;
    const [row] = await this.statement.execute({ applied: this.applied.toString(), prev, rows: this.maxRows + 1 });
    if (!row) throw new Error("the epoch read returned no row");
    const epoch = BigInt(row.epoch ?? "0");
    if (row.snapshot !== null && epoch > this.applied) this.apply(prev, row, epoch);
    if (writesBefore !== undefined && epoch >= (this.lastRead?.epoch ?? -1n)) this.lastRead = { epoch, writes: writesBefore };
    return epoch;
  }

  /**
   * The epoch, without a statement, when the store's count of finished writes still stands where it stood before the
   * last read started: every commit counts when it finishes, so none has happened since, and that read's epoch (whose
   * changes it applied) is the epoch now. Undefined otherwise, and always without `writes`.
   */
  epochIfUnwritten(): bigint | undefined {
    const last = this.lastRead;
    return last !== undefined && last.writes === this.writes?.value ? last.epoch : undefined;
  }

  private apply(prev: string | null, row: CatchUpRow, epoch: bigint): void {
    this.stats.catchUps++;
    const tags = row.tags ?? [];
    if (prev === null || row.pruned !== false || tags.length > this.maxRows || tags.includes(EVERYTHING)) {
      for (const cache of this.caches) cache.clear();
      this.stats.clearedAll++;
    } else if (tags.length > 0) {
      const dropped = new Set(tags);
      for (const cache of this.caches) cache.dropTagged(dropped);
      this.stats.tagsApplied += tags.length;
    }
    this.snapshot = row.snapshot;
    this.applied = epoch;
  }
}

/** Log rows older than this are pruned: a reader that has not caught up for longer empties its caches. */
export const INVALIDATION_RETENTION_MS = 10 * 60_000;
/** How often the pruner runs, and how many rows one of its statements deletes at most. */
export const INVALIDATION_PRUNE_INTERVAL_MS = 60_000;
const PRUNE_BATCH_ROWS = 10_000;
const PRUNE_MAX_BATCHES = 10;

/**
 * Deletes up to `maxRows` log rows written more than `olderThanMs` ago (database time: the log's own bookkeeping,
 * not business time) and records the greatest transaction id deleted, so that a reader whose last snapshot still
 * needed one of them knows it cannot catch up. Returns how many rows it deleted.
 */
export async function pruneInvalidations(db: Db, olderThanMs: number, maxRows = PRUNE_BATCH_ROWS): Promise<number> {
  const [row] = rowsOf<{ deleted: number | string }>(
    await db.execute(sql`with gone as (
        delete from keyhaven_invalidations where ctid = any(array(
          select ctid from keyhaven_invalidations
          where at < clock_timestamp() - make_interval(secs => ${olderThanMs / 1000}::double precision)
          limit ${maxRows}))
        returning xid),
      moved as (
        update keyhaven_invalidations_pruned set through = greatest(through, (select max(xid) from gone))
        where id = 0 and exists (select 1 from gone) returning 1)
      select (select count(*) from gone)::int as deleted, (select count(*) from moved)::int as moved`),
  );
  return Number(row?.deleted ?? 0);
}

type Logger = { warn(obj: unknown, msg?: string): void };

/**
 * Prunes the invalidation log in the background: every minute, rows older than ten minutes, in bounded statements
 * (each one has the store's statement deadline on PostgreSQL), at most a bounded number per run and none started
 * after the run's deadline. The same on PGlite: the embedded store is one process, but its log grows all the same. One per process
 * (services.ts); several replicas pruning at once only delete fewer rows each.
 */
export class InvalidationPruner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly db: Db,
    private readonly options: { retentionMs: number; intervalMs: number } = {
      retentionMs: INVALIDATION_RETENTION_MS,
      intervalMs: INVALIDATION_PRUNE_INTERVAL_MS,
    },
  ) {}

  start(log: Logger): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = this.pruneNow()
        .then(() => undefined)
        .catch((err: unknown) => log.warn({ err }, "pruning the invalidation log failed; retrying at the next interval"))
        .finally(() => {
          this.running = undefined;
        });
    }, this.options.intervalMs);
    this.timer.unref();
  }

  /**
   * Prunes what is due now; returns how many rows it deleted. A run starts no further statement once half its
   * interval has passed (each statement is bounded by its rows, and on PostgreSQL by the statement deadline).
   */
  async pruneNow(): Promise<number> {
    let total = 0;
    const deadline = performance.now() + this.options.intervalMs / 2;
    for (let i = 0; i < PRUNE_MAX_BATCHES && performance.now() < deadline; i++) {
      const deleted = await pruneInvalidations(this.db, this.options.retentionMs, PRUNE_BATCH_ROWS);
      total += deleted;
      if (deleted < PRUNE_BATCH_ROWS) break;
    }
    return total;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
