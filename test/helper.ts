import { randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import postgres from "postgres";
import { expect, inject } from "vitest";
import { buildApp } from "../src/app.js";
import { type BackgroundJobs, startBackgroundJobs, stopBackgroundJobs } from "../src/background.js";
import type { Clock } from "../src/clock.js";
import { type Config, loadConfig } from "../src/config.js";
import type { Keyring } from "../src/keyring/keyring.js";
import { type Db, openPostgres, type Store } from "../src/storage/client.js";
import { insertRootKey } from "../src/storage/rootKeys/rootKeys.repository.js";
import { MemoryRateLimiter } from "../src/storage/ratelimits/memory.ratelimiter.js";
import { counterQuotasOf, type RateLimiter } from "../src/storage/ratelimits/ratelimiter.js";
import { RedisRateLimiter } from "../src/storage/ratelimits/redis.ratelimiter.js";
import { createServices, type Services } from "../src/services.js";
import type { WebhookWorkerOptions } from "../src/core/webhooks/webhooks.worker.js";
import { pooledPglite } from "./pglite-pool.js";
import { insertWorkspace, setWorkspaceEnabled } from "../src/storage/workspaces/workspaces.repository.js";

export const ADMIN_TOKEN = "test-admin-token-0123456789";

export type Response = { status: number; body: any; headers: Record<string, unknown> };

export type Tenant = { workspaceId: string; rootKey: string; rootKeyId: string };

export type Harness = {
  app: FastifyInstance;
  store: Store;
  db: Db;
  config: Config;
  keyring: Keyring;
  ratelimiter: RateLimiter;
  /** Everything the app's handlers use (createServices), as main.ts builds it. */
  services: Services;
  /** The app's clock: the machine's unless the harness was given one (e.g. a ManualClock). */
  clock: Clock;
  /** The app's verification analytics and migration worker (started unless the harness was made without it). */
  jobs: BackgroundJobs;
  /** Whether this run uses a real PostgreSQL server (TEST_DATABASE_URL) rather than PGlite. */
  onPostgres: boolean;
  databaseUrl: string | undefined;
  /** A workspace with a root key holding `permissions` (default `*`). */
  tenant(permissions?: string[]): Promise<Tenant>;
  /** Another root key of the workspace, holding only `permissions`. */
  rootKey(workspaceId: string, permissions: string[]): Promise<string>;
  disableWorkspace(workspaceId: string): Promise<void>;
  /** An API of the tenant's workspace, created through the API (any createApi settings may be given). */
  createApi(tenant: Tenant, settings?: Record<string, unknown>): Promise<string>;
  /** A key imported by plaintext (so it can be verified), with any import fields. */
  importKey(tenant: Tenant, apiId: string, fields?: Record<string, unknown>): Promise<{ key: string; keyId: string }>;
  post(path: string, body: unknown, rootKey?: string, headers?: Record<string, string>): Promise<Response>;
  get(path: string, query: Record<string, string>, rootKey?: string): Promise<Response>;
  /** Raw SQL against the test database, for assertions on what was (not) written. */
  sql<T = Record<string, unknown>>(query: string): Promise<T[]>;
  /**
   * A second app on the same database, as another replica would be: its own connection pool on PostgreSQL and
   * its own Redis client on the same counters. On PGlite (one embedded instance) it shares this app's store.
   */
  replica(): Promise<{ app: FastifyInstance; services: Services; close(): Promise<void> }>;
  /** This app and a replica() listening on loopback ports: their base URLs, and a close for the replica. */
  listenWithReplica(): Promise<{ urls: [string, string]; closeReplica(): Promise<void> }>;
  close(): Promise<void>;
};

/**
 * Copies the migrated template into a database of its own. PostgreSQL refuses the copy (55006, "source database is
 * being accessed by other users") while any other session is in the template, as another file's copy or an
 * autovacuum worker can be for a moment: try again until it is free, for at most about 10 s.
 */
async function copyTemplate(admin: postgres.Sql, name: string, template: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await admin.unsafe(`create database ${name} template ${template}`);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== "55006" || attempt >= 40) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 200));
    }
  }
}

