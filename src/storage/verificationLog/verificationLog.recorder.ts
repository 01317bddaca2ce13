import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import type { Db } from "../client.js";
import { findDependencyFailure } from "../dependency.js";
import { insertVerificationLogRows, type VerificationLogRow } from "./verificationLog.repository.js";

/** How often the rows in memory are written: the verification counts' interval (ANALYTICS_FLUSH_INTERVAL_MS). */
export const VERIFICATION_LOG_FLUSH_INTERVAL_MS = 1000;
/**
 * Rows appended per statement on the embedded store, where a statement runs on keyhaven's own thread: a flush of more
 * writes them in several, serving the requests that arrived in between (as ANALYTICS_ROWS_PER_STATEMENT does for the
 * counts). An append cost the embedded store 20-40 µs a row (2,000 to 5,000 rows a statement, 2026-12-06), so a
 * statement of 250 holds the thread some 5-10 ms, as one of the counts' does.
 */
export const VERIFICATION_LOG_ROWS_PER_STATEMENT = 250;
/** Rows appended per statement on PostgreSQL, where the statement runs in PostgreSQL's process: fewer, larger ones. */
export const VERIFICATION_LOG_ROWS_PER_STATEMENT_POSTGRES = 5000;
/** Rows held in memory at most, e.g. while the database is unreachable; beyond, verifications are not logged (and counted). */
export const MAX_PENDING_LOG_ROWS = 100_000;
/**
 * Characters of tags the rows in memory hold at most: v2 accepts 20 tags of 512 characters, and MAX_PENDING_LOG_ROWS
 * rows of such tags would hold some 2 GB while the database is unreachable. Beyond, verifications are not logged.
 */
export const MAX_PENDING_LOG_TAG_CHARS = 8_000_000;

