import { describe, expect } from "vitest";
import { auditEntries } from "./audit-entries.js";
import { harnessWith, testWith } from "./fixtures.js";
import type { Harness, Response, Tenant } from "./helper.js";
import { liveSession, makePortal, mint, uniqueSlug } from "./portal-helpers.js";
import { expectV2Error } from "./v2-errors.js";

// keyhaven's routes over customer portals (issue 39; upstream has none: its tests insert rows): one portal per API,
// a slug unique in the workspace, its branding and return link checked, under upstream's portal permissions
// (`portal.*|<id>.create_portal|read_portal|update_portal|delete_portal`).

const PUBLIC_URL = "https://keys.example.com";
const it = testWith(harnessWith({ KEYHAVEN_PUBLIC_URL: PUBLIC_URL }));

const create = (h: Harness, rootKey: string, body: Record<string, unknown>) => h.post("/v2/keyhaven.createPortal", body, rootKey);
const get = (h: Harness, rootKey: string, portalId: string) => h.post("/v2/keyhaven.getPortal", { portalId }, rootKey);
const update = (h: Harness, rootKey: string, body: Record<string, unknown>) => h.post("/v2/keyhaven.updatePortal", body, rootKey);
const remove = (h: Harness, rootKey: string, portalId: string) => h.post("/v2/keyhaven.deletePortal", { portalId }, rootKey);
const list = (h: Harness, rootKey: string, body: Record<string, unknown> = {}) => h.post("/v2/keyhaven.listPortals", body, rootKey);

