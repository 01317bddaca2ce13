import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getApi, getApiSettings } from "../src/core/apis/apis.core.js";
import { sql } from "drizzle-orm";
import { rowsOf } from "../src/storage/client.js";
import { prefixRange, searchApiKeysQuery } from "../src/storage/keys/keys.search.repository.js";
import { auditEntries } from "./audit-entries.js";
import { type ConsoleClient, signedIn, textOf } from "./console-client.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";

const XSS = "<script>alert(1)</script>";

/** The key ids the page's table of keys links to, in order (not its top keys, listed below the chart). */
const keyIdsOf = (html: string) =>
  [...html.split("<h2>Verifications")[0]!.matchAll(/href="\/console\/keys\/([^"]+)"/g)].map((m) => decodeURIComponent(m[1]!));
/** Entities of an attribute or a textarea, decoded. */
const decoded = (text: string) =>
  text.replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&quot;", '"').replaceAll("&#39;", "'").replaceAll("&amp;", "&");
/**
 * What a browser would send of the form posting to `action`, as the page shows it (without its CSRF token, which the
 * client adds): its inputs (a checkbox only when checked) and textareas, with `changes` applied (undefined: left out,
 * as an unchecked box).
 */
function formOf(html: string, action: string, changes: Record<string, string | undefined> = {}): Record<string, string> {
  const form = new RegExp(`<form[^>]*action="${action}"[^>]*>([\\s\\S]*?)</form>`).exec(html)?.[1];
  if (form === undefined) throw new Error(`no form posting to ${action}`);
  const fields: Record<string, string> = {};
  for (const [tag] of form.matchAll(/<input\b[^>]*>/g)) {
    const name = /\sname="([^"]*)"/.exec(tag)?.[1];
    if (name === undefined || name === "_csrf") continue;
    if (/type="checkbox"/.test(tag) && !/\schecked/.test(tag)) continue;
    fields[name] = decoded(/\svalue="([^"]*)"/.exec(tag)?.[1] ?? "");
  }
  for (const m of form.matchAll(/<textarea\b[^>]*\sname="([^"]*)"[^>]*>([\s\S]*?)<\/textarea>/g)) fields[m[1]!] = decoded(m[2]!);
  for (const [name, value] of Object.entries(changes)) {
    if (value === undefined) delete fields[name];
    else fields[name] = value;
  }
  return fields;
}
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

  it("a search of an API's keys is served by its indexes in a generic plan too (a prepared statement's sixth run on)", async () => {
    // Planned for any values, as PostgreSQL may plan a prepared statement after five runs: `like $1` alone cannot
    // bound an index scan there, so the search walked all of an API's keys (118 ms at 100,000); the range beside it
    // (keys.search.repository.ts startsWith) can. 20,000 keys written directly, analysed as the store would.
    const apiId = await h.createApi(t, { name: "planned api" });
    await h.db.execute(sql`insert into keys (id, workspace_id, api_id, hash, start, name, created_at_m)
      select 'key_plan_' || g, ${t.workspaceId}, ${apiId}, md5('plan ' || g), 'pl_' || g, 'Customer ' || g, 0
      from generate_series(1, 20000) g`);
    await h.db.execute(sql`analyze keys`);
    const query = searchApiKeysQuery(h.db, {
      workspaceId: t.workspaceId,
      apiId,
      search: "customer 1234",
      filter: "all",
      now: 0,
      limit: 51,
    });
    const { sql: text, params } = query.toSQL();
    const literal = (v: unknown) => `'${String(v).replaceAll("'", "''")}'`;
    const plan = await h.db.transaction(async (tx) => {
      await tx.execute(sql`set local plan_cache_mode = force_generic_plan`);
      await tx.execute(sql.raw(`prepare console_search_plan as ${text}`));
      const rows = rowsOf<{ "QUERY PLAN": string }>(
        await tx.execute(sql.raw(`explain execute console_search_plan(${params.map(literal).join(", ")})`)),
      );
      await tx.execute(sql`deallocate console_search_plan`);
      return rows.map((r) => r["QUERY PLAN"]).join("\n");
    });
    expect(plan).toMatch(/Index Cond: .*lower\(name\) ~>=~/);
    expect(plan).toMatch(/Index Cond: .*start ~>=~/);
    expect(plan).not.toContain("keys_live_by_api_idx");
    expect((await query).map((k) => k.name)).toEqual(["Customer 1234"].concat(Array.from({ length: 10 }, (_, i) => `Customer 1234${i}`)));
  });

  it("prefixRange bounds exactly the strings that start with a prefix, in code point order", () => {
    expect(prefixRange("bulk 11")).toEqual({ from: "bulk 11", below: "bulk 12" });
    expect(prefixRange("a\u{10ffff}")).toEqual({ from: "a\u{10ffff}", below: "b" });
    expect(prefixRange("x\ud7ff")).toEqual({ from: "x\ud7ff", below: "x\ue000" });
    expect(prefixRange("é")).toEqual({ from: "é", below: "ê" });
    expect(prefixRange("\u{10ffff}")).toEqual({ from: "\u{10ffff}", below: undefined });
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

  describe("the settings form: name, default prefix and byte length, delete protection, IP allow-list", () => {
    const owner = () => ({ workspaceId: t.workspaceId, permissions: new Set(["*"]) });
    const settingsOf = async (apiId: string) => {
      const { name, defaultPrefix, defaultBytes, deleteProtection, ipWhitelist } = await getApiSettings(h.services, owner(), apiId);
      return { name, defaultPrefix, defaultBytes, deleteProtection, ipWhitelist };
    };
    /** The settings form of the API's page, as shown, with `changes` applied. */
    const filled = async (apiId: string, changes: Record<string, string | undefined>) => {
      const page = await c.get(`/console/apis/${apiId}/settings`);
      expect(page.status).toBe(200);
      return formOf(page.html, `/console/apis/${apiId}/settings`, changes);
    };

    it("labels every field of the form and carries the CSRF token", async () => {
      const apiId = await h.createApi(t, { name: "labelled" });
      const { html } = await c.get(`/console/apis/${apiId}/settings`);
      const form = new RegExp(`<form[^>]*action="/console/apis/${apiId}/settings"[^>]*>([\\s\\S]*?)</form>`).exec(html)![1]!;
      expect(form).toMatch(/name="_csrf" value="[^"]+"/);
      for (const [, id] of form.matchAll(/<(?:input|textarea)\b[^>]*\sid="([^"]+)"/g)) expect(form, id).toContain(`for="${id}"`);
      for (const name of ["name", "defaultPrefix", "defaultBytes", "deleteProtection", "ipWhitelist"]) {
        expect(form, name).toContain(`name="${name}"`);
      }
    });

    it("saves every setting in one POST, shown on the page, in the core, for new keys, with one audit entry naming them", async () => {
      const apiId = await h.createApi(t, { name: "editable" });
      const path = `/console/apis/${apiId}/settings`;
      const body = await filled(apiId, {
        name: "edited name",
        defaultPrefix: "ed",
        defaultBytes: "40",
        deleteProtection: "on",
        ipWhitelist: "10.0.0.0/8",
      });
      const saved = await c.post(path, body);
      expect(saved.status, textOf(saved.html)).toBe(303);
      expect(saved.location).toBe(`${path}?done=saved`);
      const text = textOf((await c.get(saved.location!)).html);
      expect(text).toContain("Settings saved.");
      expect(text).toContain("Name edited name");
      expect(text).toContain("Default prefix ed");
      expect(text).toContain("Default byte length 40");
      expect(text).toContain("Delete protection on");
      expect(await settingsOf(apiId)).toEqual({
        name: "edited name",
        defaultPrefix: "ed",
        defaultBytes: 40,
        deleteProtection: true,
        ipWhitelist: "10.0.0.0/8",
      });
      const [entry, ...more] = await auditEntries(h, { workspaceId: t.workspaceId, event: "api.update" }).then((all) =>
        all.filter((e) => e.targets[0]?.id === apiId),
      );
      expect(more).toEqual([]);
      expect(entry).toMatchObject({
        actorId: t.rootKeyId,
        surface: "console",
        details: { fields: ["name", "defaultPrefix", "defaultBytes", "deleteProtection", "ipWhitelist"] },
      });
      const key = await v2("keys.createKey", { apiId });
      expect(key.status).toBe(200);
      expect(key.body.data.key).toMatch(/^ed_/);

      // Emptied, the defaults are removed; unchecked (the box not sent), delete protection is off.
      const cleared = await c.post(path, await filled(apiId, { defaultPrefix: "", defaultBytes: "", deleteProtection: undefined }));
      expect(cleared.status, textOf(cleared.html)).toBe(303);
      expect(await settingsOf(apiId)).toEqual({
        name: "edited name",
        defaultPrefix: null,
        defaultBytes: null,
        deleteProtection: false,
        ipWhitelist: "10.0.0.0/8",
      });
      const updates = await auditEntries(h, { workspaceId: t.workspaceId, event: "api.update" });
      expect(updates.filter((e) => e.targets[0]?.id === apiId).at(-1)?.details).toEqual({
        fields: ["defaultPrefix", "defaultBytes", "deleteProtection"],
      });
    });

    it("sends only what the form changed: a setting changed meanwhile elsewhere is kept, and an unchanged form saves nothing", async () => {
      const apiId = await h.createApi(t, { name: "shared" });
      const path = `/console/apis/${apiId}/settings`;
      const body = await filled(apiId, { defaultPrefix: "mine" });
      expect((await h.post("/v1/apis.updateApi", { apiId, name: "renamed elsewhere" }, t.rootKey)).status).toBe(200);
      expect((await c.post(path, body)).status).toBe(303);
      expect(await settingsOf(apiId)).toMatchObject({ name: "renamed elsewhere", defaultPrefix: "mine" });
      const before = await auditEntries(h, { workspaceId: t.workspaceId, event: "api.update" });
      const same = await c.post(path, await filled(apiId, {}));
      expect(same.status).toBe(303);
      expect(same.location).toBe(`${path}?done=unchanged`);
      expect(textOf((await c.get(same.location!)).html)).toContain("Nothing to save");
      expect(await auditEntries(h, { workspaceId: t.workspaceId, event: "api.update" })).toHaveLength(before.length);
    });

    it.each([
      [{ name: "ab" }, "The name must be 3 to 256 characters long (it has 2)."],
      [{ name: "" }, "The name must be 3 to 256 characters long (it has 0)."],
      [{ defaultPrefix: "toolongpf" }, "The default prefix must be 1 to 8 characters long (it has 9)."],
      [{ defaultBytes: "15" }, "The default byte length must be a whole number from 16 to 255 (got 15)."],
      [{ defaultBytes: "256" }, "The default byte length must be a whole number from 16 to 255 (got 256)."],
      [{ defaultBytes: "20.5" }, 'The default byte length must be a whole number from 16 to 255 (got "20.5").'],
      [{ ipWhitelist: "10.0.0.1, nonsense" }, 'The IP allow-list is refused: "nonsense" is not an IPv4 or IPv6 address or CIDR range.'],
    ])("refuses %j with a precise 400 page, shows what was typed and changes nothing", async (changes, message) => {
      const apiId = await h.createApi(t, { name: "bounded", defaultPrefix: "bd", defaultBytes: 24 });
      const before = await settingsOf(apiId);
      const res = await c.post(`/console/apis/${apiId}/settings`, await filled(apiId, { ...changes, deleteProtection: "on" }));
      expect(res.status).toBe(400);
      expect(textOf(res.html)).toContain(message);
      const [name, value] = Object.entries(changes)[0]!;
      if (name === "ipWhitelist") expect(res.html).toContain(`${value}</textarea>`);
      else if (value === "") expect(res.html).not.toMatch(new RegExp(`name="${name}"[^>]*value="[^"]`));
      else expect(res.html).toMatch(new RegExp(`name="${name}"[^>]*value="${value.replace(".", "\\.")}"`));
      // The box as it was submitted (checked), not as stored.
      expect(res.html).toMatch(/name="deleteProtection"[^>]*checked/);
      expect(await settingsOf(apiId)).toEqual(before);
    });

    it("refuses a root key without update_api with 403 and changes nothing", async () => {
      const apiId = await h.createApi(t, { name: "read only" });
      const reader = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api"]));
      const page = await reader.get(`/console/apis/${apiId}/settings`);
      expect(page.status).toBe(200);
      expect(page.html).not.toContain('name="deleteProtection"');
      const before = await settingsOf(apiId);
      const refused = await reader.post(`/console/apis/${apiId}/settings`, {
        name: "taken over",
        defaultPrefix: "x",
        deleteProtection_shown: "1",
        deleteProtection: "on",
      });
      expect(refused.status).toBe(403);
      expect(textOf(refused.html)).toContain("update_api");
      expect(await settingsOf(apiId)).toEqual(before);
    });

    it("delete protection switched on in the form makes the page refuse the deletion, until switched off", async () => {
      const apiId = await h.createApi(t, { name: "guard me" });
      const path = `/console/apis/${apiId}/settings`;
      expect((await c.post(path, await filled(apiId, { deleteProtection: "on" }))).status).toBe(303);
      const refused = await c.post(`/console/apis/${apiId}/delete`, { confirm: "guard me" });
      expect(refused.status).toBe(412);
      expect(textOf(refused.html)).toContain("delete protection");
      expect((await v2("apis.getApi", { apiId })).status).toBe(200);
      expect((await c.post(path, await filled(apiId, { deleteProtection: undefined }))).status).toBe(303);
      const deleted = await c.post(`/console/apis/${apiId}/delete`, { confirm: "guard me" });
      expect(deleted.status).toBe(303);
      expect((await v2("apis.getApi", { apiId })).status).toBe(404);
    });
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
