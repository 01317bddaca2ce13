import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../src/clock.js";
import { createHarness, type Harness } from "./helper.js";

// createServices (src/services.ts) is the one place the stateful pieces of a process are built: nothing lives in
// module state, so two apps in one process (two tests, an app and a replica on one embedded store) share nothing;
// and its clock is the one business time comes from, so a test sets the time instead of waiting for it.

const HOUR = 3_600_000;
const hourOf = (ms: number) => ms - (ms % HOUR);

describe("createServices: no state shared between two sets of services in one process", () => {
  let a: Harness;
  let b: Harness;
  beforeAll(async () => {
    [a, b] = await Promise.all([createHarness(), createHarness()]);
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  it("gives two harnesses on two stores caches of their own", async () => {
    const t = await a.tenant();
    const { key } = await a.importKey(t, await a.createApi(t));
    expect((await a.post("/v1/keys.verifyKey", { key })).body.code).toBe("VALID");
    expect(a.services.verificationCache.size).toBe(1);
    expect(b.services.verificationCache.size).toBe(0);
    for (const piece of [
      "epochs",
      "verificationCache",
      "remainingSpender",
      "rootKeys",
      "limitLookups",
      "apiSettings",
      "metrics",
      "analytics",
      "migrationWorker",
    ] as const) {
      expect(a.services[piece], piece).not.toBe(b.services[piece]);
    }
    // The other store does not know the key, and its answer is its own.
    expect((await b.post("/v1/keys.verifyKey", { key })).body.code).toBe("NOT_FOUND");
    expect(b.services.verificationCache.size).toBe(0);
  });

  it("gives a replica on the same store (one PGlite handle, shared) caches of its own, as another process has", async () => {
    const t = await a.tenant();
    const { key } = await a.importKey(t, await a.createApi(t));
    const replica = await a.replica();
    try {
      const before = a.services.verificationCache.size;
      const res = await replica.app.inject({ method: "POST", url: "/v1/keys.verifyKey", payload: { key } });
      expect(res.json().code).toBe("VALID");
      expect(replica.services.verificationCache.size).toBe(1);
      expect(a.services.verificationCache.size).toBe(before);
      expect(replica.services.verificationCache).not.toBe(a.services.verificationCache);
    } finally {
      await replica.close();
    }
  });
});

describe("createServices: the injected clock", () => {
  // One second before the top of an hour, two hours ago: a verification before and one after it, without waiting.
  const clock = new ManualClock(hourOf(Date.now()) - HOUR - 1000);
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness({}, { clock, migrationWorker: false });
  });
  afterAll(() => h?.close());

  it("counts verifications on either side of an hour boundary in their own hours", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const { key } = await h.importKey(t, apiId);
    const before = hourOf(clock.now());
    for (let i = 0; i < 3; i++) expect((await h.post("/v1/keys.verifyKey", { key })).body.code).toBe("VALID");
    clock.advance(2000);
    expect(hourOf(clock.now())).toBe(before + HOUR);
    for (let i = 0; i < 2; i++) expect((await h.post("/v1/keys.verifyKey", { key })).body.code).toBe("VALID");
    await h.jobs.analytics.flush();

    // No `end`: it defaults to the clock's now, in the later hour.
    const res = await h.get("/v1/analytics.getVerifications", { apiId, start: String(before - HOUR), groupBy: "hour" }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.map((r: { time: number; valid: number }) => [r.time, r.valid])).toEqual([
      [before - HOUR, 0],
      [before, 3],
      [before + HOUR, 2],
    ]);
  });

  it("expires a key when the clock passes its expiry", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const { key } = await h.importKey(t, apiId, { expires: clock.now() + 60_000 });
    expect((await h.post("/v1/keys.verifyKey", { key })).body.code).toBe("VALID");
    clock.advance(60_001);
    expect((await h.post("/v1/keys.verifyKey", { key })).body.code).toBe("EXPIRED");
  });
});
