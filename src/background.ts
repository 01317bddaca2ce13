import type { Config } from "./config.js";
import type { Db } from "./db/client.js";
import { VerificationAnalytics } from "./modules/analytics/verification-analytics.js";
import { MigrationWorker } from "./modules/migrations/migration-worker.js";

export type BackgroundJobs = { analytics: VerificationAnalytics; migrationWorker: MigrationWorker };

type Logger = {
  info(obj: unknown, msg?: string): void;
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
};

/** The process's background jobs, created before buildApp because handlers use them (through Deps). */
export function createBackgroundJobs(db: Db, config: Config): BackgroundJobs {
  return {
    analytics: new VerificationAnalytics(db, config.analytics, { retentionDays: config.analyticsRetentionDays }),
    migrationWorker: new MigrationWorker(db),
  };
}

/** Starts the analytics flusher and retention cleanup and, unless `migrationWorker: false`, the migration worker. */
export function startBackgroundJobs(jobs: BackgroundJobs, log: Logger, options: { migrationWorker?: boolean } = {}): void {
  jobs.analytics.start(log);
  if (options.migrationWorker !== false) jobs.migrationWorker.start(log);
}

/**
 * Call after the app has closed (no request in flight) and before the store closes: the worker finishes the
 * batch it is importing and claims no other; the flusher writes every count left, so none recorded is lost.
 */
export async function stopBackgroundJobs(jobs: BackgroundJobs): Promise<void> {
  await jobs.migrationWorker.stop();
  await jobs.analytics.stop();
}
