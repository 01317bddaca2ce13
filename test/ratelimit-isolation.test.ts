import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../src/clock.js";
import type { MemoryRateLimiter } from "../src/storage/ratelimits/memory.ratelimiter.js";
import { MAX_WINDOW_MS } from "../src/storage/ratelimits/ratelimiter.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { hasRedisServer, type OwnRedis, startRedisServer } from "./redis-server.js";

// A small quota (of configured limits' counters, and of ad-hoc ones'), so that one workspace's flood reaches it
// quickly. The Redis of the test has 2 MB of maxmemory: about 0.9 MB for an empty Redis, plus what the formula of
// docs/operations.md asks for these two workspaces (2 × (100 + 100) counters × ~300 bytes), with room to spare; the
// flood below would need about 2 MB more without the quotas.
const QUOTA = 100;
const MAXMEMORY = "2mb";
const FLOOD_REQUESTS = 200;
const LIMITS_PER_REQUEST = 20;
const CONCURRENCY = 8;

type Setup = { label: string; redisArgs?: string[] };
const setups: Setup[] = [{ label: "in process memory" }];
if (hasRedisServer) {
  setups.push(
    // What the docs advised before: a maxmemory that evicts the counters closest to expiry.
    { label: "in Redis with maxmemory and volatile-ttl", redisArgs: ["--maxmemory", MAXMEMORY, "--maxmemory-policy", "volatile-ttl"] },
    // What docs/operations.md advises now (and docker-compose.yml applies).
    { label: "in Redis with maxmemory and noeviction", redisArgs: ["--maxmemory", MAXMEMORY, "--maxmemory-policy", "noeviction"] },
  );
}

// The app's clock stands still in the middle of an hour, ahead of the machine's (as in ratelimit.test.ts): the
// victim's 10-minute window cannot roll over while the flood runs, however slow the machine is.
const HOUR = 3_600_000;
const clock = new ManualClock(Date.now() - (Date.now() % HOUR) + HOUR + 30 * 60_000);

describe.each(setups)("rate-limit counters $label", ({ redisArgs }) => {
  let redis: OwnRedis | undefined;
  let h: Harness;
  let victim: Tenant;
  let attacker: Tenant;
  beforeAll(async () => {
    if (redisArgs) redis = await startRedisServer(redisArgs);
    h = await createHarness(
      { KEYHAVEN_RATELIMIT_COUNTERS_PER_WORKSPACE: String(QUOTA), KEYHAVEN_RATELIMIT_ADHOC_COUNTERS_PER_WORKSPACE: String(QUOTA) },
      { redisUrl: redis?.url ?? null, clock },
    );
    victim = await h.tenant();
    attacker = await h.tenant();
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await redis?.stop();
  });

  it("one workspace's flood of ad-hoc limits neither resets, evicts nor fails another workspace's limits", async () => {
    const { key: victimKey } = await h.importKey(victim, await h.createApi(victim));
    const login = { key: victimKey, ratelimits: [{ name: "login", limit: 3, duration: 600_000 }] };
    const standalone = { namespace: "login", identifier: "user-1", limit: 3, duration: 600_000 };
    for (let i = 0; i < 3; i++) {
      expect((await h.post("/v1/keys.verifyKey", login)).body.code).toBe("VALID");
      expect((await h.post("/v1/ratelimits.limit", standalone, victim.rootKey)).body.success).toBe(true);
    }

    // Anyone with a key of another workspace: distinct ad-hoc limits with long names and the longest window.
    const { key: attackerKey } = await h.importKey(attacker, await h.createApi(attacker));
    const statuses = new Map<number, number>();
    const flood = async (request: number) => {
      const ratelimits = Array.from({ length: LIMITS_PER_REQUEST }, (_, j) => ({
        name: `${request}-${j}-`.padEnd(256, "x"),
        limit: 1000,
        duration: MAX_WINDOW_MS,
      }));
      const res = await h.post("/v1/keys.verifyKey", { key: attackerKey, ratelimits });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    };
    const started = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < FLOOD_REQUESTS) await flood(next++);
      }),
    );
    // And distinct identifiers in ratelimits.limit, past the quota too.
    for (let i = 0; i < QUOTA + 20; i++) {
      const res = await h.post(
        "/v1/ratelimits.limit",
        { namespace: "flood", identifier: `id-${i}`, limit: 5, duration: MAX_WINDOW_MS },
        attacker.rootKey,
      );
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    }
    console.log(
      `flood of ${FLOOD_REQUESTS} × ${LIMITS_PER_REQUEST} ad-hoc limits: ${Date.now() - started} ms, statuses ${JSON.stringify([...statuses])}`,
    );

    // The victim's 4th and 5th attempts are still refused, and nothing answered 500.
    for (let i = 0; i < 2; i++) {
      const res = await h.post("/v1/keys.verifyKey", login);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ valid: false, code: "RATE_LIMITED", ratelimit: { remaining: 0 } });
      const limited = await h.post("/v1/ratelimits.limit", standalone, victim.rootKey);
      expect(limited.status, JSON.stringify(limited.body)).toBe(200);
      expect(limited.body).toMatchObject({ success: false, remaining: 0 });
    }
    // And the victim's limits that still have room are charged as before (in a full Redis they would fail).
    const fresh = await h.post("/v1/keys.verifyKey", { key: victimKey, ratelimits: [{ name: "search", limit: 3, duration: 60_000 }] });
    expect(fresh.status, JSON.stringify(fresh.body)).toBe(200);
    expect(fresh.body).toMatchObject({ valid: true, ratelimit: { remaining: 2 } });
    const other = await h.post("/v1/ratelimits.limit", { ...standalone, identifier: "user-2" }, victim.rootKey);
    expect(other.status, JSON.stringify(other.body)).toBe(200);
    expect(other.body).toMatchObject({ success: true, remaining: 2 });
    expect([...statuses.keys()]).toEqual([200]);

    // The attacker holds at most its quotas of counters (ad-hoc ones, and its namespace's); in Redis, memory stays
    // under maxmemory.
    if (redis) {
      const attackerCounters = await redis.client.keys(`*{${attacker.workspaceId}}:*`);
      expect(attackerCounters.length).toBeLessThanOrEqual(2 * QUOTA);
      const info = await redis.client.info("stats");
      expect(Number(/evicted_keys:(\d+)/.exec(info)![1])).toBe(0);
      console.log(`Redis used_memory after the flood: ${await redis.usedMemory()} bytes; attacker counters: ${attackerCounters.length}`);
    } else {
      const limiter = h.ratelimiter as MemoryRateLimiter;
      expect(limiter.size(attacker.workspaceId, "adHoc")).toBe(QUOTA);
      expect(limiter.size(attacker.workspaceId, "configured")).toBe(QUOTA);
      expect(limiter.size(victim.workspaceId)).toBe(4);
    }
  }, 120_000);
});

