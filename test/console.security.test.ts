import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../src/clock.js";
import { CONSOLE_CSP } from "../src/console/surface.js";
import { MAX_FAILED_SIGN_INS } from "../src/core/console/console.sessions.js";
import { ADMIN_TOKEN, createHarness, type Harness, type Tenant } from "./helper.js";
import { CONSOLE_HOST, consoleClient, signedIn, textOf } from "./console-client.js";

const sessionsOf = (h: Harness) => h.sql<{ n: number }>("select count(*)::int as n from console_sessions");

describe("the console over HTTP: sessions, CSRF, Origin, headers", () => {
  let h: Harness;
  let t: Tenant;
  let clock: ManualClock;
  beforeAll(async () => {
    clock = new ManualClock(Date.parse("2026-12-01T10:00:00Z"));
    h = await createHarness({ KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN }, { clock });
    t = await h.tenant();
  });
  afterAll(() => h?.close());

  it("sets the session cookie HttpOnly and SameSite=Strict, and stores only its hash", async () => {
    const c = consoleClient(h.app);
    const res = await c.post("/console/sign-in", { secret: t.rootKey });
    expect(res.status).toBe(303);
    const cookie = String(res.headers["set-cookie"]);
    expect(cookie).toMatch(/^keyhaven_session=[A-Za-z0-9_-]{43};/);
    expect(cookie).toContain("HttpOnly");
    expect(cookie).toContain("SameSite=Strict");
    expect(cookie).toContain("Path=/");
    expect(cookie).not.toContain("Secure");
    const rows = await h.sql<{ id_hash: string }>("select id_hash from console_sessions");
    expect(rows.map((r) => r.id_hash)).not.toContain(c.cookie);
    expect(JSON.stringify(await h.sql("select * from console_sessions"))).not.toContain(c.cookie!);
    expect(JSON.stringify(await h.sql("select * from console_sessions"))).not.toContain(t.rootKey);
  });

  it("names the cookie __Host- and marks it Secure when served over https (behind a trusted proxy)", async () => {
    const p = await createHarness({ KEYHAVEN_TRUST_PROXY: "on" });
    try {
      const pt = await p.tenant();
      const res = await p.app.inject({
        method: "POST",
        url: "/console/sign-in",
        headers: {
          host: CONSOLE_HOST,
          origin: `https://${CONSOLE_HOST}`,
          "x-forwarded-proto": "https",
          "content-type": "application/x-www-form-urlencoded",
        },
        payload: new URLSearchParams({ secret: pt.rootKey }).toString(),
      });
      expect(res.statusCode).toBe(303);
      const cookie = String(res.headers["set-cookie"]);
      expect(cookie).toMatch(/^__Host-keyhaven_session=/);
      expect(cookie).toContain("Secure");
      expect(cookie).toContain("HttpOnly");
      expect(cookie).toContain("SameSite=Strict");
    } finally {
      await p.close();
    }
  });

  it("refuses a POST without the CSRF token, or with another session's, and changes nothing", async () => {
    const c = await signedIn(h.app, t.rootKey);
    const other = await signedIn(h.app, t.rootKey);
    const before = (await sessionsOf(h))[0]!.n;
    for (const csrf of ["", other.csrf, `${c.csrf}x`]) {
      const res = await c.post("/console/sign-out", { _csrf: csrf });
      expect(res.status).toBe(403);
      expect(textOf(res.html)).toContain("security token is missing or out of date");
    }
    expect((await sessionsOf(h))[0]!.n).toBe(before);
    expect((await c.get("/console/")).status).toBe(200);
  });

  it("refuses a POST from a foreign Origin, a null one, or none, even with the right token", async () => {
    const c = await signedIn(h.app, t.rootKey);
    for (const origin of ["http://evil.example", "null", `https://${CONSOLE_HOST}`]) {
      const res = await c.post("/console/sign-out", {}, { origin });
      expect(res.status, origin).toBe(403);
      expect(textOf(res.html)).toContain("sent from another site");
    }
    expect((await c.post("/console/sign-out", {}, { origin: "" })).status).toBe(403);
    // A Referer of the console's own origin stands in for a missing Origin.
    expect((await c.post("/console/sign-out", {}, { origin: "", referer: `http://${CONSOLE_HOST}/console/` })).status).toBe(303);
  });

  it("refuses a sign-in from a foreign Origin (login CSRF)", async () => {
    const res = await consoleClient(h.app).post("/console/sign-in", { secret: t.rootKey }, { origin: "http://evil.example" });
    expect(res.status).toBe(403);
  });

  it("sends the strict CSP, no-store and anti-framing headers on pages and error pages", async () => {
    const c = await signedIn(h.app, t.rootKey);
    for (const path of ["/console/", "/console/apis/../", "/console/no-such-page"]) {
      const res = await c.get(path);
      expect(res.headers["content-security-policy"], path).toBe(CONSOLE_CSP);
      expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
      expect(CONSOLE_CSP).toContain("script-src 'self'");
      expect(CONSOLE_CSP).not.toContain("unsafe-inline");
      expect(res.headers["cache-control"], path).toBe("no-store");
      expect(res.headers["x-frame-options"]).toBe("DENY");
      expect(res.headers["x-content-type-options"]).toBe("nosniff");
      expect(res.headers["content-type"]).toBe("text/html; charset=utf-8");
    }
    expect((await c.get("/console/no-such-page")).status).toBe(404);
  });

  it("writes no inline script or style attribute in any page it serves", async () => {
    const c = await signedIn(h.app, t.rootKey);
    for (const path of ["/console/", "/console/sign-in", "/console/no-such-page"]) {
      const { html } = await c.get(path);
      for (const script of html.match(/<script\b[^>]*>[\s\S]*?<\/script>/g) ?? []) {
        expect(script, path).toMatch(/^<script src="\/console\/assets\/[0-9a-f]{16}\/[a-z.]+" defer><\/script>$/);
      }
      expect(html, path).not.toMatch(/\sstyle=|\son[a-z]+=|<style/i);
    }
  });

  it("serves assets from their npm packages under a digest, cached for good; another digest is a 404", async () => {
    const c = await signedIn(h.app, t.rootKey);
    const { html } = await c.get("/console/");
    const urls = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(urls.length).toBe(5);
    for (const url of urls) {
      const res = await h.app.inject({ url });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
      expect(res.headers["content-type"]).toMatch(/^text\/(javascript|css); charset=utf-8$/);
    }
    const wrong = urls[0]!.replace(/\/assets\/[0-9a-f]{16}\//, "/assets/0000000000000000/");
    expect((await h.app.inject({ url: wrong })).statusCode).toBe(404);
  });

  it("escapes what it echoes: a `next` holding markup stays an attribute value and is never followed off the console", async () => {
    const evil = `"><script>alert(1)</script>`;
    const page = await consoleClient(h.app).get(`/console/sign-in?next=${encodeURIComponent(evil)}`);
    expect(page.status).toBe(200);
    expect(page.html).not.toContain("<script>alert(1)</script>");
    expect(page.html).toContain("&lt;script>alert(1)&lt;/script>");
    for (const next of ["https://evil.example/", "//evil.example/", "/console//evil.example", "/v2/apis.createApi"]) {
      const res = await consoleClient(h.app).post("/console/sign-in", { secret: t.rootKey, next });
      expect(res.location, next).toBe("/console/");
    }
    const res = await consoleClient(h.app).post("/console/sign-in", { secret: t.rootKey, next: "/console/apis?x=1" });
    expect(res.location).toBe("/console/apis?x=1");
  });

  it("ends a session after its idle time, and at its absolute end however busy", async () => {
    const c = await signedIn(h.app, t.rootKey);
    clock.advance(29 * 60_000);
    expect((await c.get("/console/")).status).toBe(200);
    clock.advance(29 * 60_000);
    expect((await c.get("/console/")).status).toBe(200);
    clock.advance(31 * 60_000);
    expect((await c.get("/console/")).status).toBe(303);

    const busy = await signedIn(h.app, t.rootKey);
    for (let hour = 0; hour < 12 * 4 - 1; hour++) {
      clock.advance(15 * 60_000);
      expect((await busy.get("/console/")).status, `after ${(hour + 1) * 15} min`).toBe(200);
    }
    clock.advance(15 * 60_000);
    expect((await busy.get("/console/")).status).toBe(303);
  });

  it("ends a root key's sessions when the root key is revoked or its workspace disabled", async () => {
    const w = await h.tenant();
    const doomed = await signedIn(h.app, w.rootKey);
    const res = await h.post("/v1/rootKeys.deleteRootKey", { keyId: w.rootKeyId }, undefined, { authorization: `Bearer ${ADMIN_TOKEN}` });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await doomed.get("/console/")).status).toBe(303);

    const v = await h.tenant();
    const c = await signedIn(h.app, v.rootKey);
    const off = await h.post("/v1/workspaces.updateWorkspace", { workspaceId: v.workspaceId, enabled: false }, undefined, {
      authorization: `Bearer ${ADMIN_TOKEN}`,
    });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    expect((await c.get("/console/")).status).toBe(303);
    const again = await consoleClient(h.app).post("/console/sign-in", { secret: v.rootKey });
    expect(again.status).toBe(403);
    expect(textOf(again.html)).toContain("workspace is disabled");
  });

  it("records sign-in and sign-out in the audit log with the root key as actor", async () => {
    const w = await h.tenant();
    const c = await signedIn(h.app, w.rootKey);
    await c.post("/console/sign-out");
    const rows = await h.sql<{ event: string; actor_kind: string; actor_id: string; surface: string }>(
      `select event, actor_kind, actor_id, surface from audit_log where workspace_id = '${w.workspaceId}' order by event`,
    );
    expect(rows, JSON.stringify(rows)).toEqual([
      { event: "console.sign_in", actor_kind: "root_key", actor_id: w.rootKeyId, surface: "console" },
      { event: "console.sign_out", actor_kind: "root_key", actor_id: w.rootKeyId, surface: "console" },
    ]);
    expect(JSON.stringify(await h.sql("select * from audit_log"))).not.toContain(w.rootKey);
  });

  it("refuses a wrong secret plainly, and an address after too many failures, even with the right secret", async () => {
    const address = { "x-forwarded-for": "203.0.113.9" };
    const p = await createHarness({ KEYHAVEN_TRUST_PROXY: "on" });
    try {
      const pt = await p.tenant();
      for (let i = 0; i < MAX_FAILED_SIGN_INS; i++) {
        const res = await consoleClient(p.app).post("/console/sign-in", { secret: `wrong-secret-${i}-0123456789` }, address);
        expect(res.status).toBe(401);
        expect(textOf(res.html)).toContain("neither a root key of this store nor the operator token");
        expect(res.html).not.toContain(`wrong-secret-${i}`);
      }
      const blocked = await consoleClient(p.app).post("/console/sign-in", { secret: pt.rootKey }, address);
      expect(blocked.status).toBe(429);
      expect(textOf(blocked.html)).toContain("Too many failed sign-ins");
      const elsewhere = await consoleClient(p.app).post("/console/sign-in", { secret: pt.rootKey }, { "x-forwarded-for": "203.0.113.10" });
      expect(elsewhere.status).toBe(303);
    } finally {
      await p.close();
    }
  });

  it("ends operator sessions when the operator token changes", async () => {
    const op = await signedIn(h.app, ADMIN_TOKEN);
    expect((await op.get("/console/")).location).toBe("/console/operator/workspaces");
    const other = await createHarness({ KEYHAVEN_ADMIN_TOKEN: "another-admin-token-0123456789" });
    try {
      const c = consoleClient(other.app);
      await c.post("/console/sign-in", { secret: "another-admin-token-0123456789" });
      const stolen = c.cookie!;
      // The same session row under a changed token (as after a restart with a new KEYHAVEN_ADMIN_TOKEN): dead.
      const [row] = await other.sql<Record<string, unknown>>("select * from console_sessions");
      await h.sql(
        `insert into console_sessions values ('${row!.id_hash}', 'operator', null, null, null, '${row!.operator_check}', ${clock.now()}, ${clock.now()}, ${clock.now() + 3_600_000})`,
      );
      const replay = consoleClient(h.app);
      replay.cookie = stolen;
      expect((await replay.get("/console/")).location).toBe("/console/sign-in?next=%2Fconsole%2F");
    } finally {
      await other.close();
    }
  });

  it("answers a non-form body 415 and an oversized form 413, as pages, and changes nothing", async () => {
    const c = await signedIn(h.app, t.rootKey);
    const json = await h.app.inject({
      method: "POST",
      url: "/console/sign-out",
      headers: {
        host: CONSOLE_HOST,
        origin: `http://${CONSOLE_HOST}`,
        cookie: `keyhaven_session=${c.cookie}`,
        "content-type": "application/json",
      },
      payload: "{}",
    });
    expect(json.statusCode).toBe(415);
    expect(json.headers["content-type"]).toBe("text/html; charset=utf-8");
    const big = await c.post("/console/sign-out", { filler: "x".repeat(300 * 1024) });
    expect(big.status).toBe(413);
    expect((await c.get("/console/")).status).toBe(200);
  });

  it("serves no console with KEYHAVEN_CONSOLE=off", async () => {
    const off = await createHarness({ KEYHAVEN_CONSOLE: "off" });
    try {
      const res = await off.app.inject({ url: "/console/sign-in" });
      expect(res.statusCode).toBe(404);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
    } finally {
      await off.close();
    }
  });
});
