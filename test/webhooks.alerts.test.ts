import { beforeEach, describe, expect } from "vitest";
import { Webhook } from "standardwebhooks";
import { ManualClock } from "../src/clock.js";
import { DEFAULT_CREDITS_LOW_PERCENT, DEFAULT_EXPIRING_WITHIN_MS } from "../src/core/webhooks/webhooks.alerts.js";
import { harnessWith, testWith } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
import { expectV2Error } from "./v2-errors.js";
import { WebhookReceiver } from "./webhook-receiver.js";
import { waitFor } from "./wait.js";

// Threshold events (issue 38 §3, docs/webhooks.md#threshold-events) against a real receiver on 127.0.0.1. The outbox
// is read in the database: each crossing must have written exactly one delivery per subscribed endpoint, in the
// statement that crossed.
const clock = new ManualClock();
const it = testWith(harnessWith({ KEYHAVEN_WEBHOOK_ALLOW_PRIVATE: "true" }, { clock, webhooks: { pollMs: 20, random: () => 0.5 } }));

const ALL = [
  "key.credits.low",
  "key.credits.low.resolved",
  "key.credits.exhausted",
  "key.credits.exhausted.resolved",
  "key.expiring",
  "key.expiring.resolved",
  "key.expired",
  "key.expired.resolved",
  "key.ratelimited",
];

