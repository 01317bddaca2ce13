import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { ManualClock } from "../src/clock.js";
import { MemoryRateLimiter } from "../src/storage/ratelimits/memory.ratelimiter.js";
import type { LimitCheck, RateLimiter } from "../src/storage/ratelimits/ratelimiter.js";
import { RedisRateLimiter } from "../src/storage/ratelimits/redis.ratelimiter.js";
import { harnessWith, testWith } from "./fixtures.js";
import { expectError } from "./helper.js";

const QUOTA = 100;
const backends: [string, () => RateLimiter][] = [["memory", () => new MemoryRateLimiter(60_000, QUOTA)]];
if (process.env.TEST_REDIS_URL) {
  backends.push([
    "redis",
    () => new RedisRateLimiter(process.env.TEST_REDIS_URL!, `keyhaven-test:${randomBytes(6).toString("hex")}:`, QUOTA),
  ]);
}

describe.each(backends)("the %s rate limiter", (_, make) => {
  let limiter: RateLimiter;
  beforeAll(() => {
    limiter = make();
  });
  afterAll(() => limiter.close());

  const check = (over: Partial<LimitCheck> = {}): LimitCheck => ({
    workspaceId: "ws_a",
    name: "default",
    identifier: `id-${randomBytes(4).toString("hex")}`,
    limit: 3,
    duration: 60_000,
    cost: 1,
    ...over,
  });
  const now = 1_800_000_000_000; // the start of a 60 s window: [1_800_000_000_000, 1_800_000_060_000)

  it("lets `limit` units through per fixed window, then refuses until the window ends", async () => {
    const c = check();
    const results = [];
    for (let i = 0; i < 4; i++) results.push((await limiter.check([c], now))[0]!);
    expect(results.map((r) => [r.passed, r.remaining])).toEqual([
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
    ]);
    expect(results[0]!.reset).toBe(1_800_000_060_000);
    expect((await limiter.check([c], 1_800_000_059_999))[0]!.passed).toBe(false);
    const next = (await limiter.check([c], 1_800_000_060_000))[0]!;
    expect(next).toMatchObject({ passed: true, remaining: 2, reset: 1_800_000_120_000 });
  });

  it("charges several limits all or nothing", async () => {
    const loose = check({ name: "loose", limit: 100 });
    const tight = check({ name: "tight", limit: 1 });
    expect((await limiter.check([loose, tight], now)).every((o) => o.passed)).toBe(true);
    const refused = await limiter.check([loose, tight], now);
    expect(refused.map((o) => o.passed)).toEqual([true, false]);
    // The refused call charged nothing: `loose` still has 99 left.
    expect((await limiter.check([{ ...loose, cost: 0 }], now))[0]).toMatchObject({ passed: true, remaining: 99 });
  });

  it("reads without charging at cost 0, charges `cost` units, and refuses everything at limit 0", async () => {
    const c = check({ limit: 10 });
    expect((await limiter.check([{ ...c, cost: 4 }], now))[0]).toMatchObject({ passed: true, remaining: 6 });
    expect((await limiter.check([{ ...c, cost: 0 }], now))[0]).toMatchObject({ passed: true, remaining: 6 });
    expect((await limiter.check([{ ...c, cost: 7 }], now))[0]).toMatchObject({ passed: false, remaining: 6 });
    expect((await limiter.check([check({ limit: 0 })], now))[0]!.passed).toBe(false);
  });

  it("at a workspace's quota evicts only that workspace's own counters, soonest-expiring first", async () => {
    const victim = check({ name: "login", limit: 3, duration: 600_000 });
    for (let i = 0; i < 3; i++) expect((await limiter.check([victim], now))[0]!.passed).toBe(true);
    // Another workspace creates three times its quota of counters, the first one with the shortest window.
    const flood = (i: number) =>
      check({ workspaceId: "ws_b", identifier: "key_b", name: `flood-${i}`, limit: 5, duration: i === 0 ? 120_000 : 3_600_000 });
    for (let i = 0; i < 3 * QUOTA; i += 20) {
      await limiter.check(
        Array.from({ length: 20 }, (_, j) => flood(i + j)),
        now,
      );
    }
    expect((await limiter.check([victim], now))[0]).toMatchObject({ passed: false, remaining: 0 });
    // Within ws_b, each new counter evicted the soonest-expiring: flood-0 first, the newest ones stay.
    const left = async (i: number) => (await limiter.check([{ ...flood(i), cost: 0 }], now))[0]!.remaining;
    expect(await left(0)).toBe(5);
    expect(await left(3 * QUOTA - 1)).toBe(4);
  });

  it("makes room for ad-hoc counters only among the workspace's ad-hoc ones, never its configured ones", async () => {
    const configured = check({ workspaceId: "ws_c", name: "login", limit: 3, duration: 600_000 });
    for (let i = 0; i < 3; i++) expect((await limiter.check([configured], now))[0]!.passed).toBe(true);
    // The same workspace creates three times its ad-hoc quota of counters, all expiring after the configured one.
    const adHoc = (i: number) =>
      check({ workspaceId: "ws_c", identifier: "key_c", name: `adhoc-${i}`, limit: 5, duration: 3_600_000, adHoc: true });
    for (let i = 0; i < 3 * QUOTA; i += 20) {
      await limiter.check(
        Array.from({ length: 20 }, (_, j) => adHoc(i + j)),
        now,
      );
    }
    expect((await limiter.check([configured], now))[0]).toMatchObject({ passed: false, remaining: 0 });
    // The ad-hoc ones made room among themselves: the oldest went, the newest stay.
    const left = async (i: number) => (await limiter.check([{ ...adHoc(i), cost: 0 }], now))[0]!.remaining;
    expect(await left(0)).toBe(5);
    expect(await left(3 * QUOTA - 1)).toBe(4);
  });
});

