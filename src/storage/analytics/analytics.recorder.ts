import { createHash } from "node:crypto";
import type { Db } from "../client.js";
import { findDependencyFailure } from "../dependency.js";
import { DAY_MS, deleteVerificationCountsBefore, upsertVerificationCounts, type VerificationCountRow } from "./analytics.repository.js";

const HOUR_MS = 3_600_000;
/** How often the counts in memory are written to the database. */
export const ANALYTICS_FLUSH_INTERVAL_MS = 1000;
/** Distinct tag sets counted per key and hour (per process); further ones are counted under OVERFLOW_TAGS. */
export const MAX_TAG_SETS_PER_KEY_HOUR = 100;
/** A tag set no request can send (no tag may be empty): where tag sets beyond the bound are counted. */
export const OVERFLOW_TAGS: readonly string[] = Object.freeze([""]);
/**
 * Counts written per statement on the embedded store. A flush of more writes them in several, one after the other,
 * letting the event loop serve requests in between: there a statement runs on keyhaven's own thread, and one second
 * of verifications of 2,400 distinct keys (2,400 new counts) took it 90-150 ms in one statement (issue 13, the tail
 * latency of random keys on PGlite: docs/benchmarks.md).
 */
export const ANALYTICS_ROWS_PER_STATEMENT = 200;
/**
 * Counts written per statement on PostgreSQL, where a statement runs in PostgreSQL's process, not on keyhaven's
 * thread: fewer, larger statements cost it less per count (random keys among 1,000,000: 2,000 rather than 200 per
 * statement, +3–6% verifications/s; docs/benchmarks.md).
 */
export const ANALYTICS_ROWS_PER_STATEMENT_POSTGRES = 2000;
/** Distinct counts (key, hour, outcome, tags) held in memory at most, e.g. while the database is unreachable. */
export const MAX_PENDING_ROWS = 100_000;
/**
 * Characters of tags the counts not yet written hold at most: a count of a further tag set is counted under
 * OVERFLOW_TAGS instead (the totals stay exact). v2 accepts 20 tags of 512 characters: without it, MAX_PENDING_ROWS
 * counts of such tag sets would hold some 2 GB while the database is unreachable.
 */
export const MAX_PENDING_TAG_CHARS = 8_000_000;
/**
 * Tag sets longer than this (characters, joined) are known in memory by a digest instead of their text (the bound
 * of distinct tag sets per key and hour, and the id of their count), so that what is kept per tag set stays small.
 */
const DIGEST_TAG_SETS_LONGER_THAN = 128;
/**
 * Statements one flush may spend, beyond one per chunk, finding which counts a refused statement could not write:
 * a statement the database refuses (an error of the statement, not an outage) is split in halves, written again,
 * and so on down to the refused counts, so that one count the database will not take never holds back the others.
 * Isolating one count among 2,000 takes 22; what the budget leaves untried waits for the next flush.
 */
export const ISOLATING_STATEMENTS_PER_FLUSH = 32;
/**
 * Flushes in which a count may be refused on its own (in a statement of that count alone) before it is dropped
 * and logged: kept until then for the next flush, in case what refused it was passing.
 */
export const MAX_REFUSALS_PER_COUNT = 3;

/**
 * A count in memory with where it is kept: its hour and its id in that hour (key id, outcome and tags); `settled`
 * once a flush wrote it or set it aside (refused, or left untried).
 */
type PendingCount = { hourM: number; id: string; row: PendingRow; settled: boolean };
/** A count in memory: its row, and how many flushes refused it on its own. */
type PendingRow = VerificationCountRow & { refusals: number };
/** What a flush could not write: the counts refused on their own, those the isolating budget left, the error. */
type Unwritten = { refused: PendingCount[]; untried: PendingCount[]; error: unknown; statements: number; isolating: number };

