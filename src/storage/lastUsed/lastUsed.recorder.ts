import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import type { Db } from "../client.js";
import { findDependencyFailure } from "../dependency.js";
import { deleteOrphanedLastUsed, type LastUsedRow, upsertLastUsed } from "./lastUsed.repository.js";

/**
 * How often the times in memory are written: what `lastUsedAt` may lag behind the last use (plus the write itself).
 * The same interval as the verification counts' (ANALYTICS_FLUSH_INTERVAL_MS).
 */
export const LAST_USED_FLUSH_INTERVAL_MS = 1000;
/** Keys (and, apart, root keys) whose time is held in memory at most, e.g. while the database is unreachable. */
export const MAX_PENDING_LAST_USED = 100_000;
/** Rows one statement of the sweep of orphaned times reads. */
const ORPHAN_SWEEP_CHUNK = 5000;
/** How often the times of keys and root keys that are gone are swept (also once when started). */
export const ORPHAN_SWEEP_INTERVAL_MS = 86_400_000;

type Logger = { warn(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };

export type LastUsedOptions = {
  /** Times written per statement: the verification counts' (ANALYTICS_ROWS_PER_STATEMENT…) suit them too. */
  rowsPerStatement: number;
  maxPending?: number;
};

/** One kind of id's latest uses not written yet: id → unix ms. */
class Pending {
  times = new Map<string, number>();
  /** Uses not kept because memory was full, since the last successful write. */
  dropped = 0;

  constructor(readonly max: number) {}

  /** One map lookup: the newer time wins. False when the use was not kept (memory full). */
  record(id: string, at: number): boolean {
    const had = this.times.get(id);
    if (had !== undefined) {
      if (at > had) this.times.set(id, at);
    } else if (this.times.size < this.max) {
      this.times.set(id, at);
    } else {
      this.dropped++;
      return false;
    }
    return true;
  }

  take(): LastUsedRow[] {
    const rows = [...this.times].map(([id, at]) => ({ id, at }));
    this.times = new Map();
    return rows;
  }

  mergeBack(rows: readonly LastUsedRow[]): void {
    for (const { id, at } of rows) this.record(id, at);
  }
}

/**
 * When each key was last verified and each root key last authenticated (issue 38 §1): kept in process memory, one
 * map lookup per use and never a query, and written about once a second (LAST_USED_FLUSH_INTERVAL_MS) and when the
 * app closes: per flush one upsert per `rowsPerStatement` keys used since the last one, however often each was used.
 * A time is never moved back (upsertLastUsed), so replicas writing the same key agree on the latest. Kept whether or
 * not analytics count (KEYHAVEN_ANALYTICS): it is a field of the key, not an analytic.
 *
 * A failed write keeps its times for the next flush (merged: the newer wins), within `maxPending` ids per kind;
 * beyond, uses of further ids are not kept (and logged) until a write succeeds.
 */
export class LastUsed {
  private readonly keys: Pending;
  private readonly rootKeys: Pending;
  private flushTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  /** Ids in the flush being written now (out of memory until it ends). */
  private writing = 0;
  private warnedFull = false;
  private log: Logger = { warn: () => {}, error: () => {} };
  private readonly rowsPerStatement: number;

  constructor(
    private readonly db: Db,
    options: LastUsedOptions,
  ) {
    this.rowsPerStatement = options.rowsPerStatement;
    this.keys = new Pending(options.maxPending ?? MAX_PENDING_LAST_USED);
    this.rootKeys = new Pending(options.maxPending ?? MAX_PENDING_LAST_USED);
  }

  /** A verification of the key `keyId` at `at` (unix ms). */
  key(keyId: string, at: number): void {
    if (!this.keys.record(keyId, at)) this.warnFull();
  }

  /** The root key `rootKeyId` authenticated at `at` (unix ms). */
  rootKey(rootKeyId: string, at: number): void {
    if (!this.rootKeys.record(rootKeyId, at)) this.warnFull();
  }

  /** Ids whose time is in memory, not written yet. */
  get unwritten(): number {
    return this.keys.times.size + this.rootKeys.times.size;
  }

  /** Ids whose time is not known to be written: in memory, or in a flush still unanswered (shutdown's log). */
  get notWritten(): number {
    return this.unwritten + this.writing;
  }

  private warnFull(): void {
    if (this.warnedFull) return;
    this.warnedFull = true;
    this.log.warn(
      { maxPending: this.keys.max },
      "last-used times held in memory reached their bound (is the database unreachable?); uses of further keys are not kept until a write succeeds",
    );
  }

  /** Writes the times every second, and sweeps those of deleted keys now and every day. */
  start(log?: Logger): void {
    if (log) this.log = log;
    if (!this.flushTimer) {
      this.flushTimer = setInterval(() => {
        this.flush().catch((err) => {
          // An outage is logged once per change of state by the store (dependency.ts), not at every flush.
          if (!findDependencyFailure(err)) this.log.error({ err }, "writing last-used times failed; kept for the next try");
        });
      }, LAST_USED_FLUSH_INTERVAL_MS);
      this.flushTimer.unref();
    }
    if (!this.sweepTimer) {
      const sweep = () => {
        this.deleteOrphans().catch((err) => {
          if (!findDependencyFailure(err)) this.log.error({ err }, "deleting the last-used times of deleted keys failed");
        });
      };
      this.sweepTimer = setInterval(sweep, ORPHAN_SWEEP_INTERVAL_MS);
      this.sweepTimer.unref();
      sweep();
    }
  }

  /** Deletes the times of keys and root keys that no longer exist; returns how many went. */
  deleteOrphans(): Promise<number> {
    return deleteOrphanedLastUsed(this.db, ORPHAN_SWEEP_CHUNK, () => yieldToEventLoop());
  }

  /** Stops the timers and writes what is left (when the app closes, after the last request). */
  async stop(): Promise<void> {
    clearInterval(this.flushTimer);
    clearInterval(this.sweepTimer);
    this.flushTimer = undefined;
    this.sweepTimer = undefined;
    await this.flush();
  }

  /**
   * Writes every time in memory, `rowsPerStatement` per statement, yielding to the event loop between statements.
   * What a failed statement and those after it held is merged back for the next call; throws that error.
   */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing.catch(() => {});
    if (this.keys.times.size === 0 && this.rootKeys.times.size === 0) return;
    this.flushing = this.write();
    try {
      await this.flushing;
    } finally {
      this.flushing = undefined;
    }
  }

  private async write(): Promise<void> {
    let statements = 0;
    for (const [of, pending] of [
      ["keys", this.keys],
      ["rootKeys", this.rootKeys],
    ] as const) {
      const rows = pending.take();
      for (let from = 0; from < rows.length; from += this.rowsPerStatement) {
        this.writing = rows.length - from;
        // The requests that arrived during the previous statement are served before the next one.
        if (statements++ > 0) await yieldToEventLoop();
        try {
          await upsertLastUsed(this.db, of, rows.slice(from, from + this.rowsPerStatement));
        } catch (err) {
          pending.mergeBack(rows.slice(from));
          throw err;
        } finally {
          this.writing = 0;
        }
      }
    }
    if (this.keys.dropped > 0 || this.rootKeys.dropped > 0) {
      this.log.warn(
        { dropped: this.keys.dropped + this.rootKeys.dropped },
        "last-used times are written again; some uses were not kept while memory was full",
      );
      this.keys.dropped = 0;
      this.rootKeys.dropped = 0;
    }
    this.warnedFull = false;
  }
}
