import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../src/clock.js";
import { textOf } from "./console-client.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { keyOf, openedSession, PORTAL_HOST, portalClient, portalOf, sessionUrl, verifies } from "./portal-client.js";

/**
 * The customer portal page (issue 39 §2) over app.inject: the exchange and its cookie, what a session sees and may
 * do, its web security, and how a session ends. The clock is a ManualClock: grace periods and expiry are reached by
 * moving it, never by waiting.
 */
describe("the portal page", () => {
  let h: Harness;
  let t: Tenant;
  const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
  let n = 0;
  const slug = () => `portal-${++n}-x`;

  beforeAll(async () => {
    h = await createHarness({}, { clock });
    t = await h.tenant();
  });
  afterAll(async () => {
    await h?.close();
  });

  const ALL = ["keys:read", "keys:reroll", "analytics:read"];

  it("exchanges the code server-side for an HttpOnly, SameSite=Strict cookie, and redirects the code out of the address bar", async () => {
    const { portalId } = await portalOf(h, t, slug());
    const url = await sessionUrl(h, t, portalId, "user_a", ALL);
    expect(url).toMatch(new RegExp(`^http://${PORTAL_HOST.replace(".", "\\.")}/portal/\\?code=pst_|/portal/\\?code=pst_`));
    const u = new URL(url);
    const c = portalClient(h.app);
    const res = await c.get(`${u.pathname}${u.search}`);
    expect(res.status).toBe(303);
    expect(res.location).toBe("/portal/");
    expect(res.headers["referrer-policy"]).toBe("no-referrer");
    expect(c.setCookies).toHaveLength(1);
    const line = c.setCookies[0]!;
    expect(line).toMatch(/^keyhaven_portal=pat_[A-Za-z0-9]{24};/);
    expect(line).toContain("HttpOnly");
    expect(line).toContain("SameSite=Strict");
    expect(line).toContain("Path=/portal");
    expect(line).toContain("Max-Age=86400");
    expect(line).not.toContain("Secure");
    // The landing page is the first tab the scopes allow.
    const landing = await c.get("/portal/");
    expect(landing.status).toBe(303);
    expect(landing.location).toBe("/portal/keys");

    // The user reloads the code's URL: recognised (the cookie is that session's), not an error.
    const reload = await c.get(`${u.pathname}${u.search}`);
    expect(reload.status).toBe(303);
    expect(reload.location).toBe("/portal/");
    expect(c.setCookies).toEqual([]);

    // Anyone else with the used code (another browser, a leaked link): refused.
    const other = portalClient(h.app);
    const reused = await other.get(`${u.pathname}${u.search}`);
    expect(reused.status).toBe(401);
    expect(reused.headers["content-type"]).toMatch(/^text\/html/);
    expect(textOf(reused.html)).toContain("This link is invalid, expired or has already been used; ask for a new one");
    expect(other.cookie).toBeUndefined();
    // Another session's cookie is no licence for this code either.
    const someoneElse = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_b", ALL));
    expect((await someoneElse.get(`${u.pathname}${u.search}`)).status).toBe(401);
    expect((await portalClient(h.app).get("/portal/?code=pst_nonsense")).status).toBe(401);
  });

  it("a code expires after 15 minutes unexchanged", async () => {
    const { portalId } = await portalOf(h, t, slug());
    const u = new URL(await sessionUrl(h, t, portalId, "user_a", ALL));
    clock.advance(15 * 60_000 + 1);
    const res = await portalClient(h.app).get(`${u.pathname}${u.search}`);
    expect(res.status).toBe(401);
  });

  it("lists only the end user's keys in the portal's API, with hostile values escaped", async () => {
    const { apiId, portalId } = await portalOf(h, t, slug(), {
      branding: { title: "<b>Acme</b> & co", accentColor: "#ff5500", logoUrl: "https://cdn.example/logo.png" },
    });
    const mine = await keyOf(h, t, apiId, { externalId: "user_esc", name: "<script>alert(1)</script>", credits: { remaining: 42 } });
    const second = await keyOf(h, t, apiId, { externalId: "user_esc", name: "second" });
    await keyOf(h, t, apiId, { externalId: "someone_else", name: "theirs" });
    await keyOf(h, t, apiId, { name: "nobodys" });
    const otherApi = await h.createApi(t);
    await keyOf(h, t, otherApi, { externalId: "user_esc", name: "elsewhere" });

    const c = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_esc", ALL));
    const page = await c.get("/portal/keys");
    expect(page.status).toBe(200);
    expect(page.html).not.toContain("<script>alert(1)</script>");
    expect(page.html).toContain("<td>&lt;script>alert(1)&lt;/script></td>");
    expect(page.html).not.toContain("<b>Acme</b>");
    expect(page.html).toContain("<span>&lt;b>Acme&lt;/b> &amp; co</span>");
    expect(page.html).toContain('src="https://cdn.example/logo.png"');
    const text = textOf(page.html);
    expect(text).toContain("second");
    expect(text).toContain("42");
    for (const hidden of ["theirs", "nobodys", "elsewhere"]) expect(text).not.toContain(hidden);
    expect(page.html).toContain(`/portal/keys/${mine.keyId}/reroll`);
    expect(page.html).toContain(`/portal/keys/${second.keyId}/reroll`);
    expect(page.html.match(/<tr>/g)?.length).toBe(3); // the head and two keys
    // The accent colour: a style sheet of its own (no inline style), for this portal's session only.
    const link = /href="(\/portal\/theme\/[^"]+)"/.exec(page.html)?.[1]?.replace(/&amp;/g, "&");
    expect(link).toMatch(new RegExp(`^/portal/theme/${portalId}\\.css\\?v=\\d+$`));
    const theme = await c.get(link!);
    expect(theme.headers["content-type"]).toMatch(/^text\/css/);
    expect(theme.html).toContain("--accent: #ff5500");
    expect((await portalClient(h.app).get(link!)).html).toBe("");
    expect(page.html).not.toMatch(/ style=/);
  });

  it("sends the console's security headers on every page, and HTML error pages of its own", async () => {
    const { portalId } = await portalOf(h, t, slug());
    const c = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_a", ALL));
    for (const path of ["/portal/keys", "/portal/usage", "/portal/nope", "/portal/"]) {
      const res = await c.get(path);
      const csp = String(res.headers["content-security-policy"]);
      expect(csp, path).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("style-src 'self'");
      expect(csp).toContain("img-src 'self' data: https:");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(res.headers["cache-control"]).toBe("no-store");
      expect(res.headers["x-frame-options"]).toBe("DENY");
      expect(res.headers["x-content-type-options"]).toBe("nosniff");
      expect(res.headers["referrer-policy"]).toBe("same-origin");
    }
    const missing = await c.get("/portal/nope");
    expect(missing.status).toBe(404);
    expect(missing.headers["content-type"]).toMatch(/^text\/html/);
    expect(textOf(missing.html)).toContain("There is no such page in this portal");
    const json = await h.app.inject({
      method: "POST",
      url: "/portal/sign-out",
      headers: { "content-type": "application/json", host: PORTAL_HOST },
      payload: "{}",
    });
    expect(json.statusCode).toBe(415);
    expect(json.headers["content-type"]).toMatch(/^text\/html/);
  });

  it("rerolls a key: refused without the CSRF token or from another site; with it, the new key shown once and the old one verifying until its grace ends", async () => {
    const { apiId, portalId } = await portalOf(h, t, slug());
    const mine = await keyOf(h, t, apiId, { externalId: "user_r", name: "mine" });
    const c = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_r", ALL));
    const confirm = await c.get(`/portal/keys/${mine.keyId}/reroll`);
    expect(confirm.status).toBe(200);
    expect(textOf(confirm.html)).toContain("The old key stops verifying");
    const keysBefore = Number((await h.sql<{ n: string }>(`select count(*) as n from keys where api_id = '${apiId}'`))[0]!.n);

    const noToken = await c.post(`/portal/keys/${mine.keyId}/reroll`, { _csrf: "", grace: "3600000" });
    expect(noToken.status).toBe(403);
    expect(textOf(noToken.html)).toContain("security token is missing or out of date");
    const wrongToken = await c.post(`/portal/keys/${mine.keyId}/reroll`, { _csrf: "x".repeat(43), grace: "3600000" });
    expect(wrongToken.status).toBe(403);
    const foreign = await c.post(`/portal/keys/${mine.keyId}/reroll`, { grace: "3600000" }, { origin: "https://evil.example" });
    expect(foreign.status).toBe(403);
    const noOrigin = await c.post(`/portal/keys/${mine.keyId}/reroll`, { grace: "3600000" }, { origin: "" });
    expect(noOrigin.status).toBe(403);
    expect(Number((await h.sql<{ n: string }>(`select count(*) as n from keys where api_id = '${apiId}'`))[0]!.n)).toBe(keysBefore);
    expect(await verifies(h, t, mine.key)).toEqual({ valid: true, code: "VALID" });
    const expires = await h.sql<{ expires: unknown }>(`select expires from keys where id = '${mine.keyId}'`);
    expect(expires[0]!.expires).toBeNull();

    // A grace period not offered: refused, nothing changed.
    expect((await c.post(`/portal/keys/${mine.keyId}/reroll`, { grace: "12345" })).status).toBe(400);

    const done = await c.post(`/portal/keys/${mine.keyId}/reroll`, { grace: "3600000" });
    expect(done.status).toBe(200);
    expect(done.headers["cache-control"]).toBe("no-store");
    expect(done.location).toBeUndefined();
    const newKey = /<code id="new-key">([^<]+)<\/code>/.exec(done.html)?.[1];
    expect(newKey).toBeDefined();
    expect(done.html.split(newKey!).length - 1).toBe(1);
    expect(newKey).not.toBe(mine.key);
    // Shown once: the keys page lists it without its secret.
    const after = await c.get("/portal/keys");
    expect(after.html).not.toContain(newKey!);
    expect(after.html.match(/<tr>/g)?.length).toBe(3);

    expect(await verifies(h, t, newKey!)).toEqual({ valid: true, code: "VALID" });
    expect(await verifies(h, t, mine.key)).toEqual({ valid: true, code: "VALID" });
    clock.advance(61 * 60_000);
    expect((await verifies(h, t, mine.key)).valid).toBe(false);
    expect(await verifies(h, t, newKey!)).toEqual({ valid: true, code: "VALID" });
  });

  it("answers another user's key, and a key of another API, as a 404 page on the reroll URL", async () => {
    const { apiId, portalId } = await portalOf(h, t, slug());
    const theirs = await keyOf(h, t, apiId, { externalId: "user_other", name: "theirs" });
    const unowned = await keyOf(h, t, apiId, { name: "unowned" });
    await keyOf(h, t, apiId, { externalId: "user_me", name: "mine" });
    const c = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_me", ALL));
    await c.get("/portal/keys");
    for (const keyId of [theirs.keyId, unowned.keyId, "key_doesnotexist"]) {
      const get = await c.get(`/portal/keys/${keyId}/reroll`);
      expect(get.status, keyId).toBe(404);
      expect(get.headers["content-type"]).toMatch(/^text\/html/);
      expect(get.html).not.toContain("theirs");
      const post = await c.post(`/portal/keys/${keyId}/reroll`, { grace: "0" });
      expect(post.status).toBe(404);
    }
    expect(await verifies(h, t, theirs.key)).toEqual({ valid: true, code: "VALID" });
  });

  it("shows only the tabs the scopes allow, and refuses the others' URLs", async () => {
    const { apiId, portalId } = await portalOf(h, t, slug());
    const mine = await keyOf(h, t, apiId, { externalId: "user_s", name: "mine" });
    const reader = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_s", ["keys:read"]));
    const keys = await reader.get("/portal/keys");
    expect(keys.status).toBe(200);
    expect(keys.html).toContain('href="/portal/keys"');
    expect(keys.html).not.toContain('href="/portal/usage');
    expect(keys.html).not.toContain("/reroll");
    expect(keys.html).not.toContain("Verifications, last");
    expect((await reader.get("/portal/usage")).status).toBe(403);
    expect((await reader.get(`/portal/keys/${mine.keyId}/reroll`)).status).toBe(403);
    expect((await reader.post(`/portal/keys/${mine.keyId}/reroll`, { grace: "0" })).status).toBe(403);
    expect(await verifies(h, t, mine.key)).toEqual({ valid: true, code: "VALID" });

    const analyst = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_s", ["analytics:read"]));
    const landing = await analyst.get("/portal/");
    expect(landing.location).toBe("/portal/usage");
    const usage = await analyst.get("/portal/usage");
    expect(usage.status).toBe(200);
    expect(usage.html).not.toContain('href="/portal/keys"');
    const refused = await analyst.get("/portal/keys");
    expect(refused.status).toBe(403);
    expect(textOf(refused.html)).toContain("keys:read");

    // A reroller without keys:read has the Keys tab, but no list.
    const reroller = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_s", ["keys:reroll"]));
    const tab = await reroller.get("/portal/keys");
    expect(tab.status).toBe(200);
    expect(textOf(tab.html)).toContain("This session may not list your keys");
    const confirm = await reroller.get(`/portal/keys/${mine.keyId}/reroll`);
    expect(confirm.status).toBe(200);
    // Without keys:read, the confirmation names the key by the id the user gave, not by its name.
    expect(textOf(confirm.html)).toContain(`Reroll ${mine.keyId}`);
    expect(textOf(confirm.html)).not.toContain("mine");
  });

  it("charts the user's verifications by outcome, with the numbers in a table, and a sparkline per key", async () => {
    const { apiId, portalId } = await portalOf(h, t, slug());
    const mine = await keyOf(h, t, apiId, { externalId: "user_u", name: "mine", credits: { remaining: 2 } });
    const theirs = await keyOf(h, t, apiId, { externalId: "user_v", name: "theirs" });
    for (let i = 0; i < 3; i++) await verifies(h, t, mine.key); // 2 valid, 1 usage exceeded
    for (let i = 0; i < 5; i++) await verifies(h, t, theirs.key);
    await h.jobs.analytics.flush();
    const c = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_u", ALL));
    for (const range of ["24h", "7d", "30d"]) {
      const page = await c.get(`/portal/usage?range=${range}`);
      expect(page.status, range).toBe(200);
      expect(textOf(page.html)).toContain("3 verifications of your keys in this period");
      expect(page.html).toContain("data-chart=");
      expect(page.html).toContain('<th scope="col">Valid</th>');
      expect(page.html).toContain('<th scope="col">Usage exceeded</th>');
      expect(page.html).toContain(
        `aria-current="page">${range === "24h" ? "Last 24 hours" : range === "7d" ? "Last 7 days" : "Last 30 days"}`,
      );
    }
    const keys = await c.get("/portal/keys");
    expect(keys.html).toMatch(/aria-label="3 verifications in the last 7 days, by day: 0, 0, 0, 0, 0, 0, 3"/);
    expect(keys.html).toContain("<polyline");
  });

  it("keeps its session off the console and the API, and theirs off it", async () => {
    const { portalId } = await portalOf(h, t, slug());
    const c = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_a", ALL));
    const token = c.cookie!;
    const v2 = await h.post("/v2/portal.listKeys", {}, undefined, { cookie: `keyhaven_portal=${token}` });
    expect(v2.status).toBe(400);
    const console = await h.app.inject({ method: "GET", url: "/console/", headers: { cookie: `keyhaven_portal=${token}` } });
    expect(console.statusCode).not.toBe(200);
    const viaV2Cookie = await h.app.inject({ method: "GET", url: "/portal/keys", headers: { cookie: `portal_session=${token}` } });
    expect(viaV2Cookie.statusCode).toBe(401);
    expect(textOf(viaV2Cookie.body)).toContain("Not signed in");
    const viaRootKey = await h.app.inject({ method: "GET", url: "/portal/keys", headers: { authorization: `Bearer ${t.rootKey}` } });
    expect(viaRootKey.statusCode).toBe(401);
  });

  it("signs out for good: the session revoked, its cookie cleared", async () => {
    const { portalId } = await portalOf(h, t, slug(), { returnUrl: "https://app.example/settings" });
    const c = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_a", ALL));
    const token = c.cookie!;
    await c.get("/portal/keys");
    expect((await c.post("/portal/sign-out", { _csrf: "" })).status).toBe(403);
    const out = await c.post("/portal/sign-out");
    expect(out.status).toBe(200);
    expect(textOf(out.html)).toContain("You have signed out");
    expect(out.html).toContain('href="https://app.example/settings"');
    expect(c.cookie).toBeUndefined();
    const again = await h.app.inject({
      method: "GET",
      url: "/portal/keys",
      headers: { host: PORTAL_HOST, cookie: `keyhaven_portal=${token}` },
    });
    expect(again.statusCode).toBe(401);
    expect(textOf(again.body)).toContain("Your session has ended");
    const rows = await h.sql<{ revoked_at_m: unknown }>(`select revoked_at_m from portal_sessions where portal_id = '${portalId}'`);
    expect(rows[0]!.revoked_at_m).not.toBeNull();
  });

  it("shows an expired session's page with the return link and reason=session_expired, and the branding's return link before", async () => {
    const { portalId } = await portalOf(h, t, slug(), { returnUrl: "https://app.example/portal-default" });
    const c = await openedSession(
      h.app,
      await sessionUrl(h, t, portalId, "user_a", ALL, { returnUrl: 'https://app.example/back?tab=keys&x="><script>' }),
    );
    const live = await c.get("/portal/keys");
    // The attribute is escaped: its quote cannot end it.
    expect(live.html).toContain('href="https://app.example/back?tab=keys&amp;x=&quot;>&lt;script>"');
    expect(live.html).not.toContain("<script>");
    clock.advance(24 * 3_600_000 + 1);
    const ended = await c.get("/portal/keys");
    expect(ended.status).toBe(401);
    expect(textOf(ended.html)).toContain("Your session has ended");
    expect(ended.html).toMatch(/href="https:\/\/app\.example\/back\?tab=keys&amp;x=%22%3E%3Cscript%3E&amp;reason=session_expired"/);
    expect(ended.html).not.toContain("<script>");
    expect(c.cookie).toBeUndefined();
    // With the portal's default return link when the session named none.
    const d = await openedSession(h.app, await sessionUrl(h, t, portalId, "user_a", ALL));
    clock.advance(24 * 3_600_000 + 1);
    const endedDefault = await d.get("/portal/");
    expect(endedDefault.html).toContain('href="https://app.example/portal-default?reason=session_expired"');
    // No cookie at all: how to get in, no link.
    const none = await portalClient(h.app).get("/portal/");
    expect(none.status).toBe(401);
    expect(textOf(none.html)).toContain("Open the portal from the link your provider gave you");
  });
});

