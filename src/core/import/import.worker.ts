import { sql } from "drizzle-orm";
import type { Db } from "../../storage/client.js";
import type { AuditTarget } from "../../storage/schema.js";
import { type Actor, trustedCaller } from "../caller.js";
import { type RecordChange, WriteGate } from "../changes.js";
import { findDependencyFailure, isTransientFailure } from "../../storage/dependency.js";
import { batchFailureOf, importBatch } from "./import.batch.js";
import { describeUnexpected } from "../../log.js";
import {
  claimPendingBatch,
  deferMigrationBatch,
  failMigrationBatch,
  finishMigrationBatch,
  type PendingBatch,
} from "../../storage/import/migrations.repository.js";

type Logger = {
  info(obj: unknown, msg?: string): void;
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
};

/** How long an idle worker waits before looking for pending batches again (an enqueue in this process wakes it). */
export const MIGRATION_POLL_INTERVAL_MS = 1000;
/** The first retry of a batch after a transient failure waits about this long; each next one twice as long… */
export const MIGRATION_RETRY_MIN_MS = 1000;
/** …up to this long, for as many attempts as it takes. */
export const MIGRATION_RETRY_MAX_MS = 5 * 60_000;
/** The worker's own deadlines, per statement of its transaction: waiting for a lock, and running at all. */
export const MIGRATION_LOCK_TIMEOUT_MS = 10_000;
export const MIGRATION_STATEMENT_TIMEOUT_MS = 60_000;

/**
 * The wait before attempt `attempts + 1` of a batch whose `attempts`th failed: exponential from 1 s, capped at
 * 5 min, with jitter (half of it random) so that batches and replicas that failed together do not retry together.
 */
