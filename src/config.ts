import { z } from "zod";

const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

const optionalNonEmpty = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === "" ? undefined : v));

// Buffer.from(…, "base64") skips characters outside the alphabet, so a mistyped key would decode to other bytes.
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

const encryptionKeySchema = optionalNonEmpty.refine(
  (v) => v === undefined || (BASE64.test(v.trim()) && Buffer.from(v.trim(), "base64").length === 32),
  "must be 32 bytes encoded as base64 (generate one with: openssl rand -base64 32)",
);

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default("127.0.0.1"),
  DATABASE_URL: optionalNonEmpty.refine(
    (v) => v === undefined || /^postgres(ql)?:\/\//.test(v),
    "must be a postgres:// or postgresql:// URL",
  ),
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(4),
  REDIS_URL: optionalNonEmpty.refine(
    (v) => v === undefined || /^rediss?:\/\//.test(v),
    "must be a redis:// or rediss:// URL",
  ),
  KEYHAVEN_DATA_DIR: z.string().min(1).default("./.keyhaven"),
  KEYHAVEN_ROOT_KEY: optionalNonEmpty.refine(
    (v) => v === undefined || v.length >= 16,
    "must be at least 16 characters long",
  ),
  KEYHAVEN_ADMIN_TOKEN: optionalNonEmpty.refine(
    (v) => v === undefined || v.length >= 16,
    "must be at least 16 characters long",
  ),
  KEYHAVEN_METRICS_TOKEN: optionalNonEmpty.refine(
    (v) => v === undefined || v.length >= 16,
    "must be at least 16 characters long",
  ),
  KEYHAVEN_ENCRYPTION_KEY: encryptionKeySchema,
  KEYHAVEN_PUBLIC_URL: optionalNonEmpty.refine(
    (v) => v === undefined || isOrigin(v.replace(/\/+$/, "")),
    "must be an origin such as https://keys.example.com",
  ),
  LOG_LEVEL: z.enum(logLevels).default("info"),
  KEYHAVEN_ANALYTICS: z.enum(["on", "off"], { error: 'must be "on" or "off"' }).default("on"),
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
  redisUrl: string | undefined;
  dataDir: string;
  rootKey: string | undefined;
  adminToken: string | undefined;
  /** When set, GET /metrics needs `Authorization: Bearer <token>`; unset, /metrics is open. */
  metricsToken: string | undefined;
  encryptionKey: Buffer | undefined;
  publicUrl: string | undefined;
  logLevel: (typeof logLevels)[number];
  /** Whether verifications are counted for keys.getVerifications and analytics.getVerifications. */
  analytics: boolean;
}>;

export class ConfigError extends Error {}

/** The only reader of the environment: parses it once, and names the variable that is wrong. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty (or blank) variable means unset, so its default applies: `PORT=` must not mean port 0.
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ""));
  const parsed = envSchema.safeParse(set);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`invalid environment:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    redisUrl: e.REDIS_URL,
    dataDir: e.KEYHAVEN_DATA_DIR,
    rootKey: e.KEYHAVEN_ROOT_KEY,
    adminToken: e.KEYHAVEN_ADMIN_TOKEN,
    metricsToken: e.KEYHAVEN_METRICS_TOKEN,
    encryptionKey: e.KEYHAVEN_ENCRYPTION_KEY ? Buffer.from(e.KEYHAVEN_ENCRYPTION_KEY.trim(), "base64") : undefined,
    publicUrl: e.KEYHAVEN_PUBLIC_URL?.replace(/\/+$/, ""),
    logLevel: e.LOG_LEVEL,
    analytics: e.KEYHAVEN_ANALYTICS === "on",
  });
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