async function endpoint(h: Harness, t: Tenant, url: string, events = ALL) {
  const res = await h.post("/v2/keyhaven.createWebhook", { url, events }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { webhookId: string; secret: string };
}

/** The events written for `keyId`, oldest first (the outbox: one row per endpoint and event). */
async function eventsOf(h: Harness, webhookId: string, keyId?: string): Promise<string[]> {
  const rows = await h.sql<{ event: string }>(
    `select event from webhook_deliveries where endpoint_id = '${webhookId}' and event like 'key.%'
       and event not in ('key.create', 'key.update', 'key.delete') ${keyId ? `and payload->'data'->>'keyId' = '${keyId}'` : ""}
     order by created_at_m, id`,
  );
  return rows.map((r) => r.event);
}

async function verify(h: Harness, t: Tenant, key: string, extra: Record<string, unknown> = {}) {
  const res = await h.post("/v2/keys.verifyKey", { key, ...extra }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { valid: boolean; code: string; credits?: number };
}

async function createKey(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown>) {
  const res = await h.post("/v2/keys.createKey", { apiId, ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { keyId: string; key: string };
}

describe("threshold events", () => {
  beforeEach(() => clock.set(Date.now()));

  it("sends key.credits.low and key.credits.exhausted once per crossing, and their .resolved when an update lifts them", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const r = await new WebhookReceiver().start();
    try {
      const hook = await endpoint(h, t, r.url);
      const set = await h.post("/v2/keyhaven.setAlertThresholds", { apiId, creditsLow: { remaining: 5 } }, t.rootKey);
      expect(set.status, JSON.stringify(set.body)).toBe(200);
      const { keyId, key } = await createKey(h, t, apiId, { credits: { remaining: 10 }, externalId: "cust_1" });
      for (let i = 0; i < 5; i++) await verify(h, t, key);
      expect(await eventsOf(h, hook.webhookId, keyId)).toEqual([]); // 5 left: not below 5
      expect((await verify(h, t, key)).credits).toBe(4);
      expect(await eventsOf(h, hook.webhookId, keyId)).toEqual(["key.credits.low"]);
      for (let i = 0; i < 3; i++) await verify(h, t, key);
      expect(await eventsOf(h, hook.webhookId, keyId)).toEqual(["key.credits.low"]);
      await verify(h, t, key); // 0 left
      expect((await verify(h, t, key)).code).toBe("USAGE_EXCEEDED");
      expect(await eventsOf(h, hook.webhookId, keyId)).toEqual(["key.credits.low", "key.credits.exhausted"]);
      const update = await h.post("/v2/keys.updateKey", { keyId, credits: { remaining: 100 } }, t.rootKey);
      expect(update.status, JSON.stringify(update.body)).toBe(200);
      // One statement lifted both: their order within it is not defined.
      const events = await eventsOf(h, hook.webhookId, keyId);
      expect(events.slice(0, 2)).toEqual(["key.credits.low", "key.credits.exhausted"]);
      expect(events.slice(2).sort()).toEqual(["key.credits.exhausted.resolved", "key.credits.low.resolved"]);

      // Delivered (the triggers date their events by the database's clock: the test's clock moves to it), signed, and saying whose key and how many uses are left; never the key or its hash.
      clock.set(Date.now() + 1000);
      const received = await waitFor("four threshold events", async () => {
        const got = r.received.filter((q) => q.body.includes(keyId));
        return got.length >= 4 ? got : undefined;
      });
      const low = received
        .map((q) => new Webhook(hook.secret).verify(q.body, q.headers as Record<string, string>) as any)
        .find((e) => e.type === "key.credits.low");
      expect(low.data).toEqual({
        keyId,
        apiId,
        workspaceId: t.workspaceId,
        identityId: expect.any(String),
        externalId: "cust_1",
        remaining: 4,
        threshold: 5,
      });
      expect(received.some((q) => q.body.includes(key))).toBe(false);
      const state = await h.post("/v2/keyhaven.getAlertThresholds", { keyId }, t.rootKey);
      expect(state.body.data).toMatchObject({
        keyId,
        apiId,
        alerts: [],
        effective: { creditsLow: { remaining: 5 }, creditsLowFrom: "api", creditsLowBelow: 5 },
      });
    } finally {
      await r.close();
    }
  });

  it("takes a percentage of the refill amount, else of the starting credits, and a key's own threshold over its API's", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const hook = await endpoint(h, t, "http://127.0.0.1:9/never");
    // Default: 10 % of the starting credits (20): below 2.
    const plain = await createKey(h, t, apiId, { credits: { remaining: 20 } });
    const got = await h.post("/v2/keyhaven.getAlertThresholds", { keyId: plain.keyId }, t.rootKey);
    expect(got.body.data.effective).toMatchObject({
      creditsLow: { percent: DEFAULT_CREDITS_LOW_PERCENT },
      creditsLowFrom: "default",
      expiringWithinMs: DEFAULT_EXPIRING_WITHIN_MS,
    });
    // The SQL's default (what the triggers apply) is the core's: 10 % of 20, rounded up.
    expect(got.body.data.effective.creditsLowBelow).toBe(Math.ceil((20 * DEFAULT_CREDITS_LOW_PERCENT) / 100));
    for (let i = 0; i < 18; i++) await verify(h, t, plain.key);
    expect(await eventsOf(h, hook.webhookId, plain.keyId)).toEqual([]);
    await verify(h, t, plain.key); // 1 left
    expect(await eventsOf(h, hook.webhookId, plain.keyId)).toEqual(["key.credits.low"]);

    // 50 % of a refill of 10: below 5, whatever the key started with; the key's own 0 % means never.
    await h.post("/v2/keyhaven.setAlertThresholds", { apiId, creditsLow: { percent: 50 } }, t.rootKey);
    const refilled = await createKey(h, t, apiId, { credits: { remaining: 6, refill: { interval: "daily", amount: 10 } } });
    await verify(h, t, refilled.key);
    expect(await eventsOf(h, hook.webhookId, refilled.keyId)).toEqual([]);
    await verify(h, t, refilled.key); // 4 left
    expect(await eventsOf(h, hook.webhookId, refilled.keyId)).toEqual(["key.credits.low"]);
    // The refill, applied by the first verification after it is due (here: the last one set two days back), lifts it.
    await h.sql(
      `update keys set last_refill_at = now() - interval '2 days', created_at_m = created_at_m - 172800000 where id = '${refilled.keyId}'`,
    );
    expect((await verify(h, t, refilled.key)).credits).toBe(9);
    expect(await eventsOf(h, hook.webhookId, refilled.keyId)).toEqual(["key.credits.low", "key.credits.low.resolved"]);
    const never = await createKey(h, t, apiId, { credits: { remaining: 3 } });
    const off = await h.post("/v2/keyhaven.setAlertThresholds", { keyId: never.keyId, creditsLow: { percent: 0 } }, t.rootKey);
    expect(off.body.data).toMatchObject({ keyId: never.keyId, creditsLow: { percent: 0 }, effective: { creditsLowFrom: "key" } });
    expect(off.body.data.effective.creditsLowBelow).toBeUndefined();
    for (let i = 0; i < 3; i++) await verify(h, t, never.key);
    expect(await eventsOf(h, hook.webhookId, never.keyId)).toEqual(["key.credits.exhausted"]);
  });

  it("sends key.expiring when a key comes within its lead, key.expired at its expiry, and both .resolved when it is extended", async ({
    h,
  }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const hook = await endpoint(h, t, "http://127.0.0.1:9/never");
    await h.post("/v2/keyhaven.setAlertThresholds", { apiId, expiringWithinMs: 3_600_000 }, t.rootKey);
    const now = Date.now();
    const soon = await createKey(h, t, apiId, { expires: now + 30 * 60_000 }); // within the hour: expiring from the start
    const later = await createKey(h, t, apiId, { expires: now + 3 * 3_600_000 });
    expect(await eventsOf(h, hook.webhookId, soon.keyId)).toEqual(["key.expiring"]);
    expect(await eventsOf(h, hook.webhookId, later.keyId)).toEqual([]);
    await h.services.expiryScan.scanNow();
    clock.set(now + 2.5 * 3_600_000); // `soon` expired, `later` within its hour
    await h.services.expiryScan.scanNow();
    await h.services.expiryScan.scanNow(); // a second scan (or replica) sends nothing twice
    expect(await eventsOf(h, hook.webhookId, soon.keyId)).toEqual(["key.expiring", "key.expired"]);
    expect(await eventsOf(h, hook.webhookId, later.keyId)).toEqual(["key.expiring"]);
    const extend = await h.post("/v2/keys.updateKey", { keyId: soon.keyId, expires: Date.now() + 30 * 86_400_000 }, t.rootKey);
    expect(extend.status, JSON.stringify(extend.body)).toBe(200);
    // (The scan's events are dated by the test's clock, hours ahead of the update's: compared as a set.)
    expect((await eventsOf(h, hook.webhookId, soon.keyId)).sort()).toEqual([
      "key.expired",
      "key.expired.resolved",
      "key.expiring",
      "key.expiring.resolved",
    ]);
    expect(await h.sql(`select * from key_alerts where key_id = '${soon.keyId}'`)).toEqual([]);
    // A key deleted while expiring just stops: its alerts go, nothing is sent.
    await h.post("/v2/keys.deleteKey", { keyId: later.keyId }, t.rootKey);
    expect(await h.sql(`select * from key_alerts where key_id = '${later.keyId}'`)).toEqual([]);
  });

  it("sends key.ratelimited once per key and window, before the refusal is answered", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const hook = await endpoint(h, t, "http://127.0.0.1:9/never", ["key.ratelimited"]);
    const { keyId, key } = await createKey(h, t, apiId, {
      ratelimits: [{ name: "requests", limit: 1, duration: 60_000, autoApply: true }],
    });
    expect((await verify(h, t, key)).code).toBe("VALID");
    for (let i = 0; i < 4; i++) expect((await verify(h, t, key)).code).toBe("RATE_LIMITED");
    const rows = await h.sql<{ event: string; payload: any }>(
      `select event, payload from webhook_deliveries where endpoint_id = '${hook.webhookId}'`,
    );
    expect(rows.map((r) => r.event)).toEqual(["key.ratelimited"]);
    expect(rows[0]!.payload.data).toMatchObject({
      keyId,
      ratelimit: { name: "requests", limit: 1, duration: 60_000, resetAt: expect.any(Number) },
    });
  });

  it("writes nothing for a workspace without a subscribed endpoint, and refuses bad thresholds with a 400 that changes nothing", async ({
    h,
  }) => {
    const t = await h.tenant();
    const other = await h.tenant();
    await endpoint(h, other, "http://127.0.0.1:9/never"); // another workspace's endpoint
    const apiId = await h.createApi(t);
    await endpoint(h, t, "http://127.0.0.1:9/never", ["key.create"]);
    const { keyId, key } = await createKey(h, t, apiId, { credits: { remaining: 1 } });
    await verify(h, t, key);
    expect(await h.sql(`select * from key_alerts where key_id = '${keyId}'`)).toEqual([]);
    expect(await h.sql(`select event from webhook_deliveries where workspace_id = '${t.workspaceId}' and event <> 'key.create'`)).toEqual(
      [],
    );

    expectV2Error(
      await h.post("/v2/keyhaven.setAlertThresholds", { apiId, keyId, creditsLow: { percent: 5 } }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
    expectV2Error(await h.post("/v2/keyhaven.setAlertThresholds", { apiId }, t.rootKey), 400, "unkey/application/invalid_input");
    expectV2Error(
      await h.post("/v2/keyhaven.setAlertThresholds", { apiId, creditsLow: { percent: 101 } }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
    expectV2Error(
      await h.post("/v2/keyhaven.setAlertThresholds", { apiId, expiringWithinMs: -1 }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
    const elsewhere = await h.createApi(other);
    expectV2Error(
      await h.post("/v2/keyhaven.setAlertThresholds", { apiId: elsewhere, creditsLow: { remaining: 3 } }, t.rootKey),
      404,
      "unkey/data/api_not_found",
    );
    expect(await h.sql(`select * from alert_thresholds where workspace_id = '${t.workspaceId}'`)).toEqual([]);
    const reader = await h.rootKey(t.workspaceId, [`api.${apiId}.read_api`]);
    expectV2Error(
      await h.post("/v2/keyhaven.setAlertThresholds", { apiId, creditsLow: { remaining: 3 } }, reader),
      403,
      "unkey/authorization/insufficient_permissions",
    );
    expect((await h.post("/v2/keyhaven.getAlertThresholds", { apiId }, reader)).status).toBe(200);
  });
});
