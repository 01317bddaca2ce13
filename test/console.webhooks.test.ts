import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { type ConsoleClient, signedIn, signedInTenant, textOf } from "./console-client.js";
import type { Harness, Tenant } from "./helper.js";
import { waitFor } from "./wait.js";
import { WebhookReceiver } from "./webhook-receiver.js";

/** The secret a "created" page shows once, in its SecretOnce. */
const secretOf = (html: string) => /<code id="new-secret">([^<]+)<\/code>/.exec(html)?.[1];

describe("console webhooks pages", () => {
  let h: Harness;
  let t: Tenant;
  let c: ConsoleClient;
  let r: WebhookReceiver;
  beforeAll(async () => {
    ({ h, t, c } = await signedInTenant({ KEYHAVEN_WEBHOOK_ALLOW_PRIVATE: "true" }));
    r = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await h?.close();
    await r?.close();
  });

  it("creates an endpoint showing its secret once, lists it, shows its deliveries, replays one and deletes it", async () => {
    const empty = await c.get("/console/webhooks");
    expect(empty.status).toBe(200);
    expect(textOf(empty.html)).toContain("No webhook endpoints yet.");
    expect(empty.html).toContain('value="key.create"');
    const created = await c.post("/console/webhooks", { url: r.url, events: ["api.create", "key.create"], description: "ops <b>" });
    expect(created.status, created.html.slice(0, 500)).toBe(200);
    const secret = secretOf(created.html);
    expect(secret).toMatch(/^whsec_/);
    const list = await c.get("/console/webhooks");
    expect(textOf(list.html)).toContain(r.url);
    expect(list.html).toContain("ops &lt;b");
    expect(list.html).not.toContain("ops <b>");
    expect(list.html).not.toContain(secret!);
    const webhookId = /\/console\/webhooks\/(wh_[A-Za-z0-9]+)/.exec(list.html)![1]!;

    await h.createApi(t);
    await waitFor("the api.create delivery", () => r.received.length === 1);
    const payload = new Webhook(secret!).verify(r.received[0]!.body, r.received[0]!.headers as Record<string, string>) as any;
    expect(payload.type).toBe("api.create");
    const messageId = r.received[0]!.headers["webhook-id"] as string;
    const page = await waitFor("the delivery listed as delivered", async () => {
      const p = await c.get(`/console/webhooks/${webhookId}`);
      return textOf(p.html).includes("delivered") ? p : undefined;
    });
    expect(page.status).toBe(200);
    expect(textOf(page.html)).toContain(messageId);
    expect(page.html).not.toContain(secret!);

    const replayed = await c.post(`/console/webhooks/${webhookId}/deliveries/${messageId}/replay`);
    expect(replayed.status).toBe(303);
    expect(replayed.location).toBe(`/console/webhooks/${webhookId}?done=replayed`);
    await waitFor("the replay", () => r.received.length === 2);
    expect(r.received[1]!.headers["webhook-id"]).toBe(messageId);

    const deleted = await c.post(`/console/webhooks/${webhookId}/delete`);
    expect(deleted.status).toBe(303);
    expect(textOf((await c.get("/console/webhooks?done=deleted")).html)).toContain("Webhook endpoint deleted.");
    expect((await c.get(`/console/webhooks/${webhookId}`)).status).toBe(404);
  });

  it("refuses a bad form with a 400 naming the field, and a root key without the permission", async () => {
    const noEvents = await c.post("/console/webhooks", { url: r.url });
    expect(noEvents.status).toBe(400);
    expect(textOf(noEvents.html)).toContain("The events must have at least 1.");
    const badUrl = await c.post("/console/webhooks", { url: "ftp://x.example/y", events: ["key.create"] });
    expect(badUrl.status).toBe(400);
    expect(textOf(badUrl.html)).toContain("url: must use https or http, not ftp");
    const other = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    const refused = await other.get("/console/webhooks");
    expect(refused.status).toBe(403);
    expect(textOf(refused.html)).toContain("webhook.*.manage_webhooks");
    expect(refused.html).not.toContain("New endpoint");
  });
});