type Logger = { info(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };

export type AnalyticsOptions = {
  /** Counts of hours that started more than this many days ago are deleted (KEYHAVEN_ANALYTICS_RETENTION_DAYS). */
  retentionDays: number;
  maxTagSetsPerKeyHour?: number;
  maxPendingRows?: number;
  maxPendingTagChars?: number;
  /** Counts written per statement (ANALYTICS_ROWS_PER_STATEMENT unless given). */
  rowsPerStatement?: number;
  /** How often expired counts are deleted (the first time when started). */
  cleanupIntervalMs?: number;
  /** The clock the retention is measured on (injectable, so a test need not wait days). */
  now?: () => number;
};

/**
 * Counts verification outcomes in process memory and writes them to `verification_counts` about once a second
 * and when the app closes. Recording is synchronous and cheap: one map lookup and an increment per verification,
 * never a query, so it adds nothing measurable to keys.verifyKey. A failed write keeps its counts for the next one;
 * a count the database refuses holds back no other (flush).
 *
 * What callers control is bounded: a key gets at most `maxTagSetsPerKeyHour` distinct tag sets per hour in this
 * process (more are counted under OVERFLOW_TAGS), memory holds at most `maxPendingRows` distinct counts (beyond,
 * new ones are dropped and logged, while existing ones keep counting), and counts older than the retention are
 * deleted in the background.
 */
export class VerificationAnalytics {
  /** Hour (unix ms) → key id, outcome and tags → the count so far. */
  private pending = new Map<number, Map<string, PendingRow>>();
  private pendingRows = 0;
  /** Characters of tags the pending counts hold. */
  private pendingTagChars = 0;
  /** Hour → key id → the tag sets (joined) this process has counted for it: the bound of distinct tag sets. */
  private tagSets = new Map<number, Map<string, Set<string>>>();
  /** Verifications not counted because memory was full, since the last successful write. */
  private dropped = 0;
  private flushTimer: NodeJS.Timeout | undefined;
  private cleanupTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  /** Verifications in the counts a flush is writing now (out of `pending` until it ends). */
  private writing = 0;
  private log: Logger = { info: () => {}, warn: () => {}, error: () => {} };
  private readonly maxTagSets: number;
  private readonly maxPendingRows: number;
  private readonly maxPendingTagChars: number;
  readonly rowsPerStatement: number;
  private readonly cleanupIntervalMs: number;
  private readonly now: () => number;
  readonly retentionDays: number;

  constructor(
    private readonly db: Db,
    readonly enabled: boolean,
    options: AnalyticsOptions,
  ) {
    this.retentionDays = options.retentionDays;
    this.maxTagSets = options.maxTagSetsPerKeyHour ?? MAX_TAG_SETS_PER_KEY_HOUR;
    this.maxPendingRows = options.maxPendingRows ?? MAX_PENDING_ROWS;
    this.maxPendingTagChars = options.maxPendingTagChars ?? MAX_PENDING_TAG_CHARS;
    this.rowsPerStatement = options.rowsPerStatement ?? ANALYTICS_ROWS_PER_STATEMENT;
    this.cleanupIntervalMs = options.cleanupIntervalMs ?? HOUR_MS;
    this.now = options.now ?? Date.now;
  }

  /**
   * Counts one verification of an existing key (v1 counts only those). Its workspace and API are stored with the
   * count, so the count stays even if the key is deleted permanently before it is written. `tags` are kept as
   * sent, up to the bound of distinct tag sets; `at` is unix ms. The count sums the credits the verifications spent
   * and the ms they took (`latency`), for the aggregates' spent_credits and latency_avg.
   */
  record(
    key: { keyId: string; workspaceId: string; apiId: string; identityId: string | undefined },
    outcome: string,
    tags: string[] | undefined,
    at: number,
    spentCredits = 0,
    latency = 0,
  ): void {
    if (!this.enabled) return;
    const hourM = at - (at % HOUR_MS);
    let hour = this.pending.get(hourM);
    if (hour === undefined) this.pending.set(hourM, (hour = new Map()));
    // NUL never occurs in a key id, code or tag (the JSON body parser refuses it), so it separates them safely.
    const keyed = `${key.keyId}\u0000${outcome}`;
    let counted: readonly string[] = [];
    let id = keyed;
    if (tags !== undefined && tags.length > 0) {
      const tagSet = this.boundTags(key.keyId, hourM, tags);
      counted = tagSet === OVERFLOW_ID ? OVERFLOW_TAGS : tags;
      id = `${keyed}\u0000${tagSet}`;
    }
    let row = hour.get(id);
    if (row === undefined && counted !== OVERFLOW_TAGS && this.pendingTagChars + charsOf(counted) > this.maxPendingTagChars) {
      counted = OVERFLOW_TAGS;
      id = `${keyed}\u0000${OVERFLOW_ID}`;
      row = hour.get(id);
    }
    if (row !== undefined) {
      row.count++;
      row.spent_credits += spentCredits;
      row.latency_sum += latency;
      row.identity_id = key.identityId ?? null;
      return;
    }
    if (this.pendingRows >= this.maxPendingRows) {
      this.drop(1);
      return;
    }
    this.pendingRows++;
    this.pendingTagChars += charsOf(counted);
    hour.set(id, {
      key_id: key.keyId,
      workspace_id: key.workspaceId,
      api_id: key.apiId,
      hour_m: hourM,
      outcome,
      tags: [...counted],
      identity_id: key.identityId ?? null,
      count: 1,
      spent_credits: spentCredits,
      latency_sum: latency,
      refusals: 0,
    });
  }

  /**
   * The id of the tag set to count: the tags as sent (joined, or a digest of them when long) while the key has fewer
   * than the bound of distinct tag sets this hour, else OVERFLOW_ID (count them under OVERFLOW_TAGS).
   */
  private boundTags(keyId: string, hourM: number, tags: string[]): string {
    let hour = this.tagSets.get(hourM);
    if (hour === undefined) {
      // Verifications are recorded as they happen, so only this hour and the one before can still grow.
      for (const h of this.tagSets.keys()) if (h < hourM - HOUR_MS) this.tagSets.delete(h);
      this.tagSets.set(hourM, (hour = new Map()));
    }
    let seen = hour.get(keyId);
    if (seen === undefined) hour.set(keyId, (seen = new Set()));
    const tagSet = tagSetId(tags);
    if (seen.has(tagSet)) return tagSet;
    if (seen.size >= this.maxTagSets) return OVERFLOW_ID;
    seen.add(tagSet);
    return tagSet;
  }

  private drop(count: number): void {
    if (this.dropped === 0) {
      this.log.warn(
        { maxPendingRows: this.maxPendingRows },
        "verification counts held in memory reached their bound (is the database unreachable?); new counts are dropped until a write succeeds",
      );
    }
    this.dropped += count;
  }

  /** Verifications counted and not yet written. */
  get unwritten(): number {
    let n = 0;
    for (const hour of this.pending.values()) for (const row of hour.values()) n += row.count;
    return n;
  }

  /** Verifications counted and not known to be written: in memory, or in a flush still unanswered (shutdown's log). */
  get notWritten(): number {
    return this.unwritten + this.writing;
  }

  /** Starts writing the counts every second (when enabled) and deleting expired ones every cleanup interval. */
  start(log?: Logger): void {
    if (log) this.log = log;
    if (this.enabled && !this.flushTimer) {
      this.flushTimer = setInterval(() => {
        this.flush().catch((err) => {
          // An outage is logged once per change of state by the store (dependency.ts), not at every flush.
          if (!findDependencyFailure(err)) this.log.error({ err }, "writing verification counts failed; kept for the next try");
        });
      }, ANALYTICS_FLUSH_INTERVAL_MS);
      this.flushTimer.unref();
    }
    if (!this.cleanupTimer) {
      const cleanup = () => {
        this.deleteExpired().catch((err) => {
          if (!findDependencyFailure(err)) this.log.error({ err }, "deleting expired verification counts failed");
        });
      };
      this.cleanupTimer = setInterval(cleanup, this.cleanupIntervalMs);
      this.cleanupTimer.unref();
      cleanup();
    }
  }

  /** Deletes the counts of hours that started before the retention window; returns how many rows went. */
  async deleteExpired(): Promise<number> {
    const deleted = await deleteVerificationCountsBefore(this.db, this.now() - this.retentionDays * DAY_MS);
    if (deleted > 0) this.log.info({ deleted, retentionDays: this.retentionDays }, "deleted expired verification counts");
    return deleted;
  }

  /** Stops the timers and writes what is left (called when the app closes, after the last request finished). */
  async stop(): Promise<void> {
    clearInterval(this.flushTimer);
    clearInterval(this.cleanupTimer);
    this.flushTimer = undefined;
    this.cleanupTimer = undefined;
    try {
      await this.flush();
    } catch (err) {
      this.log.error({ err, lost: this.unwritten }, "writing verification counts at shutdown failed");
      throw err;
    }
  }

  /**
   * Writes every count in memory, `rowsPerStatement` per statement (the ones written stay written). In an outage,
   * the counts of the failed statement and of those not sent yet are merged back for the next call. A statement
   * the database refuses is split until the counts it refuses are found (ISOLATING_STATEMENTS_PER_FLUSH): the
   * others are written, the refused ones kept for the next call, up to MAX_REFUSALS_PER_COUNT refusals each, then
   * dropped and logged. Throws the first error after writing what it could.
   */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing.catch(() => {});
    if (this.pending.size === 0) return;
    const batch = [...this.pending].flatMap(([hourM, hour]) => [...hour].map(([id, row]) => ({ hourM, id, row, settled: false })));
    this.pending = new Map();
    this.pendingRows = 0;
    this.pendingTagChars = 0;
    this.writing = batch.reduce((n, c) => n + c.row.count, 0);
    this.flushing = this.write(batch);
    try {
      await this.flushing;
    } finally {
      this.flushing = undefined;
      this.writing = 0;
    }
  }

  private async write(batch: PendingCount[]): Promise<void> {
    const unwritten: Unwritten = { refused: [], untried: [], error: undefined, statements: 0, isolating: ISOLATING_STATEMENTS_PER_FLUSH };
    for (let from = 0; from < batch.length; from += this.rowsPerStatement) {
      try {
        await this.writeIsolating(batch.slice(from, from + this.rowsPerStatement), unwritten);
      } catch (err) {
        // An outage: nothing more is tried; what this flush has not written waits for the next one.
        this.mergeBack(batch.slice(from).filter((c) => !c.settled));
        this.mergeBack(unwritten.untried);
        this.mergeBack(unwritten.refused);
        throw err;
      }
    }
    this.mergeBack(unwritten.untried);
    this.keepOrDropRefused(unwritten.refused);
    if (unwritten.error !== undefined) throw unwritten.error;
    if (this.dropped > 0) {
      this.log.warn({ dropped: this.dropped }, "verification counts are written again; some were dropped while memory was full");
      this.dropped = 0;
    }
  }

  /**
   * Writes `counts` in one statement. When the database refuses it (an error of the statement, not an outage, which
   * is thrown), writes each half the same way while the flush's isolating budget lasts: the counts refused on their
   * own and those left untried are collected in `unwritten`, the others are written.
   */
  private async writeIsolating(counts: PendingCount[], unwritten: Unwritten): Promise<void> {
    // The requests that arrived during the previous statement are served before the next one.
    if (unwritten.statements++ > 0) await new Promise((resolve) => setImmediate(resolve));
    try {
      await upsertVerificationCounts(
        this.db,
        counts.map((c) => c.row),
      );
    } catch (err) {
      if (findDependencyFailure(err)) throw err;
      unwritten.error ??= err;
      if (counts.length === 1) {
        counts[0]!.settled = true;
        unwritten.refused.push(counts[0]!);
      } else if (unwritten.isolating < 2) {
        for (const c of counts) c.settled = true;
        unwritten.untried.push(...counts);
      } else {
        unwritten.isolating -= 2;
        const half = Math.ceil(counts.length / 2);
        await this.writeIsolating(counts.slice(0, half), unwritten);
        await this.writeIsolating(counts.slice(half), unwritten);
      }
      return;
    }
    for (const c of counts) c.settled = true;
  }

  /** Counts the database refused on their own: kept for the next flush, dropped (and logged) after the bound. */
  private keepOrDropRefused(refused: readonly PendingCount[]): void {
    const kept: PendingCount[] = [];
    for (const c of refused) {
      c.row.refusals++;
      if (c.row.refusals < MAX_REFUSALS_PER_COUNT) {
        kept.push(c);
        continue;
      }
      // Which count, not its tags: they may be long, and are the caller's text.
      const { key_id: keyId, hour_m: hourM, outcome, count, tags } = c.row;
      this.log.error(
        { keyId, hourM, outcome, count, tags: tags.length, refusals: c.row.refusals },
        "the database refused a verification count in every try; dropped",
      );
    }
    this.mergeBack(kept);
  }

  /** Puts the counts of a failed write back, within the bound of rows held in memory. */
  private mergeBack(counts: readonly PendingCount[]): void {
    for (const { hourM, id, row } of counts) {
      let current = this.pending.get(hourM);
      if (!current) this.pending.set(hourM, (current = new Map()));
      const newer = current.get(id);
      if (newer) {
        newer.count += row.count;
        newer.spent_credits += row.spent_credits;
        newer.latency_sum += row.latency_sum;
        newer.refusals = Math.max(newer.refusals, row.refusals);
      } else if (this.pendingRows < this.maxPendingRows) {
        current.set(id, row);
        this.pendingRows++;
        this.pendingTagChars += charsOf(row.tags);
      } else {
        this.drop(row.count);
      }
    }
  }
}

/** OVERFLOW_TAGS' id among tag sets (its one tag, empty, joined): no tag set sent has it, since no tag is empty. */
const OVERFLOW_ID = "";

/**
 * A tag set's id in memory: its tags joined by NUL, or, when that is long, NUL and a SHA-256 digest of it (a joined
 * tag set never starts with NUL, since its first tag is not empty).
 */
function tagSetId(tags: readonly string[]): string {
  const joined = tags.join("\u0000");
  return joined.length > DIGEST_TAG_SETS_LONGER_THAN ? `\u0000${createHash("sha256").update(joined).digest("base64")}` : joined;
}

/** The characters of a tag set's tags. */
function charsOf(tags: readonly string[]): number {
  let n = 0;
  for (const tag of tags) n += tag.length;
  return n;
}