/** Builds the real app on a fresh, migrated database of its own (PGlite, or a copy of the PostgreSQL template). */
export async function createHarness(
  env: Record<string, string> = {},
  options: {
    /** false: enqueued migration batches wait (for a replica's worker). */
    migrationWorker?: boolean;
    /** Counters in this Redis (e.g. one the test started, or through a fault proxy), or `null`: in memory, even with TEST_REDIS_URL. */
    redisUrl?: string | null;
    /** PostgreSQL only: the URL the app connects to, given the test database's (e.g. through a fault proxy). */
    postgresVia?: (databaseUrl: string) => string;
    /** Fastify's logger option for the app (default: no logs). */
    logger?: Record<string, unknown>;
    /** The app's clock (and its replicas'): default, the machine's. */
    clock?: Clock;
    /** The webhook worker's options (a short poll, a fixed jitter): default, production's. */
    webhooks?: Partial<WebhookWorkerOptions>;
  } = {},
): Promise<Harness> {
  const templateUrl = inject("templateDatabaseUrl");
  let store: Store;
  let databaseUrl: string | undefined;
  let dropDatabase = async () => {};
  if (templateUrl) {
    const name = `keyhaven_test_${randomBytes(6).toString("hex")}`;
    const template = new URL(templateUrl).pathname.slice(1);
    const admin = postgres(templateUrl.replace(`/${template}`, "/postgres"), { max: 1, onnotice: () => {} });
    await copyTemplate(admin, name, template);
    databaseUrl = templateUrl.replace(`/${template}`, `/${name}`);
    store = openPostgres(options.postgresVia?.(databaseUrl) ?? databaseUrl, 4, postgresTimeouts(env));
    dropDatabase = async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    };
  } else {
    store = await pooledPglite();
  }
  const config = loadConfig({
    KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN,
    KEYHAVEN_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
    KEYHAVEN_DATA_DIR: "memory://",
    ...(databaseUrl && { DATABASE_URL: databaseUrl }),
    ...env,
  });
  // With TEST_REDIS_URL, counters live in the real Redis, under a prefix of this harness's own.
  const redisUrl = options.redisUrl === undefined ? process.env.TEST_REDIS_URL : (options.redisUrl ?? undefined);
  const redisPrefix = `keyhaven-test:${randomBytes(6).toString("hex")}:`;
  const quota = counterQuotasOf(config);
  const redisTimeouts = { connectTimeoutMs: config.redisConnectTimeoutMs, commandTimeoutMs: config.redisCommandTimeoutMs };
  const ratelimiter: RateLimiter = redisUrl
    ? new RedisRateLimiter(redisUrl, redisPrefix, quota, redisTimeouts)
    : new MemoryRateLimiter(undefined, quota);
  const services = await createServices(config, store, {
    ratelimiter,
    ...(options.clock && { clock: options.clock }),
    ...(options.webhooks && { webhooks: options.webhooks }),
  });
  const app = await buildApp({ deps: services, logger: options.logger ?? false });
  startBackgroundJobs(services, app.log, options);

  const harness: Harness = {
    app,
    store,
    db: store.db,
    config,
    keyring: services.keyring,
    ratelimiter,
    services,
    clock: services.clock,
    jobs: services,
    onPostgres: templateUrl !== undefined,
    databaseUrl,
    async tenant(permissions = ["*"]) {
      const workspaceId = await insertWorkspace(store.db, `ws-${randomBytes(3).toString("hex")}`, services.clock.now());
      const { keyId, key } = await insertRootKey(store.db, { workspaceId, permissions }, services.clock.now());
      return { workspaceId, rootKey: key, rootKeyId: keyId };
    },
    async rootKey(workspaceId, permissions) {
      return (await insertRootKey(store.db, { workspaceId, permissions }, services.clock.now())).key;
    },
    async createApi(tenant, settings = {}) {
      const res = await harness.post("/v1/apis.createApi", { name: `api-${randomBytes(4).toString("hex")}`, ...settings }, tenant.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.apiId;
    },
    async importKey(tenant, apiId, fields = {}) {
      const key = `sk_${randomBytes(16).toString("hex")}`;
      const res = await harness.post("/v1/migrations.createKeys", [{ apiId, plaintext: key, ...fields }], tenant.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return { key, keyId: res.body.keyIds[0] as string };
    },
    async disableWorkspace(workspaceId) {
      await setWorkspaceEnabled(store.db, workspaceId, false, services.clock.now());
    },
    ...clientOf(app),
    async sql<T>(query: string) {
      const { rowsOf } = await import("../src/storage/client.js");
      const { sql } = await import("drizzle-orm");
      return rowsOf<T>(await store.db.execute(sql.raw(query)));
    },
    async replica() {
      const replicaStore = databaseUrl ? openPostgres(databaseUrl, 4, postgresTimeouts(env)) : store;
      const replicaLimiter = redisUrl ? new RedisRateLimiter(redisUrl, redisPrefix, quota, redisTimeouts) : ratelimiter;
      // Services of its own, as another process has: its caches are not this app's, even on one PGlite store.
      const replicaJobs = await createServices(config, replicaStore, {
        ratelimiter: replicaLimiter,
        clock: services.clock,
        ...(options.webhooks && { webhooks: options.webhooks }),
      });
      const replicaApp = await buildApp({ deps: replicaJobs });
      startBackgroundJobs(replicaJobs, replicaApp.log);
      return {
        app: replicaApp,
        services: replicaJobs,
        async close() {
          await replicaApp.close();
          await stopBackgroundJobs(replicaJobs);
          if (replicaLimiter !== ratelimiter) await replicaLimiter.close();
          if (replicaStore !== store) await replicaStore.close();
        },
      };
    },
    async listenWithReplica() {
      const replica = await harness.replica();
      const urls: [string, string] = [
        await app.listen({ port: 0, host: "127.0.0.1" }),
        await replica.app.listen({ port: 0, host: "127.0.0.1" }),
      ];
      return { urls, closeReplica: replica.close };
    },
    async close() {
      await app.close();
      await stopBackgroundJobs(services);
      await ratelimiter.close();
      await store.close();
      await dropDatabase();
    },
  };
  return harness;
}

/** `post` and `get` of a harness, over any app: one of another configuration, or a server's. */
export function clientOf(app: FastifyInstance): Pick<Harness, "post" | "get"> {
  const toResponse = (res: { statusCode: number; body: string; headers: Record<string, unknown> }): Response => {
    let body: unknown = res.body;
    try {
      body = JSON.parse(res.body);
    } catch {}
    return { status: res.statusCode, body, headers: res.headers };
  };
  const auth = (rootKey?: string) => (rootKey === undefined ? {} : { authorization: `Bearer ${rootKey}` });
  return {
    async post(path, body, rootKey, headers = {}) {
      const res = await app.inject({
        method: "POST",
        url: path,
        headers: { "content-type": "application/json", ...auth(rootKey), ...headers },
        payload: JSON.stringify(body),
      });
      return toResponse(res);
    },
    async get(path, query, rootKey) {
      const res = await app.inject({ method: "GET", url: path, query, headers: auth(rootKey) });
      return toResponse(res);
    },
  };
}

/**
 * An app on `h`'s database and rate limiter whose keyring holds `master` (and nothing cached): a replica started
 * with another encryption key. Its `post`/`get` are clientOf's; close it after use.
 */
export async function appWithMasterKey(h: Harness, master: Buffer) {
  const config = loadConfig({ ...(h.databaseUrl && { DATABASE_URL: h.databaseUrl }), KEYHAVEN_ENCRYPTION_KEY: master.toString("base64") });
  const app = await buildApp({ deps: await createServices(config, h.store, { masterKey: master, ratelimiter: h.ratelimiter }) });
  return { ...clientOf(app), close: () => app.close() };
}

/** GET /v1/apis.listKeys with decrypt=true on `client` (a harness or clientOf an app), as `tenant`. */
export const decryptedKeys = (client: Pick<Harness, "get">, tenant: Tenant, apiId: string) =>
  client.get("/v1/apis.listKeys", { apiId, decrypt: "true" }, tenant.rootKey);

/** The store's deadlines as the app's config would set them from `env`. */
function postgresTimeouts(env: Record<string, string>) {
  const config = loadConfig(env);
  return { connectTimeoutMs: config.databaseConnectTimeoutMs, statementTimeoutMs: config.databaseStatementTimeoutMs };
}

/** A v1-style error body with this code (and, when given, a message matching `message`). */
export function expectError(res: Response, status: number, code: string, message?: string | RegExp) {
  const ok =
    res.status === status &&
    res.body?.error?.code === code &&
    typeof res.body.error.requestId === "string" &&
    res.body.error.requestId === res.headers["unkey-request-id"] &&
    typeof res.body.error.docs === "string" &&
    res.body.error.docs.endsWith(`/docs/errors/${code}`) &&
    (message === undefined || (typeof message === "string" ? res.body.error.message === message : message.test(res.body.error.message)));
  if (!ok) {
    throw new Error(`expected ${status} ${code}${message ? ` (${message})` : ""}, got ${res.status} ${JSON.stringify(res.body)}`);
  }
}
