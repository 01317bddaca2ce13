import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { auditEntries } from "./audit-entries.js";
import { type ConsoleClient, signedIn, signedInTenant, textOf } from "./console-client.js";
import { ADMIN_TOKEN, type Harness, type Tenant } from "./helper.js";

const XSS = "Acme <b>Inc</b> <script>alert(1)</script>";

/** Entities of an attribute, decoded. */
const decoded = (text: string) =>
  text.replaceAll("&lt;", "<").replaceAll("&gt;", ">").replaceAll("&quot;", '"').replaceAll("&#39;", "'").replaceAll("&amp;", "&");

/**
 * What a browser would send of the form posting to `action`, as the page shows it (without its CSRF token, which the
 * client adds): its inputs (a checkbox only when checked), with `changes` applied (undefined: left out).
 */
function formOf(html: string, action: string, changes: Record<string, string | string[] | undefined> = {}) {
  const form = new RegExp(`<form[^>]*action="${action}"[^>]*>([\\s\\S]*?)</form>`).exec(html)?.[1];
  if (form === undefined) throw new Error(`no form posting to ${action}`);
  const fields: Record<string, string | string[]> = {};
  for (const [tag] of form.matchAll(/<input\b[^>]*>/g)) {
    const name = /\sname="([^"]*)"/.exec(tag)?.[1];
    if (name === undefined || name === "_csrf") continue;
    if (/type="checkbox"/.test(tag) && !/\schecked/.test(tag)) continue;
    const value = decoded(/\svalue="([^"]*)"/.exec(tag)?.[1] ?? "");
    const had = fields[name];
    fields[name] = had === undefined ? value : [...(Array.isArray(had) ? had : [had]), value];
  }
  for (const [name, value] of Object.entries(changes)) {
    if (value === undefined) delete fields[name];
    else fields[name] = value;
  }
  return fields;
}

/** The console's POST forms of a page (its sign-out left out). */
const postForms = (html: string) =>
  [...html.matchAll(/<form method="post" action="([^"]+)"/g)].map((m) => m[1]).filter((a) => a !== "/console/sign-out");

