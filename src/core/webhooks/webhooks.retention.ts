import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import { deleteFinishedWebhookDeliveriesBefore } from "../../storage/webhooks/webhooks.repository.js";
import { BackgroundPruner } from "../pruner.js";

const DAY_MS = 86_400_000;
const BATCH_ROWS = 1000;
const MAX_BATCHES = 100;
const INTERVAL_MS = 3_600_000;

/**
 * Deletes delivered and failed webhook deliveries (and their attempts) last changed more than `retentionDays` ago, as
 * long as audit entries are kept (KEYHAVEN_AUDIT_RETENTION_DAYS: a delivery is an audit entry sent on), at start and
 * then hourly, in statements of 1,000 rows (core/pruner.ts). Pending deliveries stay until sent or failed.
 */
export class WebhookRetention extends BackgroundPruner {
  constructor(db: Db, clock: Clock, retentionDays: number) {
    super({
      what: "finished webhook deliveries",
      intervalMs: INTERVAL_MS,
      batchRows: BATCH_ROWS,
      maxBatches: MAX_BATCHES,
      cutoff: () => clock.now() - retentionDays * DAY_MS,
      deleteBatch: (before, rows) => deleteFinishedWebhookDeliveriesBefore(db, before, rows),
      logFields: { retentionDays },
    });
  }
}
