import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { PeriodicRun } from "./periodic.js";

type Logger = { info(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void };

/** What a BackgroundPruner deletes, and how much at a time. */
export type PruneSpec = {
  /** For the log lines: "expired audit entries", … */
  readonly what: string;
  readonly intervalMs: number;
  /** Rows one statement deletes at most: a short statement, a short lock, whatever the backlog. */
  readonly batchRows: number;
  /** Statements one run makes at most; a larger backlog goes at the next runs. */
  readonly maxBatches: number;
  /** The time (unix ms, business time) before which rows go, computed at each run. */
  cutoff(): number;
  /** Deletes at most `rows` rows older than `before`; answers how many went. */
  deleteBatch(before: number, rows: number): Promise<number>;
  /** Fields every "deleted" log line carries besides the count. */
  readonly logFields?: Readonly<Record<string, unknown>>;
};

/**
 * Deletes old rows in the background (audit entries past their retention, expired idempotency keys): at start, then
 * every interval, in statements of at most `batchRows` rows, yielding to the event loop between them, so it never
 * holds the loop or a long lock. Several replicas pruning at once only delete fewer rows each.
 */
export class BackgroundPruner {
  private readonly periodic: PeriodicRun;
  private stopped = false;

  constructor(private readonly spec: PruneSpec) {
    this.periodic = new PeriodicRun(spec.intervalMs);
  }

  start(log: Logger): void {
    if (this.periodic.started) return;
    this.stopped = false;
    this.periodic.start(() =>
      this.pruneNow()
        .then((deleted) => {
          if (deleted > 0) log.info({ deleted, ...this.spec.logFields }, `deleted ${this.spec.what}`);
        })
        .catch((err: unknown) => log.warn({ err }, `deleting ${this.spec.what} failed; retrying at the next interval`)),
    );
  }

  /** Deletes what is due now, batch by batch; returns how many rows went. */
  async pruneNow(): Promise<number> {
    const before = this.spec.cutoff();
    let total = 0;
    for (let i = 0; i < this.spec.maxBatches && !this.stopped; i++) {
      const deleted = await this.spec.deleteBatch(before, this.spec.batchRows);
      total += deleted;
      if (deleted < this.spec.batchRows) break;
      await yieldToEventLoop();
    }
    return total;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.periodic.stop();
  }
}
