import net from "node:net";
import { sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { stopBackgroundJobs, stopBackgroundJobsWithin } from "../src/background.js";
import { loadConfig } from "../src/config.js";
import { warnIfRedisUnreachable } from "../src/storage/ratelimits/ratelimiter.js";
import { RedisRateLimiter } from "../src/storage/ratelimits/redis.ratelimiter.js";
import { FaultProxy } from "./fault-proxy.js";
import { freePort, waitFor } from "./wait.js";
import { createHarness, expectError, type Harness } from "./helper.js";
import { logCapture } from "./log-capture.js";

async function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on("error", () => resolve(false));
  });
}

const redisTarget = new URL(process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379");
const redisAnswers = await answers(redisTarget.hostname, Number(redisTarget.port || 6379));
const timed = async <T>(work: () => Promise<T>) => {
  const started = Date.now();
  const value = await work();
  return { value, ms: Date.now() - started };
};

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn().catch(() => {});
  cleanup = [];
});

async function setUp(h: Harness) {
  const tenant = await h.tenant();
  const apiId = await h.createApi(tenant);
  const { key } = await h.importKey(tenant, apiId, { remaining: 1000 });
  return { tenant, apiId, key };
}

const verify = (h: Harness, key: string, extra: Record<string, unknown> = {}) => h.post("/v1/keys.verifyKey", { key, ...extra });
const readiness = (h: Harness) => h.get("/v1/readiness", {});

