import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { hostname } from "node:os";
import { z } from "zod";
// zod 3's wording for the environment's messages too, as for the API's.
import "./validation.messages.js";

const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

const optionalNonEmpty = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === "" ? undefined : v));

// Buffer.from(…, "base64") skips characters outside the alphabet, so a mistyped key would decode to other bytes.
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

const ENCRYPTION_KEY_RULE = "must be 32 bytes encoded as base64 (generate one with: openssl rand -base64 32)";

/** The one rule for an encryption key (variable, key file or new key): 32 bytes as base64, surrounding blanks ignored. */
export function decodeEncryptionKey(text: string): Buffer | undefined {
  const v = text.trim();
  if (!BASE64.test(v)) return undefined;
  const key = Buffer.from(v, "base64");
  return key.length === 32 ? key : undefined;
}

/**
 * Reads an encryption key from a file (a mounted secret, the embedded store's key file, a new key to rotate to).
 * Errors name the file, never its content.
 */
export function readEncryptionKeyFile(file: string): Buffer {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(`${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const key = decodeEncryptionKey(text);
  if (!key) throw new ConfigError(`${file}: ${ENCRYPTION_KEY_RULE}`);
  return key;
}

const encryptionKeySchema = optionalNonEmpty.refine((v) => v === undefined || decodeEncryptionKey(v) !== undefined, ENCRYPTION_KEY_RULE);

/** Live counters a workspace may hold when KEYHAVEN_RATELIMIT_COUNTERS_PER_WORKSPACE is not set. */
export const DEFAULT_COUNTERS_PER_WORKSPACE = 100_000;
/**
 * Live counters of ad-hoc limits (named with their limit and duration by a verification itself, by anyone holding a
 * key) a workspace may hold besides, when KEYHAVEN_RATELIMIT_ADHOC_COUNTERS_PER_WORKSPACE is not set.
 */
export const DEFAULT_ADHOC_COUNTERS_PER_WORKSPACE = 100_000;
/** Days the raw verification log keeps its rows when KEYHAVEN_VERIFICATION_LOG_DAYS is not set (0 turns the log off). */
export const DEFAULT_VERIFICATION_LOG_DAYS = 7;
/**
 * Rows of the raw verification log one workspace keeps at most on PostgreSQL when KEYHAVEN_VERIFICATION_LOG_MAX_ROWS
 * is not set: a workspace's oldest rows beyond it are deleted by the log's cleanup. A verification takes some 70 bytes
 * in its compressed chunk (PostgreSQL, no identity, no tags), so a full workspace some 70 MB.
 */
export const DEFAULT_VERIFICATION_LOG_MAX_ROWS = 1_000_000;
/**
 * The same on the embedded store (no DATABASE_URL), a tenth: PGlite runs every statement on keyhaven's one thread, and
 * a v2 analytics query reads the whole log of the caller's workspace in its range, so while it runs no other
 * tenant's request is served. Measured (docs/benchmarks.md, bench/verification-log-query.bench.ts): over a full log
 * of 1,000,000 rows a count(*) held the thread 0.9–1.5 s and an hourly sum of the per-minute table 9–10 s; at
 * 100,000 rows each query measured 0.1–0.6 s.
 */
export const DEFAULT_VERIFICATION_LOG_MAX_ROWS_EMBEDDED = 100_000;
/** Characters of KEYHAVEN_REGION (and of the hostname that is its default) at most. */
export const MAX_REGION_CHARS = 64;

/**
 * PostgreSQL's buffer pool in the embedded store (KEYHAVEN_PGLITE_SHARED_BUFFERS_MB), what PGlite 0.3 ran with. A
 * store of 1,000,000 keys has 234 MB of keys and hash index: beyond the pool, a random key's verification reads its
 * pages through the file system (issue 13 §2, docs/benchmarks.md).
 */
export const DEFAULT_PGLITE_SHARED_BUFFERS_MB = 128;

/**
 * The deadline of one call to hosted Unkey on the fallback path (KEYHAVEN_UNKEY_FALLBACK_TIMEOUT_MS): a verification
 * is otherwise bounded by DATABASE_STATEMENT_TIMEOUT_MS (5 s by default), and the fallback's call must stay well
 * under it; Unkey's verifyKey answers in tens of milliseconds.
 */
export const DEFAULT_UNKEY_FALLBACK_TIMEOUT_MS = 1000;
/** Fallback calls per second a workspace may cause (KEYHAVEN_UNKEY_FALLBACK_RATE): unknown keys cannot flood Unkey. */
export const DEFAULT_UNKEY_FALLBACK_RATE = 20;
/** How long a key Unkey did not know is not asked about again (KEYHAVEN_UNKEY_FALLBACK_NEGATIVE_TTL_MS). */
export const DEFAULT_UNKEY_FALLBACK_NEGATIVE_TTL_MS = 10 * 60_000;

/** An ISO 8601 date (`2027-03-31`, midnight UTC) or date and time with a zone, in unix ms; undefined when not one. */
export function parseIsoDate(value: string): number | undefined {
  const v = value.trim();
  if (!/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/.test(v)) return undefined;
  // Date.parse rolls 2027-02-30 over to March: the day must exist in its month.
  const [y, m, d] = v.slice(0, 10).split("-").map(Number) as [number, number, number];
  if (new Date(Date.UTC(y, m - 1, d)).getUTCDate() !== d || m < 1 || m > 12) return undefined;
  const ms = Date.parse(v);
  return Number.isFinite(ms) ? ms : undefined;
}

/** An http(s) URL without credentials (a base URL such as Unkey's). */
function isBaseUrl(v: string): boolean {
  try {
    const u = new URL(v);
    return (u.protocol === "http:" || u.protocol === "https:") && u.username === "" && u.password === "";
  } catch {
    return false;
  }
}

/** A deadline in milliseconds: at least `min`, at most 10 minutes. */
function milliseconds(fallback: number, min = 50) {
  return z.coerce.number().int().min(min).max(600_000).default(fallback);
}

const TRUST_PROXY_RULE = 'must be "off", "on" or comma-separated proxy addresses and CIDR ranges (or loopback, linklocal, uniquelocal)';

/** An address or range of KEYHAVEN_TRUST_PROXY, as Fastify's trustProxy (proxy-addr) takes it. */
function isProxyEntry(entry: string): boolean {
  if (["loopback", "linklocal", "uniquelocal"].includes(entry)) return true;
  const [address = "", prefix, ...rest] = entry.split("/");
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

/**
 * KEYHAVEN_TRUST_PROXY as Fastify's `trustProxy`: which proxies' X-Forwarded-For is believed for the caller's address
 * (`request.ip`, which the IP allow-lists of keys.verifyKey read). Undefined when the value is not one of these.
 */
export function parseTrustProxy(value: string): boolean | string[] | undefined {
  const v = value.trim().toLowerCase();
  if (v === "off" || v === "false") return false;
  if (v === "on" || v === "true") return true;
  // No hop count: Fastify trusts nobody for one (it cannot tell a proxy from a client that sends the header itself).
  const entries = v.split(",").map((e) => e.trim());
  return entries.every(isProxyEntry) ? entries : undefined;
}

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default("127.0.0.1"),
  DATABASE_URL: optionalNonEmpty.refine(
    (v) => v === undefined || /^postgres(ql)?:\/\//.test(v),
    "must be a postgres:// or postgresql:// URL",
  ),
  // A file holding DATABASE_URL's password (a Docker secret, the one PostgreSQL's POSTGRES_PASSWORD_FILE reads).
  DATABASE_PASSWORD_FILE: optionalNonEmpty,
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(4),
  DATABASE_CONNECT_TIMEOUT_MS: milliseconds(3000),
  DATABASE_STATEMENT_TIMEOUT_MS: milliseconds(5000),
  KEYHAVEN_SHUTDOWN_TIMEOUT_MS: milliseconds(5000),
  REDIS_URL: optionalNonEmpty.refine((v) => v === undefined || /^rediss?:\/\//.test(v), "must be a redis:// or rediss:// URL"),
  // At least 100: one verification may need a few dozen new counters, and must not evict its own.
  KEYHAVEN_RATELIMIT_COUNTERS_PER_WORKSPACE: z.coerce.number().int().min(100).max(10_000_000).default(DEFAULT_COUNTERS_PER_WORKSPACE),
  KEYHAVEN_RATELIMIT_ADHOC_COUNTERS_PER_WORKSPACE: z.coerce
    .number()
    .int()
    .min(100)
    .max(10_000_000)
    .default(DEFAULT_ADHOC_COUNTERS_PER_WORKSPACE),
  REDIS_CONNECT_TIMEOUT_MS: milliseconds(500),
  REDIS_COMMAND_TIMEOUT_MS: milliseconds(500),
  KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE: z.enum(["open", "closed"], { error: 'must be "open" or "closed"' }).optional(),
  // The same setting by the shorter name issue 34 used for it; both may be set only to the same value.
  KEYHAVEN_RATELIMIT_FAIL: z.enum(["open", "closed"], { error: 'must be "open" or "closed"' }).optional(),
  KEYHAVEN_DATA_DIR: z.string().min(1).default("./.keyhaven"),
  KEYHAVEN_PGLITE_SHARED_BUFFERS_MB: z.coerce
    .number({ error: "must be a whole number of megabytes" })
    .int("must be a whole number of megabytes")
    .min(16, "must be at least 16")
    .max(1024, "must be at most 1024")
    .default(DEFAULT_PGLITE_SHARED_BUFFERS_MB),
  KEYHAVEN_ROOT_KEY: optionalNonEmpty.refine((v) => v === undefined || v.length >= 16, "must be at least 16 characters long"),
  KEYHAVEN_ROOT_KEY_FILE: optionalNonEmpty,
  KEYHAVEN_ADMIN_TOKEN: optionalNonEmpty.refine((v) => v === undefined || v.length >= 16, "must be at least 16 characters long"),
  KEYHAVEN_METRICS_TOKEN: optionalNonEmpty.refine((v) => v === undefined || v.length >= 16, "must be at least 16 characters long"),
  KEYHAVEN_ENCRYPTION_KEY: encryptionKeySchema,
  KEYHAVEN_ENCRYPTION_KEY_FILE: optionalNonEmpty,
  KEYHAVEN_PUBLIC_URL: optionalNonEmpty.refine(
    (v) => v === undefined || isOrigin(v.replace(/\/+$/, "")),
    "must be an origin such as https://keys.example.com",
  ),
  LOG_LEVEL: z.enum(logLevels).default("info"),
  KEYHAVEN_ANALYTICS: z.enum(["on", "off"], { error: 'must be "on" or "off"' }).default("on"),
  KEYHAVEN_ANALYTICS_RETENTION_DAYS: z.coerce
    .number({ error: "must be a whole number of days" })
    .int("must be a whole number of days")
    .min(1, "must be at least 1")
    .max(36_500, "must be at most 36500")
    .default(90),
  KEYHAVEN_VERIFICATION_LOG_DAYS: z.coerce
    .number({ error: "must be a whole number of days" })
    .int("must be a whole number of days")
    .min(0, "must be at least 0 (0 turns the verification log off)")
    .max(36_500, "must be at most 36500")
    .default(DEFAULT_VERIFICATION_LOG_DAYS),
  KEYHAVEN_VERIFICATION_LOG_MAX_ROWS: z.coerce
    .number({ error: "must be a whole number of rows" })
    .int("must be a whole number of rows")
    .min(1, "must be at least 1")
    .max(1_000_000_000, "must be at most 1000000000")
    // Unset: the default of the store (DEFAULT_VERIFICATION_LOG_MAX_ROWS or _EMBEDDED), once DATABASE_URL is read.
    .optional(),
  KEYHAVEN_REGION: optionalNonEmpty.refine(
    (v) => v === undefined || v.trim().length <= MAX_REGION_CHARS,
    `must be at most ${MAX_REGION_CHARS} characters`,
  ),
  KEYHAVEN_AUDIT_RETENTION_DAYS: z.coerce
    .number({ error: "must be a whole number of days" })
    .int("must be a whole number of days")
    .min(1, "must be at least 1")
    .max(36_500, "must be at most 36500")
    .default(90),
  KEYHAVEN_VERIFY_REQUIRE_SCOPE: z.enum(["on", "off"], { error: 'must be "on" or "off"' }).default("off"),
  // Webhook endpoints on loopback, private, link-local, unique-local or unspecified addresses (docs/webhooks.md).
  KEYHAVEN_WEBHOOK_ALLOW_PRIVATE: z.enum(["true", "false"], { error: 'must be "true" or "false"' }).default("false"),
  // Client timeouts: at least 100 ms (a smaller one would cut off ordinary clients).
  KEYHAVEN_HEADERS_TIMEOUT_MS: milliseconds(10_000, 100),
  KEYHAVEN_REQUEST_TIMEOUT_MS: milliseconds(30_000, 100),
  KEYHAVEN_KEEP_ALIVE_TIMEOUT_MS: milliseconds(30_000, 100),
  KEYHAVEN_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  KEYHAVEN_TRUST_PROXY: z
    .string()
    .default("off")
    .refine((v) => parseTrustProxy(v) !== undefined, TRUST_PROXY_RULE),
  // The web console (issue 37): under /console on the same listener, or on its own port; off turns it off.
  KEYHAVEN_CONSOLE: z.enum(["on", "off"], { error: 'must be "on" or "off"' }).default("on"),
  KEYHAVEN_CONSOLE_PORT: z.coerce
    .number({ error: "must be a port number" })
    .int("must be a port number")
    .min(1, "must be between 1 and 65535")
    .max(65535, "must be between 1 and 65535")
    .optional(),
  KEYHAVEN_CONSOLE_IDLE_MINUTES: z.coerce
    .number({ error: "must be a whole number of minutes" })
    .int("must be a whole number of minutes")
    .min(1, "must be at least 1")
    .max(1440, "must be at most 1440 (a day)")
    .default(30),
  KEYHAVEN_CONSOLE_SESSION_HOURS: z.coerce
    .number({ error: "must be a whole number of hours" })
    .int("must be a whole number of hours")
    .min(1, "must be at least 1")
    .max(720, "must be at most 720 (30 days)")
    .default(12),
  // The Unkey fallback (issue 36 §2): adopting pending keys on their first verification during a parallel run.
  KEYHAVEN_UNKEY_FALLBACK_URL: optionalNonEmpty.refine(
    (v) => v === undefined || isBaseUrl(v),
    "must be an http:// or https:// URL without credentials, such as https://api.unkey.com",
  ),
  // Checked in loadConfig, by messages that never quote it: zod's may quote the value received.
  KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: optionalNonEmpty,
  KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY_FILE: optionalNonEmpty,
  KEYHAVEN_UNKEY_FALLBACK_UNTIL: optionalNonEmpty.refine(
    (v) => v === undefined || parseIsoDate(v) !== undefined,
    "must be an ISO 8601 date or date and time, such as 2027-03-31 or 2027-03-31T18:00:00Z",
  ),
  KEYHAVEN_UNKEY_FALLBACK_TIMEOUT_MS: milliseconds(DEFAULT_UNKEY_FALLBACK_TIMEOUT_MS),
  KEYHAVEN_UNKEY_FALLBACK_RATE: z.coerce
    .number({ error: "must be a whole number of calls per second" })
    .int("must be a whole number of calls per second")
    .min(1, "must be at least 1")
    .max(10_000, "must be at most 10000")
    .default(DEFAULT_UNKEY_FALLBACK_RATE),
  KEYHAVEN_UNKEY_FALLBACK_NEGATIVE_TTL_MS: z.coerce
    .number({ error: "must be a whole number of milliseconds" })
    .int("must be a whole number of milliseconds")
    .min(1000, "must be at least 1000")
    .max(86_400_000, "must be at most 86400000 (a day)")
    .default(DEFAULT_UNKEY_FALLBACK_NEGATIVE_TTL_MS),
});

/** Every environment variable keyhaven reads (the server's; the client commands read a subset, see loadCliEnv). */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze(Object.keys(envSchema.shape));

function isOrigin(v: string): boolean {
  if (!/^https?:\/\/[^/?#]+$/.test(v)) return false;
  try {
    const u = new URL(v);
    return u.username === "" && u.password === "";
  } catch {
    return false;
  }
}

export type Config = Readonly<{
  port: number;
  host: string;
  databaseUrl: string | undefined;
  databasePoolSize: number;
  /** Deadline on opening a PostgreSQL connection (handshake included). */
  databaseConnectTimeoutMs: number;
  /** PostgreSQL's statement_timeout; the client gives up 500 ms later (a frozen server or network). */
  databaseStatementTimeoutMs: number;
  /** The one deadline for what shutdown writes (analytics counts, the migration worker's batch, ANALYZE), after requests. */
  shutdownTimeoutMs: number;
  redisUrl: string | undefined;
  /**
   * Live counters of configured rate limits (keys', identities', namespaces') one workspace may hold (in memory or
   * in Redis); at the quota its own configured counters go, never another workspace's.
   */
  ratelimitCountersPerWorkspace: number;
  /**
   * Live counters of ad-hoc limits (a verification's own `ratelimits` with limit and duration) one workspace may
   * hold besides: a budget of their own, so that they never evict a configured limit's counter.
   */
  ratelimitAdHocCountersPerWorkspace: number;
  redisConnectTimeoutMs: number;
  redisCommandTimeoutMs: number;
  /**
   * When Redis cannot answer (KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE, or KEYHAVEN_RATELIMIT_FAIL): "open" verifies without
   * the Redis-backed limits (and says so), "closed" answers 503.
   */
  ratelimitOnRedisFailure: "open" | "closed";
  dataDir: string;
  /** The embedded store's buffer pool, in MB (PostgreSQL's shared_buffers). */
  pgliteSharedBuffersMb: number;
  rootKey: string | undefined;
  adminToken: string | undefined;
  /** When set, GET /metrics needs `Authorization: Bearer <token>`; unset, /metrics is open. */
  metricsToken: string | undefined;
  encryptionKey: Buffer | undefined;
  /** KEYHAVEN_ENCRYPTION_KEY_FILE: the file `encryptionKey` was read from, if it came from one. */
  encryptionKeyFile: string | undefined;
  publicUrl: string | undefined;
  logLevel: (typeof logLevels)[number];
  /** Whether verifications are counted for keys.getVerifications and analytics.getVerifications. */
  analytics: boolean;
  /** Verification counts of hours older than this many days are deleted in the background. */
  analyticsRetentionDays: number;
  /**
   * Days the raw verification log (issue 38 §2) keeps its rows, 0 when there is no log: KEYHAVEN_VERIFICATION_LOG_DAYS,
   * or 0 when analytics are off (KEYHAVEN_ANALYTICS=off). A query of the log must refuse a range older than this.
   */
  verificationLogDays: number;
  /**
   * Rows of the verification log one workspace keeps at most; its oldest beyond are deleted in the background
   * (KEYHAVEN_VERIFICATION_LOG_MAX_ROWS; unset: 1,000,000 on PostgreSQL, 100,000 on the embedded store).
   */
  verificationLogMaxRows: number;
  /** This instance's name in the verification log's `region` (KEYHAVEN_REGION, else the hostname; at most 64 characters). */
  region: string;
  /** Audit entries older than this many days are deleted in the background. */
  auditRetentionDays: number;
  /**
   * KEYHAVEN_WEBHOOK_ALLOW_PRIVATE: whether a webhook endpoint may be (or resolve to) a loopback, private, link-local,
   * unique-local or unspecified address; false by default, so a workspace cannot make keyhaven call its own network.
   */
  webhookAllowPrivate: boolean;
  /**
   * keys.verifyKey needs `apiId` or a valid root key (which scopes it to that root key's workspace); off: neither
   * is needed, as in v1.
   */
  verifyRequireScope: boolean;
  /**
   * Fastify's trustProxy (KEYHAVEN_TRUST_PROXY): false (the default) takes the caller's address from the socket;
   * true (any peer) or proxy addresses/ranges take it from X-Forwarded-For, as far back as the proxies are trusted.
   */
  trustProxy: boolean | string[];
  /**
   * The Unkey fallback (docs/operations.md, "The Unkey fallback"): a verification of a key keyhaven does not know asks hosted
   * Unkey, once, and adopts the pending key Unkey names. Undefined when KEYHAVEN_UNKEY_FALLBACK_URL is unset.
   */
  unkeyFallback: UnkeyFallbackConfig | undefined;
  /** What the HTTP server allows a client: see docs/operations.md, "Running in production" (Slow clients). */
  /**
   * The web console: whether it is served (KEYHAVEN_CONSOLE), on its own listener's port (KEYHAVEN_CONSOLE_PORT; else
   * under /console of the API's), and how long its sessions live idle and at most.
   */
  console: Readonly<{ enabled: boolean; port: number | undefined; idleMs: number; absoluteMs: number }>;
  http: Readonly<{
    /** From a connection's (or request's) first byte to the end of its headers; else 408. */
    headersTimeoutMs: number;
    /** From a request's first byte to the end of its body; else 408. Not the time the answer takes. */
    requestTimeoutMs: number;
    /** How long a keep-alive connection may sit idle between requests before it is closed. */
    keepAliveTimeoutMs: number;
    /** Open connections at most; more are closed at once. */
    maxConnections: number;
  }>;
}>;

/** KEYHAVEN_UNKEY_FALLBACK_*: see docs/operations.md. */
export type UnkeyFallbackConfig = Readonly<{
  /** Unkey's base URL, without a trailing slash. */
  url: string;
  /** The Unkey root key (never logged, never in an error). */
  rootKey: string;
  /** Unix ms after which the fallback is off by itself; undefined: no end. */
  until: number | undefined;
  /** The deadline of one upstream call, answer included. */
  timeoutMs: number;
  /** Upstream calls per second per workspace (a token bucket of as many). */
  ratePerSecond: number;
  /** How long a key Unkey did not know is not asked about again. */
  negativeTtlMs: number;
}>;

export class ConfigError extends Error {}

/** The only reader of the environment: parses it once, and names the variable that is wrong. */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  /** `ignoreEncryptionKey`: neither KEYHAVEN_ENCRYPTION_KEY nor its file is read (for forgetting a lost key). */
  { ignoreEncryptionKey = false }: { ignoreEncryptionKey?: boolean } = {},
): Config {
  const ignored = new Set(ignoreEncryptionKey ? ["KEYHAVEN_ENCRYPTION_KEY", "KEYHAVEN_ENCRYPTION_KEY_FILE"] : []);
  // An empty (or blank) variable means unset, so its default applies: `PORT=` must not mean port 0.
  const set = Object.fromEntries(Object.entries(env).filter(([name, v]) => v !== undefined && v.trim() !== "" && !ignored.has(name)));
  const parsed = envSchema.safeParse(set);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`invalid environment:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  const invalid = (name: string, message: string) => new ConfigError(`invalid environment:\n  ${name}: ${message}`);
  if (e.KEYHAVEN_ENCRYPTION_KEY !== undefined && e.KEYHAVEN_ENCRYPTION_KEY_FILE !== undefined) {
    throw invalid("KEYHAVEN_ENCRYPTION_KEY, KEYHAVEN_ENCRYPTION_KEY_FILE", "both are set; set only one of them");
  }
  let encryptionKey = e.KEYHAVEN_ENCRYPTION_KEY === undefined ? undefined : decodeEncryptionKey(e.KEYHAVEN_ENCRYPTION_KEY);
  if (e.KEYHAVEN_ENCRYPTION_KEY_FILE !== undefined) {
    try {
      encryptionKey = readEncryptionKeyFile(e.KEYHAVEN_ENCRYPTION_KEY_FILE);
    } catch (err) {
      throw invalid("KEYHAVEN_ENCRYPTION_KEY_FILE", (err as Error).message);
    }
  }
  const onRedisFailure = e.KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE ?? e.KEYHAVEN_RATELIMIT_FAIL ?? "open";
  if (e.KEYHAVEN_RATELIMIT_FAIL !== undefined && e.KEYHAVEN_RATELIMIT_FAIL !== onRedisFailure) {
    throw invalid(
      "KEYHAVEN_RATELIMIT_FAIL, KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE",
      "both are set, to different values; set only one of them",
    );
  }
  const rootKey =
    e.KEYHAVEN_ROOT_KEY_FILE === undefined ? e.KEYHAVEN_ROOT_KEY : rootKeyFromFile(e.KEYHAVEN_ROOT_KEY, e.KEYHAVEN_ROOT_KEY_FILE);
  const databaseUrl =
    e.DATABASE_PASSWORD_FILE === undefined ? e.DATABASE_URL : urlWithPasswordFile(e.DATABASE_URL, e.DATABASE_PASSWORD_FILE);
  if (e.KEYHAVEN_HEADERS_TIMEOUT_MS > e.KEYHAVEN_REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      "invalid environment:\n  KEYHAVEN_HEADERS_TIMEOUT_MS: must not exceed KEYHAVEN_REQUEST_TIMEOUT_MS (the headers are part of the request)",
    );
  }
  const unkeyFallback = unkeyFallbackOf(e);
  if (unkeyFallback !== undefined && unkeyFallback.timeoutMs >= e.DATABASE_STATEMENT_TIMEOUT_MS) {
    throw invalid(
      "KEYHAVEN_UNKEY_FALLBACK_TIMEOUT_MS",
      `must be less than DATABASE_STATEMENT_TIMEOUT_MS (${e.DATABASE_STATEMENT_TIMEOUT_MS}), which bounds a verification`,
    );
  }
  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    databaseUrl,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    databaseConnectTimeoutMs: e.DATABASE_CONNECT_TIMEOUT_MS,
    databaseStatementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
    shutdownTimeoutMs: e.KEYHAVEN_SHUTDOWN_TIMEOUT_MS,
    redisUrl: e.REDIS_URL,
    ratelimitCountersPerWorkspace: e.KEYHAVEN_RATELIMIT_COUNTERS_PER_WORKSPACE,
    ratelimitAdHocCountersPerWorkspace: e.KEYHAVEN_RATELIMIT_ADHOC_COUNTERS_PER_WORKSPACE,
    redisConnectTimeoutMs: e.REDIS_CONNECT_TIMEOUT_MS,
    redisCommandTimeoutMs: e.REDIS_COMMAND_TIMEOUT_MS,
    ratelimitOnRedisFailure: onRedisFailure,
    dataDir: e.KEYHAVEN_DATA_DIR,
    pgliteSharedBuffersMb: e.KEYHAVEN_PGLITE_SHARED_BUFFERS_MB,
    rootKey,
    adminToken: e.KEYHAVEN_ADMIN_TOKEN,
    metricsToken: e.KEYHAVEN_METRICS_TOKEN,
    encryptionKey,
    encryptionKeyFile: e.KEYHAVEN_ENCRYPTION_KEY_FILE,
    publicUrl: e.KEYHAVEN_PUBLIC_URL?.replace(/\/+$/, ""),
    logLevel: e.LOG_LEVEL,
    analytics: e.KEYHAVEN_ANALYTICS === "on",
    analyticsRetentionDays: e.KEYHAVEN_ANALYTICS_RETENTION_DAYS,
    verificationLogDays: e.KEYHAVEN_ANALYTICS === "on" ? e.KEYHAVEN_VERIFICATION_LOG_DAYS : 0,
    verificationLogMaxRows:
      e.KEYHAVEN_VERIFICATION_LOG_MAX_ROWS ??
      (databaseUrl === undefined ? DEFAULT_VERIFICATION_LOG_MAX_ROWS_EMBEDDED : DEFAULT_VERIFICATION_LOG_MAX_ROWS),
    region: regionOf(e.KEYHAVEN_REGION),
    auditRetentionDays: e.KEYHAVEN_AUDIT_RETENTION_DAYS,
    webhookAllowPrivate: e.KEYHAVEN_WEBHOOK_ALLOW_PRIVATE === "true",
    verifyRequireScope: e.KEYHAVEN_VERIFY_REQUIRE_SCOPE === "on",
    trustProxy: parseTrustProxy(e.KEYHAVEN_TRUST_PROXY)!,
    unkeyFallback,
    console: Object.freeze({
      enabled: e.KEYHAVEN_CONSOLE === "on",
      port: e.KEYHAVEN_CONSOLE_PORT,
      idleMs: e.KEYHAVEN_CONSOLE_IDLE_MINUTES * 60_000,
      absoluteMs: e.KEYHAVEN_CONSOLE_SESSION_HOURS * 3_600_000,
    }),
    http: Object.freeze({
      headersTimeoutMs: e.KEYHAVEN_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: e.KEYHAVEN_REQUEST_TIMEOUT_MS,
      keepAliveTimeoutMs: e.KEYHAVEN_KEEP_ALIVE_TIMEOUT_MS,
      maxConnections: e.KEYHAVEN_MAX_CONNECTIONS,
    }),
  });
}