describe("keyhaven.createPortal", () => {
  it("creates an API's portal, read back with its branding, return link and page URL", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const before = Date.now();
    const res = await create(h, t.rootKey, {
      apiId,
      slug: "acme-billing",
      name: "Acme",
      returnUrl: "https://acme.example.com/account",
      branding: { title: "Acme keys", accentColor: "#AABBCC", logoUrl: "https://acme.example.com/logo.png" },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toEqual({ portalId: expect.stringMatching(/^pc_/) });
    const { portalId } = res.body.data;
    const read = await get(h, t.rootKey, portalId);
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body.data).toEqual({
      portalId,
      apiId,
      slug: "acme-billing",
      name: "Acme",
      enabled: true,
      returnUrl: "https://acme.example.com/account",
      branding: { title: "Acme keys", accentColor: "#aabbcc", logoUrl: "https://acme.example.com/logo.png" },
      url: `${PUBLIC_URL}/portal/`,
      createdAt: expect.any(Number),
    });
    expect(read.body.data.createdAt).toBeGreaterThanOrEqual(before);
    const [entry] = (await auditEntries(h, { workspaceId: t.workspaceId, event: "portal.create" })).filter(
      (e) => e.requestId === res.body.meta.requestId,
    );
    expect(entry).toMatchObject({ actorKind: "root_key", actorId: t.rootKeyId });
    expect(entry!.targets.map((x) => x.id)).toEqual([portalId, apiId]);
  });

  describe("slugs: 3–64 lowercase letters and digits, single hyphens, neither first nor last", () => {
    for (const slug of ["abc", "a-b", "acme-2026-keys", "x".repeat(64), "0ab"]) {
      it(`accepts ${JSON.stringify(slug.length > 20 ? `${slug.slice(0, 8)}… (${slug.length})` : slug)}`, async ({ h }) => {
        const t = await h.tenant();
        const apiId = await h.createApi(t);
        const res = await create(h, t.rootKey, { apiId, slug, name: "P" });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
      });
    }
    for (const slug of ["ab", "", "x".repeat(65), "Acme", "acme_keys", "-acme", "acme-", "ac--me", "acme keys", "acmé", "ac.me"]) {
      it(`refuses ${JSON.stringify(slug.length > 20 ? `${slug.slice(0, 8)}… (${slug.length})` : slug)} (400)`, async ({ h, t }) => {
        const apiId = await h.createApi(t);
        expectV2Error(await create(h, t.rootKey, { apiId, slug, name: "P" }), 400, "unkey/application/invalid_input");
        expect((await list(h, t.rootKey, { apiId })).body.data).toEqual([]);
      });
    }
  });

  it("409 for a slug taken in the workspace and for a second portal of one API; another workspace may use the slug", async ({ h }) => {
    const t = await h.tenant();
    const { apiId, slug } = await makePortal(h, t);
    const taken = await create(h, t.rootKey, { apiId: await h.createApi(t), slug, name: "again" });
    expectV2Error(taken, 409, "unkey/data/portal_already_exists", `A portal with slug '${slug}' already exists in this workspace.`);
    const second = await create(h, t.rootKey, { apiId, slug: uniqueSlug(), name: "second" });
    expectV2Error(second, 409, "unkey/data/portal_already_exists", `The API ${apiId} has a portal already; update or delete that one.`);
    const other = await h.tenant();
    expect((await create(h, other.rootKey, { apiId: await h.createApi(other), slug, name: "theirs" })).status).toBe(200);
    expect((await list(h, t.rootKey)).body.data).toHaveLength(1);
  });

  it("404 for an unknown API, another workspace's and a deleted one", async ({ h }) => {
    const t = await h.tenant();
    const other = await h.tenant();
    const deleted = await h.createApi(t);
    expect((await h.post("/v2/apis.deleteApi", { apiId: deleted }, t.rootKey)).status).toBe(200);
    for (const apiId of ["api_1234567890abcdefghij", await h.createApi(other), deleted]) {
      expectV2Error(await create(h, t.rootKey, { apiId, slug: uniqueSlug(), name: "P" }), 404, "unkey/data/api_not_found");
    }
  });

  describe("400 for a return link, logo or colour a page should not carry", () => {
    const cases: [string, Record<string, unknown>][] = [
      ["a javascript: return link", { returnUrl: "javascript:alert(1)" }],
      ["a data: return link", { returnUrl: "data:text/html,<script>alert(1)</script>" }],
      ["a relative return link", { returnUrl: "/account" }],
      ["a return link with a user name", { returnUrl: "https://user:pass@example.com/" }],
      ["a return link over 500 characters", { returnUrl: `https://example.com/${"a".repeat(490)}` }],
      ["a logo not over https", { branding: { logoUrl: "http://example.com/logo.png" } }],
      ["a javascript: logo", { branding: { logoUrl: "javascript:alert(1)" } }],
      ["a colour by name", { branding: { accentColor: "red" } }],
      ["a short colour", { branding: { accentColor: "#abc" } }],
      ["a colour that is no hex", { branding: { accentColor: "#ggghhh" } }],
      ["an empty title", { branding: { title: "" } }],
      ["a blank name", { name: "   " }],
      ["an unknown branding field", { branding: { css: "body{}" } }],
      ["an unknown field", { enabled: false }],
    ];
    for (const [name, fields] of cases) {
      it(name, async ({ h, t }) => {
        const apiId = await h.createApi(t);
        expectV2Error(
          await create(h, t.rootKey, { apiId, slug: uniqueSlug(), name: "P", ...fields }),
          400,
          "unkey/application/invalid_input",
        );
      });
    }
    it("accepts an http return link (a local app) and an https logo", async ({ h, t }) => {
      const apiId = await h.createApi(t);
      const res = await create(h, t.rootKey, {
        apiId,
        slug: uniqueSlug(),
        name: "P",
        returnUrl: "http://localhost:3000/account",
        branding: { logoUrl: "https://cdn.example.com/l.svg" },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    });
  });
});

describe("keyhaven.getPortal and listPortals", () => {
  it("gets a portal by id and by slug; another workspace's is not found", async ({ h }) => {
    const t = await h.tenant();
    const other = await h.tenant();
    const { portalId, slug } = await makePortal(h, t);
    const byId = await get(h, t.rootKey, portalId);
    const bySlug = await get(h, t.rootKey, slug);
    expect(byId.status, JSON.stringify(byId.body)).toBe(200);
    expect(bySlug.body.data).toEqual(byId.body.data);
    for (const portal of [portalId, slug, "pc_1234567890abcdefghij"]) {
      expectV2Error(await get(h, other.rootKey, portal), 404, "unkey/data/portal_not_found", "Portal not found.");
    }
  });

  it("lists the workspace's portals by id, a page at a time, and an API's alone", async ({ h }) => {
    const t = await h.tenant();
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await makePortal(h, t));
    await makePortal(h, await h.tenant());
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const res = await list(h, t.rootKey, { limit: 2, ...(cursor && { cursor }) });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      seen.push(...res.body.data.map((p: { portalId: string }) => p.portalId));
      if (!res.body.pagination.hasMore) break;
      cursor = res.body.pagination.cursor;
      expect(res.body.data).toHaveLength(2);
    }
    expect(seen).toEqual(made.map((p) => p.portalId).sort());
    const one = await list(h, t.rootKey, { apiId: made[3]!.apiId });
    expect(one.body.data.map((p: { portalId: string }) => p.portalId)).toEqual([made[3]!.portalId]);
    expect(one.body.pagination).toEqual({ hasMore: false });
    expect((await list(h, t.rootKey, { apiId: "api_1234567890abcdefghij" })).body.data).toEqual([]);
  });

  it("deletes an API's portal and its sessions with the API, so that its slug is free again", async ({ h }) => {
    const t = await h.tenant();
    const { apiId, portalId, slug } = await makePortal(h, t);
    await liveSession(h, t.rootKey, slug, "user_of_deleted_api");
    expect((await h.post("/v2/apis.deleteApi", { apiId }, t.rootKey)).status).toBe(200);
    expect((await list(h, t.rootKey)).body.data).toEqual([]);
    expectV2Error(await get(h, t.rootKey, portalId), 404, "unkey/data/portal_not_found");
    expect(await h.sql(`select id from portals where id = '${portalId}'`)).toEqual([]);
    expect(await h.sql(`select id from portal_sessions where portal_id = '${portalId}'`)).toEqual([]);
    // A portal nobody can see, get or delete must not hold its slug.
    const again = await create(h, t.rootKey, { apiId: await h.createApi(t), slug, name: "again" });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
  });
});