export function migrationRetryDelayMs(attempts: number, random: () => number = Math.random): number {
  const ceiling = Math.min(MIGRATION_RETRY_MAX_MS, MIGRATION_RETRY_MIN_MS * 2 ** Math.min(Math.max(attempts - 1, 0), 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

export type MigrationWorkerOptions = {
  pollIntervalMs?: number;
  /** The wait after a batch's `attempts`th transient failure (default migrationRetryDelayMs). */
  retryDelayMs?: (attempts: number) => number;
  /** The clock that decides when a waiting batch is due (unix ms). */
  now?: () => number;
  lockTimeoutMs?: number;
  statementTimeoutMs?: number;
  /** Told how many keys each batch imported, once its transaction committed (services.ts: the statistics refresher). */
  onImported?: (count: number) => void;
  /** The write gate its changes go through (services.ts: the services' one); by default one on `db` and `now`. */
  changes?: WriteGate;
};

/** The worker as the audit log names it. */
export const IMPORT_WORKER: Actor = { kind: "worker", id: "import-worker", name: "import worker" };

/**
 * The worker's caller: trusted (it applies what a root key allowed when it enqueued). It acts in no workspace of
 * its own until it has claimed a batch, so each entry names the batch's workspace (Change.workspaceId).
 */
const WORKER_CALLER = trustedCaller(IMPORT_WORKER, "", { surface: "worker" });

/**
 * The audit entry of a batch processed (import.apply_batch): the migration, the API and every key imported; how
 * many were imported and how many not. Never a key's hash or secret.
 */
function recordBatch(record: RecordChange, batch: PendingBatch, keyIds: readonly string[], failed: number): void {
  const targets: AuditTarget[] = [
    { type: "migration", id: batch.migrationId },
    { type: "api", id: batch.apiId },
    ...keyIds.map((id) => ({ type: "key", id })),
  ];
  record({
    event: "import.apply_batch",
    targets,
    description: `applied batch ${batch.id} of migration ${batch.migrationId}: ${keyIds.length} imported, ${failed} not`,
    details: { batchId: batch.id, count: keyIds.length, failed },
    workspaceId: batch.workspaceId,
  });
}

/**
 * Imports the batches of `migrations.enqueueKeys` in the background, oldest due first, one at a time per process.
 * Each batch is claimed and imported in one transaction (`FOR UPDATE SKIP LOCKED`), so replicas never process one
 * twice, and a batch whose process dies is pending again for the next worker, on any replica or after a restart.
 *
 * A transient failure (isTransientFailure: connection, timeout, lock, serialization) leaves the batch pending with
 * a time for its next attempt, backing off for as long as it takes; other batches are imported meanwhile. Any other
 * failure ends the batch as failed (nothing of it imported), for the operator to retry.
 */
export class MigrationWorker {
  private loop: Promise<void> | undefined;
  private stopping = false;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private log: Logger = { info: () => {}, warn: () => {}, error: () => {} };
  private readonly pollIntervalMs: number;
  private readonly retryDelayMs: (attempts: number) => number;
  private readonly now: () => number;
  private readonly lockTimeoutMs: number;
  private readonly statementTimeoutMs: number;
  private readonly onImported: (count: number) => void;
  private readonly changes: WriteGate;

  constructor(
    private readonly db: Db,
    options: MigrationWorkerOptions = {},
  ) {
    this.pollIntervalMs = options.pollIntervalMs ?? MIGRATION_POLL_INTERVAL_MS;
    this.retryDelayMs = options.retryDelayMs ?? ((attempts) => migrationRetryDelayMs(attempts));
    this.now = options.now ?? Date.now;
    this.lockTimeoutMs = options.lockTimeoutMs ?? MIGRATION_LOCK_TIMEOUT_MS;
    this.statementTimeoutMs = options.statementTimeoutMs ?? MIGRATION_STATEMENT_TIMEOUT_MS;
    this.onImported = options.onImported ?? (() => {});
    this.changes = options.changes ?? new WriteGate(db, { now: () => this.now() });
  }

  start(log?: Logger): void {
    if (log) this.log = log;
    if (this.loop) return;
    this.stopping = false;
    this.loop = this.run();
  }

  /** Looks for work now rather than at the next poll (called after an enqueue in this process). */
  wake(): void {
    if (!this.loop) return;
    // Woken while busy: look again right after the current batch instead of sleeping first.
    if (this.wakeUp) this.wakeUp();
    else this.woken = true;
  }

  /** Stops claiming batches and waits until the one being imported, if any, is committed. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wakeUp?.();
    await this.loop;
    this.loop = undefined;
  }

  private async run(): Promise<void> {
    // Consecutive failures to claim or record (the database unreachable): wait longer each time, not every poll.
    let failures = 0;
    while (!this.stopping) {
      let worked = false;
      try {
        worked = await this.processNext();
        failures = 0;
      } catch (err) {
        failures++;
        // An outage is logged once per change of state by the store (dependency.ts), not at every poll.
        if (!findDependencyFailure(err))
          this.log.error({ err, failures }, "the migration worker could not reach its queue; it tries again");
      }
      if (!worked && !this.stopping) await this.idle(failures > 0 ? this.retryDelayMs(failures) : this.pollIntervalMs);
    }
  }

  private idle(ms: number): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      this.wakeUp = done;
    });
  }

  /**
   * Claims and imports the oldest due batch; false when none was due. A batch whose import fails is deferred
   * (transient failure) or failed (any other), and counts as work; only a failure to claim or to record throws.
   */
  async processNext(): Promise<boolean> {
    const now = this.now();
    let claimed: PendingBatch | undefined;
    let imported = 0;
    try {
      const worked = await this.changes.change(WORKER_CALLER, async (tx, record) => {
        await tx.execute(sql.raw(`set local lock_timeout = ${Math.max(1, Math.round(this.lockTimeoutMs))}`));
        await tx.execute(sql.raw(`set local statement_timeout = ${Math.max(1, Math.round(this.statementTimeoutMs))}`));
        const batch = await claimPendingBatch(tx, now);
        if (!batch) return false;
        claimed = batch;
        const result = await importBatch(tx, batch, this.now);
        await finishMigrationBatch(tx, batch, result, this.now());
        recordBatch(record, batch, result.keyIds, batch.keys.length - result.imported);
        imported = result.imported;
        this.log.info(
          { batchId: batch.id, migrationId: batch.migrationId, imported: result.imported, failed: result.errors.length },
          "imported an enqueued migration batch",
        );
        return true;
      });
      this.onImported(imported);
      return worked;
    } catch (err) {
      if (!claimed) throw err;
      const batch = claimed;
      const context = { err, batchId: batch.id, migrationId: batch.migrationId, attempts: batch.attempts + 1 };
      if (isTransientFailure(err)) {
        const nextAttemptAtM = this.now() + this.retryDelayMs(batch.attempts + 1);
        // A transient failure is the driver's or the network's (never a refusal): its kind is all that is kept.
        await deferMigrationBatch(this.db, batch, { message: describeUnexpected(err), nextAttemptAtM });
        this.log.warn(
          { ...context, nextAttemptAt: nextAttemptAtM },
          "importing an enqueued migration batch failed; it will be tried again",
        );
      } else {
        await this.changes.change(WORKER_CALLER, async (tx, record) => {
          if (await failMigrationBatch(tx, batch, batchFailureOf(err), this.now())) recordBatch(record, batch, [], batch.keyCount);
        });
        this.log.error(context, "importing an enqueued migration batch failed in a way retrying cannot fix; it is failed");
      }
      return true;
    }
  }
}