describe("the memory rate limiter's bound", () => {
  it("keeps at most its quota of counters per workspace: expired ones go first, then the soonest-expiring", async () => {
    const limiter = new MemoryRateLimiter(60_000, 100);
    try {
      const now = 0; // every window of the long counters below starts here, so the shortest one ends first
      const one = (identifier: string, duration: number) => ({
        workspaceId: "ws_a",
        name: "adhoc",
        identifier,
        limit: 5,
        duration,
        cost: 1,
      });
      const remaining = async (c: LimitCheck, at: number) => (await limiter.check([{ ...c, cost: 0 }], at))[0]!.remaining;
      // 50 counters of a 1 s window, then 100 of windows from 1 to 100 hours long, ending at different times.
      for (let i = 0; i < 50; i++) await limiter.check([one(`short-${i}`, 1000)], now);
      const long = (i: number) => one(`long-${i}`, 3_600_000 * (i + 1));
      for (let i = 0; i < 100; i++) await limiter.check([long(i)], now + 5000);
      expect(limiter.size("ws_a")).toBe(100);
      // The 50 expired ones went first; then the soonest-expiring long one made room for the newest.
      expect(await remaining(long(99), now + 5000)).toBe(4);
      await limiter.check([long(100)], now + 5000);
      expect(limiter.size()).toBe(100);
      for (let i = 0; i < 100; i++) expect(await remaining(long(i), now + 5000)).toBe(i === 0 ? 5 : 4);
    } finally {
      await limiter.close();
    }
  });
});

// The app's (and its replica's) clock stands still in the middle of an hour, ahead of the machine's (so that counters
// the in-memory limiter sweeps by the machine's clock are never dropped early): a one-hour window never rolls over
// during a test, and no test waits for the top of the hour.
const HOUR = 3_600_000;
const clock = new ManualClock(Date.now() - (Date.now() % HOUR) + HOUR + 30 * 60_000);

// The keys.verifyKey tests' harness is the shared `h` fixture of test/fixtures.ts made on that clock (`t`, `apiId`
// and `importKey` are of it).
const it = testWith(harnessWith({}, { clock })).extend(
  "verify",
  async ({ h }) =>
    (body: Record<string, unknown>) =>
      h.post("/v1/keys.verifyKey", body),
);

