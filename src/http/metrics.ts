import type { FastifyInstance, onResponseHookHandler } from "fastify";
import { collectDefaultMetrics, Counter, Gauge, type Metric, Registry } from "prom-client";
import { ApiError } from "./errors.js";
import { bearerToken } from "./bearer.js";
import { secretsEqual } from "../crypto/hash.js";
import type { Config } from "../config.js";
import type { Db, Store } from "../storage/client.js";
import type { InvalidationStats } from "../storage/invalidations.js";
import type { RateLimiter } from "../storage/ratelimits/ratelimiter.window.js";
import { checkDatabase } from "./health.js";

/** Latency buckets in seconds: verifications take well under a millisecond to tens of milliseconds. */
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

// Process metrics (CPU, memory, event-loop lag, GC) describe the process, not one app: one registry per process.
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

type Series = { labels: Record<string, string>; count: number; sum: number; buckets: Float64Array };

/**
 * Request counts and latencies per method, route pattern and status. Recording costs a few additions on numbers
 * this object already holds (no label object, no hashing, no promise per request); the Prometheus series are
 * built only when /metrics is scraped. prom-client's own Histogram hashes its labels on every observation.
 */
class RequestStats {
  private readonly series: Series[] = [];

  /** The recorder of one route: its series per status are created on first use and then reused. */
  recorder(method: string, route: string): (status: number, elapsedMs: number) => void {
    const byStatus: (Series | undefined)[] = [];
    return (status, elapsedMs) => {
      let s = byStatus[status];
      if (s === undefined) {
        s = { labels: { method, route, status: String(status) }, count: 0, sum: 0, buckets: new Float64Array(LATENCY_BUCKETS.length + 1) };
        byStatus[status] = s;
        this.series.push(s);
      }
      const seconds = elapsedMs / 1000;
      s.count += 1;
      s.sum += seconds;
      let i = 0;
      while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]!) i++;
      s.buckets[i]! += 1;
    };
  }

  /** `keyhaven_http_requests_total` and `keyhaven_http_request_duration_seconds`, in prom-client's metric shape. */
  metrics(): Metric[] {
    const series = this.series;
    const counter = {
      name: "keyhaven_http_requests_total",
      help: "HTTP requests answered, by method, route pattern (never the raw URL) and status.",
      type: "counter",
      aggregator: "sum",
      get: async () => Object.assign({}, counter, { values: series.map((s) => ({ labels: s.labels, value: s.count })) }),
    };
    const histogram = {
      name: "keyhaven_http_request_duration_seconds",
      help: "Time from receiving a request to sending its last byte, by method, route pattern and status.",
      type: "histogram",
      aggregator: "sum",
      get: async () =>
        Object.assign({}, histogram, {
          values: series.flatMap((s) => {
            let cumulative = 0;
            const buckets = LATENCY_BUCKETS.map((le, i) => {
              cumulative += s.buckets[i]!;
              return { metricName: `${histogram.name}_bucket`, labels: Object.assign({}, s.labels, { le }), value: cumulative };
            });
            return [
              ...buckets,
              { metricName: `${histogram.name}_bucket`, labels: Object.assign({}, s.labels, { le: "+Inf" }), value: s.count },
              { metricName: `${histogram.name}_sum`, labels: s.labels, value: s.sum },
              { metricName: `${histogram.name}_count`, labels: s.labels, value: s.count },
            ];
          }),
        }),
    };
    return [counter as unknown as Metric, histogram as unknown as Metric];
  }
}

/** What the Unkey fallback counts (its FallbackStats), read at each scrape. */
type FallbackCounts = {
  readonly calls: ReadonlyMap<string, number>;
  readonly errors: ReadonlyMap<string, number>;
  readonly skipped: ReadonlyMap<string, number>;
  readonly adopted: number;
  pending(): number;
};

/** One process's metrics. createServices creates it, buildApp serves it; keys.verifyKey reports outcomes to it. */
export class AppMetrics {
  readonly registry = new Registry();
  /** Per-route request counts and latencies, fed by the hooks registerMetrics installs. */
  readonly requests = new RequestStats();
  private readonly verificationCounts = new Map<string, number>();
  private readonly skipped = { verifyKey: 0, limit: 0 };

