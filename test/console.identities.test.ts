import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConsoleClient, signedIn, signedInTenant, textOf } from "./console-client.js";
import type { Harness, Tenant } from "./helper.js";

/** The identity id a create redirected to. */
const idOf = (location: string | undefined) => /\/console\/identities\/(id_[^?]+)\?done=created$/.exec(location ?? "")?.[1];

describe("console identities pages", () => {
  let h: Harness;
  let t: Tenant;
  let c: ConsoleClient;
  beforeAll(async () => {
    ({ h, t, c } = await signedInTenant());
  });
  afterAll(() => h?.close());

  const v2 = (path: string, body: unknown, key = t.rootKey) => h.post(`/v2/${path}`, body, key);

  it("creates an identity with meta and shared rate limits, shown on its page and by v2", async () => {
    expect((await c.get("/console/identities")).status).toBe(200);
    const res = await c.post("/console/identities", {
      externalId: "user_1",
      meta: '{"plan":"pro"}',
      rl0_name: "requests",
      rl0_limit: "10",
      rl0_duration: "60000",
      rl0_autoApply: "on",
      rl1_name: "",
      rl1_limit: "",
      rl1_duration: "",
    });
    expect(res.status).toBe(303);
    const id = idOf(res.location)!;
    expect(id).toBeDefined();
    const page = await c.get(`/console/identities/${id}?done=created`);
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain("Identity created.");
    expect(text).toContain("user_1");
    expect(text).toContain('{"plan":"pro"}');
    expect(text).toContain("requests 10 60000 to every verification");
    const got = await v2("identities.getIdentity", { identity: id });
    expect(got.body.data).toMatchObject({ externalId: "user_1", meta: { plan: "pro" } });
    expect(got.body.data.ratelimits).toMatchObject([{ name: "requests", limit: 10, duration: 60000, autoApply: true }]);
    expect(textOf((await c.get("/console/identities")).html)).toContain("user_1");
  });

  it("lists the identity's keys, links them, and charts their verifications of the last 7 days", async () => {
    const apiId = await h.createApi(t);
    const key = await v2("keys.createKey", { apiId, externalId: "user_keys" });
    expect(key.status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await v2("keys.verifyKey", { key: key.body.data.key })).status).toBe(200);
    await h.jobs.analytics.flush();
    const identityId = (await v2("identities.getIdentity", { identity: "user_keys" })).body.data.id;
    const page = await c.get(`/console/identities/${identityId}`);
    expect(page.status).toBe(200);
    expect(page.html).toContain(`href="/console/keys/${key.body.data.keyId}"`);
    expect(page.html).toContain("Verifications, last 7 days");
    const chart = /data-chart="([^"]+)"/.exec(page.html)![1]!.replace(/&quot;/g, '"');
    const data = JSON.parse(chart) as { series: { label: string; values: number[] }[] };
    expect(data.series.find((s) => s.label === "Valid")!.values.reduce((a, b) => a + b, 0)).toBe(3);
  });

  it("edits meta and rate limits, and deletes the identity", async () => {
    const id = idOf((await c.post("/console/identities", { externalId: "user_edit" })).location)!;
    const saved = await c.post(`/console/identities/${id}`, {
      meta: '{"tier":2}',
      rl0_name: "burst",
      rl0_limit: "5",
      rl0_duration: "1000",
    });
    expect(saved.status).toBe(303);
    expect(saved.location).toBe(`/console/identities/${id}?done=saved`);
    const got = await v2("identities.getIdentity", { identity: id });
    expect(got.body.data).toMatchObject({ meta: { tier: 2 }, ratelimits: [{ name: "burst", limit: 5, duration: 1000, autoApply: false }] });
    expect(textOf((await c.get(`/console/identities/${id}`)).html)).toContain("burst 5 1000 when named");

    const deleted = await c.post(`/console/identities/${id}/delete`);
    expect(deleted.location).toBe("/console/identities?done=deleted");
    expect((await v2("identities.getIdentity", { identity: id })).status).toBe(404);
    const gone = await c.get(`/console/identities/${id}`);
    expect(gone.status).toBe(404);
    expect(textOf(gone.html)).toContain("This identity does not exist.");
  });

  it("refuses bad input with a 400 naming the field, keeping what was typed, and writes nothing", async () => {
    const badJson = await c.post("/console/identities", { externalId: "user_bad", meta: "{plan:" });
    expect(badJson.status).toBe(400);
    expect(textOf(badJson.html)).toContain("Meta is not valid JSON");
    expect(badJson.html).toContain('value="user_bad"');
    const notObject = await c.post("/console/identities", { externalId: "user_bad", meta: "[1]" });
    expect(notObject.status).toBe(400);
    expect(textOf(notObject.html)).toContain("Meta must be a JSON object");
    const negative = await c.post("/console/identities", {
      externalId: "user_bad",
      rl0_name: "requests",
      rl0_limit: "-1",
      rl0_duration: "60000",
    });
    expect(negative.status).toBe(400);
    expect(textOf(negative.html)).toContain("Rate limit 1: limit must be at least 1.");
    const short = await c.post("/console/identities", { externalId: "user_bad", rl0_name: "rq", rl0_limit: "1", rl0_duration: "999" });
    expect(textOf(short.html)).toContain("Rate limit 1: name must be at least 3 characters.");
    const badId = await c.post("/console/identities", { externalId: "a b" });
    expect(badId.status).toBe(400);
    expect(textOf(badId.html)).toContain("External id must hold only letters, digits and _ . -.");
    expect((await v2("identities.getIdentity", { identity: "user_bad" })).status).toBe(404);
    const taken = await c.post("/console/identities", { externalId: "user_1" });
    expect(taken.status).toBe(409);
  });

  it("renders markup in meta escaped", async () => {
    const evil = "<script>alert(1)</script>";
    const id = idOf((await c.post("/console/identities", { externalId: "user_xss", meta: JSON.stringify({ name: evil }) })).location)!;
    const page = await c.get(`/console/identities/${id}`);
    expect(page.html).not.toContain(evil);
    expect(page.html).toContain("&lt;script>alert(1)&lt;/script>");
  });

  it("hides the actions from a root key that may only read, and refuses them with 403 changing nothing", async () => {
    const id = (await v2("identities.getIdentity", { identity: "user_1" })).body.data.id;
    const reader = await signedIn(h.app, await h.rootKey(t.workspaceId, ["identity.*.read_identity"]));
    const list = await reader.get("/console/identities");
    expect(list.status).toBe(200);
    expect(list.html).not.toContain("Create identity");
    const page = await reader.get(`/console/identities/${id}`);
    expect(page.status).toBe(200);
    expect(page.html).not.toContain("Save identity");
    expect(page.html).not.toContain("Delete identity");
    const create = await reader.post("/console/identities", { externalId: "user_refused" });
    expect(create.status).toBe(403);
    expect(textOf(create.html)).toContain("identity.*.create_identity");
    expect((await v2("identities.getIdentity", { identity: "user_refused" })).status).toBe(404);
    const edit = await reader.post(`/console/identities/${id}`, { meta: '{"x":1}' });
    expect(edit.status).toBe(403);
    const del = await reader.post(`/console/identities/${id}/delete`);
    expect(del.status).toBe(403);
    expect((await v2("identities.getIdentity", { identity: id })).body.data.meta).toEqual({ plan: "pro" });

    const nobody = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    const refused = await nobody.get("/console/identities");
    expect(refused.status).toBe(403);
    expect(textOf(refused.html)).toContain("read_identity");
  });

  it("writes no inline script or style attribute in its pages", async () => {
    const id = (await v2("identities.getIdentity", { identity: "user_1" })).body.data.id;
    for (const path of ["/console/identities", `/console/identities/${id}`, "/console/identities/id_missing"]) {
      const { html } = await c.get(path);
      for (const script of html.match(/<script\b[^>]*>[\s\S]*?<\/script>/g) ?? []) {
        expect(script, path).toMatch(/^<script src="\/console\/assets\/[0-9a-f]{16}\/[a-z.]+" defer><\/script>$/);
      }
      expect(html, path).not.toMatch(/\sstyle=|\son[a-z]+=|<style/i);
    }
  });
});
