import { LRUCache } from "lru-cache";
import { sql } from "drizzle-orm";
import { bigint, pgTable, smallint } from "drizzle-orm/pg-core";
import { Coalescer } from "./coalescer.js";
import type { Db } from "./client.js";

// Created by the custom migration `verification_epoch` (with its triggers), so not part of the drizzle schema.
export const epochTable = pgTable("keyhaven_epoch", {
  shard: smallint("shard").primaryKey(),
  value: bigint("value", { mode: "bigint" }).notNull(),
});

/** The epoch as SQL text, for statements that read it next to other rows in one snapshot. */
export const epochSum = sql<string>`(select sum(${epochTable.value})::text from ${epochTable})`;

function epochQuery(db: Db) {
  return db
    .select({ epoch: sql<string>`sum(${epochTable.value})::text` })
    .from(epochTable)
    .prepare("keyhaven_epoch");
}

type Waiter = { resolve: (epoch: bigint) => void; reject: (err: unknown) => void };

/**
 * Reads the store's write epoch: the sum of `keyhaven_epoch`, to which every committed write that can change a
 * cached answer (a key's settings, a root key, a rate limit namespace or override, and what they depend on) adds 1
 * in its own transaction (triggers of migrations `verification_epoch` and `root_key_epoch`). The sum never shrinks.
 *
 * `current()` answers from a statement that starts after the call: a caller that arrives while a statement runs
 * waits for the next one, and everyone waiting then shares it. So under load one tiny query serves many requests,
 * and a write that committed before a request arrived is always reflected in the epoch that request gets.
 * One per process (services.ts), shared by every cache of that process.
 */
export class EpochReader {
  private readonly queue: Coalescer<Waiter>;

  constructor(db: Db) {
    const statement = epochQuery(db);
    this.queue = new Coalescer(
      async (batch) => {
        const [row] = await statement.execute();
        const epoch = BigInt(row?.epoch ?? "0");
        for (const w of batch) w.resolve(epoch);
      },
      (batch, err) => {
        for (const w of batch) w.reject(err);
      },
    );
  }

  current(): Promise<bigint> {
    return new Promise((resolve, reject) => this.queue.add({ resolve, reject }));
  }
}

/**
 * Values read from the database, kept in memory only while the epoch has not moved: an entry is stored with the
 * epoch that was read before it was loaded, and is used only by a caller holding that same epoch. A newer epoch
 * drops every entry; a caller holding an older one (its epoch read finished before another caller's) loads without
 * touching the cache. Absent values (`undefined`) are never cached, so a row created later is found at once.
 */
export class EpochCache<V extends {}> {
  /** Bounded: beyond `maxEntries`, the least recently used entries are dropped first. */
  private readonly entries: LRUCache<string, V>;
  private epoch = -1n;

  constructor(
    private readonly load: (key: string) => Promise<V | undefined>,
    maxEntries: number,
  ) {
    this.entries = new LRUCache({ max: maxEntries });
  }

  async get(key: string, epoch: bigint): Promise<V | undefined> {
    if (epoch > this.epoch) {
      this.entries.clear();
      this.epoch = epoch;
    }
    if (epoch === this.epoch) {
      const hit = this.entries.get(key);
      if (hit !== undefined) return hit;
    }
    const loaded = await this.load(key);
    // Only while the epoch is still the one read before the load: anything newer may have changed the row.
    if (loaded !== undefined && epoch === this.epoch) this.entries.set(key, loaded);
    return loaded;
  }

  get size(): number {
    return this.entries.size;
  }
}