  constructor(deps: {
    config: Pick<Config, "databasePoolSize">;
    store: Pick<Store, "kind">;
    db: Db;
    ratelimiter: RateLimiter;
    /** The process's epoch reads and cache invalidations (EpochReader.invalidations.stats). */
    invalidations: Readonly<InvalidationStats>;
    /** The remaining-uses spender's counts (RemainingSpender). */
    spender: { readonly statementsSent: number; readonly spendsSent: number };
    /** The verification cache's lookups (VerificationCache). */
    lookups: { readonly statements: number; readonly hashesLookedUp: number };
    /** The Unkey fallback's counts (core/verification/verification.fallback.ts), when it is configured. */
    fallback?: FallbackCounts | undefined;
    /** The raw verification log's writer (VerificationLog): verifications it did not log. */
    verificationLog?: { readonly dropped: number } | undefined;
  }) {
    for (const metric of this.requests.metrics()) this.registry.registerMetric(metric);
    // prom-client counts the process's CPU from when its collectors are registered: register them now, at start,
    // so that the first scrape reports what the process used until then instead of almost nothing.
    processMetrics();
    const verificationCounts = this.verificationCounts;
    const skipped = this.skipped;
    // Counters by one label, read from what the process counted at each scrape.
    const labelled: [name: string, help: string, label: string, read: () => Iterable<[string, number]>][] = [
      [
        "keyhaven_key_verifications_total",
        "keys.verifyKey outcomes by code (VALID, NOT_FOUND, RATE_LIMITED, ...).",
        "code",
        () => verificationCounts,
      ],
      [
        "keyhaven_ratelimit_skipped_total",
        "Requests answered without their rate limits because Redis did not answer (KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open; the answer says ratelimitSkipped: true), by operation: verifyKey (v1 and v2), limit (ratelimits.limit, ratelimit.limit, ratelimit.multiLimit).",
        "operation",
        () => (["verifyKey", "limit"] as const).map((operation) => [operation, skipped[operation]]),
      ],
    ];
    const { fallback } = deps;
    if (fallback !== undefined) {
      labelled.push(
        [
          "keyhaven_unkey_fallback_calls_total",
          "Calls to hosted Unkey's keys.verifyKey by the fallback (KEYHAVEN_UNKEY_FALLBACK_URL), by outcome: adopted (a pending key was adopted), not_pending (Unkey knew the key, keyhaven holds no pending key of its id), not_allowed (pending, but not for this request's workspace or caller), unknown (Unkey did not know it), failed (see keyhaven_unkey_fallback_errors_total).",
          "outcome",
          () => fallback.calls,
        ],
        [
          "keyhaven_unkey_fallback_errors_total",
          "Failed calls to hosted Unkey, by reason: timeout (KEYHAVEN_UNKEY_FALLBACK_TIMEOUT_MS), network, status (not 2xx), malformed (outside the v2 contract, or too large); adoption_refused (the store refused what Unkey answered, e.g. a NUL in meta); refresh_skipped (too many getKey refreshes at once). The verification answered as without the fallback.",
          "reason",
          () => fallback.errors,
        ],
        [
          "keyhaven_unkey_fallback_skipped_total",
          "Misses not asked about, by reason: negative_cache (asked within KEYHAVEN_UNKEY_FALLBACK_NEGATIVE_TTL_MS), rate_limited (the workspace's KEYHAVEN_UNKEY_FALLBACK_RATE).",
          "reason",
          () => fallback.skipped,
        ],
      );
    }
    for (const [name, help, label, read] of labelled) {
      new Counter({
        name,
        help,
        labelNames: [label],
        registers: [this.registry],
        collect() {
          this.reset();
          for (const [value, n] of read()) this.inc({ [label]: value }, n);
        },
      });
    }
    const { invalidations, spender, lookups } = deps;
    // Counters the process keeps itself, read at each scrape: name, help, value.
    const counters: [string, string, () => number][] = [
      [
        "keyhaven_epoch_reads_total",
        "Statements that read the store's epoch (verifications arriving together share one; the embedded store reads it only after a write).",
        () => invalidations.reads,
      ],
      [
        "keyhaven_caches_cleared_total",
        "Times every cache of this process was emptied instead of dropping what writes changed (the first read, a log pruned past this process, a bulk write).",
        () => invalidations.clearedAll,
      ],
      [
        "keyhaven_remaining_spend_statements_total",
        "Statements that spent remaining uses; with keyhaven_remaining_spends_total, how many verifications share one.",
        () => spender.statementsSent,
      ],
      ["keyhaven_remaining_spends_total", "Verifications whose remaining uses those statements spent.", () => spender.spendsSent],
      [
        "keyhaven_verification_lookups_total",
        "Statements that looked up keys not in this process's memory (verifications arriving together share one).",
        () => lookups.statements,
      ],
      [
        "keyhaven_verification_lookup_keys_total",
        "Keys those statements looked up: verifications not answered from memory, whether the key exists or not.",
        () => lookups.hashesLookedUp,
      ],
    ];
    const { verificationLog } = deps;
    if (verificationLog !== undefined) {
      counters.push([
        "keyhaven_verification_log_dropped_total",
        "Verifications the raw verification log did not keep: memory full while the database was unreachable, or rows the database refused. They are still counted in the verification counts.",
        () => verificationLog.dropped,
      ]);
    }
    if (fallback !== undefined) {
      counters.push([
        "keyhaven_keys_adopted_total",
        "Pending keys adopted by the Unkey fallback on their first verification.",
        () => fallback.adopted,
      ]);
      new Gauge({
        name: "keyhaven_keys_pending",
        help: "Pending keys (copied from hosted Unkey without their secret, not yet adopted), as the Unkey fallback last counted them.",
        registers: [this.registry],
        collect() {
          this.set(fallback.pending());
        },
      });
    }
    for (const [name, help, value] of counters) {
      new Counter({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(value());
        },
      });
    }
    new Gauge({
      name: "keyhaven_database_pool_size",
      help: "Connections this process may open to the store (DATABASE_POOL_SIZE; 1 for the embedded PGlite).",
      labelNames: ["store"],
      registers: [this.registry],
    }).set({ store: deps.store.kind }, deps.store.kind === "postgres" ? deps.config.databasePoolSize : 1);
    new Gauge({
      name: "keyhaven_database_up",
      help: "1 when the store answered readiness's probe (it reads the epoch table) correctly during this scrape (within 1 s), else 0.",
      registers: [this.registry],
      async collect() {
        this.set((await checkDatabase(deps)) === "up" ? 1 : 0);
      },
    });
    const { ratelimiter } = deps;
    if (ratelimiter.kind === "redis" && ratelimiter.isConnected) {
      const isConnected = ratelimiter.isConnected.bind(ratelimiter);
      new Gauge({
        name: "keyhaven_redis_up",
        help: "1 while the connection to REDIS_URL (shared rate-limit counters) is up, else 0. Absent without REDIS_URL.",
        registers: [this.registry],
        collect() {
          this.set(isConnected() ? 1 : 0);
        },
      });
    }
  }

  /** One keys.verifyKey outcome. A Map lookup and an addition: it runs on every verification. */
  recordVerification(code: string): void {
    this.verificationCounts.set(code, (this.verificationCounts.get(code) ?? 0) + 1);
  }

  /** One request answered without its rate limits, Redis not answering (failing open). */
  recordRatelimitSkipped(operation: "verifyKey" | "limit"): void {
    this.skipped[operation] += 1;
  }

  /** The Prometheus text exposition: this app's series, then the process's. */
  async render(): Promise<{ contentType: string; body: string }> {
    const [app, proc] = await Promise.all([this.registry.metrics(), processMetrics().metrics()]);
    return { contentType: this.registry.contentType, body: `${app}\n${proc}` };
  }
}

