import { afterAll, beforeAll, beforeEach, describe, expect, it as plainIt } from "vitest";
import { Webhook } from "standardwebhooks";
import { ManualClock } from "../src/clock.js";
import { nonPublicKindOf } from "../src/core/webhooks/webhooks.url.js";
import { DEFAULT_RETRY_SCHEDULE_MS } from "../src/core/webhooks/webhooks.worker.js";
import { harnessWith, testWith } from "./fixtures.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { WebhookReceiver } from "./webhook-receiver.js";
import { waitFor } from "./wait.js";

// Webhooks (issue 38 §3, docs/webhooks.md) against a real receiver on 127.0.0.1, so this file's harness allows
// private addresses. The clock is set by hand: a retry is due when the test moves it, never after a wall-clock wait.
// The jitter is fixed (random 0.5: each wait is exactly the schedule's).
const clock = new ManualClock();
const ATTEMPT_DEADLINE_MS = 3_000;
const it = testWith(
  harnessWith(
    { KEYHAVEN_WEBHOOK_ALLOW_PRIVATE: "true" },
    { clock, webhooks: { pollMs: 20, random: () => 0.5, attemptDeadlineMs: ATTEMPT_DEADLINE_MS } },
  ),
);

type Delivery = {
  id: string;
  status: string;
  attempts: number;
  last_status: number | null;
  next_attempt_at_m: string | number;
  /** Set while a worker holds it (an attempt in flight): its outcome is not recorded yet. */
  lease: string | null;
};

async function receiver(): Promise<WebhookReceiver> {
  return new WebhookReceiver().start();
}