describe.runIf(process.env.TEST_DATABASE_URL)("when PostgreSQL is frozen or cut", () => {
  async function harnessBehindProxy(env: Record<string, string> = {}) {
    const target = new URL(process.env.TEST_DATABASE_URL!);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
    const logs = logCapture();
    const h = await createHarness(
      { DATABASE_STATEMENT_TIMEOUT_MS: "1000", DATABASE_CONNECT_TIMEOUT_MS: "1000", ...env },
      { postgresVia: (url) => proxy.urlFor(url), logger: logs.logger },
    );
    cleanup.push(
      () => proxy.close(),
      () => h.close(),
    );
    return { proxy, logs, h };
  }

  it("answers 503 naming PostgreSQL within the deadline, serves again as soon as it is back, and logs each change once", async () => {
    const { proxy, logs, h } = await harnessBehindProxy();
    const { key } = await setUp(h);
    expect((await verify(h, key)).body.valid).toBe(true);

    proxy.freeze();
    const first = await timed(() => verify(h, key));
    expectError(first.value, 503, "SERVICE_UNAVAILABLE", "PostgreSQL is unreachable");
    // Deadline: statement_timeout 1000 ms + 500 ms grace. Generous bound for a loaded machine.
    expect(first.ms).toBeLessThan(5000);
    const more = await timed(() => Promise.all([verify(h, key), verify(h, key), verify(h, key)]));
    for (const res of more.value) expectError(res, 503, "SERVICE_UNAVAILABLE", "PostgreSQL is unreachable");
    expect(more.ms).toBeLessThan(5000);
    expectError(await readiness(h), 503, "SERVICE_UNAVAILABLE", /the database/);

    await proxy.restore();
    const back = await timed(async () => {
      await expect.poll(async () => (await verify(h, key)).status, { timeout: 10_000, interval: 50 }).toBe(200);
    });
    expect((await readiness(h)).status).toBe(200);
    console.log(
      `PostgreSQL frozen: first 503 after ${first.ms} ms, 3 more in ${more.ms} ms; serving again ${back.ms} ms after it was back`,
    );
    expect(back.ms).toBeLessThan(5000);
    await expect.poll(() => logs.count("PostgreSQL reachable again")).toBe(1);
    expect(logs.count("PostgreSQL unreachable")).toBe(1);
    expect(logs.count("unhandled error")).toBe(0);
    // The idle migration worker polls every second and the analytics flusher writes every second: the outage is
    // already logged, they add nothing.
    expect(logs.count("importing an enqueued migration batch failed; it stays pending")).toBe(0);
    expect(logs.count("writing verification counts failed; kept for the next try")).toBe(0);
  });

  it("answers 503 at once while PostgreSQL refuses connections, and 200 as soon as it accepts them", async () => {
    const { proxy, logs, h } = await harnessBehindProxy();
    const { key } = await setUp(h);
    await proxy.cut();
    const down = await timed(() => verify(h, key));
    expectError(down.value, 503, "SERVICE_UNAVAILABLE", "PostgreSQL is unreachable");
    expect(down.ms).toBeLessThan(5000);
    // Several failures in a row: the driver's reconnect backoff must not delay the recovery.
    for (let i = 0; i < 5; i++) expectError(await verify(h, key), 503, "SERVICE_UNAVAILABLE");
    await proxy.restore();
    const back = await timed(async () => {
      await expect.poll(async () => (await verify(h, key)).status, { timeout: 10_000, interval: 50 }).toBe(200);
    });
    console.log(`PostgreSQL cut: 503 after ${down.ms} ms; serving again ${back.ms} ms after it accepted connections`);
    expect(back.ms).toBeLessThan(3000);
    expect(logs.count("PostgreSQL unreachable")).toBe(1);
    expect(logs.count("unhandled error")).toBe(0);
  });

  it("serves again at once after a black hole, not behind the connects it started during the outage", async () => {
    // A connect timeout far above the recovery bound, so that waiting behind a connect into the black hole shows.
    const { proxy, logs, h } = await harnessBehindProxy({ DATABASE_CONNECT_TIMEOUT_MS: "20000" });
    const { key } = await setUp(h);
    // Without the background jobs: a transaction of theirs that misses its deadline drops every connection, which
    // ends the connects into the black hole too, at a time that depends on their schedule, not on the fix.
    await stopBackgroundJobs(h.jobs);
    proxy.blackHole();
    // The statements on the open connections miss their deadline, which drops every connection...
    for (const res of await Promise.all([verify(h, key), verify(h, key)])) expectError(res, 503, "SERVICE_UNAVAILABLE");
    await waitFor("the store marked down, its connections dropped", () => h.store.state.isDown);
    // ...and the next statements make the pool dial again, into the black hole: connects nobody answers. (More
    // statements than connections, each its own, as concurrent requests of several routes make.)
    const statements = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => h.store.db.execute(sql.raw(`select ${i}`))));
    for (const s of statements) expect(s.status).toBe("rejected");
    // Every one of the pool's 4 connections (createHarness) is dialling into it.
    expect(proxy.lostConnections).toBeGreaterThanOrEqual(4);

    await proxy.restore();
    const at = Date.now();
    const first = await verify(h, key);
    const firstMs = Date.now() - at;
    await expect.poll(async () => (await verify(h, key)).status, { timeout: 10_000, interval: 50 }).toBe(200);
    const back = Date.now() - at;
    console.log(
      `PostgreSQL black-holed: ${proxy.lostConnections} connects lost; first request after it answered again: ${first.status} in ${firstMs} ms; serving again after ${back} ms`,
    );
    // Before: the pool's connections were all waiting for connects into the black hole, and every request waited
    // behind them until DATABASE_CONNECT_TIMEOUT_MS (20 s here) ended them (18.5 s after PostgreSQL was back); and
    // had they been answered, the connections made for statements that had given up never rejoined the pool
    // (test/postgres-driver.test.ts). Documented: reconnects wait at most 0.5 s; the rest is slack for a loaded
    // machine.
    expect(back).toBeLessThan(4000);
    expect(logs.count("unhandled error")).toBe(0);
  });

  it("shuts down within its deadlines during an outage (as on SIGTERM)", async () => {
    const { proxy, logs, h } = await harnessBehindProxy();
    const { key } = await setUp(h);
    await h.app.listen({ port: 0, host: "127.0.0.1" });
    const url = `http://127.0.0.1:${(h.app.server.address() as net.AddressInfo).port}`;
    proxy.freeze();
    const before = logs.count("incoming request");
    const inFlight = fetch(`${url}/v1/keys.verifyKey`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key }),
    });
    await waitFor("the request in flight", () => logs.count("incoming request") > before);
    // What main.ts does on SIGTERM: the app (in-flight requests first), the background jobs within their deadline
    // (what they still hold, such as the root key's last use from setUp, cannot be written: logged and dropped), then
    // the store.
    const closed = await timed(async () => {
      await h.app.close();
      await stopBackgroundJobsWithin(h.jobs, 2_000, h.app.log);
      await h.store.close();
    });
    expect((await inFlight).status).toBe(503);
    console.log(`shut down in ${closed.ms} ms with a request in flight, PostgreSQL frozen`);
    // Deadlines: the request's statement (1.5 s here), the background jobs' 2 s, then 1 s for the store's frozen
    // connections.
    expect(closed.ms).toBeLessThan(10_000);
    expect(logs.count("shutdown: gave up writing what the background jobs held; dropped what is counted here")).toBeLessThanOrEqual(1);
  });
});

