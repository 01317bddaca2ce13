import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { PeriodicRun } from "../periodic.js";
import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import {
  countVerificationLogRowsBeyond,
  deleteOldestVerificationLogRows,
  deleteVerificationLogRowsBefore,
  nextLoggedWorkspace,
  verificationLogCutoff,
} from "../../storage/verificationLog/verificationLog.repository.js";

/** Rows one statement deletes at most: a short statement and a short lock, whatever the backlog. */
export const VERIFICATION_LOG_PRUNE_BATCH_ROWS = 2000;
/**
 * Deleting statements one pass makes at most (so at most 500,000 rows); a larger backlog goes at the next passes,
 * the next one resuming at the workspace this one stopped at.
 */
export const VERIFICATION_LOG_PRUNE_MAX_BATCHES = 250;
/** How often the log is pruned (also once when started): some 3,000,000 rows an hour at most. */
export const VERIFICATION_LOG_PRUNE_INTERVAL_MS = 600_000;

/** A pass's cutoff (unix ms, business time) and what it did so far. */
type Pass = { before: number; statements: number; expired: number; beyondCap: number };
/** Workspaces after `after` (or from it, `inclusive`) and before `below`; undefined bounds: none. */
type WorkspaceRange = { after: string | undefined; below: string | undefined; inclusive?: boolean };

type Logger = { info(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void };

export type VerificationLogRetentionOptions = {
  /** Rows older than this many days go (KEYHAVEN_VERIFICATION_LOG_DAYS; 0: no log, nothing to prune). */
  days: number;
  /** Rows one workspace keeps at most: its oldest beyond go (KEYHAVEN_VERIFICATION_LOG_MAX_ROWS). */
  maxRowsPerWorkspace: number;
  batchRows?: number;
  maxBatches?: number;
};

/**
 * Prunes the raw verification log in the background: at start, then every VERIFICATION_LOG_PRUNE_INTERVAL_MS, workspace
 * by workspace (found on the log's own index), it deletes the rows older than the retention (business time), then the
 * oldest beyond the workspace's cap, in statements of `batchRows` rows each (bounded by PostgreSQL's statement_timeout
 * as every statement is), at most `maxBatches` per pass, yielding to the event loop between them. Several replicas
 * pruning at once only delete fewer rows each.
 */
export class VerificationLogRetention {
  private readonly periodic = new PeriodicRun(VERIFICATION_LOG_PRUNE_INTERVAL_MS);
  private stopped = false;
  /** The workspace a pass that ran out of statements stopped at: the next one starts there (undefined: at the first). */
  private resumeAt: string | undefined;
  readonly days: number;
  readonly maxRowsPerWorkspace: number;
  private readonly batchRows: number;
  private readonly maxBatches: number;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    options: VerificationLogRetentionOptions,
  ) {
    this.days = options.days;
    this.maxRowsPerWorkspace = options.maxRowsPerWorkspace;
    this.batchRows = options.batchRows ?? VERIFICATION_LOG_PRUNE_BATCH_ROWS;
    this.maxBatches = options.maxBatches ?? VERIFICATION_LOG_PRUNE_MAX_BATCHES;
  }

  start(log: Logger): void {
    if (this.days === 0 || this.periodic.started) return;
    this.stopped = false;
    this.periodic.start(() =>
      this.pruneNow()
        .then(({ expired, beyondCap }) => {
          if (expired + beyondCap > 0) {
            log.info(
              { expired, beyondCap, days: this.days, maxRowsPerWorkspace: this.maxRowsPerWorkspace },
              "deleted rows of the verification log",
            );
          }
        })
        .catch((err: unknown) => log.warn({ err }, "pruning the verification log failed; retrying at the next interval")),
    );
  }

  /** One pass: what it deleted for age (`expired`) and beyond the workspaces' cap (`beyondCap`). */
  async pruneNow(): Promise<{ expired: number; beyondCap: number }> {
    if (this.days === 0) return { expired: 0, beyondCap: 0 };
    const pass: Pass = { before: verificationLogCutoff(this.clock.now(), this.days), statements: 0, expired: 0, beyondCap: 0 };
    const resumeAt = this.resumeAt;
    this.resumeAt = undefined;
    // From the workspace the last pass stopped at to the last one, then those before it; or all, in text order.
    const ranges: WorkspaceRange[] =
      resumeAt === undefined
        ? [{ after: undefined, below: undefined }]
        : [
            { after: resumeAt, below: undefined, inclusive: true },
            { after: undefined, below: resumeAt },
          ];
    for (const range of ranges) {
      let { after } = range;
      let inclusive = range.inclusive === true;
      for (;;) {
        if (!this.budgetLeft(pass)) {
          this.resumeAt = after;
          return { expired: pass.expired, beyondCap: pass.beyondCap };
        }
        const workspaceId = await nextLoggedWorkspace(this.db, { after, inclusive, below: range.below });
        if (workspaceId === undefined) break;
        if (!(await this.pruneWorkspace(workspaceId, pass))) {
          this.resumeAt = workspaceId;
          return { expired: pass.expired, beyondCap: pass.beyondCap };
        }
        after = workspaceId;
        inclusive = false;
      }
    }
    return { expired: pass.expired, beyondCap: pass.beyondCap };
  }

  private budgetLeft(pass: Pass): boolean {
    return pass.statements < this.maxBatches && !this.stopped;
  }

  /** Deletes the workspace's expired rows, then its oldest beyond the cap; false when the pass's budget ran out first. */
  private async pruneWorkspace(workspaceId: string, pass: Pass): Promise<boolean> {
    for (;;) {
      if (!this.budgetLeft(pass)) return false;
      const n = await deleteVerificationLogRowsBefore(this.db, workspaceId, pass.before, this.batchRows);
      pass.statements++;
      pass.expired += n;
      await yieldToEventLoop();
      if (n < this.batchRows) break;
    }
    if (!this.budgetLeft(pass)) return false;
    const most = this.batchRows * (this.maxBatches - pass.statements);
    let excess = await countVerificationLogRowsBeyond(this.db, workspaceId, this.maxRowsPerWorkspace, most);
    while (excess > 0) {
      if (!this.budgetLeft(pass)) return false;
      const n = await deleteOldestVerificationLogRows(this.db, workspaceId, Math.min(this.batchRows, excess));
      pass.statements++;
      pass.beyondCap += n;
      excess -= n;
      await yieldToEventLoop();
      if (n === 0) break;
    }
    return true;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.periodic.stop();
  }
}
