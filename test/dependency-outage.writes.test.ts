import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";
import { createServices } from "../src/services.js";
import { openPostgres } from "../src/storage/client.js";
import { MemoryRateLimiter } from "../src/storage/ratelimits/memory.ratelimiter.js";
import { countIn } from "./fixtures.js";
import { FaultProxy } from "./fault-proxy.js";
import { clientOf, createHarness, expectError, type Harness } from "./helper.js";

// What an outage must not do to writes (issue 34 §6): a write is attempted once per request, so a statement that was
// sent and may have been applied is never sent again by the same request. The app under test reaches its database
// through a fault proxy; the harness's own connection (h.sql) does not, so it counts what was really committed.

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn().catch(() => {});
  cleanup = [];
});

/** An app on `h`'s database behind a fault proxy, with one connection (so the write goes where the test mutes it). */
async function appBehindProxy(h: Harness) {
  const target = new URL(h.databaseUrl!);
  const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
  const config = Object.assign({}, h.config, { databaseStatementTimeoutMs: 1000, databaseConnectTimeoutMs: 1000 });
  const store = openPostgres(proxy.urlFor(h.databaseUrl!), 1, { connectTimeoutMs: 1000, statementTimeoutMs: 1000 });
  const app: FastifyInstance = await buildApp({ deps: await createServices(config, store, { ratelimiter: new MemoryRateLimiter() }) });
  cleanup.push(
    () => proxy.close(),
    () => store.close(),
    () => app.close(),
  );
  return { proxy, app, ...clientOf(app) };
}

describe.runIf(process.env.TEST_DATABASE_URL)("a write whose answer is lost", () => {
  it.each(["/v1/keys.createKey", "/v2/keys.createKey"])(
    "%s, with its root key in memory, is sent once: 503, and at most the one key committed",
    async (route) => {
      const h = await createHarness();
      cleanup.push(() => h.close());
      const t = await h.tenant();
      const apiId = await h.createApi(t);
      const { proxy, post } = await appBehindProxy(h);
      // The root key in memory (RootKeyAuthenticator.authorizeWrite's path that writes without reading the epoch).
      expect((await post(route, { apiId, name: "warm-up" }, t.rootKey)).status).toBe(200);

      proxy.muteAnswers();
      const res = await post(route, { apiId, name: "lost-answer" }, t.rootKey);
      await proxy.restore();
      const n = await countIn(h, `keys where api_id = '${apiId}' and name = 'lost-answer'`);
      // Before: the write ran again after its DependencyUnavailableError, on a fresh connection: 200 and two keys.
      expect(n).toBeLessThanOrEqual(1);
      expect(res.status).toBe(503);
      if (route.startsWith("/v1")) expectError(res, 503, "SERVICE_UNAVAILABLE", "PostgreSQL is unreachable");
      // The statement (the key and its audit entry, one statement) reached PostgreSQL before its answer was lost: the
      // 503 was applied (docs/operations.md).
      expect(n).toBe(1);
    },
  );
});

describe.runIf(process.env.TEST_DATABASE_URL)("one deadline per request", () => {
  it("every request answers 503 within its one deadline while PostgreSQL is frozen, however many statements and waits it makes", async () => {
    const target = new URL(process.env.TEST_DATABASE_URL!);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
    const h = await createHarness(
      { DATABASE_STATEMENT_TIMEOUT_MS: "1000", DATABASE_CONNECT_TIMEOUT_MS: "1000" },
      { postgresVia: (url) => proxy.urlFor(url) },
    );
    cleanup.push(
      () => proxy.close(),
      () => h.close(),
    );
    // The documented bound: DATABASE_STATEMENT_TIMEOUT_MS + 0.5 s.
    const bound = 1500;
    expect(h.store.requestDeadlineMs).toBe(bound);
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const { key } = await h.importKey(t, apiId, { remaining: 100 });
    const other = await h.tenant();
    proxy.freeze();
    // Requests that wait behind each other's statements (the epoch read and key lookups they share, the pool's
    // connections) and make several statements each (a transaction with roles, a root key not in memory).
    const calls = [
      () => h.post("/v1/keys.verifyKey", { key }),
      () => h.post("/v1/keys.createKey", { apiId, roles: ["r1"], permissions: ["p1"] }, t.rootKey),
      () => h.post("/v2/keys.createKey", { apiId }, other.rootKey),
      () => h.get("/v1/apis.getApi", { apiId }, t.rootKey),
      () => h.post("/v2/keys.verifyKey", { key }, t.rootKey),
    ];
    const answers = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        // Arrivals spread over more than one deadline: the scenario, not a wait for an event.
        await new Promise((resolve) => setTimeout(resolve, i * 120));
        const at = Date.now();
        const res = await calls[i % calls.length]!();
        return { status: res.status, ms: Date.now() - at };
      }),
    );
    const times = answers.map((a) => a.ms);
    console.log(
      `PostgreSQL frozen, 20 requests arriving over 2.3 s: answered in ${Math.min(...times)}–${Math.max(...times)} ms (bound ${bound} ms)`,
    );
    for (const a of answers) expect(a.status).toBe(503);
    // Before: waits added up (for another's statement, then one's own; each statement, pool slot and retry its own
    // deadline), up to twice the bound here and 8.5–22 s at the default 5.5 s. The slack is for a loaded machine.
    expect(Math.max(...times)).toBeLessThan(bound * 1.6);
  });
});
