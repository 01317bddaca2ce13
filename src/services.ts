import { type Clock, systemClock } from "./clock.js";
import type { Config } from "./config.js";
import { Keyring } from "./keyring/keyring.js";
import type { Db, Store } from "./storage/client.js";
import { EpochReader } from "./storage/epoch.js";
import { InvalidationPruner } from "./storage/invalidations.js";
import { AppMetrics } from "./http/metrics.js";
import { RootKeyAuthenticator } from "./core/auth/rootKeys.authenticator.js";
import {
  ANALYTICS_ROWS_PER_STATEMENT,
  ANALYTICS_ROWS_PER_STATEMENT_POSTGRES,
  VerificationAnalytics,
} from "./storage/analytics/analytics.recorder.js";
import { LastUsed } from "./storage/lastUsed/lastUsed.recorder.js";
import {
  VERIFICATION_LOG_ROWS_PER_STATEMENT,
  VERIFICATION_LOG_ROWS_PER_STATEMENT_POSTGRES,
  VerificationLog,
} from "./storage/verificationLog/verificationLog.recorder.js";
import { VerificationLogRetention } from "./core/verification/verification.logRetention.js";
import { DEFAULT_SPEND_STATEMENTS_IN_FLIGHT, RemainingSpender, SPEND_OVERLAP_AFTER_MS } from "./storage/keys/remaining.spender.js";
import { POSTGRES_LOOKUPS_IN_FLIGHT, VERIFICATION_CACHE_ENTRIES, VerificationCache } from "./storage/keys/verification.cache.js";
import { type KeyObjectReads, prepareKeyObjectReads } from "./storage/keys/keyObjects.repository.js";
import { type KeyWrites, prepareKeyWrites } from "./storage/keys/keys.writes.repository.js";
import { MigrationWorker } from "./core/import/import.worker.js";
import { ApiSettingsCache } from "./storage/apis/apis.repository.js";
import { LimitLookupCache } from "./storage/ratelimits/ratelimits.repository.js";
import { openRateLimiter, type RateLimiter } from "./storage/ratelimits/ratelimiter.js";
import { ConsoleSessions } from "./core/console/console.sessions.js";
import { WriteGate } from "./core/changes.js";
import { AuditRetention } from "./core/audit/audit.retention.js";
import { Idempotency } from "./core/idempotency/idempotency.js";
import { StatisticsRefresher } from "./storage/statistics.js";
import { UnkeyFallback } from "./core/verification/verification.fallback.js";
import { ExpiryScan, RatelimitAlerts } from "./core/webhooks/webhooks.alerts.js";
import { WebhookWorker, type WebhookWorkerOptions } from "./core/webhooks/webhooks.worker.js";
import { WebhookRetention } from "./core/webhooks/webhooks.retention.js";

/**
 * Every stateful piece of one keyhaven process, built once by createServices and passed to every handler (as
 * `deps`). Nothing of this lives in module state: two sets of services in one process (two tests, an app and its
 * replica) share no cache, no prepared statement and no counter.
 */
