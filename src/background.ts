import type { Services } from "./services.js";
import { findDependencyFailure } from "./storage/dependency.js";

export type BackgroundJobs = Pick<
  Services,
  | "analytics"
  | "lastUsed"
  | "verificationLog"
  | "verificationLogRetention"
  | "migrationWorker"
  | "invalidationPruner"
  | "statistics"
  | "auditRetention"
  | "idempotency"
  | "unkeyFallback"
  | "webhookWorker"
  | "webhookRetention"
  | "expiryScan"
  | "ratelimitAlerts"
>;

type Logger = {
  info(obj: unknown, msg?: string): void;
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
};

/**
 * Starts the webhook worker and its retention, the analytics flusher and retention cleanup, the last-used flusher, the
 * verification log's flusher and pruner, the invalidation log's pruner, the audit log's retention, the pruner of expired
 * Idempotency-Keys, the statistics refresher (ANALYZE after imports on PGlite), the Unkey fallback's counts of pending
 * keys (when configured) and, unless `migrationWorker: false`, the migration worker of services built by createServices
 * (services.ts).
 */
export function startBackgroundJobs(jobs: BackgroundJobs, log: Logger, options: { migrationWorker?: boolean } = {}): void {
  jobs.analytics.start(log);
  jobs.lastUsed.start(log);
  jobs.verificationLog.start(log);
  jobs.verificationLogRetention.start(log);
  jobs.invalidationPruner.start(log);
  jobs.auditRetention.start(log);
  jobs.idempotency.start(log);
  jobs.statistics.start(log);
  jobs.unkeyFallback?.start();
  jobs.webhookWorker.start(log);
  jobs.webhookRetention.start(log);
  jobs.expiryScan.start(log);
  jobs.ratelimitAlerts.start(log);
  if (options.migrationWorker !== false) jobs.migrationWorker.start(log);
}

/**
 * Call after the app has closed (no request in flight) and before the store closes: the worker finishes the
 * batch it is importing and claims no other; the refresher runs the ANALYZE still due after the imports (its
 * work is bounded by its sample) and waits for it; the flusher writes every count left, so none recorded is lost.
 */
export async function stopBackgroundJobs(jobs: BackgroundJobs): Promise<void> {
  // First: its refreshes write through the store, and their calls to Unkey are aborted.
  await jobs.unkeyFallback?.stop();
  await jobs.migrationWorker.stop();
  await jobs.statistics.stop();
  await jobs.analytics.stop();
  await jobs.lastUsed.stop();
  await jobs.verificationLog.stop();
  await jobs.verificationLogRetention.stop();
  await jobs.invalidationPruner.stop();
  await jobs.auditRetention.stop();
  await jobs.idempotency.stop();
  await jobs.webhookRetention.stop();
  await jobs.expiryScan.stop();
  // Last, so that a receiver or a store that does not answer delays nothing above: its attempts in flight end within
  // their deadline and are recorded; what it had claimed but not sent is sent again when its lease ends.
  await jobs.webhookWorker.stop();
}

/**
 * stopBackgroundJobs within one deadline (KEYHAVEN_SHUTDOWN_TIMEOUT_MS) for everything it writes, so that a shutdown
 * with PostgreSQL down ends in time (issue 34 §6: 47–56 s, then exit 1, beyond a 30 s grace period). Past the
 * deadline, or when writing fails, it gives up and logs what was not written (counts only); it never throws, so
 * the process exits 0 after it. A batch of the migration worker is never lost: unfinished, it stays pending in the
 * database for the next worker.
 */
export async function stopBackgroundJobsWithin(jobs: BackgroundJobs, deadlineMs: number, log: Logger): Promise<void> {
  const stopping = stopBackgroundJobs(jobs);
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    stopping.then(
      () => ({ done: true as const }),
      (err: unknown) => ({ done: false as const, why: "writing failed", err }),
    ),
    new Promise<{ done: false; why: string; err?: unknown }>((resolve) => {
      timer = setTimeout(() => resolve({ done: false, why: `not done within ${deadlineMs} ms` }), deadlineMs);
    }),
  ]);
  clearTimeout(timer);
  if (outcome.done) return;
  // Still running past the deadline: what it ends with comes after the answer and must not go unhandled.
  stopping.catch(() => {});
  const failure = outcome.err === undefined ? undefined : findDependencyFailure(outcome.err);
  log.warn(
    {
      deadlineMs,
      why: outcome.why,
      ...(failure && { dependency: failure.dependency, reason: failure.reason }),
      droppedVerificationCounts: jobs.analytics.notWritten,
      droppedLastUsedTimes: jobs.lastUsed.notWritten,
      droppedVerificationLogRows: jobs.verificationLog.notWritten,
    },
    "shutdown: gave up writing what the background jobs held; dropped what is counted here",
  );
}
