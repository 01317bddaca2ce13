import { sql } from "drizzle-orm";
import { Coalescer } from "./coalescer.js";
import type { Db, WriteCount } from "./client.js";
import { epochTable, InvalidationTracker, TaggedEntries } from "./invalidations.js";

export { epochTable };

/** The epoch in the snapshot of the statement it is part of, as a number (a statement's condition on it). */
export const epochNow = sql`(select coalesce(sum(${epochTable.value}), 0) from ${epochTable})`;

/** The epoch as SQL text, for statements that read it next to other rows in one snapshot. */
export const epochSum = sql<string>`(${epochNow})::text`;

type Waiter = { resolve: (epoch: bigint) => void; reject: (err: unknown) => void };

/**
 * Reads the store's write epoch: the sum of `keyhaven_epoch`, to which every committed write that can change a
 * cached answer (a key's settings, a root key, a rate limit namespace or override, and what they depend on) adds 1
 * in its own transaction (triggers of migrations `verification_epoch` and `root_key_epoch`). The sum never shrinks.
 *
 * `current()` answers from a statement that starts after the call: a caller that arrives while a statement runs
 * waits for the next one, and everyone waiting then shares it. So under load one tiny query serves many requests,
 * and a write that committed before a request arrived is always reflected in the epoch that request gets.
 * One per process (services.ts), shared by every cache of that process, as is its `invalidations`: what moved the
 * epoch, applied to those caches (invalidations.ts), so that a write drops only the entries it can change.
 */
export class EpochReader {
  private readonly queue: Coalescer<Waiter>;
  readonly invalidations: InvalidationTracker;

  /**
   * `writes`: the embedded store's count of finished writes (Store.writes), with which `current()` answers without a
   * statement while nothing was written since the last epoch read (InvalidationTracker.epochIfUnwritten).
   */
  constructor(db: Db, writes?: WriteCount) {
    this.invalidations = new InvalidationTracker(db, writes);
    this.queue = new Coalescer(
      async (batch) => {
        // Applies what moved the epoch, if it moved, before anyone holding it answers from memory.
        const epoch = await this.invalidations.readEpoch();
        for (const w of batch) w.resolve(epoch);
      },
      (batch, err) => {
        for (const w of batch) w.reject(err);
      },
    );
  }

  current(): Promise<bigint> {
    const unwritten = this.invalidations.epochIfUnwritten();
    if (unwritten !== undefined) return Promise.resolve(unwritten);
    return new Promise((resolve, reject) => this.queue.add({ resolve, reject }));
  }
}

/** How an EpochCache follows the invalidation log: the process's tracker, and the tags of what a value was read from. */
export type EpochCacheTags<V> = { tracker: InvalidationTracker; tagsOf: (value: V, key: string) => readonly string[] };

/**
 * Values read from the database, kept in memory without answering from stale data. An entry is used only by a caller
 * holding an epoch read after it arrived, and only once the tracker has applied every change that epoch sees: those
 * changes drop the entries carrying their tags (`tagsOf`), the rest stay. A value is stored only when the epoch read
 * before its load is not older than what the tracker applied (else the load may predate a change already applied).
 * Absent values (`undefined`) are never cached, so a row created later is found at once.
 *
 * Without `tags` (a cache nothing invalidates by tag), a newer epoch drops every entry, and a caller holding an older
 * one loads without touching the cache.
 */
export class EpochCache<V extends {}> {
  /** Bounded: beyond `maxEntries`, the least recently used entries are dropped first. */
  private readonly entries: TaggedEntries<V>;
  private epoch = -1n;
  /** Values read from the database (what the tests of invalidation count). */
  loads = 0;

  constructor(
    private readonly load: (key: string) => Promise<V | undefined>,
    maxEntries: number,
    private readonly tags?: EpochCacheTags<V>,
  ) {
    this.entries = new TaggedEntries(maxEntries);
    tags?.tracker.register(this.entries);
  }

  async get(key: string, epoch: bigint): Promise<V | undefined> {
    if (this.tags) return this.getTagged(key, epoch, this.tags);
    if (epoch > this.epoch) {
      this.entries.clear();
      this.epoch = epoch;
    }
    if (epoch === this.epoch) {
      const hit = this.entries.get(key);
      if (hit !== undefined) return hit;
    }
    const loaded = await this.load(key);
    this.loads++;
    // Only while the epoch is still the one read before the load: anything newer may have changed the row.
    if (loaded !== undefined && epoch === this.epoch) this.entries.set(key, loaded, []);
    return loaded;
  }

  private async getTagged(key: string, epoch: bigint, tags: EpochCacheTags<V>): Promise<V | undefined> {
    if (epoch > tags.tracker.applied) await tags.tracker.reach(epoch);
    const hit = this.entries.get(key);
    if (hit !== undefined) return hit;
    const loaded = await this.load(key);
    this.loads++;
    if (loaded !== undefined && epoch >= tags.tracker.applied) this.entries.set(key, loaded, tags.tagsOf(loaded, key));
    return loaded;
  }

  /**
   * The entry in memory, without reading the epoch: exact as of the last catch-up, perhaps not as of now. Only for a
   * caller that re-checks it where it matters (rootKeys.authenticator.ts, `authorizeWrite`); undefined for a cache
   * without tags, whose entries may predate a change it has not applied.
   */
  peek(key: string): V | undefined {
    return this.tags ? this.entries.get(key) : undefined;
  }

  get size(): number {
    return this.entries.size;
  }
}
