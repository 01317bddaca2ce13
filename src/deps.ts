import type { Config } from "./config.js";
import type { Keyring } from "./crypto/keyring.js";
import type { Db, Store } from "./db/client.js";
import type { AppMetrics } from "./http/metrics.js";
import type { VerificationAnalytics } from "./modules/analytics/verification-analytics.js";
import type { MigrationWorker } from "./modules/migrations/migration-worker.js";
import type { RateLimiter } from "./ratelimit/ratelimiter.js";

/** Everything a handler may use, passed down explicitly from main.ts (or the test harness). */
export type Deps = {
  config: Config;
  store: Store;
  db: Db;
  keyring: Keyring;
  /** Rate-limit counters: process memory, or Redis (REDIS_URL) shared by every replica. */
  ratelimiter: RateLimiter;
  /** Set by buildApp: this app's Prometheus metrics (handlers report domain outcomes, e.g. verification codes). */
  metrics?: AppMetrics;
  /** Verification counts (KEYHAVEN_ANALYTICS); absent where the app is built without background jobs. */
  analytics?: VerificationAnalytics;
  /** The migrations.enqueueKeys worker of this process, woken after an enqueue; absent: batches wait for one. */
  migrationWorker?: MigrationWorker;
};
