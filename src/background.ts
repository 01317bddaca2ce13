import type { Services } from "./services.js";

export type BackgroundJobs = Pick<Services, "analytics" | "migrationWorker" | "invalidationPruner" | "statistics">;

type Logger = {
  info(obj: unknown, msg?: string): void;
  warn(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
};

/**
 * Starts the analytics flusher and retention cleanup, the invalidation log's pruner, the statistics refresher (ANALYZE
 * after imports on PGlite) and, unless `migrationWorker: false`, the migration worker of services built by createServices
 * (services.ts).
 */
export function startBackgroundJobs(jobs: BackgroundJobs, log: Logger, options: { migrationWorker?: boolean } = {}): void {
  jobs.analytics.start(log);
  jobs.invalidationPruner.start(log);
  jobs.statistics.start(log);
  if (options.migrationWorker !== false) jobs.migrationWorker.start(log);
}

/**
 * Call after the app has closed (no request in flight) and before the store closes: the worker finishes the
 * batch it is importing and claims no other; the refresher runs the ANALYZE still due after the imports (its
 * work is bounded by its sample) and waits for it; the flusher writes every count left, so none recorded is lost.
 */
export async function stopBackgroundJobs(jobs: BackgroundJobs): Promise<void> {
  await jobs.migrationWorker.stop();
  await jobs.statistics.stop();
  await jobs.analytics.stop();
  await jobs.invalidationPruner.stop();
}