describe("a full disk", () => {
  it("answers 503 naming PostgreSQL's disk and makes readiness unready until a write succeeds again", async () => {
    const h = await createHarness();
    cleanup.push(() => h.close());
    const { key } = await setUp(h);
    // What PostgreSQL (and PGlite) raise when a data file cannot grow: SQLSTATE 53100, on the remaining-uses write.
    await h.sql(`create function keyhaven_test_disk_full() returns trigger language plpgsql as $$
      begin raise exception 'could not extend file: No space left on device' using errcode = 'disk_full'; end $$`);
    await h.sql(`create trigger keyhaven_test_disk_full before update on keys for each row execute function keyhaven_test_disk_full()`);
    expectError(await verify(h, key), 503, "SERVICE_UNAVAILABLE", "PostgreSQL cannot write: its disk is full");
    expectError(await readiness(h), 503, "SERVICE_UNAVAILABLE", "not ready: PostgreSQL's disk is full");

    await h.sql(`drop trigger keyhaven_test_disk_full on keys`);
    // Dropped too, so that the embedded store's instance is reused by the next test instead of a new one started
    // (test/pglite-pool.ts): that start was most of the next test's time on a busy machine.
    await h.sql(`drop function keyhaven_test_disk_full()`);
    // The refused write spent nothing.
    expect((await verify(h, key)).body).toMatchObject({ valid: true, remaining: 999 });
    expect((await readiness(h)).status).toBe(200);
  });
});

describe("a REDIS_URL that does not answer at start", () => {
  it("is reported by a warning naming it, without its password", async () => {
    const url = `redis://:s3cret-password@127.0.0.1:${await freePort()}`;
    const config = loadConfig({ REDIS_URL: url });
    const limiter = new RedisRateLimiter(url);
    cleanup.push(() => limiter.close());
    const warnings: string[] = [];
    const ok = await warnIfRedisUnreachable(limiter, config, { warn: (_obj, msg) => warnings.push(msg ?? "") });
    expect(ok).toBe(false);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`REDIS_URL redis://:***@127.0.0.1:`);
    expect(warnings[0]).toContain("verifications skip the Redis-backed rate limits");
    expect(warnings[0]).not.toContain("s3cret");
  });
});