async function createWebhook(h: Harness, t: Tenant, url: string, events: string[]) {
  const res = await h.post("/v2/keyhaven.createWebhook", { url, events }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { webhookId: string; secret: string };
}

const deliveriesOf = (h: Harness, webhookId: string) =>
  h.sql<Delivery>(
    `select id, status, attempts, last_status, next_attempt_at_m, lease from webhook_deliveries where endpoint_id = '${webhookId}' order by created_at_m, id`,
  );

/** The one delivery of `webhookId`, once `ready` holds for it. */
async function deliveryOnce(h: Harness, webhookId: string, ready: (d: Delivery) => boolean): Promise<Delivery> {
  return waitFor(`a delivery of ${webhookId}`, async () => {
    const rows = await deliveriesOf(h, webhookId);
    return rows.length === 1 && ready(rows[0]!) ? rows[0]! : undefined;
  });
}

const verify = (secret: string, r: { body: string; headers: Record<string, unknown> }) =>
  new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as any;

describe("webhook endpoints", () => {
  // Each test starts at the machine's time: a signature's timestamp must be within 5 minutes of it for
  // Webhook.verify, and a test before may have moved the clock a day on.
  beforeEach(() => clock.set(Date.now()));

  it("creates an endpoint whose secret is answered once and stored only sealed, and lists it without the secret", async ({ h }) => {
    const t = await h.tenant();
    const r = await receiver();
    try {
      const created = await h.post(
        "/v2/keyhaven.createWebhook",
        { url: r.url, events: ["key.create", "key.delete"], description: "billing" },
        t.rootKey,
      );
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      const { webhookId, secret } = created.body.data;
      expect(webhookId).toMatch(/^wh_/);
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      const listed = await h.post("/v2/keyhaven.listWebhooks", {}, t.rootKey);
      expect(listed.status).toBe(200);
      expect(listed.body.data).toEqual([
        {
          webhookId,
          url: r.url,
          events: ["key.create", "key.delete"],
          description: "billing",
          enabled: true,
          createdAt: expect.any(Number),
        },
      ]);
      const raw = secret.slice("whsec_".length);
      const dump = await h.sql<{ row: string }>(
        `select row_to_json(x)::text as row from (select * from webhook_endpoints) x
         union all select row_to_json(x)::text from (select * from audit_log) x`,
      );
      expect(dump.some((d) => d.row.includes(raw))).toBe(false);
      const [stored] = await h.sql<{ secret_encrypted: string; encryption_key_id: string }>(
        `select secret_encrypted, encryption_key_id from webhook_endpoints where id = '${webhookId}'`,
      );
      expect(await h.keyring.decrypt(h.db, t.workspaceId, stored!.encryption_key_id, webhookId, stored!.secret_encrypted)).toBe(secret);
      const [entry] = await h.sql<any>(`select * from audit_log where event = 'webhook.create' and workspace_id = '${t.workspaceId}'`);
      expect(entry.targets).toEqual([{ type: "webhook", id: webhookId, name: new URL(r.url).host }]);
    } finally {
      await r.close();
    }
  });

  it("delivers a key.create made through the API exactly once, signed so that standardwebhooks' Webhook.verify accepts it", async ({
    h,
  }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const r = await receiver();
    try {
      const hook = await createWebhook(h, t, r.url, ["key.create"]);
      const other = await createWebhook(h, t, r.url, ["key.delete"]);
      const res = await h.post("/v2/keys.createKey", { apiId }, t.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const { keyId, key } = res.body.data;
      const delivery = await deliveryOnce(h, hook.webhookId, (d) => d.status === "delivered");
      expect(delivery).toMatchObject({ attempts: 1, last_status: 204 });
      expect(await deliveriesOf(h, other.webhookId)).toEqual([]);
      const got = r.of(delivery.id);
      expect(got).toHaveLength(1);
      expect(r.received).toHaveLength(1);
      const request = got[0]!;
      expect(delivery.id).toMatch(/^msg_/);
      expect(request.headers["content-type"]).toBe("application/json");
      expect(request.headers["webhook-timestamp"]).toBe(String(Math.floor(clock.now() / 1000)));
      const payload = verify(hook.secret, request);
      expect(payload).toMatchObject({
        type: "key.create",
        timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        data: {
          event: "key.create",
          workspaceId: t.workspaceId,
          actor: { type: "root_key", id: t.rootKeyId },
          context: { surface: "v2", requestId: expect.any(String) },
        },
      });
      expect(payload.data.targets.map((x: any) => x.id)).toContain(keyId);
      expect(request.body).not.toContain(key);
      expect(() => verify(other.secret, request)).toThrow();
      expect(() => verify(hook.secret, { body: request.body.replace("key.create", "key.delete"), headers: request.headers })).toThrow();
    } finally {
      await r.close();
    }
  });

  it("sends a delivery a receiver failed (500) again after the first backoff, and lists both attempts", async ({ h }) => {
    const t = await h.tenant();
    const r = await receiver();
    try {
      r.statuses.push(500);
      const hook = await createWebhook(h, t, r.url, ["api.create"]);
      await h.createApi(t);
      const failed = await deliveryOnce(h, hook.webhookId, (d) => d.attempts === 1 && d.status === "pending" && d.last_status === 500);
      // The first retry waits the schedule's first step (5 s; the jitter is fixed at none).
      const lastAttempt = await h.sql<{ at_m: string }>(`select at_m from webhook_attempts where delivery_id = '${failed.id}'`);
      expect(Number(failed.next_attempt_at_m) - Number(lastAttempt[0]!.at_m)).toBe(DEFAULT_RETRY_SCHEDULE_MS[0]);
      expect(r.of(failed.id)).toHaveLength(1);
      clock.advance(DEFAULT_RETRY_SCHEDULE_MS[0]!);
      const delivered = await deliveryOnce(h, hook.webhookId, (d) => d.status === "delivered");
      expect(delivered).toMatchObject({ id: failed.id, attempts: 2, last_status: 204 });
      const both = r.of(failed.id);
      expect(both).toHaveLength(2);
      for (const request of both) expect(verify(hook.secret, request).type).toBe("api.create");
      const listed = await h.post("/v2/keyhaven.listWebhookDeliveries", { webhookId: hook.webhookId }, t.rootKey);
      expect(listed.status, JSON.stringify(listed.body)).toBe(200);
      expect(listed.body.pagination).toEqual({ hasMore: false });
      expect(listed.body.data).toEqual([
        {
          deliveryId: failed.id,
          webhookId: hook.webhookId,
          event: "api.create",
          status: "delivered",
          attempts: 2,
          createdAt: expect.any(Number),
          updatedAt: expect.any(Number),
          lastResponseCode: 204,
          recentAttempts: [
            { attempt: 2, time: expect.any(Number), responseCode: 204, durationMs: expect.any(Number) },
            { attempt: 1, time: expect.any(Number), responseCode: 500, error: "answered 500", durationMs: expect.any(Number) },
          ],
        },
      ]);
      expect(JSON.stringify(listed.body)).not.toContain(hook.secret.slice(6));
    } finally {
      await r.close();
    }
  });

  it("gives a delivery up as failed after the last retry of the schedule, about a day later", async ({ h }) => {
    const t = await h.tenant();
    const r = await receiver();
    try {
      r.status = 503;
      const hook = await createWebhook(h, t, r.url, ["permission.create"]);
      expect((await h.post("/v2/permissions.createPermission", { name: "p", slug: "p" }, t.rootKey)).status).toBe(200);
      const started = clock.now();
      for (let attempt = 1; attempt <= DEFAULT_RETRY_SCHEDULE_MS.length; attempt++) {
        await deliveryOnce(h, hook.webhookId, (d) => d.attempts === attempt && d.status === "pending" && d.lease === null);
        clock.advance(DEFAULT_RETRY_SCHEDULE_MS[attempt - 1]!);
      }
      const failed = await deliveryOnce(h, hook.webhookId, (d) => d.status === "failed");
      expect(failed.attempts).toBe(DEFAULT_RETRY_SCHEDULE_MS.length + 1);
      expect(r.of(failed.id)).toHaveLength(DEFAULT_RETRY_SCHEDULE_MS.length + 1);
      const spanHours = (clock.now() - started) / 3_600_000;
      expect(spanHours).toBeGreaterThan(23);
      expect(spanHours).toBeLessThan(25);
      // Replayed, a failed delivery is sent again at once, with the same webhook-id, and its schedule starts over.
      r.status = 200;
      const replayed = await h.post("/v2/keyhaven.replayWebhookDelivery", { deliveryId: failed.id }, t.rootKey);
      expect(replayed.status, JSON.stringify(replayed.body)).toBe(200);
      expect(replayed.body.data).toEqual({ deliveryId: failed.id, webhookId: hook.webhookId });
      await deliveryOnce(h, hook.webhookId, (d) => d.status === "delivered");
      expect(r.of(failed.id)).toHaveLength(DEFAULT_RETRY_SCHEDULE_MS.length + 2);
      const [entry] = await h.sql<any>(
        `select * from audit_log where event = 'webhook.replay_delivery' and workspace_id = '${t.workspaceId}'`,
      );
      expect(entry.targets.map((x: any) => x.id)).toEqual([hook.webhookId, failed.id]);
    } finally {
      await r.close();
    }
  });

  it("replays a delivered message with the same webhook-id", async ({ h }) => {
    const t = await h.tenant();
    const r = await receiver();
    try {
      const hook = await createWebhook(h, t, r.url, ["role.create"]);
      expect((await h.post("/v2/permissions.createRole", { name: "r" }, t.rootKey)).status).toBe(200);
      const first = await deliveryOnce(h, hook.webhookId, (d) => d.status === "delivered");
      expect((await h.post("/v2/keyhaven.replayWebhookDelivery", { deliveryId: first.id }, t.rootKey)).status).toBe(200);
      await waitFor("the replay", () => r.of(first.id).length === 2);
      await deliveryOnce(h, hook.webhookId, (d) => d.status === "delivered" && d.attempts === 2);
      const [a, b] = r.of(first.id);
      expect(b!.body).toBe(a!.body);
      expect(verify(hook.secret, b!).type).toBe("role.create");
    } finally {
      await r.close();
    }
  });

  it("sends a delivery again once the lease of a worker that died while sending it has ended (at least once)", async ({ h }) => {
    const t = await h.tenant();
    const r = await receiver();
    try {
      const hook = await createWebhook(h, t, r.url, ["key.create"]);
      // A delivery as a worker killed mid-send leaves it: claimed (attempt 1 counted), its lease running 2 minutes.
      const now = clock.now();
      await h.sql(
        `insert into webhook_deliveries (id, workspace_id, endpoint_id, event, payload, status, attempts, lease, next_attempt_at_m, created_at_m, updated_at_m)
         values ('msg_crashed', '${t.workspaceId}', '${hook.webhookId}', 'key.create', '{"type":"key.create","data":{}}', 'pending', 1, 'dead-worker', ${now + 120_000}, ${now}, ${now})`,
      );
      clock.advance(120_000);
      const delivered = await deliveryOnce(h, hook.webhookId, (d) => d.status === "delivered");
      expect(delivered).toMatchObject({ id: "msg_crashed", attempts: 2 });
      expect(r.of("msg_crashed")).toHaveLength(1);
      expect(verify(hook.secret, r.of("msg_crashed")[0]!)).toEqual({ type: "key.create", data: {} });
    } finally {
      await r.close();
    }
  });

  it("sends at most 4 attempts at once to one endpoint, and a held receiver times out after the deadline", async ({ h }) => {
    const t = await h.tenant();
    const r = await receiver();
    try {
      let release = () => {};
      r.hold = new Promise<void>((resolve) => {
        release = resolve;
      });
      const hook = await createWebhook(h, t, r.url, ["identity.create"]);
      for (let i = 0; i < 6; i++) {
        expect((await h.post("/v2/identities.createIdentity", { externalId: `ext-${i}` }, t.rootKey)).status).toBe(200);
      }
      await waitFor("4 requests at the receiver", () => r.received.length === 4);
      // The scenario is a receiver that does not answer: while it holds, no fifth request arrives.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(r.received).toHaveLength(4);
      // Verification is not held up by a receiver that does not answer.
      const apiId = await h.createApi(t);
      const { key } = await h.importKey(t, apiId);
      const verified = await h.post("/v2/keys.verifyKey", { key }, t.rootKey);
      expect(verified.body.data?.valid, JSON.stringify(verified.body)).toBe(true);
      const timedOut = await waitFor(
        "the held attempts to time out",
        async () => {
          const rows = await h.sql<{ error: string }>(
            `select a.error from webhook_attempts a join webhook_deliveries d on d.id = a.delivery_id where d.endpoint_id = '${hook.webhookId}'`,
          );
          return rows.length >= 4 ? rows : undefined;
        },
        { timeoutMs: ATTEMPT_DEADLINE_MS + 15_000 },
      );
      expect(timedOut.slice(0, 4).map((x) => x.error)).toEqual(new Array(4).fill(`timed out after ${ATTEMPT_DEADLINE_MS} ms`));
      release();
      r.hold = undefined;
      // Each retry is due after its wait: the clock moves on until every delivery has been answered.
      let moves = 0;
      await waitFor("every delivery delivered", async () => {
        const rows = await deliveriesOf(h, hook.webhookId);
        if (rows.length === 6 && rows.every((d) => d.status === "delivered")) return true;
        if (moves++ < 20 && rows.every((d) => d.lease === null)) clock.advance(DEFAULT_RETRY_SCHEDULE_MS[1]!);
        return false;
      });
    } finally {
      await r.close();
    }
  });

  it("sends a disabled endpoint nothing and changes it with updateWebhook", async ({ h }) => {
    const t = await h.tenant();
    const r = await receiver();
    try {
      const hook = await createWebhook(h, t, r.url, ["api.create"]);
      const disabled = await h.post("/v2/keyhaven.updateWebhook", { webhookId: hook.webhookId, enabled: false }, t.rootKey);
      expect(disabled.status, JSON.stringify(disabled.body)).toBe(200);
      expect(disabled.body.data).toMatchObject({ webhookId: hook.webhookId, enabled: false, updatedAt: expect.any(Number) });
      await h.createApi(t);
      expect(await deliveriesOf(h, hook.webhookId)).toEqual([]);
      const changed = await h.post(
        "/v2/keyhaven.updateWebhook",
        { webhookId: hook.webhookId, enabled: true, events: ["api.delete", "api.create"], description: "x" },
        t.rootKey,
      );
      expect(changed.body.data).toMatchObject({ enabled: true, events: ["api.delete", "api.create"], description: "x" });
      await h.createApi(t);
      await deliveryOnce(h, hook.webhookId, (d) => d.status === "delivered");
      const removed = await h.post("/v2/keyhaven.updateWebhook", { webhookId: hook.webhookId, description: null }, t.rootKey);
      expect(removed.body.data.description).toBeUndefined();
      const deleted = await h.post("/v2/keyhaven.deleteWebhook", { webhookId: hook.webhookId }, t.rootKey);
      expect(deleted.status).toBe(200);
      expect(await deliveriesOf(h, hook.webhookId)).toEqual([]);
      expect((await h.post("/v2/keyhaven.listWebhooks", {}, t.rootKey)).body.data).toEqual([]);
      expect((await h.post("/v2/keyhaven.deleteWebhook", { webhookId: hook.webhookId }, t.rootKey)).status).toBe(404);
    } finally {
      await r.close();
    }
  });

  it("refuses bad input with a 400 naming the field, and changes nothing", async ({ h }) => {
    const t = await h.tenant();
    const hook = await createWebhook(h, t, "http://127.0.0.1:9/hooks", ["key.reroll"]);
    const before = await h.sql(`select * from webhook_endpoints where workspace_id = '${t.workspaceId}'`);
    const cases: [string, unknown, string][] = [
      ["/v2/keyhaven.createWebhook", { url: "ftp://example.com/x", events: ["key.create"] }, "url: must use https or http, not ftp"],
      ["/v2/keyhaven.createWebhook", { url: "not a url", events: ["key.create"] }, "url: must be an absolute http or https URL"],
      [
        "/v2/keyhaven.createWebhook",
        { url: "https://u:p@example.com/x", events: ["key.create"] },
        "url: must not contain a user name or password",
      ],
      ["/v2/keyhaven.createWebhook", { url: `https://example.com/${"a".repeat(2048)}`, events: ["key.create"] }, "url"],
      ["/v2/keyhaven.createWebhook", { url: "https://example.com/x", events: ["no.such"] }, "events"],
      ["/v2/keyhaven.createWebhook", { url: "https://example.com/x", events: [] }, "events"],
      ["/v2/keyhaven.updateWebhook", { webhookId: hook.webhookId }, "give at least one of url, events, description, enabled"],
      ["/v2/keyhaven.updateWebhook", { webhookId: hook.webhookId, url: "gopher://x" }, "url: must use https or http, not gopher"],
      ["/v2/keyhaven.listWebhookDeliveries", { webhookId: hook.webhookId, cursor: "nope!" }, "cursor"],
    ];
    for (const [path, body, words] of cases) {
      const res = await h.post(path, body, t.rootKey);
      expect(res.status, `${path} ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`).toBe(400);
      expect(JSON.stringify(res.body.error), JSON.stringify(body)).toContain(words);
    }
    expect(await h.sql(`select * from webhook_endpoints where workspace_id = '${t.workspaceId}'`)).toEqual(before);
  });

  it("needs webhook.*.manage_webhooks (403 otherwise) and answers another workspace's endpoint or delivery as not found", async ({ h }) => {
    const a = await h.tenant();
    const b = await h.tenant();
    const hookB = await createWebhook(h, b, "http://127.0.0.1:9/hooks", ["key.reroll"]);
    await h.sql(
      `insert into webhook_deliveries (id, workspace_id, endpoint_id, event, payload, status, next_attempt_at_m, created_at_m, updated_at_m)
       values ('msg_of_b', '${b.workspaceId}', '${hookB.webhookId}', 'key.reroll', '{}', 'failed', 0, 0, 0)`,
    );
    const none = await h.rootKey(a.workspaceId, ["api.*.read_api"]);
    const bodies: [string, unknown][] = [
      ["/v2/keyhaven.createWebhook", { url: "http://127.0.0.1:9/x", events: ["key.create"] }],
      ["/v2/keyhaven.listWebhooks", {}],
      ["/v2/keyhaven.updateWebhook", { webhookId: hookB.webhookId, enabled: false }],
      ["/v2/keyhaven.deleteWebhook", { webhookId: hookB.webhookId }],
      ["/v2/keyhaven.listWebhookDeliveries", { webhookId: hookB.webhookId }],
      ["/v2/keyhaven.replayWebhookDelivery", { deliveryId: "msg_of_b" }],
    ];
    for (const [path, body] of bodies) {
      const res = await h.post(path, body, none);
      expect(res.status, path).toBe(403);
      expect(res.body.error.detail, path).toContain("webhook.*.manage_webhooks");
    }
    const manager = await h.rootKey(a.workspaceId, ["webhook.*.manage_webhooks"]);
    expect((await h.post("/v2/keyhaven.listWebhooks", {}, manager)).body.data).toEqual([]);
    for (const [path, body] of bodies.slice(2)) {
      const res = await h.post(path, body, manager);
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(404);
    }
    expect((await h.post("/v2/keyhaven.deleteWebhook", { webhookId: hookB.webhookId }, manager)).body.error.type).toContain(
      "webhook_not_found",
    );
    const [row] = await h.sql<{ enabled: boolean }>(`select enabled from webhook_endpoints where id = '${hookB.webhookId}'`);
    expect(row!.enabled).toBe(true);
    const [delivery] = await h.sql<{ status: string }>(`select status from webhook_deliveries where id = 'msg_of_b'`);
    expect(delivery!.status).toBe("failed");
    expect(await h.sql(`select * from audit_log where event like 'webhook.%' and workspace_id = '${a.workspaceId}'`)).toEqual([]);
  });

  it("sends each message once with two workers on the same store (FOR UPDATE SKIP LOCKED)", async ({ h }) => {
    const t = await h.tenant();
    const r = await receiver();
    const replica = await h.replica();
    try {
      await createWebhook(h, t, r.url, ["permission.create"]);
      for (let i = 0; i < 10; i++) {
        expect((await h.post("/v2/permissions.createPermission", { name: `p${i}`, slug: `p${i}` }, t.rootKey)).status).toBe(200);
      }
      await waitFor("10 deliveries delivered", async () => {
        const [row] = await h.sql<{ n: string }>(
          `select count(*) as n from webhook_deliveries where workspace_id = '${t.workspaceId}' and status = 'delivered'`,
        );
        return Number(row!.n) === 10;
      });
      const ids = r.received.map((x) => x.headers["webhook-id"]);
      expect(ids).toHaveLength(10);
      expect(new Set(ids).size).toBe(10);
    } finally {
      await replica.close();
      await r.close();
    }
  });
});

describe("webhook delivery retention", () => {
  it("deletes delivered and failed deliveries past the audit log's retention, with their attempts, and keeps pending ones", async ({
    h,
  }) => {
    const t = await h.tenant();
    const hook = await createWebhook(h, t, "http://127.0.0.1:9/hooks", ["key.reroll"]);
    await h.sql(`update webhook_endpoints set enabled = false where id = '${hook.webhookId}'`);
    const old = clock.now() - 91 * 86_400_000;
    for (const [id, status, at] of [
      ["msg_old_delivered", "delivered", old],
      ["msg_old_failed", "failed", old],
      ["msg_old_pending", "pending", old],
      ["msg_new_delivered", "delivered", clock.now()],
    ] as const) {
      await h.sql(
        `insert into webhook_deliveries (id, workspace_id, endpoint_id, event, payload, status, next_attempt_at_m, created_at_m, updated_at_m)
         values ('${id}', '${t.workspaceId}', '${hook.webhookId}', 'key.reroll', '{}', '${status}', ${at}, ${at}, ${at})`,
      );
    }
    await h.sql(
      `insert into webhook_attempts (delivery_id, attempt, at_m, status, duration_ms) values ('msg_old_delivered', 1, ${old}, 200, 5)`,
    );
    expect(await h.services.webhookRetention.pruneNow()).toBe(2);
    const left = await h.sql<{ id: string }>(`select id from webhook_deliveries where endpoint_id = '${hook.webhookId}' order by id`);
    expect(left.map((r) => r.id)).toEqual(["msg_new_delivered", "msg_old_pending"]);
    expect(await h.sql(`select * from webhook_attempts where delivery_id = 'msg_old_delivered'`)).toEqual([]);
  });
});

describe("webhook endpoints without KEYHAVEN_WEBHOOK_ALLOW_PRIVATE", () => {
  let h: Harness;
  let t: Tenant;
  beforeAll(async () => {
    h = await createHarness();
    t = await h.tenant();
  });
  afterAll(() => h?.close());

  plainIt("refuses loopback, private, link-local, unique-local and unspecified hosts with a 400 naming the address", async () => {
    const cases: [string, string][] = [
      ["http://127.0.0.1:8080/hooks", "url: the host 127.0.0.1 is a loopback address"],
      ["http://[::1]/hooks", "url: the host ::1 is a loopback address"],
      ["http://10.1.2.3/hooks", "url: the host 10.1.2.3 is a private address"],
      ["http://192.168.0.10/hooks", "url: the host 192.168.0.10 is a private address"],
      ["http://169.254.169.254/latest/meta-data", "url: the host 169.254.169.254 is a link-local address"],
      ["http://[fd12:3456::1]/hooks", "url: the host fd12:3456::1 is a unique-local address"],
      ["http://[::ffff:127.0.0.1]/hooks", "is a loopback address"],
      ["http://0.0.0.0/hooks", "url: the host 0.0.0.0 is an unspecified address"],
      ["http://localhost:9/hooks", "url: the host localhost resolves to"],
    ];
    for (const [url, words] of cases) {
      const res = await h.post("/v2/keyhaven.createWebhook", { url, events: ["key.create"] }, t.rootKey);
      expect(res.status, `${url}: ${JSON.stringify(res.body)}`).toBe(400);
      expect(res.body.error.detail, url).toContain(words);
      expect(res.body.error.detail, url).toContain("KEYHAVEN_WEBHOOK_ALLOW_PRIVATE=true");
    }
    expect(await h.sql(`select * from webhook_endpoints where workspace_id = '${t.workspaceId}'`)).toEqual([]);
    expect(await h.sql(`select * from audit_log where event like 'webhook.%' and workspace_id = '${t.workspaceId}'`)).toEqual([]);
  });

  plainIt("accepts a public address (a documentation one, sent nothing: no event it subscribes to happens)", async () => {
    const res = await h.post("/v2/keyhaven.createWebhook", { url: "https://203.0.113.10/hooks", events: ["key.reroll"] }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const moved = await h.post("/v2/keyhaven.updateWebhook", { webhookId: res.body.data.webhookId, url: "http://127.0.0.2/x" }, t.rootKey);
    expect(moved.status).toBe(400);
    expect(moved.body.error.detail).toContain("url: the host 127.0.0.2 is a loopback address");
  });

  plainIt("checks the address again before each attempt: an endpoint now on loopback is sent nothing", async () => {
    const r = await receiver();
    try {
      const created = await h.post("/v2/keyhaven.createWebhook", { url: "https://203.0.113.10/hooks", events: ["api.create"] }, t.rootKey);
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      const { webhookId } = created.body.data;
      // As if its host's DNS answer now pointed inside (the stored URL is what each attempt resolves and checks).
      await h.sql(`update webhook_endpoints set url = '${r.url}' where id = '${webhookId}'`);
      await h.createApi(t);
      const [attempt] = await waitFor("the refused attempt", () =>
        h
          .sql<{ status: number | null; error: string }>(
            `select a.status, a.error from webhook_attempts a join webhook_deliveries d on d.id = a.delivery_id where d.endpoint_id = '${webhookId}'`,
          )
          .then((rows) => (rows.length > 0 ? rows : undefined)),
      );
      expect(attempt).toEqual({
        status: null,
        error: expect.stringContaining("the host 127.0.0.1 is a loopback address"),
      });
      expect(r.received).toEqual([]);
      const [delivery] = await h.sql<{ status: string }>(`select status from webhook_deliveries where endpoint_id = '${webhookId}'`);
      expect(delivery!.status).toBe("pending");
    } finally {
      await r.close();
    }
  });

  plainIt("classifies addresses as the rule says", () => {
    const table: [string, string | undefined][] = [
      ["8.8.8.8", undefined],
      ["172.15.0.1", undefined],
      ["172.16.0.1", "private"],
      ["172.31.255.255", "private"],
      ["100.64.0.1", "private"],
      ["224.0.0.1", "multicast or reserved"],
      ["2001:db8::1", undefined],
      ["::", "unspecified"],
      ["fe80::1", "link-local"],
      ["fc00::1", "unique-local"],
      ["::ffff:10.0.0.1", "private"],
      ["::ffff:a00:1", "private"],
      ["64:ff9b::7f00:1", "loopback"],
      ["ff02::1", "multicast or reserved"],
    ];
    for (const [address, kind] of table) expect(nonPublicKindOf(address), address).toBe(kind);
  });
});