export type Services = {
  config: Config;
  store: Store;
  db: Db;
  /** The write gate: every mutation's transaction and its audit entry (core/changes.ts). */
  changes: WriteGate;
  /** Business time: expiry, analytics hours, rate-limit windows, how long an unknown token is remembered. */
  clock: Clock;
  keyring: Keyring;
  /** Rate-limit counters: process memory, or Redis (REDIS_URL) shared by every replica. */
  ratelimiter: RateLimiter;
  /** The store's write epoch, read once for all the caches below that ask at the same time. */
  epochs: EpochReader;
  /** Deletes audit entries older than KEYHAVEN_AUDIT_RETENTION_DAYS (started by background.ts). */
  auditRetention: AuditRetention;
  /** Idempotency-Key: stored answers and the request scopes that store them (pruned after 24 h by background.ts). */
  idempotency: Idempotency;
  /** Deletes old rows of the invalidation log the caches catch up from (started by background.ts). */
  invalidationPruner: InvalidationPruner;
  /** The keys keys.verifyKey reads, in memory while the epoch stands. */
  verificationCache: VerificationCache;
  /** Spends keys' remaining uses, grouping concurrent verifications of one key. */
  remainingSpender: RemainingSpender;
  /** Root keys (and tokens that are none), in memory while the epoch stands. */
  rootKeys: RootKeyAuthenticator;
  /** The key settings of APIs, remembered for keys.createKey (which confirms them as it inserts: ApiSettingsCache). */
  apiSettings: ApiSettingsCache;
  /** keys.createKey's prepared statement. */
  keyWrites: KeyWrites;
  /** keys.getKey's and keys.whoami's prepared lookups. */
  keyReads: KeyObjectReads;
  /** ratelimits.limit's namespace and override lookups, in memory while the epoch stands. */
  limitLookups: LimitLookupCache;
  /** This process's Prometheus metrics (buildApp serves them; handlers report domain outcomes). */
  metrics: AppMetrics;
  /** Verification counts (KEYHAVEN_ANALYTICS), written in the background once started (background.ts). */
  analytics: VerificationAnalytics;
  /** When keys were last verified and root keys last authenticated, written in the background once started (background.ts). */
  lastUsed: LastUsed;
  /**
   * The raw verification log (issue 38 §2): a row per verification the analytics count, written in the background once
   * started (background.ts); off when config.verificationLogDays is 0 (KEYHAVEN_VERIFICATION_LOG_DAYS=0 or KEYHAVEN_ANALYTICS=off).
   */
  verificationLog: VerificationLog;
  /** Deletes the log's rows past config.verificationLogDays and beyond each workspace's cap (started by background.ts). */
  verificationLogRetention: VerificationLogRetention;
  /** The migrations.enqueueKeys worker, woken after an enqueue; it works once started (background.ts). */
  migrationWorker: MigrationWorker;
  /** Analyses the imported tables after imports on PGlite (no autovacuum there), once started (background.ts). */
  statistics: StatisticsRefresher;
  /** KEYHAVEN_UNKEY_FALLBACK_URL: adoption of pending keys on their first verification; undefined when unset. */
  unkeyFallback: UnkeyFallback | undefined;
  /** The web console's sessions (sign-in, expiry, sign-out, failed sign-ins per address). */
  consoleSessions: ConsoleSessions;
  /** Sends the webhook outbox (core/webhooks), once started (background.ts). */
  webhookWorker: WebhookWorker;
  /** Deletes delivered and failed webhook deliveries past the audit log's retention (started by background.ts). */
  webhookRetention: WebhookRetention;
  /** Applies the passing of time to key.expiring and key.expired (started by background.ts). */
  expiryScan: ExpiryScan;
  /** key.ratelimited: the first refusal of a key in a rate limit's window writes its event (verifyKey). */
  ratelimitAlerts: RatelimitAlerts;
};

export type ServicesOptions = {
  /** The master key (main.ts resolves it, possibly from the key file); default: KEYHAVEN_ENCRYPTION_KEY. */
  masterKey?: Buffer | undefined;
  /** The rate limiter; default: the one the configuration names (REDIS_URL, else memory). */
  ratelimiter?: RateLimiter;
  /** Default: the machine's clock. */
  clock?: Clock;
  /** The webhook worker's poll, lease, deadline, concurrency and retry schedule (tests shorten them). */
  webhooks?: Partial<WebhookWorkerOptions>;
};

/**
 * The remaining-uses spender of a store. Spending statements at once: DEFAULT_SPEND_STATEMENTS_IN_FLIGHT, leaving at
 * least one connection of a PostgreSQL pool to the lookups verification needs; on PostgreSQL the second starts only
 * beside a statement that has run for SPEND_OVERLAP_AFTER_MS (one at a time costs less per spend, RemainingSpender),
 * and a statement's verifications are answered once the next statement is on its way to PostgreSQL.
 * The embedded store runs statements one at a time, but a second one queued there early still measured faster
 * (bench:budgets) than batches that wait in the spender for the first.
 */
function remainingSpenderOf(store: Store, config: Config): RemainingSpender {
  if (store.kind === "pglite") return new RemainingSpender(store.db, DEFAULT_SPEND_STATEMENTS_IN_FLIGHT);
  const answerAfterNextStatement = true;
  return new RemainingSpender(
    store.db,
    withinPool(config, DEFAULT_SPEND_STATEMENTS_IN_FLIGHT, 1),
    SPEND_OVERLAP_AFTER_MS,
    answerAfterNextStatement,
  );
}