type Logger = { warn(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };

export type VerificationLogOptions = {
  /** Whether verifications are logged: KEYHAVEN_ANALYTICS on and KEYHAVEN_VERIFICATION_LOG_DAYS above 0. */
  enabled: boolean;
  /** Every row's `region`: this instance (KEYHAVEN_REGION). */
  region: string;
  rowsPerStatement: number;
  maxPendingRows?: number;
  maxPendingTagChars?: number;
};

/**
 * The raw verification log's writer (issue 38 §2): each verification the analytics count is kept in process memory,
 * one array push and never a query, and appended to `key_verifications_log` about once a second and when the app
 * closes, `rowsPerStatement` rows per statement (one statement of arrays, yielding to the event loop between them).
 *
 * An outage keeps the rows for the next flush, within `maxPendingRows` rows and `maxPendingTagChars` characters of
 * tags; beyond, verifications are not logged (logged once per outage, counted in `dropped` for the metrics). A
 * statement the database refuses otherwise (not an outage: nothing in these rows can violate a constraint, so it
 * would refuse them again) drops its rows, logged with their number.
 */
export class VerificationLog {
  private pending: VerificationLogRow[] = [];
  private pendingTagChars = 0;
  /** Verifications not logged since the process started (memory full, or refused by the database). */
  private droppedTotal = 0;
  /** Whether the drop of a full memory was logged, since the last successful write. */
  private warnedFull = false;
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  /** Rows in the flush being written now (out of `pending` until it ends). */
  private writing = 0;
  private log: Logger = { warn: () => {}, error: () => {} };
  readonly enabled: boolean;
  readonly region: string;
  private readonly rowsPerStatement: number;
  private readonly maxPendingRows: number;
  private readonly maxPendingTagChars: number;

  constructor(
    private readonly db: Db,
    options: VerificationLogOptions,
  ) {
    this.enabled = options.enabled;
    this.region = options.region;
    this.rowsPerStatement = options.rowsPerStatement;
    this.maxPendingRows = options.maxPendingRows ?? MAX_PENDING_LOG_ROWS;
    this.maxPendingTagChars = options.maxPendingTagChars ?? MAX_PENDING_LOG_TAG_CHARS;
  }

  /** Keeps one verification for the next flush: an array push (no copy: the caller hands the row over). */
  record(row: VerificationLogRow): void {
    if (this.enabled) this.keep(row);
  }

  private drop(count: number): void {
    this.droppedTotal += count;
    if (this.warnedFull) return;
    this.warnedFull = true;
    this.log.warn(
      { maxPendingRows: this.maxPendingRows, maxPendingTagChars: this.maxPendingTagChars },
      "the verification log's rows held in memory reached their bound (is the database unreachable?); verifications are not logged until a write succeeds",
    );
  }

  /** Verifications not logged since the process started: memory full, or refused by the database (a metric). */
  get dropped(): number {
    return this.droppedTotal;
  }

  /** Rows in memory, not written yet. */
  get unwritten(): number {
    return this.pending.length;
  }

  /** Rows not known to be written: in memory, or in a flush still unanswered (shutdown's log). */
  get notWritten(): number {
    return this.pending.length + this.writing;
  }

  /** Writes the rows every second (when enabled). */
  start(log?: Logger): void {
    if (log) this.log = log;
    if (!this.enabled || this.flushTimer) return;
    this.flushTimer = setInterval(() => {
      this.flush().catch((err) => {
        // An outage is logged once per change of state by the store (dependency.ts), not at every flush.
        if (!findDependencyFailure(err)) this.log.error({ err }, "writing the verification log failed");
      });
    }, VERIFICATION_LOG_FLUSH_INTERVAL_MS);
    this.flushTimer.unref();
  }

  /** Stops the timer and writes what is left (when the app closes, after the last request). */
  async stop(): Promise<void> {
    clearInterval(this.flushTimer);
    this.flushTimer = undefined;
    try {
      await this.flush();
    } catch (err) {
      this.log.error({ err, lost: this.unwritten }, "writing the verification log at shutdown failed");
      throw err;
    }
  }

  /**
   * Writes every row in memory, `rowsPerStatement` per statement. In an outage, the rows of the failed statement and
   * of those not sent yet go back to memory (before the newer ones, within the bounds) and the error is thrown; a
   * statement refused otherwise drops its rows (logged), the others are written, and its error is thrown at the end.
   */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing.catch(() => {});
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.pendingTagChars = 0;
    this.writing = batch.length;
    this.flushing = this.write(batch);
    try {
      await this.flushing;
    } finally {
      this.flushing = undefined;
      this.writing = 0;
    }
  }

  private async write(batch: VerificationLogRow[]): Promise<void> {
    let refusedBy: unknown;
    for (let from = 0; from < batch.length; from += this.rowsPerStatement) {
      // The requests that arrived during the previous statement are served before the next one.
      if (from > 0) await yieldToEventLoop();
      const chunk = batch.slice(from, from + this.rowsPerStatement);
      try {
        await insertVerificationLogRows(this.db, chunk, this.region);
        this.writing -= chunk.length;
      } catch (err) {
        if (findDependencyFailure(err)) {
          this.putBack(batch.slice(from));
          throw err;
        }
        this.writing -= chunk.length;
        this.droppedTotal += chunk.length;
        // How many, not what: tags are the caller's text.
        this.log.error({ err, rows: chunk.length }, "the database refused rows of the verification log; dropped");
        refusedBy ??= err;
      }
    }
    this.warnedFull = false;
    if (refusedBy !== undefined) throw refusedBy;
  }

  /** Puts the rows of a failed flush back before those recorded since, dropping what the bounds do not hold. */
  private putBack(rows: readonly VerificationLogRow[]): void {
    const newer = this.pending;
    this.pending = [];
    this.pendingTagChars = 0;
    for (const row of rows) this.keep(row);
    for (const row of newer) this.keep(row);
  }

  /** Keeps the row within the bounds of memory, else drops it. */
  private keep(row: VerificationLogRow): void {
    const tags = row.tags;
    let chars = 0;
    if (tags !== undefined) for (let i = 0; i < tags.length; i++) chars += tags[i]!.length;
    if (this.pending.length >= this.maxPendingRows || this.pendingTagChars + chars > this.maxPendingTagChars) {
      this.drop(1);
      return;
    }
    this.pendingTagChars += chars;
    this.pending.push(row);
  }
}
