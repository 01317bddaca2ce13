import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getApi } from "../src/core/apis/apis.core.js";
import { type ConsoleClient, signedIn, textOf } from "./console-client.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";

const XSS = "<script>alert(1)</script>";

/** The key ids the page's table of keys links to, in order (not its top keys, listed below the chart). */
const keyIdsOf = (html: string) =>
  [...html.split("<h2>Verifications")[0]!.matchAll(/href="\/console\/keys\/([^"]+)"/g)].map((m) => decodeURIComponent(m[1]!));
/** The href of the page's "Next page" link, entities decoded. */
const nextOf = (html: string) => /<nav class="pager"[^>]*><a href="([^"]+)"/.exec(html)?.[1]?.replace(/&amp;/g, "&");

describe("console: overview and APIs", () => {
  let h: Harness;
  let t: Tenant;
  let c: ConsoleClient;
  /** An API with 120 keys: 117 imported in bulk, and three of v2's keys.createKey with a name, an externalId, disabled. */
  let bigApi: string;
  let named: { keyId: string; key: string };
  let owned: string;
  let disabled: string;

  const v2 = async (path: string, body: unknown, rootKey = t.rootKey) => h.post(`/v2/${path}`, body, rootKey);

  beforeAll(async () => {
    h = await createHarness();
    t = await h.tenant();
    c = await signedIn(h.app, t.rootKey);
    bigApi = await h.createApi(t, { name: "big api" });
    const create = async (input: Record<string, unknown>) => {
      const res = await v2("keys.createKey", { apiId: bigApi, ...input });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.data as { keyId: string; key: string };
    };
    named = await create({ name: "Checkout Service", prefix: "zeta" });
    owned = (await create({ name: "owned", externalId: "customer-42" })).keyId;
    disabled = (await create({ name: "switched off", enabled: false })).keyId;
    const bulk = Array.from({ length: 117 }, (_, i) => ({ apiId: bigApi, plaintext: `bulk_${i}_${"x".repeat(20)}`, name: `bulk ${i}` }));
    for (const part of [bulk.slice(0, 60), bulk.slice(60)]) {
      const res = await h.post("/v1/migrations.createKeys", part, t.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
  }, 60_000);
  afterAll(() => h?.close());

  it("the overview charts the workspace's verifications by outcome and lists its APIs with their key counts", async () => {
    expect((await v2("keys.verifyKey", { key: named.key })).body.data.valid).toBe(true);
    await h.jobs.analytics.flush();
    const page = await c.get("/console/");
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain("Verifications, last 7 days");
    expect(page.html).toContain('data-chart="');
    expect(page.html).toContain(`href="/console/apis/${bigApi}"`);
    // The API's row: its name, id, and its 120 keys.
    expect(text).toMatch(new RegExp(`big api ${bigApi} 120 `));
    const day = await c.get("/console/?range=24h");
    expect(day.status).toBe(200);
    // 24 hourly rows in the chart's table, the one of this hour holding the verification.
    expect(day.html.match(/<tr><td>\d{4}-/g)).toHaveLength(24);
    expect(textOf(day.html)).toContain("VALID");
    expect((await c.get("/console/?range=30d")).status).toBe(200);
    const bad = await c.get("/console/?range=1y");
    expect(bad.status).toBe(400);
    expect(textOf(bad.html)).toContain("The range must be one of 24h, 7d, 30d.");
  });

  it("creates an API from the APIs page and shows it there and through v2", async () => {
    const list = await c.get("/console/apis");
    expect(list.status).toBe(200);
    expect(list.html).toContain('action="/console/apis"');
    const res = await c.post("/console/apis", { name: "payments" });
    expect(res.status).toBe(303);
    const apiId = /^\/console\/apis\/(api_[^?]+)\?done=created$/.exec(res.location ?? "")?.[1];
    expect(apiId, res.location).toBeDefined();
    const page = await c.get(res.location!);
    expect(page.status).toBe(200);
    expect(textOf(page.html)).toContain("API created.");
    expect(textOf(page.html)).toContain("No keys match.");
    expect((await v2("apis.getApi", { apiId })).body.data).toEqual({ id: apiId, name: "payments" });
    expect(textOf((await c.get("/console/apis")).html)).toContain(`payments ${apiId} 0`);
  });

  it("refuses a name that is too short with a precise 400 and creates nothing", async () => {
    const before = await h.sql(`select id from apis where workspace_id = '${t.workspaceId}'`);
    const res = await c.post("/console/apis", { name: "ab" });
    expect(res.status).toBe(400);
    expect(textOf(res.html)).toContain("The name must be 3 to 256 characters long.");
    expect(res.html).toContain('value="ab"');
    expect(await h.sql(`select id from apis where workspace_id = '${t.workspaceId}'`)).toHaveLength(before.length);
  });

  it("escapes an API's name everywhere it shows it", async () => {
    const res = await c.post("/console/apis", { name: XSS });
    expect(res.status).toBe(303);
    for (const path of [res.location!, `${res.location!.split("?")[0]}/settings`, "/console/apis", "/console/"]) {
      const page = await c.get(path);
      expect(page.status, path).toBe(200);
      expect(page.html, path).not.toContain(XSS);
      expect(page.html, path).toContain("&lt;script>alert(1)&lt;/script>");
    }
  });

  it("hides the create form from a root key without create_api and refuses its POST with 403", async () => {
    const reader = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api", "api.*.read_key"]));
    const list = await reader.get("/console/apis");
    expect(list.status).toBe(200);
    expect(list.html).not.toContain('action="/console/apis"');
    expect(textOf(list.html)).toContain("big api");
    const before = await h.sql(`select id from apis where workspace_id = '${t.workspaceId}'`);
    const res = await reader.post("/console/apis", { name: "sneaky" });
    expect(res.status).toBe(403);
    expect(textOf(res.html)).toContain("api.*.create_api");
    expect(await h.sql(`select id from apis where workspace_id = '${t.workspaceId}'`)).toHaveLength(before.length);
    // Its API page has no "New key" link (create_key) but lists the keys.
    const api = await reader.get(`/console/apis/${bigApi}`);
    expect(api.status).toBe(200);
    expect(api.html).not.toContain("/keys/new");
    expect(api.html).toContain(`/console/apis/${bigApi}/settings`);
    expect(api.html).not.toContain(`action="/console/apis/${bigApi}/delete"`);
  });

  it("lists only the APIs a root key may read one by one, and refuses the keys without read_key", async () => {
    const one = await signedIn(h.app, await h.rootKey(t.workspaceId, [`api.${bigApi}.read_api`]));
    const list = await one.get("/console/apis");
    expect(list.status).toBe(200);
    expect(textOf(list.html)).toContain("big api");
    expect(textOf(list.html)).not.toContain("payments");
    const page = await one.get(`/console/apis/${bigApi}`);
    expect(page.status).toBe(403);
    expect(textOf(page.html)).toContain("read_key");
    expect(keyIdsOf(page.html)).toEqual([]);
    // The overview's chart needs read_api on every API: it says so; the rest of the page is there.
    const overview = await one.get("/console/");
    expect(overview.status).toBe(200);
    expect(textOf(overview.html)).toContain("api.*.read_api");
    expect(textOf(overview.html)).toContain("big api");
  });

  it("pages through 120 keys 50 at a time by id, every key once", async () => {
    const seen: string[] = [];
    let path: string | undefined = `/console/apis/${bigApi}`;
    const sizes: number[] = [];
    while (path !== undefined) {
      const page = await c.get(path);
      expect(page.status, path).toBe(200);
      const ids = keyIdsOf(page.html);
      sizes.push(ids.length);
      seen.push(...ids);
      path = nextOf(page.html);
    }
    expect(sizes).toEqual([50, 50, 20]);
    expect(new Set(seen).size).toBe(120);
    expect(seen).toEqual([...seen].sort());
    const v1 = await h.get("/v1/apis.listKeys", { apiId: bigApi, limit: "100" }, t.rootKey);
    expect(v1.body.total).toBe(120);
  });

  it("searches an API's keys by name (any case), by a prefix of their start, and by externalId", async () => {
    const search = async (q: string, filter?: string) => {
      const page = await c.get(`/console/apis/${bigApi}?${new URLSearchParams({ q, ...(filter ? { filter } : {}) })}`);
      expect(page.status, q).toBe(200);
      return page;
    };
    expect(keyIdsOf((await search("checkout")).html)).toEqual([named.keyId]);
    expect(keyIdsOf((await search("CHECKOUT serv")).html)).toEqual([named.keyId]);
    // The start of a key of prefix zeta is `zeta_` and the key's first characters.
    expect(keyIdsOf((await search(named.key.slice(0, 7))).html)).toEqual([named.keyId]);
    expect(keyIdsOf((await search("zeta_")).html)).toEqual([named.keyId]);
    expect(keyIdsOf((await search("customer-42")).html)).toEqual([owned]);
    expect(textOf((await search("customer-42")).html)).toContain("customer-42");
    // A search is a prefix (or an exact owner): `%` and `_` are literal; the search stays in the form.
    expect(keyIdsOf((await search("%")).html)).toEqual([]);
    // "bulk 11" and "bulk 110" to "bulk 116".
    expect(keyIdsOf((await search("bulk 11")).html)).toHaveLength(8);
  });

  it("filters an API's keys: enabled, disabled, expired, pending", async () => {
    const filtered = async (filter: string, q = "") => {
      const page = await c.get(`/console/apis/${bigApi}?${new URLSearchParams({ filter, q })}`);
      expect(page.status, filter).toBe(200);
      return page;
    };
    expect(keyIdsOf((await filtered("disabled")).html)).toEqual([disabled]);
    const enabled = await filtered("enabled", "switched");
    expect(keyIdsOf(enabled.html)).toEqual([]);
    expect(keyIdsOf((await filtered("enabled", "owned")).html)).toEqual([owned]);
    expect(keyIdsOf((await filtered("enabled")).html)).toHaveLength(50);
    expect(keyIdsOf((await filtered("expired")).html)).toEqual([]);
    expect(keyIdsOf((await filtered("pending")).html)).toEqual([]);
    // The filter is kept by the next page's link.
    expect(nextOf((await filtered("enabled")).html)).toMatch(/filter=enabled&cursor=/);
    const bad = await c.get(`/console/apis/${bigApi}?filter=nope`);
    expect(bad.status).toBe(400);
    expect(textOf(bad.html)).toContain("The filter must be one of all, enabled, disabled, expired, pending.");
    const long = await c.get(`/console/apis/${bigApi}?q=${"a".repeat(300)}`);
    expect(long.status).toBe(400);
    expect(textOf(long.html)).toContain("The search is longer than 256 characters.");
  });

  it("charts an API's verifications and names its top keys", async () => {
    const page = await c.get(`/console/apis/${bigApi}`);
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain("Verifications, last 7 days");
    expect(page.html).toContain('data-chart="');
    expect(page.html.match(/<tr><td>\d{4}-/g)).toHaveLength(7);
    expect(text).toMatch(/Top keys, last 7 days Key Verifications Valid Checkout Service 1 1/);
    expect(page.html).toContain(`href="/console/apis/${bigApi}/keys/new"`);
  });

  it("answers a missing or another workspace's API with a 404 page", async () => {
    const other = await h.tenant();
    const foreign = await h.createApi(other);
    for (const apiId of ["api_missing", foreign]) {
      for (const path of [`/console/apis/${apiId}`, `/console/apis/${apiId}/settings`]) {
        const page = await c.get(path);
        expect(page.status, path).toBe(404);
        expect(textOf(page.html)).toContain("API not found");
      }
      const res = await c.post(`/console/apis/${apiId}/delete`, { confirm: "x" });
      expect(res.status).toBe(404);
    }
    expect((await h.post("/v2/apis.getApi", { apiId: foreign }, other.rootKey)).status).toBe(200);
  });

  it("shows an API's settings and sets its IP allow-list, refusing a bad one precisely", async () => {
    const apiId = await h.createApi(t, { name: "guarded", defaultPrefix: "gd", defaultBytes: 24 });
    const path = `/console/apis/${apiId}/settings`;
    const page = await c.get(path);
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain("Default prefix gd");
    expect(text).toContain("Default byte length 24");
    expect(text).toContain("Delete protection off");
    const principal = { workspaceId: t.workspaceId, permissions: new Set(["*"]) };
    const bad = await c.post(path, { ipWhitelist: "10.0.0.1, nonsense" });
    expect(bad.status).toBe(400);
    expect(textOf(bad.html)).toContain('"nonsense" is not an IPv4 or IPv6 address or CIDR range');
    expect(bad.html).toContain("10.0.0.1, nonsense</textarea>");
    expect((await getApi(h.services, principal, apiId)).ipWhitelist).toBeNull();
    const saved = await c.post(path, { ipWhitelist: "10.0.0.0/8, 2001:db8::/32" });
    expect(saved.status).toBe(303);
    expect(saved.location).toBe(`${path}?done=saved`);
    const after = await c.get(saved.location!);
    expect(textOf(after.html)).toContain("Settings saved.");
    expect(after.html).toContain("10.0.0.0/8, 2001:db8::/32</textarea>");
    expect((await getApi(h.services, principal, apiId)).ipWhitelist).toBe("10.0.0.0/8, 2001:db8::/32");
    expect((await c.post(path, { ipWhitelist: "" })).status).toBe(303);
    expect((await getApi(h.services, principal, apiId)).ipWhitelist).toBeNull();
    // A root key without update_api sees the list without a form, and its POST is refused with 403.
    const reader = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    const readOnly = await reader.get(path);
    expect(readOnly.status).toBe(200);
    expect(readOnly.html).not.toContain(`action="${path}"`);
    const refused = await reader.post(path, { ipWhitelist: "10.0.0.1" });
    expect(refused.status).toBe(403);
    expect(textOf(refused.html)).toContain("update_api");
    expect((await getApi(h.services, principal, apiId)).ipWhitelist).toBeNull();
  });

  it("deletes an API once its name is typed, and refuses a protected one in the core's words", async () => {
    const apiId = await h.createApi(t, { name: "doomed" });
    const path = `/console/apis/${apiId}/delete`;
    const wrong = await c.post(path, { confirm: "dooomed" });
    expect(wrong.status).toBe(400);
    expect(textOf(wrong.html)).toContain("Type the API's name exactly to confirm its deletion.");
    expect((await v2("apis.getApi", { apiId })).status).toBe(200);
    const res = await c.post(path, { confirm: "doomed" });
    expect(res.status).toBe(303);
    expect(res.location).toBe("/console/apis?done=deleted");
    expect(textOf((await c.get(res.location!)).html)).toContain("API deleted.");
    expect((await v2("apis.getApi", { apiId })).status).toBe(404);

    const kept = await h.createApi(t, { name: "kept", deleteProtection: true });
    const settings = await c.get(`/console/apis/${kept}/settings`);
    expect(textOf(settings.html)).toContain("Delete protection on");
    const refused = await c.post(`/console/apis/${kept}/delete`, { confirm: "kept" });
    const direct = await v2("apis.deleteApi", { apiId: kept });
    expect(refused.status).toBe(direct.status);
    expect(textOf(refused.html)).toContain(direct.body.error.detail);
    expect((await v2("apis.getApi", { apiId: kept })).status).toBe(200);
  });

  it("writes no inline script or style attribute in any of its pages", async () => {
    for (const path of [
      "/console/",
      "/console/?range=24h",
      "/console/apis",
      `/console/apis/${bigApi}`,
      `/console/apis/${bigApi}?q=bulk&filter=enabled`,
      `/console/apis/${bigApi}/settings`,
    ]) {
      const { html, status } = await c.get(path);
      expect(status, path).toBe(200);
      for (const script of html.match(/<script\b[^>]*>[\s\S]*?<\/script>/g) ?? []) {
        expect(script, path).toMatch(/^<script src="\/console\/assets\/[0-9a-f]{16}\/[a-z.]+" defer><\/script>$/);
      }
      expect(html, path).not.toMatch(/\sstyle=|\son[a-z]+=|<style/i);
    }
  });
});
