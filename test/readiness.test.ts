import { randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";
import { createServices } from "../src/services.js";
import type { Config } from "../src/config.js";
import { openPostgres, type Store } from "../src/storage/client.js";
import { MemoryRateLimiter } from "../src/storage/ratelimits/memory.ratelimiter.js";
import type { RateLimiter } from "../src/storage/ratelimits/ratelimiter.js";
import { RedisRateLimiter } from "../src/storage/ratelimits/redis.ratelimiter.js";
import { FaultProxy } from "./fault-proxy.js";
import { freePort, waitFor } from "./wait.js";
import { createHarness, expectError, type Harness } from "./helper.js";

async function appWith(config: Config, store: Store, ratelimiter: RateLimiter): Promise<FastifyInstance> {
  return buildApp({ deps: await createServices(config, store, { ratelimiter }) });
}

const failClosed = (config: Config): Config => ({ ...config, ratelimitOnRedisFailure: "closed" });

const readiness = async (app: FastifyInstance) => {
  const res = await app.inject({ method: "GET", url: "/v1/readiness" });
  return { status: res.statusCode, body: JSON.parse(res.body), headers: res.headers };
};

/** Readiness once it answers `status` (it follows the dependencies' state, checked every 200 ms). */
const eventually = (app: FastifyInstance, status: number, timeoutMs = 15_000) =>
  waitFor(
    `readiness ${status}`,
    async () => {
      const res = await readiness(app);
      return res.status === status && res;
    },
    { timeoutMs, intervalMs: 200 },
  );

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

describe("GET /v1/readiness", () => {
  it("answers 200 while the database (and Redis, when configured) answer", async () => {
    const res = await readiness(h.app);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: "ready",
      services: { database: "up", redis: process.env.TEST_REDIS_URL ? "up" : "not configured" },
    });
    expect(res.headers["unkey-request-id"]).toMatch(/^req_/);
  });

  it("answers 503 in the envelope, naming the database, while PostgreSQL is unreachable; liveness stays 200", async () => {
    const store = openPostgres(`postgres://postgres@127.0.0.1:${await freePort()}/keyhaven`, 1);
    const app = await appWith(h.config, store, new MemoryRateLimiter());
    try {
      const res = await readiness(app);
      // What happened, not a deadline it never waited for (issue 34 §6).
      expectError(res, 503, "SERVICE_UNAVAILABLE", "not ready: the database refused the connection (ECONNREFUSED)");
      expect((await app.inject({ method: "GET", url: "/v1/liveness" })).statusCode).toBe(200);
      const metrics = await app.inject({ method: "GET", url: "/metrics" });
      expect(metrics.body).toMatch(/^keyhaven_database_up 0$/m);
    } finally {
      await app.close();
      await store.close();
    }
  });

  it("answers 503 naming Redis while the rate limiter's Redis is unreachable and rate limits fail closed", async () => {
    const limiter = new RedisRateLimiter(`redis://127.0.0.1:${await freePort()}`);
    const app = await appWith(failClosed(h.config), h.store, limiter);
    try {
      const started = Date.now();
      expectError(await readiness(app), 503, "SERVICE_UNAVAILABLE", "not ready: Redis refused the connection (ECONNREFUSED)");
      expect(Date.now() - started).toBeLessThan(3000);
      const metrics = await app.inject({ method: "GET", url: "/metrics" });
      expect(metrics.body).toMatch(/^keyhaven_redis_up 0$/m);
      expect(metrics.body).toMatch(/^keyhaven_database_up 1$/m);
    } finally {
      await app.close();
      await limiter.close();
    }
  });

  it("stays 200, reporting Redis down, while Redis is unreachable and rate limits fail open (the default)", async () => {
    const limiter = new RedisRateLimiter(`redis://127.0.0.1:${await freePort()}`);
    const app = await appWith(h.config, h.store, limiter);
    try {
      const res = await readiness(app);
      expect(res.status).toBe(200);
      expect(res.body.services).toEqual({ database: "up", redis: "down" });
    } finally {
      await app.close();
      await limiter.close();
    }
  });

  it("names both when both are down", async () => {
    const store = openPostgres(`postgres://postgres@127.0.0.1:${await freePort()}/keyhaven`, 1);
    const limiter = new RedisRateLimiter(`redis://127.0.0.1:${await freePort()}`);
    const app = await appWith(failClosed(h.config), store, limiter);
    try {
      expectError(
        await readiness(app),
        503,
        "SERVICE_UNAVAILABLE",
        "not ready: the database and Redis refused the connection (ECONNREFUSED)",
      );
    } finally {
      await app.close();
      await limiter.close();
      await store.close();
    }
  });

  it("answers 503 while the store answers statements with errors though it still answers `select 1`, and 200 once it serves again", async () => {
    // A store that answers but cannot serve (issue 34 §1: a broken embedded store answered every request with an
    // error, or with no rows, while readiness said ready): here the table every request starts with is gone.
    const t = await h.tenant();
    expect((await readiness(h.app)).status).toBe(200);
    await h.sql("alter table keyhaven_epoch rename to keyhaven_epoch_gone");
    try {
      expect(await h.sql("select 1 as one")).toEqual([{ one: 1 }]);
      expect((await h.post("/v1/apis.createApi", { name: "cannot" }, t.rootKey)).status).toBe(500);
      expectError(await readiness(h.app), 503, "SERVICE_UNAVAILABLE", "not ready: the database answered with an error (SQLSTATE 42P01)");
    } finally {
      await h.sql("alter table keyhaven_epoch_gone rename to keyhaven_epoch");
    }
    expect((await readiness(h.app)).status).toBe(200);
  });

  describe.runIf(process.env.TEST_DATABASE_URL)("when PostgreSQL does not answer", () => {
    it("says it did not answer within the probe's deadline", async () => {
      const target = new URL(h.databaseUrl!);
      const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
      const store = openPostgres(proxy.urlFor(h.databaseUrl!), 1);
      const app = await appWith(h.config, store, new MemoryRateLimiter());
      try {
        expect((await eventually(app, 200)).status).toBe(200);
        proxy.freeze();
        expectError(await readiness(app), 503, "SERVICE_UNAVAILABLE", "not ready: the database did not answer within 1000 ms");
      } finally {
        await app.close();
        await proxy.close();
        await store.close();
      }
    });
  });

  describe.runIf(process.env.TEST_REDIS_URL)("when Redis goes away and comes back", () => {
    it("turns 503 and then 200 again by itself", async () => {
      const target = new URL(process.env.TEST_REDIS_URL!);
      const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port || 6379) });
      const limiter = new RedisRateLimiter(`redis://127.0.0.1:${proxy.port}`, `keyhaven-test:${randomBytes(6).toString("hex")}:`);
      const app = await appWith(failClosed(h.config), h.store, limiter);
      try {
        expect((await eventually(app, 200)).body.services.redis).toBe("up");
        await proxy.cut();
        expectError(await eventually(app, 503), 503, "SERVICE_UNAVAILABLE", /Redis/);
        await proxy.restore();
        const back = await eventually(app, 200);
        expect(back.status).toBe(200);
        expect(back.body.services).toEqual({ database: "up", redis: "up" });
      } finally {
        await app.close();
        await limiter.close();
        await proxy.close();
      }
    });
  });

  describe.runIf(process.env.TEST_DATABASE_URL)("when PostgreSQL goes away and comes back", () => {
    it("turns 503 and then 200 again by itself", async () => {
      const target = new URL(h.databaseUrl!);
      const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
      const store = openPostgres(proxy.urlFor(h.databaseUrl!), 2);
      const app = await appWith(h.config, store, new MemoryRateLimiter());
      try {
        expect((await eventually(app, 200)).body.services.database).toBe("up");
        await proxy.cut();
        expectError(await eventually(app, 503), 503, "SERVICE_UNAVAILABLE", /the database/);
        await proxy.restore();
        const back = await eventually(app, 200);
        expect(back.status).toBe(200);
        expect(back.body.services.database).toBe("up");
      } finally {
        await app.close();
        await store.close();
        await proxy.close();
      }
    });
  });
});