describe("the portal page behind https (KEYHAVEN_PUBLIC_URL)", () => {
  let h: Harness;
  let t: Tenant;
  beforeAll(async () => {
    h = await createHarness({ KEYHAVEN_PUBLIC_URL: "https://keys.example.com" });
    t = await h.tenant();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("answers the public URL and sets a __Host- cookie: Secure, Path=/", async () => {
    const { portalId } = await portalOf(h, t, "secure-portal");
    const url = new URL(await sessionUrl(h, t, portalId, "user_a", ["keys:read"]));
    expect(url.origin).toBe("https://keys.example.com");
    expect(url.pathname).toBe("/portal/");
    const res = await h.app.inject({ method: "GET", url: `${url.pathname}${url.search}`, headers: { host: "keys.example.com" } });
    expect(res.statusCode).toBe(303);
    const line = String(res.headers["set-cookie"]);
    expect(line).toMatch(/^__Host-keyhaven_portal=pat_[A-Za-z0-9]{24};/);
    expect(line).toContain("Secure");
    expect(line).toContain("Path=/;");
    expect(line).toContain("HttpOnly");
    expect(line).toContain("SameSite=Strict");
    expect(line).not.toContain("Domain");
    const token = /^__Host-keyhaven_portal=([^;]+)/.exec(line)![1]!;
    const keys = await h.app.inject({ method: "GET", url: "/portal/keys", headers: { cookie: `__Host-keyhaven_portal=${token}` } });
    expect(keys.statusCode).toBe(200);
    // A form posted from the public origin passes the Origin check (its CSRF token given).
    const csrf = /name="_csrf" value="([^"]+)"/.exec(keys.body)![1]!;
    const out = await h.app.inject({
      method: "POST",
      url: "/portal/sign-out",
      headers: {
        cookie: `__Host-keyhaven_portal=${token}`,
        origin: "https://keys.example.com",
        "content-type": "application/x-www-form-urlencoded",
      },
      payload: `_csrf=${encodeURIComponent(csrf)}`,
    });
    expect(out.statusCode).toBe(200);
    expect(String(out.headers["set-cookie"])).toMatch(/__Host-keyhaven_portal=;/);
  });
});