describe.runIf(redisAnswers)("when Redis is frozen or killed", () => {
  const limited = { ratelimits: [{ name: "requests", limit: 1000, duration: 60_000 }] };

  async function harnessBehindProxy(env: Record<string, string> = {}) {
    const proxy = await FaultProxy.start({ host: redisTarget.hostname, port: Number(redisTarget.port || 6379) });
    const logs = logCapture();
    // A connect deadline a busy machine meets: only the first connect, below, waits on it (the proxy accepts a
    // connect at once, frozen or not), and it must not hang on a 500 ms timer of a starved worker. What the tests
    // measure is the command deadline (500 ms), which stays.
    const h = await createHarness(
      { REDIS_CONNECT_TIMEOUT_MS: "5000", ...env },
      { redisUrl: proxy.urlFor(redisTarget.toString()), logger: logs.logger },
    );
    cleanup.push(
      () => proxy.close(),
      () => h.close(),
    );
    const { key, tenant } = await setUp(h);
    // Wait for the limiter's first connection through the proxy; answers without a counted limit (503 or
    // ratelimitSkipped) spend nothing. Well below the test's own 30 s.
    let first: { valid?: boolean; ratelimit?: { remaining: number } } = {};
    await expect
      .poll(async () => (first = (await verify(h, key, limited)).body), { timeout: 10_000, interval: 100 })
      .toHaveProperty("ratelimit");
    expect(first).toMatchObject({ valid: true, ratelimit: { remaining: 999 } });
    // What the outage tests count in the logs starts here.
    logs.clear();
    return { proxy, logs, h, key, tenant };
  }

  it("fails closed when so configured: 503 naming Redis within the command deadline, and back as soon as Redis is", async () => {
    const { proxy, logs, h, key } = await harnessBehindProxy({ KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE: "closed" });
    proxy.freeze();
    const first = await timed(() => verify(h, key, limited));
    expectError(first.value, 503, "SERVICE_UNAVAILABLE", "Redis is unreachable");
    expect(first.ms).toBeLessThan(3000);
    const more = await timed(() => Promise.all([verify(h, key, limited), verify(h, key, limited)]));
    for (const res of more.value) expectError(res, 503, "SERVICE_UNAVAILABLE", "Redis is unreachable");
    expectError(await readiness(h), 503, "SERVICE_UNAVAILABLE", /Redis/);
    // Verifications without rate limits do not need Redis.
    expect((await verify(h, key)).body.valid).toBe(true);

    await proxy.restore();
    const back = await timed(async () => {
      await expect.poll(async () => (await verify(h, key, limited)).status, { timeout: 10_000, interval: 50 }).toBe(200);
    });
    console.log(
      `Redis frozen (closed): first 503 after ${first.ms} ms, 2 more in ${more.ms} ms; serving again ${back.ms} ms after it was back`,
    );
    expect(back.ms).toBeLessThan(3000);
    expect((await readiness(h)).status).toBe(200);
    await expect.poll(() => logs.count("Redis reachable again")).toBe(1);
    expect(logs.count("Redis unreachable")).toBe(1);
    expect(logs.count("unhandled error")).toBe(0);
  });

  it("fails closed with 503, not 500, when Redis is killed", async () => {
    const { proxy, h, key } = await harnessBehindProxy({ KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE: "closed" });
    await proxy.cut();
    const down = await timed(() => verify(h, key, limited));
    expectError(down.value, 503, "SERVICE_UNAVAILABLE", "Redis is unreachable");
    expect(down.ms).toBeLessThan(3000);
    await proxy.restore();
    const back = await timed(async () => {
      await expect.poll(async () => (await verify(h, key, limited)).status, { timeout: 10_000, interval: 50 }).toBe(200);
    });
    console.log(`Redis killed (closed): 503 after ${down.ms} ms; serving again ${back.ms} ms after it was back`);
  });

  it("fails open by default: verifies without the Redis-backed limits and says so; readiness stays 200", async () => {
    const { proxy, h, key, tenant } = await harnessBehindProxy();
    proxy.freeze();
    const first = await timed(() => verify(h, key, limited));
    expect(first.value.status).toBe(200);
    expect(first.value.body).toMatchObject({ valid: true, code: "VALID", ratelimitSkipped: true });
    expect(first.value.body.ratelimit).toBeUndefined();
    expect(first.ms).toBeLessThan(3000);
    const standalone = await h.post(
      "/v1/ratelimits.limit",
      { namespace: "outage", identifier: "user-1", limit: 10, duration: 60_000 },
      tenant.rootKey,
    );
    expect(standalone.body).toMatchObject({ success: true, limit: 10, remaining: 10, ratelimitSkipped: true });
    const ready = await readiness(h);
    expect(ready.status).toBe(200);
    expect(ready.body.services).toEqual({ database: "up", redis: "down" });

    await proxy.restore();
    const back = await timed(async () => {
      await expect
        .poll(async () => (await verify(h, key, limited)).body.ratelimitSkipped, { timeout: 10_000, interval: 50 })
        .toBeUndefined();
    });
    console.log(`Redis frozen (open): verification answered in ${first.ms} ms; limits applied again ${back.ms} ms after Redis was back`);
    const again = await verify(h, key, limited);
    expect(again.body.ratelimit).toMatchObject({ remaining: expect.any(Number) });
  });
});