/** Lookups at once: on PostgreSQL two, leaving two connections of the pool to the rest at least; one on PGlite. */
function lookupsInFlightOf(store: Store, config: Config): number {
  return store.kind === "pglite" ? 1 : withinPool(config, POSTGRES_LOOKUPS_IN_FLIGHT, 2);
}

/** Statements of one kind at once on PostgreSQL: up to `most`, leaving `spare` connections of the pool, and at least one. */
function withinPool(config: Config, most: number, spare: number): number {
  return Math.max(1, Math.min(most, config.databasePoolSize - spare));
}

/**
 * The composition root: builds every stateful piece on `store` with `config`. main.ts and the test harness both
 * call it. Nothing is started here: background.ts starts the analytics flusher and the migration worker.
 */
export async function createServices(config: Config, store: Store, options: ServicesOptions = {}): Promise<Services> {
  const { db } = store;
  const clock = options.clock ?? systemClock;
  const ratelimiter = options.ratelimiter ?? (await openRateLimiter(config));
  const epochs = new EpochReader(db, store.writes);
  const statistics = new StatisticsRefresher(db, store.kind);
  const remainingSpender = remainingSpenderOf(store, config);
  const verificationCache = new VerificationCache(db, epochs, VERIFICATION_CACHE_ENTRIES, lookupsInFlightOf(store, config));
  const changes = new WriteGate(db, clock);
  const keyring = new Keyring("masterKey" in options ? options.masterKey : config.encryptionKey);
  const keyWrites = prepareKeyWrites(db);
  const keyReads = prepareKeyObjectReads(db);
  const unkeyFallback =
    config.unkeyFallback === undefined
      ? undefined
      : new UnkeyFallback({ db, keyring, clock, keyWrites, keyReads, changes }, config.unkeyFallback);
  const rowsPerStatement = store.kind === "pglite" ? ANALYTICS_ROWS_PER_STATEMENT : ANALYTICS_ROWS_PER_STATEMENT_POSTGRES;
  const lastUsed = new LastUsed(db, { rowsPerStatement });
  const verificationLog = new VerificationLog(db, {
    enabled: config.verificationLogDays > 0,
    region: config.region,
    rowsPerStatement: store.kind === "pglite" ? VERIFICATION_LOG_ROWS_PER_STATEMENT : VERIFICATION_LOG_ROWS_PER_STATEMENT_POSTGRES,
  });
  const rootKeys = new RootKeyAuthenticator(db, epochs, clock, lastUsed);
  const consoleSessions = new ConsoleSessions({
    db,
    clock,
    changes,
    rootKeys,
    adminToken: config.adminToken,
    lifetimes: { idleMs: config.console.idleMs, absoluteMs: config.console.absoluteMs },
  });
  return {
    config,
    store,
    db,
    clock,
    changes,
    keyring,
    ratelimiter,
    epochs,
    invalidationPruner: new InvalidationPruner(db),
    auditRetention: new AuditRetention(db, clock, config.auditRetentionDays),
    idempotency: new Idempotency(db, clock),
    verificationCache,
    remainingSpender,
    rootKeys,
    apiSettings: new ApiSettingsCache(db),
    keyWrites,
    keyReads,
    limitLookups: new LimitLookupCache(db, epochs),
    metrics: new AppMetrics({
      config,
      store,
      db,
      ratelimiter,
      invalidations: epochs.invalidations.stats,
      spender: remainingSpender,
      lookups: verificationCache,
      fallback: unkeyFallback?.stats,
      verificationLog,
    }),
    analytics: new VerificationAnalytics(db, config.analytics, {
      retentionDays: config.analyticsRetentionDays,
      now: () => clock.now(),
      rowsPerStatement,
    }),
    lastUsed,
    verificationLog,
    verificationLogRetention: new VerificationLogRetention(db, clock, {
      days: config.verificationLogDays,
      maxRowsPerWorkspace: config.verificationLogMaxRows,
    }),
    migrationWorker: new MigrationWorker(db, { now: () => clock.now(), onImported: (count) => statistics.onImported(count), changes }),
    statistics,
    unkeyFallback,
    consoleSessions,
    webhookWorker: new WebhookWorker({ db, keyring, clock, allowPrivate: config.webhookAllowPrivate, changes }, options.webhooks),
    webhookRetention: new WebhookRetention(db, clock, config.auditRetentionDays),
    expiryScan: new ExpiryScan(db, clock),
    ratelimitAlerts: new RatelimitAlerts(db, clock),
  };
}