// Within one workspace: anyone holding any of its keys names ad-hoc limits (no root key needed), so they count in a
// budget of their own (KEYHAVEN_RATELIMIT_ADHOC_COUNTERS_PER_WORKSPACE) and never evict a configured limit's counter.
// On the harness's limiter: in memory, or in the Redis of TEST_REDIS_URL.
describe("a workspace's configured rate limits", () => {
  let h: Harness;
  let t: Tenant;
  beforeAll(async () => {
    h = await createHarness(
      { KEYHAVEN_RATELIMIT_COUNTERS_PER_WORKSPACE: String(QUOTA), KEYHAVEN_RATELIMIT_ADHOC_COUNTERS_PER_WORKSPACE: String(QUOTA) },
      { clock },
    );
    t = await h.tenant();
  }, 60_000);
  afterAll(() => h?.close());

  it("are not evicted by a flood of ad-hoc limits from another key of the same workspace", async () => {
    const apiId = await h.createApi(t);
    // A key's own limit (auto-applied), an identity's limit (requested by name), a namespace's override.
    const { key: keyLimited } = await h.importKey(t, apiId, { ratelimit: { limit: 3, refillRate: 3, refillInterval: 600_000 } });
    const identity = await h.post(
      "/v1/identities.createIdentity",
      { externalId: "customer-1", ratelimits: [{ name: "tokens", limit: 3, duration: 600_000 }] },
      t.rootKey,
    );
    expect(identity.status, JSON.stringify(identity.body)).toBe(200);
    const { key: identityLimited } = await h.importKey(t, apiId, { externalId: "customer-1" });
    const standalone = { namespace: "login", identifier: "user-1", limit: 1000, duration: 60_000, cost: 0 };
    expect((await h.post("/v1/ratelimits.limit", standalone, t.rootKey)).status).toBe(200);
    const override = { namespaceName: "login", identifier: "user-1", limit: 3, duration: 600_000 };
    expect((await h.post("/v1/ratelimits.setOverride", override, t.rootKey)).status).toBe(200);

    const viaKey = () => h.post("/v1/keys.verifyKey", { key: keyLimited });
    const viaIdentity = () => h.post("/v1/keys.verifyKey", { key: identityLimited, ratelimits: [{ name: "tokens" }] });
    const viaNamespace = () => h.post("/v1/ratelimits.limit", { ...standalone, cost: 1 }, t.rootKey);
    for (let i = 0; i < 3; i++) {
      expect((await viaKey()).body.code).toBe("VALID");
      expect((await viaIdentity()).body.code).toBe("VALID");
      expect((await viaNamespace()).body.success).toBe(true);
    }

    // Another key of the workspace floods its ad-hoc budget: more new counters than the workspace may hold, with the
    // longest window (which, before ad-hoc limits had a budget of their own, evicted the configured ones first).
    const { key: flooder } = await h.importKey(t, apiId);
    for (let request = 0; request * LIMITS_PER_REQUEST < QUOTA + 2 * LIMITS_PER_REQUEST; request++) {
      const ratelimits = Array.from({ length: LIMITS_PER_REQUEST }, (_, j) => ({
        name: `flood-${request}-${j}`,
        limit: 10,
        duration: MAX_WINDOW_MS,
      }));
      const res = await h.post("/v1/keys.verifyKey", { key: flooder, ratelimits });
      expect(res.body.code, JSON.stringify(res.body)).toBe("VALID");
    }

    // Every configured limit still counts its window: the 4th attempt is refused.
    expect((await viaKey()).body).toMatchObject({ code: "RATE_LIMITED", ratelimit: { remaining: 0 } });
    expect((await viaIdentity()).body).toMatchObject({ code: "RATE_LIMITED", ratelimit: { remaining: 0 } });
    expect((await viaNamespace()).body).toMatchObject({ success: false, remaining: 0 });
    // An ad-hoc limit named and timed as a configured one counts on that limit's counter (as upstream counts it),
    // here with a higher limit for this request: 3 used, 1 more now, 1 left.
    const named = await h.post("/v1/keys.verifyKey", { key: keyLimited, ratelimits: [{ name: "default", limit: 5, duration: 600_000 }] });
    expect(named.body).toMatchObject({ code: "VALID", ratelimit: { remaining: 1 } });
  }, 60_000);
});
