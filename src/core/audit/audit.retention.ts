import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import { deleteAuditLogRowsBefore } from "../../storage/audit/audit.repository.js";
import { BackgroundPruner } from "../pruner.js";

const DAY_MS = 86_400_000;
/** Rows one statement deletes at most: a short statement, a short lock, whatever the backlog. */
export const AUDIT_PRUNE_BATCH_ROWS = 1000;
/** Statements one run makes at most; a larger backlog goes at the next runs. */
const AUDIT_PRUNE_MAX_BATCHES = 100;
const AUDIT_PRUNE_INTERVAL_MS = 3_600_000;

/**
 * Deletes the audit entries older than KEYHAVEN_AUDIT_RETENTION_DAYS (business time) in the background: at start,
 * then hourly, in statements of AUDIT_PRUNE_BATCH_ROWS rows, yielding to the event loop between them (core/pruner.ts).
 */
export class AuditRetention extends BackgroundPruner {
  constructor(db: Db, clock: Clock, retentionDays: number) {
    super({
      what: "expired audit entries",
      intervalMs: AUDIT_PRUNE_INTERVAL_MS,
      batchRows: AUDIT_PRUNE_BATCH_ROWS,
      maxBatches: AUDIT_PRUNE_MAX_BATCHES,
      cutoff: () => clock.now() - retentionDays * DAY_MS,
      deleteBatch: (before, rows) => deleteAuditLogRowsBefore(db, before, rows),
      logFields: { retentionDays },
    });
  }
}