describe("console: an API's portal tab", () => {
  let h: Harness;
  let t: Tenant;
  let c: ConsoleClient;
  let apiId: string;
  let tab: string;

  type PortalDbRow = {
    id: string;
    slug: string;
    name: string;
    return_url: string | null;
    brand: string | null;
    accent_color: string | null;
    logo_url: string | null;
    enabled: boolean;
  };
  const portalRow = async () =>
    (
      await h.sql<PortalDbRow>(
        `select id, slug, name, return_url, branding_title as brand, accent_color, logo_url, enabled from portals where api_id = '${apiId}'`,
      )
    )[0];

  beforeAll(async () => {
    ({ h, t, c } = await signedInTenant({ KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN }));
    apiId = await h.createApi(t, { name: "payments" });
    tab = `/console/apis/${apiId}/portal`;
  });
  afterAll(() => h?.close());

  it("offers the portal permissions in the root key picker", async () => {
    const page = await c.get("/console/root-keys/new");
    for (const action of ["create_portal", "read_portal", "update_portal", "delete_portal", "create_portal_session"]) {
      expect(page.html).toContain(`value="portal.*.${action}"`);
    }
  });

  it("creates a portal from the tab (bad values refused, nothing written), with every value escaped", async () => {
    const keys = await c.get(`/console/apis/${apiId}`);
    expect(keys.html).toContain(`href="${tab}"`);
    const settings = await c.get(`/console/apis/${apiId}/settings`);
    expect(settings.html).toContain(`href="${tab}"`);
    const empty = await c.get(tab);
    expect(empty.status).toBe(200);
    expect(textOf(empty.html)).toContain("This API has no portal yet");
    const good = {
      slug: "acme-portal",
      name: XSS,
      returnUrl: "https://acme.example/back",
      title: "Acme keys",
      accentColor: "#AABBCC",
      logoUrl: "https://acme.example/logo.png",
    };
    for (const [bad, words] of [
      [{ slug: "Bad Slug" }, "slug must be 3 to 64 lowercase letters"],
      [{ accentColor: "red" }, "branding.accentColor must be a colour as #rrggbb"],
      [{ returnUrl: "javascript:alert(1)" }, "returnUrl must be an http or https URL"],
      [{ logoUrl: "http://acme.example/logo.png" }, "branding.logoUrl must be an https URL"],
      [{ name: "" }, "The name must not be empty."],
      [{ name: "a\u0000b" }, "The name must not contain the NUL character"],
      [{ title: "t".repeat(101) }, "The title must be at most 100 characters."],
    ] as const) {
      const res = await c.post(tab, formOf(empty.html, tab, { ...good, ...bad }));
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(textOf(res.html)).toContain(words);
      // What was typed is shown again, escaped.
      if (!("name" in bad)) expect(decoded(res.html)).toContain(`value="${XSS}"`);
      expect(res.html).not.toContain("<b>Inc</b>");
      expect(await portalRow()).toBeUndefined();
    }
    const created = await c.post(tab, formOf(empty.html, tab, good));
    expect(created.status, created.html.slice(0, 400)).toBe(303);
    expect(created.location).toBe(`${tab}?done=created`);
    const row = await portalRow();
    expect(row).toMatchObject({ slug: "acme-portal", name: XSS, accent_color: "#aabbcc", enabled: true, brand: "Acme keys" });
    const page = await c.get(`${tab}?done=created`);
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain("Portal created.");
    expect(text).toContain(XSS);
    expect(page.html).not.toContain("<b>Inc</b>");
    expect(page.html).not.toContain("<script>alert(1)</script>");
    expect(text).toContain("http://console.test/portal/");
    expect(text).toContain("#aabbcc");
    // A second portal of the API is refused by the core (one per API).
    const again = await c.post(tab, formOf(empty.html, tab, { ...good, slug: "other-slug" }));
    expect(again.status).toBe(409);
    expect(textOf(again.html)).toContain("has a portal already");
    const [entry] = await auditEntries(h, { event: "portal.create" });
    expect(entry).toMatchObject({ surface: "console", actorKind: "root_key" });
  });

  it("saves only the fields changed on the form, and refuses bad values changing nothing", async () => {
    const page = await c.get(tab);
    const action = `${tab}/settings`;
    const before = await portalRow();
    // Meanwhile, v2 changes the title: saving the form's other field must not undo it.
    const v2 = await h.post("/v2/keyhaven.updatePortal", { portalId: before!.id, branding: { title: "Set by v2" } }, t.rootKey);
    expect(v2.status, JSON.stringify(v2.body)).toBe(200);
    const saved = await c.post(action, formOf(page.html, action, { name: "Acme 2", logoUrl: "" }));
    expect(saved.status, saved.html.slice(0, 400)).toBe(303);
    expect(saved.location).toBe(`${tab}?done=saved`);
    expect(await portalRow()).toMatchObject({ ...before, name: "Acme 2", logo_url: null, brand: "Set by v2" });
    const updates = await auditEntries(h, { event: "portal.update" });
    expect(updates.at(-1)!.details).toMatchObject({ fields: ["name", "logoUrl"] });

    const fresh = await c.get(tab);
    const unchanged = await c.post(action, formOf(fresh.html, action));
    expect(unchanged.location).toBe(`${tab}?done=unchanged`);
    const kept = await portalRow();
    for (const [bad, words] of [
      [{ slug: "-bad-" }, "slug must be 3 to 64"],
      [{ accentColor: "#12345g" }, "branding.accentColor must be a colour as #rrggbb"],
      [{ returnUrl: "ftp://acme.example/" }, "returnUrl must be an http or https URL"],
      [{ returnUrl: "not a url" }, "returnUrl must be an absolute URL"],
    ] as const) {
      const res = await c.post(action, formOf(fresh.html, action, bad));
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(textOf(res.html)).toContain(words);
      // The form shows what was typed again.
      expect(decoded(res.html)).toContain(`value="${Object.values(bad)[0]}"`);
      expect(await portalRow()).toEqual(kept);
    }
    // A slug another API's portal has: the core's conflict, in v2's words, and nothing changed.
    const otherApi = await h.createApi(t, { name: "other api" });
    const taken = await h.post("/v2/keyhaven.createPortal", { apiId: otherApi, slug: "taken-slug", name: "Other" }, t.rootKey);
    expect(taken.status, JSON.stringify(taken.body)).toBe(200);
    const conflict = await c.post(action, formOf(fresh.html, action, { slug: "taken-slug" }));
    expect(conflict.status).toBe(409);
    expect(textOf(conflict.html)).toContain("A portal with slug 'taken-slug' already exists in this workspace.");
    expect(await portalRow()).toEqual(kept);
    // A form of a portal that is no longer the API's changes nothing.
    const stale = await c.post(action, formOf(fresh.html, action, { portalId: "pc_gone", name: "Stale" }));
    expect(stale.status).toBe(409);
    expect(await portalRow()).toEqual(kept);
  });

  it("disables and enables the portal; a disabled one mints no preview session", async () => {
    const page = await c.get(tab);
    const disabled = await c.post(`${tab}/enabled`, formOf(page.html, `${tab}/enabled`));
    expect(disabled.location).toBe(`${tab}?done=disabled`);
    expect((await portalRow())!.enabled).toBe(false);
    const off = await c.get(`${tab}?done=disabled`);
    expect(textOf(off.html)).toContain("The portal is disabled: enable it to open a preview session.");
    expect(postForms(off.html)).not.toContain(`${tab}/sessions`);
    const refused = await c.post(`${tab}/sessions`, { portalId: (await portalRow())!.id, externalId: "user_a", scopes: "keys:read" });
    expect(refused.status).toBe(403);
    expect(textOf(refused.html)).toContain("Portal is disabled.");
    expect(await h.sql("select id from portal_sessions")).toHaveLength(0);
    const enabled = await c.post(`${tab}/enabled`, formOf(off.html, `${tab}/enabled`));
    expect(enabled.location).toBe(`${tab}?done=enabled`);
    expect((await portalRow())!.enabled).toBe(true);
    const bad = await c.post(`${tab}/enabled`, { portalId: (await portalRow())!.id, enabled: "maybe" });
    expect(bad.status).toBe(400);
  });

  it("opens a preview session: its link shown once, never in a Location; its code exchanges; the row is a preview", async () => {
    const page = await c.get(tab);
    const action = `${tab}/sessions`;
    const form = formOf(page.html, action);
    expect(form.scopes).toEqual(["keys:read", "analytics:read"]);
    const noUser = await c.post(action, formOf(page.html, action, { externalId: "" }));
    expect(noUser.status).toBe(400);
    expect(textOf(noUser.html)).toContain("The externalId must not be empty.");
    const noScope = await c.post(action, formOf(page.html, action, { externalId: "user_a", scopes: undefined }));
    expect(noScope.status).toBe(400);
    const oddScope = await c.post(action, formOf(page.html, action, { externalId: "user_a", scopes: ["keys:delete"] }));
    expect(oddScope.status).toBe(400);

    const minted = await c.post(action, formOf(page.html, action, { externalId: "user <a>" }));
    expect(minted.status, minted.html.slice(0, 400)).toBe(200);
    expect(minted.location).toBeUndefined();
    expect(minted.headers["cache-control"]).toBe("no-store");
    const url = decoded(/<a id="preview-url"[^>]*href="([^"]+)"/.exec(minted.html)![1]!);
    expect(url).toMatch(/^http:\/\/console\.test\/portal\/\?code=pst_[A-Za-z0-9]{24}$/);
    expect(textOf(minted.html)).toContain("as user <a> would");
    expect(minted.html).not.toContain("user <a>");
    const code = new URL(url).searchParams.get("code")!;
    const sessionId = /Session id <code>(ps_[^<]+)<\/code>/.exec(minted.html)![1]!;
    const [row] = await h.sql<{ preview: boolean; scopes: unknown; external_id: string; minted_by: string }>(
      `select preview, scopes, external_id, minted_by from portal_sessions where id = '${sessionId}'`,
    );
    expect(row).toMatchObject({ preview: true, external_id: "user <a>", minted_by: t.rootKeyId });
    // Shown only on that answer: not on the tab afterwards.
    expect((await c.get(tab)).html).not.toContain(code);
    const exchanged = await h.post("/v2/portal.exchangeCode", { code });
    expect(exchanged.status, JSON.stringify(exchanged.body)).toBe(200);
    expect((exchanged.body.data as { accessToken: string }).accessToken).toMatch(/^pat_/);
    expect((await h.post("/v2/portal.exchangeCode", { code })).status).toBe(401);
    const [entry] = await auditEntries(h, { event: "portal.create_session" });
    expect(entry).toMatchObject({ surface: "console" });
    expect(entry!.details).toMatchObject({ preview: true, scopes: ["keys:read", "analytics:read"] });
  });

  it("refuses a scope beyond the root key's own permissions on the API (403, nothing minted)", async () => {
    const narrow = await signedIn(
      h.app,
      await h.rootKey(t.workspaceId, ["api.*.read_api", "portal.*.read_portal", "portal.*.create_portal_session"]),
    );
    const page = await narrow.get(tab);
    expect(page.status).toBe(200);
    const before = await h.sql("select id from portal_sessions");
    const res = await narrow.post(`${tab}/sessions`, formOf(page.html, `${tab}/sessions`, { externalId: "user_b" }));
    expect(res.status).toBe(403);
    expect(textOf(res.html)).toContain('You do not have permission to grant the "keys:read" scope to a portal session.');
    expect(await h.sql("select id from portal_sessions")).toEqual(before);
  });

  it("shows a reader (read_portal) the portal without any form, and refuses its POSTs with 403", async () => {
    const reader = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api", "portal.*.read_portal"]));
    const page = await reader.get(tab);
    expect(page.status).toBe(200);
    expect(textOf(page.html)).toContain("Acme 2");
    expect(postForms(page.html)).toEqual([]);
    expect(textOf(page.html)).toContain("Opening a preview session needs portal.*.create_portal_session");
    const kept = await portalRow();
    const sessions = await h.sql("select id from portal_sessions");
    const portalId = kept!.id;
    for (const [path, body] of [
      ["/settings", { portalId, name: "Reader's" }],
      ["/enabled", { portalId, enabled: "false" }],
      ["/sessions", { portalId, externalId: "user_c", scopes: "keys:read" }],
      ["/delete", { portalId }],
      ["", { slug: "reader-portal", name: "Reader's" }],
    ] as const) {
      const res = await reader.post(`${tab}${path}`, body);
      expect(res.status, path).toBe(403);
      expect(textOf(res.html), path).toMatch(/portal\.\*\.(update|create_portal_session|delete|create)/);
    }
    expect(await portalRow()).toEqual(kept);
    expect(await h.sql("select id from portal_sessions")).toEqual(sessions);
    // Without read_portal the tab says what is missing.
    const apiOnly = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    const refused = await apiOnly.get(tab);
    expect(refused.status).toBe(403);
    expect(textOf(refused.html)).toContain("portal.*.read_portal");
    expect(refused.html).not.toContain("Acme 2");
    // Nor does it tell whether an API has no portal.
    const bare = await h.createApi(t, { name: "bare" });
    const none = await apiOnly.get(`/console/apis/${bare}/portal`);
    expect(none.status).toBe(403);
    expect(textOf(none.html)).not.toContain("no portal");
    // read_portal on this portal alone is enough to see it.
    const one = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api", `portal.${portalId}.read_portal`]));
    const its = await one.get(tab);
    expect(its.status).toBe(200);
    expect(textOf(its.html)).toContain("Acme 2");
    expect(postForms(its.html)).toEqual([]);
  });

  it("answers an API of another workspace as missing, and the operator with why it cannot", async () => {
    const other = await h.tenant();
    const stranger = await signedIn(h.app, other.rootKey);
    const kept = await portalRow();
    const page = await stranger.get(tab);
    expect(page.status).toBe(404);
    expect(page.html).not.toContain("Acme 2");
    expect(postForms(page.html)).toEqual([]);
    for (const path of ["", "/settings", "/enabled", "/sessions", "/delete"]) {
      const res = await stranger.post(`${tab}${path}`, {
        portalId: kept!.id,
        slug: "stolen",
        name: "x",
        enabled: "false",
        externalId: "u",
        scopes: "keys:read",
      });
      expect(res.status, path).toBe(404);
    }
    expect(await portalRow()).toEqual(kept);
    const operator = await signedIn(h.app, ADMIN_TOKEN);
    const op = await operator.get(tab);
    expect(op.status).toBe(403);
    expect(textOf(op.html)).toContain("This page needs a root key session.");
  });

  it("deletes the portal with its sessions", async () => {
    const page = await c.get(tab);
    expect(await h.sql("select id from portal_sessions")).not.toHaveLength(0);
    const deleted = await c.post(`${tab}/delete`, formOf(page.html, `${tab}/delete`));
    expect(deleted.status).toBe(303);
    expect(deleted.location).toBe(`${tab}?done=deleted`);
    expect(await portalRow()).toBeUndefined();
    expect(await h.sql("select id from portal_sessions")).toHaveLength(0);
    const after = await c.get(`${tab}?done=deleted`);
    expect(textOf(after.html)).toContain("Portal deleted, with its sessions.");
    expect(textOf(after.html)).toContain("This API has no portal yet");
    const again = await c.post(`${tab}/delete`, formOf(page.html, `${tab}/delete`));
    expect(again.status).toBe(404);
  });
});