/**
 * Instruments every route registered after it (call it before the routes) and serves GET /metrics, which takes
 * `Authorization: Bearer <KEYHAVEN_METRICS_TOKEN>` when that is set.
 */
export function registerMetrics(app: FastifyInstance, deps: { config: Pick<Config, "metricsToken">; metrics: AppMetrics }): void {
  const { metrics } = deps;
  const { requests } = metrics;

  // Each route gets a hook of its own that already knows its method and pattern, so nothing is looked up per request.
  app.addHook("onRoute", (route) => {
    const method = Array.isArray(route.method) ? route.method.join(",") : String(route.method);
    const record = requests.recorder(method, route.url);
    const hook: onResponseHookHandler = (_req, reply, done) => {
      record(reply.statusCode, reply.elapsedTime);
      done();
    };
    const existing = route.onResponse === undefined ? [] : Array.isArray(route.onResponse) ? route.onResponse : [route.onResponse];
    route.onResponse = [hook, ...existing];
  });
  // Requests no route matched (404, and 405 from the not-found handler) share one series, whatever their URL.
  const recordUnmatched = new Map<string, (status: number, elapsedMs: number) => void>();
  app.addHook("onResponse", (req, reply, done) => {
    if (req.is404) {
      let record = recordUnmatched.get(req.method);
      if (!record) recordUnmatched.set(req.method, (record = requests.recorder(req.method, "unmatched")));
      record(reply.statusCode, reply.elapsedTime);
    }
    done();
  });

  app.get("/metrics", { schema: { hide: true } }, async (req, reply) => {
    const token = deps.config.metricsToken;
    if (token !== undefined) {
      const given = bearerToken(req.headers.authorization);
      if (given === "") throw new ApiError("UNAUTHORIZED", "metrics token required (KEYHAVEN_METRICS_TOKEN is set)");
      if (!secretsEqual(given, token)) throw new ApiError("UNAUTHORIZED", "metrics token is not valid");
    }
    const { contentType, body } = await metrics.render();
    return reply.type(contentType).send(body);
  });
}