describe("keyhaven.updatePortal", () => {
  it("changes what is given, and null removes the return link and branding fields", async ({ h }) => {
    const t = await h.tenant();
    const { portalId, apiId } = await makePortal(h, t, undefined, {
      returnUrl: "https://a.example.com/",
      branding: { title: "T", accentColor: "#112233", logoUrl: "https://a.example.com/l.png" },
    });
    const res = await update(h, t.rootKey, { portalId, name: "Renamed", slug: "renamed-portal", branding: { accentColor: "#445566" } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({
      portalId,
      apiId,
      name: "Renamed",
      slug: "renamed-portal",
      enabled: true,
      returnUrl: "https://a.example.com/",
      branding: { title: "T", accentColor: "#445566", logoUrl: "https://a.example.com/l.png" },
      updatedAt: expect.any(Number),
    });
    const cleared = await update(h, t.rootKey, { portalId, returnUrl: null, branding: { title: null, logoUrl: null } });
    expect(cleared.status, JSON.stringify(cleared.body)).toBe(200);
    expect(cleared.body.data.returnUrl).toBeUndefined();
    expect(cleared.body.data.branding).toEqual({ accentColor: "#445566" });
    expect((await get(h, t.rootKey, "renamed-portal")).body.data).toEqual(cleared.body.data);
    const [entry] = (await auditEntries(h, { workspaceId: t.workspaceId, event: "portal.update" })).filter(
      (e) => e.requestId === cleared.body.meta.requestId,
    );
    expect(entry!.details).toEqual({ fields: ["returnUrl", "brandingTitle", "logoUrl"] });
  });

  it("409 for a slug another portal of the workspace has; 400 for a bad field or nothing to change; 404 for no portal", async ({ h }) => {
    const t = await h.tenant();
    const a = await makePortal(h, t);
    const b = await makePortal(h, t);
    expectV2Error(await update(h, t.rootKey, { portalId: b.portalId, slug: a.slug }), 409, "unkey/data/portal_already_exists");
    expect((await update(h, t.rootKey, { portalId: a.portalId, slug: a.slug })).status).toBe(200);
    expectV2Error(await update(h, t.rootKey, { portalId: a.portalId }), 400, "unkey/application/invalid_input");
    // Nothing named to change (an empty branding): refused, and nothing recorded.
    const updates = (await auditEntries(h, { workspaceId: t.workspaceId, event: "portal.update" })).length;
    expectV2Error(await update(h, t.rootKey, { portalId: a.portalId, branding: {} }), 400, "unkey/application/invalid_input");
    expect(await auditEntries(h, { workspaceId: t.workspaceId, event: "portal.update" })).toHaveLength(updates);
    expectV2Error(await update(h, t.rootKey, { portalId: a.portalId, slug: "Bad_Slug" }), 400, "unkey/application/invalid_input");
    expectV2Error(
      await update(h, t.rootKey, { portalId: a.portalId, returnUrl: "javascript:alert(1)" }),
      400,
      "unkey/application/invalid_input",
    );
    expectV2Error(await update(h, t.rootKey, { portalId: a.portalId, apiId: "api_other" }), 400, "unkey/application/invalid_input");
    expectV2Error(await update(h, t.rootKey, { portalId: "pc_1234567890abcdefghij", name: "x" }), 404, "unkey/data/portal_not_found");
    expect((await get(h, t.rootKey, b.portalId)).body.data.slug).toBe(b.slug);
  });

  it("disables and enables a portal: disabled, it mints nothing and its live sessions do nothing; enabled, they work again", async ({
    h,
  }) => {
    const t = await h.tenant();
    const { portalId, slug } = await makePortal(h, t);
    const session = await liveSession(h, t.rootKey, slug, "user_paused");
    expect((await update(h, t.rootKey, { portalId, enabled: false })).body.data.enabled).toBe(false);
    expectV2Error(await session.post("/v2/portal.listKeys"), 401, "unkey/authentication/portal_session_not_found");
    expectV2Error(
      await mint(h, t.rootKey, { portal: slug, externalId: "u", scopes: ["keys:read"] }),
      403,
      "unkey/authorization/forbidden",
      "Portal is disabled.",
    );
    expect((await update(h, t.rootKey, { portalId, enabled: true })).body.data.enabled).toBe(true);
    expect((await mint(h, t.rootKey, { portal: slug, externalId: "u", scopes: ["keys:read"] })).status).toBe(200);
    expect((await session.post("/v2/portal.listKeys")).status).toBe(200);
  });
});

describe("keyhaven.deletePortal", () => {
  it("deletes a portal and its sessions: it mints no more (404), its live sessions end (401), its slug is free", async ({ h }) => {
    const t = await h.tenant();
    const { portalId, slug, apiId } = await makePortal(h, t);
    const session = await liveSession(h, t.rootKey, slug, "user_deleted");
    const res = await remove(h, t.rootKey, portalId);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toEqual({});
    expect(Number((await h.sql<{ n: string }>(`select count(*) as n from portal_sessions where portal_id = '${portalId}'`))[0]!.n)).toBe(0);
    for (const portal of [portalId, slug]) {
      expectV2Error(await mint(h, t.rootKey, { portal, externalId: "u", scopes: ["keys:read"] }), 404, "unkey/data/portal_not_found");
    }
    expectV2Error(await session.post("/v2/portal.listKeys"), 401, "unkey/authentication/portal_session_not_found");
    expectV2Error(await get(h, t.rootKey, portalId), 404, "unkey/data/portal_not_found");
    expectV2Error(await remove(h, t.rootKey, portalId), 404, "unkey/data/portal_not_found");
    expect((await create(h, t.rootKey, { apiId, slug, name: "again" })).status).toBe(200);
    expect((await auditEntries(h, { workspaceId: t.workspaceId, event: "portal.delete" })).map((e) => e.targets[0]!.id)).toEqual([
      portalId,
    ]);
  });
});

describe("the portal permissions", () => {
  /** A tenant with two portals, and a root key holding only `grants` (with `{a}`/`{b}` the portals' ids). */
  async function withGrants(h: Harness, t: Tenant) {
    const a = await makePortal(h, t);
    const b = await makePortal(h, t);
    const keyOf = (...grants: string[]) =>
      h.rootKey(
        t.workspaceId,
        grants.map((g) => g.replace("{a}", a.portalId).replace("{b}", b.portalId)),
      );
    return { a, b, keyOf };
  }
  const denied = (res: Response) => expectV2Error(res, 403, "unkey/authorization/insufficient_permissions");

  it("createPortal needs portal.*.create_portal (or *)", async ({ h }) => {
    const t = await h.tenant();
    const { keyOf } = await withGrants(h, t);
    const body = async () => ({ apiId: await h.createApi(t), slug: uniqueSlug(), name: "P" });
    for (const grants of [
      [],
      ["portal.*.read_portal", "portal.*.update_portal", "portal.*.delete_portal", "portal.*.create_portal_session"],
      ["api.*.create_api"],
    ]) {
      denied(await create(h, await keyOf(...grants), await body()));
    }
    for (const grants of [["portal.*.create_portal"], ["*"]]) {
      expect((await create(h, await keyOf(...grants), await body())).status).toBe(200);
    }
  });

  it("getPortal needs read_portal on it or on every portal", async ({ h }) => {
    const t = await h.tenant();
    const { a, b, keyOf } = await withGrants(h, t);
    denied(await get(h, await keyOf(), a.portalId));
    denied(await get(h, await keyOf("portal.*.update_portal", "portal.{a}.create_portal_session"), a.portalId));
    const scoped = await keyOf("portal.{a}.read_portal");
    expect((await get(h, scoped, a.portalId)).status).toBe(200);
    expect((await get(h, scoped, a.slug)).status).toBe(200);
    denied(await get(h, scoped, b.portalId));
    expect((await get(h, await keyOf("portal.*.read_portal"), b.slug)).status).toBe(200);
  });

  it("listPortals needs portal.*.read_portal: a grant of one portal does not list", async ({ h }) => {
    const t = await h.tenant();
    const { keyOf } = await withGrants(h, t);
    denied(await list(h, await keyOf()));
    denied(await list(h, await keyOf("portal.{a}.read_portal")));
    expect((await list(h, await keyOf("portal.*.read_portal"))).body.data).toHaveLength(2);
  });

  it("updatePortal needs update_portal on it or on every portal", async ({ h }) => {
    const t = await h.tenant();
    const { a, b, keyOf } = await withGrants(h, t);
    denied(await update(h, await keyOf("portal.*.read_portal", "portal.*.create_portal"), { portalId: a.portalId, name: "x" }));
    const scoped = await keyOf("portal.{a}.update_portal");
    expect((await update(h, scoped, { portalId: a.slug, name: "by slug" })).status).toBe(200);
    denied(await update(h, scoped, { portalId: b.portalId, name: "x" }));
    // A portal that does not exist: the permission first, so a scoped key learns nothing of other ids.
    denied(await update(h, scoped, { portalId: "pc_1234567890abcdefghij", name: "x" }));
    expect((await update(h, await keyOf("portal.*.update_portal"), { portalId: b.portalId, name: "y" })).status).toBe(200);
    expect((await get(h, t.rootKey, b.portalId)).body.data.name).toBe("y");
  });

  it("deletePortal needs delete_portal on it or on every portal", async ({ h }) => {
    const t = await h.tenant();
    const { a, b, keyOf } = await withGrants(h, t);
    denied(await remove(h, await keyOf("portal.*.update_portal", "portal.*.read_portal"), a.portalId));
    const scoped = await keyOf("portal.{a}.delete_portal");
    denied(await remove(h, scoped, b.portalId));
    expect((await remove(h, scoped, a.portalId)).status).toBe(200);
    expect((await remove(h, await keyOf("portal.*.delete_portal"), b.slug)).status).toBe(200);
    expect((await list(h, t.rootKey)).body.data).toEqual([]);
  });
});