/** KEYHAVEN_REGION as set, else the machine's hostname (cut to MAX_REGION_CHARS), else "keyhaven". */
function regionOf(set: string | undefined): string {
  if (set !== undefined) return set.trim();
  const host = hostname().trim().slice(0, MAX_REGION_CHARS);
  return host === "" ? "keyhaven" : host;
}

const invalidVariable = (name: string, message: string) => new ConfigError(`invalid environment:\n  ${name}: ${message}`);

/**
 * A secret from a file (a mounted Docker secret): its text without the trailing newlines, as PostgreSQL's image
 * reads POSTGRES_PASSWORD_FILE, so one file serves both. Errors name the file, never its content.
 */
function readSecretFile(name: string, file: string): string {
  try {
    return readFileSync(file, "utf8").replace(/[\r\n]+$/, "");
  } catch (err) {
    throw invalidVariable(name, `${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** The fallback's settings, or undefined when KEYHAVEN_UNKEY_FALLBACK_URL is unset (the root key alone is an error). */
function unkeyFallbackOf(e: z.output<typeof envSchema>): UnkeyFallbackConfig | undefined {
  const inline = e.KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY;
  const file = e.KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY_FILE;
  if (inline !== undefined && file !== undefined) {
    throw invalidVariable("KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY_FILE", "both are set; set only one of them");
  }
  const url = e.KEYHAVEN_UNKEY_FALLBACK_URL;
  if (url === undefined) {
    if (inline !== undefined || file !== undefined || e.KEYHAVEN_UNKEY_FALLBACK_UNTIL !== undefined) {
      throw invalidVariable("KEYHAVEN_UNKEY_FALLBACK_URL", "is unset, but other KEYHAVEN_UNKEY_FALLBACK_ variables are set");
    }
    return undefined;
  }
  const name = file === undefined ? "KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY" : "KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY_FILE";
  const rootKey = file === undefined ? inline?.trim() : readSecretFile(name, file).trim();
  if (rootKey === undefined || rootKey === "") {
    throw invalidVariable(
      "KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY",
      "is required with KEYHAVEN_UNKEY_FALLBACK_URL (or KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY_FILE)",
    );
  }
  // The value is never quoted: it is a secret.
  if (!/^[\x21-\x7e]+$/.test(rootKey)) throw invalidVariable(name, "must be printable ASCII without spaces (the value is not shown)");
  return Object.freeze({
    url: url.trim().replace(/\/+$/, ""),
    rootKey,
    until: e.KEYHAVEN_UNKEY_FALLBACK_UNTIL === undefined ? undefined : parseIsoDate(e.KEYHAVEN_UNKEY_FALLBACK_UNTIL),
    timeoutMs: e.KEYHAVEN_UNKEY_FALLBACK_TIMEOUT_MS,
    ratePerSecond: e.KEYHAVEN_UNKEY_FALLBACK_RATE,
    negativeTtlMs: e.KEYHAVEN_UNKEY_FALLBACK_NEGATIVE_TTL_MS,
  });
}

function rootKeyFromFile(inline: string | undefined, file: string): string {
  if (inline !== undefined) throw invalidVariable("KEYHAVEN_ROOT_KEY, KEYHAVEN_ROOT_KEY_FILE", "both are set; set only one of them");
  const key = readSecretFile("KEYHAVEN_ROOT_KEY_FILE", file);
  if (key.length < 16) throw invalidVariable("KEYHAVEN_ROOT_KEY_FILE", `${file}: must hold at least 16 characters`);
  return key;
}

/** DATABASE_URL with the password of DATABASE_PASSWORD_FILE, percent-encoded, so that any password works. */
function urlWithPasswordFile(url: string | undefined, file: string): string {
  if (url === undefined) throw invalidVariable("DATABASE_PASSWORD_FILE", "is set without DATABASE_URL (the URL to give the password to)");
  const parsed = new URL(url);
  if (parsed.password !== "") {
    throw invalidVariable("DATABASE_URL, DATABASE_PASSWORD_FILE", "the URL holds a password and the file another; set only one of them");
  }
  const password = readSecretFile("DATABASE_PASSWORD_FILE", file);
  if (password === "") throw invalidVariable("DATABASE_PASSWORD_FILE", `${file}: is empty`);
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}

/** What the client commands (`keyhaven import`, `keyhaven admin`) read from the environment: credentials only. */
export type CliEnv = Readonly<{ rootKey: string | undefined; adminToken: string | undefined }>;

/**
 * The client side of KEYHAVEN_ROOT_KEY and KEYHAVEN_ADMIN_TOKEN: the secret to send (a command-line option wins).
 * Nothing else is read, so a server-only variable that is invalid never stops a client command.
 */
export function loadCliEnv(env: NodeJS.ProcessEnv = process.env): CliEnv {
  const nonEmpty = (v: string | undefined) => (v === undefined || v.trim() === "" ? undefined : v.trim());
  return Object.freeze({ rootKey: nonEmpty(env.KEYHAVEN_ROOT_KEY), adminToken: nonEmpty(env.KEYHAVEN_ADMIN_TOKEN) });
}