describe("rate limits in keys.verifyKey", () => {
  it("applies an imported key's limit as its default limit", async ({ importKey, verify }) => {
    const { key } = await importKey({ ratelimit: { limit: 2, refillRate: 2, refillInterval: 3_600_000 } });
    const bodies = [];
    for (let i = 0; i < 3; i++) bodies.push((await verify({ key })).body);
    expect(bodies.map((b) => b.code)).toEqual(["VALID", "VALID", "RATE_LIMITED"]);
    expect(bodies[0].ratelimit).toMatchObject({ limit: 2, remaining: 1 });
    expect(bodies[2]).toMatchObject({ valid: false, ratelimit: { limit: 2, remaining: 0 } });
    expect(bodies[2].ratelimit.reset).toBeGreaterThan(Date.now());
  });

  it("does not spend remaining uses on a rate-limited verification", async ({ h, importKey, verify }) => {
    const { key, keyId } = await importKey({ remaining: 10, ratelimit: { limit: 1, refillRate: 1, refillInterval: 3_600_000 } });
    expect((await verify({ key })).body).toMatchObject({ valid: true, remaining: 9 });
    expect((await verify({ key })).body).toMatchObject({ code: "RATE_LIMITED" });
    const [row] = await h.sql<any>(`select remaining_requests from keys where id = '${keyId}'`);
    expect(row.remaining_requests).toBe(9);
  });

  it("checks ad-hoc limits given in the request", async ({ importKey, verify }) => {
    const { key } = await importKey();
    const req = { key, ratelimits: [{ name: "burst", limit: 1, duration: 3_600_000 }] };
    expect((await verify(req)).body).toMatchObject({ valid: true, ratelimit: { limit: 1, remaining: 0 } });
    expect((await verify(req)).body).toMatchObject({ valid: false, code: "RATE_LIMITED" });
  });

  it("refuses a named limit the key does not have with 400", async ({ importKey, verify }) => {
    const { key, keyId } = await importKey();
    expectError(
      await verify({ key, ratelimits: [{ name: "nope" }] }),
      400,
      "BAD_REQUEST",
      `ratelimit "nope" was requested but does not exist for key "${keyId}" and there is no identity connected`,
    );
  });

  it("charges nothing when one of several limits refuses", async ({ importKey, verify }) => {
    const { key } = await importKey({ ratelimit: { limit: 5, refillRate: 5, refillInterval: 3_600_000 } });
    const tight = { name: "tight", limit: 1, duration: 3_600_000 };
    expect((await verify({ key, ratelimits: [tight] })).body.valid).toBe(true);
    expect((await verify({ key, ratelimits: [tight] })).body.code).toBe("RATE_LIMITED");
    // The default limit was charged once (by the first call), not by the refused second call.
    expect((await verify({ key })).body.ratelimit).toMatchObject({ limit: 5, remaining: 3 });
  });

  it("shares an identity's limits among all its keys, and lets a key's own limit of that name win", async ({ h, t, importKey, verify }) => {
    const externalId = `limited-${randomBytes(4).toString("hex")}`;
    const a = await importKey({ externalId });
    const b = await importKey({ externalId });
    const [{ identity_id }] = await h.sql<any>(`select identity_id from keys where id = '${a.keyId}'`);
    await h.sql(`insert into ratelimits (id, workspace_id, name, identity_id, "limit", duration, auto_apply, created_at_m)
                 values ('rl_${randomBytes(4).toString("hex")}', '${t.workspaceId}', 'shared', '${identity_id}', 2, 3600000, true, 0)`);
    expect((await verify({ key: a.key })).body.valid).toBe(true);
    expect((await verify({ key: b.key })).body.valid).toBe(true);
    expect((await verify({ key: a.key })).body.code).toBe("RATE_LIMITED");
    expect((await verify({ key: b.key })).body.code).toBe("RATE_LIMITED");

    await h.sql(`insert into ratelimits (id, workspace_id, name, key_id, "limit", duration, auto_apply, created_at_m)
                 values ('rl_${randomBytes(4).toString("hex")}', '${t.workspaceId}', 'shared', '${b.keyId}', 100, 3600000, true, 0)`);
    expect((await verify({ key: b.key })).body.valid).toBe(true);
    expect((await verify({ key: a.key })).body.code).toBe("RATE_LIMITED");
  });
});

