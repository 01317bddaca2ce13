import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { freePort } from "./wait.js";

// Rate limits skipped while Redis cannot answer (failing open) are told to every caller, v1 and v2 alike, and
// counted in /metrics. The Redis here is dead: a loopback port nothing listens on (never the shared Redis).

/** `keyhaven_ratelimit_skipped_total{operation=…}` as /metrics reports it (0 before the first skip). */
async function skipped(h: Harness, operation: "verifyKey" | "limit"): Promise<number> {
  const res = await h.app.inject({ method: "GET", url: "/metrics" });
  const line = res.body.split("\n").find((l) => l.startsWith(`keyhaven_ratelimit_skipped_total{operation="${operation}"}`));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
}

describe("with Redis down and KEYHAVEN_RATELIMIT_FAIL=open", () => {
  let h: Harness;
  let t: Tenant;
  let key: string;
  beforeAll(async () => {
    // KEYHAVEN_RATELIMIT_FAIL: the name issue 34 used, accepted beside KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE.
    h = await createHarness({ KEYHAVEN_RATELIMIT_FAIL: "open" }, { redisUrl: `redis://127.0.0.1:${await freePort()}` });
    t = await h.tenant();
    ({ key } = await h.importKey(t, await h.createApi(t)));
  }, 60_000);
  afterAll(() => h?.close());

  const adHoc = { ratelimits: [{ name: "requests", limit: 10, duration: 60_000 }] };

  it("answers a v2 verification with `ratelimitSkipped: true` and no `ratelimits`, and counts it", async () => {
    const before = await skipped(h, "verifyKey");
    const res = await h.post("/v2/keys.verifyKey", { key, ...adHoc }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({ valid: true, code: "VALID", ratelimitSkipped: true });
    expect(res.body.data).not.toHaveProperty("ratelimits");
    expect(await skipped(h, "verifyKey")).toBe(before + 1);
  });

  it("answers a v1 verification with `ratelimitSkipped: true` as before, and counts it too", async () => {
    const before = await skipped(h, "verifyKey");
    const res = await h.post("/v1/keys.verifyKey", { key, ...adHoc });
    expect(res.body).toMatchObject({ valid: true, code: "VALID", ratelimitSkipped: true });
    expect(await skipped(h, "verifyKey")).toBe(before + 1);
  });

  it("counts skipped standalone limits (v1 and v2) apart from verifications", async () => {
    const before = await skipped(h, "limit");
    const limit = { namespace: "outage", identifier: "user-1", limit: 10, duration: 60_000 };
    expect((await h.post("/v1/ratelimits.limit", limit, t.rootKey)).body).toMatchObject({ success: true, ratelimitSkipped: true });
    expect((await h.post("/v2/ratelimit.limit", limit, t.rootKey)).body.data).toMatchObject({ success: true, ratelimitSkipped: true });
    expect(await skipped(h, "limit")).toBe(before + 2);
  });

  it("says nothing of a verification that had no rate limit to skip", async () => {
    const before = await skipped(h, "verifyKey");
    const res = await h.post("/v2/keys.verifyKey", { key }, t.rootKey);
    expect(res.body.data).toMatchObject({ valid: true, code: "VALID" });
    expect(res.body.data).not.toHaveProperty("ratelimitSkipped");
    expect(await skipped(h, "verifyKey")).toBe(before);
  });
});
