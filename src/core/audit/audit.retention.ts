import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import { deleteAuditLogRowsBefore } from "../../storage/audit/audit.repository.js";

const DAY_MS = 86_400_000;
/** Rows one statement deletes at most: a short statement, a short lock, whatever the backlog. */
export const AUDIT_PRUNE_BATCH_ROWS = 1000;
/** Statements one run makes at most; a larger backlog goes at the next runs. */
const AUDIT_PRUNE_MAX_BATCHES = 100;
const AUDIT_PRUNE_INTERVAL_MS = 3_600_000;

type Logger = { info(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void };

/**
 * Deletes the audit entries older than KEYHAVEN_AUDIT_RETENTION_DAYS (business time) in the background: at start,
 * then hourly, in statements of AUDIT_PRUNE_BATCH_ROWS rows, yielding to the event loop between them. Several
 * replicas pruning at once only delete fewer rows each.
 */
export class AuditRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly retentionDays: number,
  ) {}

  start(log: Logger): void {
    if (this.timer) return;
    this.stopped = false;
    const run = () => {
      if (this.running) return;
      this.running = this.pruneNow()
        .then((deleted) => {
          if (deleted > 0) log.info({ deleted, retentionDays: this.retentionDays }, "deleted expired audit entries");
        })
        .catch((err: unknown) => log.warn({ err }, "pruning the audit log failed; retrying at the next interval"))
        .finally(() => {
          this.running = undefined;
        });
    };
    this.timer = setInterval(run, AUDIT_PRUNE_INTERVAL_MS);
    this.timer.unref();
    run();
  }

  /** Deletes what is due now, batch by batch; returns how many entries went. */
  async pruneNow(): Promise<number> {
    const before = this.clock.now() - this.retentionDays * DAY_MS;
    let total = 0;
    for (let i = 0; i < AUDIT_PRUNE_MAX_BATCHES && !this.stopped; i++) {
      const deleted = await deleteAuditLogRowsBefore(this.db, before, AUDIT_PRUNE_BATCH_ROWS);
      total += deleted;
      if (deleted < AUDIT_PRUNE_BATCH_ROWS) break;
      await yieldToEventLoop();
    }
    return total;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