describe("the Unkey-Ratelimit-Triggered header of keys.verifyKey", () => {
  const TRIGGERED = "unkey-ratelimit-triggered";

  it("names the key's default limit when it refuses, and is absent while the verification is VALID", async ({ importKey, verify }) => {
    const { key } = await importKey({ ratelimit: { limit: 1, refillRate: 1, refillInterval: 3_600_000 } });
    const first = await verify({ key });
    expect(first.body.code).toBe("VALID");
    expect(first.headers[TRIGGERED]).toBeUndefined();
    const second = await verify({ key });
    expect(second.body.code).toBe("RATE_LIMITED");
    expect(second.headers[TRIGGERED]).toBe("default");
  });

  it("names the request's limit that refused, the first refusing one in v1's order", async ({ importKey, verify }) => {
    const { key } = await importKey({ ratelimit: { limit: 10, refillRate: 10, refillInterval: 3_600_000 } });
    const tight = { name: "tight", limit: 1, duration: 3_600_000 };
    const zero = { name: "zero", limit: 0, duration: 3_600_000 };
    const ok = await verify({ key, ratelimits: [tight] });
    expect(ok.body.code).toBe("VALID");
    expect(ok.headers[TRIGGERED]).toBeUndefined();
    const refused = await verify({ key, ratelimits: [tight] });
    expect(refused.body.code).toBe("RATE_LIMITED");
    expect(refused.headers[TRIGGERED]).toBe("tight");
    // Both refuse: the auto-applied default comes first (it passes), then the request's entries in their order.
    expect((await verify({ key, ratelimits: [zero, tight] })).headers[TRIGGERED]).toBe("zero");
    expect((await verify({ key, ratelimits: [tight, zero] })).headers[TRIGGERED]).toBe("tight");
  });

  it("is absent on answers that no limit refused", async ({ importKey, verify }) => {
    const { key } = await importKey({ remaining: 1 });
    expect((await verify({ key })).headers[TRIGGERED]).toBeUndefined();
    const exhausted = await verify({ key });
    expect(exhausted.body.code).toBe("USAGE_EXCEEDED");
    expect(exhausted.headers[TRIGGERED]).toBeUndefined();
  });
});

describe("across two replicas over real sockets", () => {
  let urls: string[];
  let closeReplica: () => Promise<void>;
  it.beforeAll(async ({ h }) => {
    ({ urls, closeReplica } = await h.listenWithReplica());
  });
  afterAll(() => closeReplica());

  const verifyAt = (i: number, body: unknown) =>
    fetch(`${urls[i % 2]}/v1/keys.verifyKey`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    }).then((r) => r.json() as Promise<any>);

  it("lets exactly 10 of 100 concurrent verifications through a limit of 10 per window", async ({ importKey }) => {
    // A one-hour window, on a clock that stands still mid-hour: the burst sees one window.
    const hour = HOUR;
    const { key } = await importKey({ ratelimit: { limit: 10, refillRate: 10, refillInterval: hour } });
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => verifyAt(i, { key })));
    expect(results.filter((r) => r.valid)).toHaveLength(10);
    expect(results.filter((r) => r.code === "RATE_LIMITED")).toHaveLength(90);
  });

  it("lets exactly 50 of 200 concurrent verifications spend a key with 50 uses", async ({ h, importKey }) => {
    const { key, keyId } = await importKey({ remaining: 50 });
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => verifyAt(i, { key })));
    expect(results.filter((r) => r.valid)).toHaveLength(50);
    expect(results.filter((r) => r.code === "USAGE_EXCEEDED")).toHaveLength(150);
    const [row] = await h.sql<any>(`select remaining_requests from keys where id = '${keyId}'`);
    expect(row.remaining_requests).toBe(0);
  });

  it("sees a disabled or deleted key on the very next verification, on either replica", async ({ h, importKey }) => {
    const { key, keyId } = await importKey();
    expect((await verifyAt(0, { key })).valid).toBe(true);
    await h.sql(`update keys set enabled = false where id = '${keyId}'`);
    expect((await verifyAt(1, { key })).code).toBe("DISABLED");
    await h.sql(`update keys set deleted_at_m = 1 where id = '${keyId}'`);
    expect((await verifyAt(0, { key })).code).toBe("NOT_FOUND");
  });
});
