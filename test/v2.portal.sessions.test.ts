import { describe, expect } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { auditEntries } from "./audit-entries.js";
import { countIn, harnessWith, testWith } from "./fixtures.js";
import { ADMIN_TOKEN, type Harness, type Tenant } from "./helper.js";
import { ALL_SCOPES, codeOf, cookieOf, exchange, liveSession, makePortal, mint, uniqueExternalId, v2Key } from "./portal-helpers.js";
import { expectV2Error } from "./v2-errors.js";

// The customer portal's sessions (issue 39) as upstream's tests have them (svc/api/routes/v2_portal_create_session,
// v2_portal_exchange_code; research §8): minting with its two-stage permission check, the exchange of the code, and
// what ends a session. The upstream assertions are kept; where keyhaven differs it says so.

const PUBLIC_URL = "https://keys.example.com";
const it = testWith(harnessWith({ KEYHAVEN_PUBLIC_URL: PUBLIC_URL }));

const MINT = "portal.*.create_portal_session";
const READ = ["api.*.read_key", "api.*.read_api"];
const NOT_FOUND = "Portal not found.";
const CODE_INVALID = "Session is invalid, expired, or has already been used.";
const SESSION_INVALID = "The portal session is invalid or has expired.";

type SessionRow = {
  id: string;
  workspace_id: string;
  portal_id: string;
  external_id: string;
  scopes: string[];
  api_ids: string[];
  preview: boolean;
  return_url: string | null;
  code_hash: string;
  token_hash: string | null;
  token_expires_at_m: string | null;
};
const sessionWhere = (h: Harness, where: string) => h.sql<SessionRow>(`select * from portal_sessions where ${where}`);
const sessionsOf = (h: Harness, t: Tenant) => countIn(h, `portal_sessions where workspace_id = '${t.workspaceId}'`);

describe("portal.createSession", () => {
  it("mints a session: a ps_ id, and a URL of the portal page with a pst_ code that does not carry the id", async ({ h }) => {
    const t = await h.tenant();
    const { slug } = await makePortal(h, t);
    const rootKey = await h.rootKey(t.workspaceId, [MINT, ...READ]);
    const res = await mint(h, rootKey, { portal: slug, externalId: "user_123", scopes: ["keys:read"] });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      meta: { requestId: expect.stringMatching(/^req_/) },
      data: {
        id: expect.stringMatching(/^ps_/),
        url: expect.stringMatching(/^https:\/\/keys\.example\.com\/portal\/\?code=pst_[A-Za-z0-9]{24}$/),
      },
    });
    expect(res.body.data.url).not.toContain(res.body.data.id);
    expect(res.headers["cache-control"]).toBe("no-store");
    expect(res.headers.pragma).toBe("no-cache");
  });

  it("resolves the portal by id as well as by slug", async ({ h }) => {
    const t = await h.tenant();
    const { portalId } = await makePortal(h, t);
    const res = await mint(h, t.rootKey, { portal: portalId, externalId: "user_123", scopes: ["keys:read"] });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [row] = await sessionWhere(h, `id = '${res.body.data.id}'`);
    expect(row!.portal_id).toBe(portalId);
  });

  it("stores preview, the externalId and the portal, with no access token yet", async ({ h }) => {
    const t = await h.tenant();
    const { slug, portalId, apiId } = await makePortal(h, t);
    const res = await mint(h, t.rootKey, { portal: slug, externalId: "user_preview", scopes: ["keys:read"], preview: true });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [row] = await sessionWhere(h, `code_hash = '${hashKey(codeOf(res.body.data.url))}'`);
    expect(row).toMatchObject({
      id: res.body.data.id,
      workspace_id: t.workspaceId,
      portal_id: portalId,
      external_id: "user_preview",
      preview: true,
      scopes: ["keys:read"],
      api_ids: [apiId],
      token_hash: null,
    });
  });

  it("stores the exchange code only as its hash: a lookup by the plaintext finds nothing", async ({ h }) => {
    const t = await h.tenant();
    const { slug } = await makePortal(h, t);
    const res = await mint(h, t.rootKey, { portal: slug, externalId: "user_hash", scopes: ["keys:read"] });
    const code = codeOf(res.body.data.url);
    expect(await countIn(h, `portal_sessions where code_hash = '${code}'`)).toBe(0);
    expect(await countIn(h, `portal_sessions where code_hash = '${hashKey(code)}'`)).toBe(1);
    const dump = await h.sql<{ row: string }>(`select row_to_json(s)::text as row from portal_sessions s`);
    expect(dump.some((r) => r.row.includes(code))).toBe(false);
  });

  it("mints a new session on every call, also for the same externalId", async ({ h }) => {
    const t = await h.tenant();
    const { slug } = await makePortal(h, t);
    const body = { portal: slug, externalId: "user_same", scopes: ["keys:read"] };
    const [a, b] = [await mint(h, t.rootKey, body), await mint(h, t.rootKey, body)];
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.body.data.id).not.toBe(b.body.data.id);
    expect(a.body.data.url).not.toBe(b.body.data.url);
    expect(await countIn(h, `portal_sessions where external_id = 'user_same' and workspace_id = '${t.workspaceId}'`)).toBe(2);
  });

  it("records one audit entry targeting the session, with the scopes, keyspaceIds, slug and portalId", async ({ h }) => {
    const t = await h.tenant();
    const { apiId, portalId } = await makePortal(h, t, undefined, { slug: "audit-portal" });
    const scopes = ["keys:read", "keys:reroll", "analytics:read"];
    const res = await mint(h, t.rootKey, { portal: "audit-portal", externalId: "user_audit", scopes });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const entries = (await auditEntries(h, { workspaceId: t.workspaceId })).filter((e) =>
      e.targets.some((target) => target.id === res.body.data.id),
    );
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      event: "portal.create_session",
      actorKind: "root_key",
      actorId: t.rootKeyId,
      description: "created portal session for user_audit",
      details: { portalId, slug: "audit-portal", scopes, keyspaceIds: [apiId], preview: false },
    });
    expect(JSON.stringify(entries[0])).not.toContain(codeOf(res.body.data.url));
  });

  it("keeps a returnUrl of the session's, and takes an empty one as none", async ({ h }) => {
    const t = await h.tenant();
    const { slug } = await makePortal(h, t);
    const a = await mint(h, t.rootKey, { portal: slug, externalId: "u", scopes: ["keys:read"], returnUrl: "https://app.example.com/back" });
    const b = await mint(h, t.rootKey, { portal: slug, externalId: "u", scopes: ["keys:read"], returnUrl: "" });
    expect([a.status, b.status]).toEqual([200, 200]);
    expect((await sessionWhere(h, `id = '${a.body.data.id}'`))[0]!.return_url).toBe("https://app.example.com/back");
    expect((await sessionWhere(h, `id = '${b.body.data.id}'`))[0]!.return_url).toBeNull();
  });

  describe("400: the body as upstream's schema refuses it", () => {
    const valid = { portal: "test-portal", externalId: "user_123", scopes: ["keys:read"] };
    const cases: [string, Record<string, unknown>][] = [
      ["missing externalId", { portal: "test-portal", scopes: ["keys:read"] }],
      ["empty externalId", { ...valid, externalId: "" }],
      ["missing portal", { externalId: "user_123", scopes: ["keys:read"] }],
      ["empty portal", { ...valid, portal: "" }],
      ["missing scopes", { portal: "test-portal", externalId: "user_123" }],
      ["empty scopes", { ...valid, scopes: [] }],
      ["a portal under 3 characters", { ...valid, portal: "ab" }],
      ["an unknown scope", { ...valid, scopes: ["keys:destroy"] }],
      ["a legacy rbac tuple as a scope", { ...valid, scopes: ["api.*.read_key"] }],
      ["valid and invalid scopes mixed", { ...valid, scopes: ["keys:read", "keys:destroy"] }],
      ["an externalId over 256 characters", { ...valid, externalId: "x".repeat(257) }],
      ["an unknown field", { ...valid, permissions: ["api.*.read_key"] }],
      ["a returnUrl that is no http(s) URL", { ...valid, returnUrl: "javascript:alert(1)" }],
    ];
    for (const [name, body] of cases) {
      it(name, async ({ h, t }) => {
        expectV2Error(await mint(h, t.rootKey, body), 400, "unkey/application/invalid_input");
      });
    }

    it("accepts an id-shaped identifier, and a well-formed unknown slug is a 404", async ({ h }) => {
      const t = await h.tenant();
      const { portalId } = await makePortal(h, t);
      expect((await mint(h, t.rootKey, { ...valid, portal: portalId })).status).toBe(200);
      expectV2Error(await mint(h, t.rootKey, { ...valid, portal: "no-such-portal" }), 404, "unkey/data/portal_not_found", NOT_FOUND);
    });
  });

  describe("401 / 400: the root key", () => {
    it("refuses an invalid bearer token (401) and a missing Authorization header (400)", async ({ h, t }) => {
      const { slug } = await makePortal(h, t);
      const body = { portal: slug, externalId: "user_123", scopes: ["keys:read"] };
      expectV2Error(await mint(h, "invalid_token_0123456789", body), 401, "unkey/authentication/key_not_found");
      expectV2Error(await h.post("/v2/portal.createSession", body), 400, "unkey/application/invalid_input");
    });

    it("is not minted by a portal session's cookie", async ({ h, t }) => {
      const { slug } = await makePortal(h, t);
      const session = await liveSession(h, t.rootKey, slug, "user_cookie");
      const res = await h.post(
        "/v2/portal.createSession",
        { portal: slug, externalId: "x", scopes: ["keys:read"] },
        undefined,
        cookieOf(session.token),
      );
      expectV2Error(res, 400, "unkey/application/invalid_input", "Authorization header for 'bearer' scheme");
    });
  });

  describe("stage 1: create_portal_session on the portal, else a masked 404", () => {
    // Upstream's TestCreateSessionAuthorizationMatrix (scope keys:read; the passing cases also hold read_key and read_api).
    const matrix: [string, (portalId: string, apiId: string) => string[], number][] = [
      ["no permissions", () => [], 404],
      ["wildcard portal permission", () => [MINT, ...READ], 200],
      ["specific portal permission", (p) => [`portal.${p}.create_portal_session`, ...READ], 200],
      ["permission and more", (p) => [`portal.${p}.create_portal_session`, "api.*.create_key", "identity.*.read_identity", ...READ], 200],
      ["another portal's grant", () => ["portal.pc_another.create_portal_session", ...READ], 404],
      ["read portal does not grant minting", () => ["portal.*.read_portal", ...READ], 404],
      ["update portal does not grant minting", () => ["portal.*.update_portal", ...READ], 404],
      ["create portal does not grant minting", () => ["portal.*.create_portal", ...READ], 404],
      ["delete portal does not grant minting", () => ["portal.*.delete_portal", ...READ], 404],
      ["unrelated api permission", () => ["api.*.create_api", ...READ], 404],
      ["key permissions alone", (_, a) => [`api.${a}.read_key`, `api.${a}.read_api`, `api.${a}.create_key`], 404],
    ];
    for (const [name, grants, status] of matrix) {
      it(`${name}: ${status}`, async ({ h, t }) => {
        const { slug, portalId, apiId } = await makePortal(h, t);
        const rootKey = await h.rootKey(t.workspaceId, grants(portalId, apiId));
        const res = await mint(h, rootKey, { portal: slug, externalId: "user_matrix", scopes: ["keys:read"] });
        if (status === 200) {
          expect(res.status, JSON.stringify(res.body)).toBe(200);
          return;
        }
        expectV2Error(res, 404, "unkey/data/portal_not_found", NOT_FOUND);
        const text = JSON.stringify(res.body);
        expect(text).not.toContain(portalId);
        expect(text).not.toContain("create_portal_session");
      });
    }

    it("an id-scoped grant matches the portal named by its slug and by its id", async ({ h, t }) => {
      const { slug, portalId } = await makePortal(h, t);
      const rootKey = await h.rootKey(t.workspaceId, [`portal.${portalId}.create_portal_session`, ...READ]);
      for (const portal of [slug, portalId]) {
        const res = await mint(h, rootKey, { portal, externalId: "user_scoped", scopes: ["keys:read"] });
        expect(res.status, `${portal}: ${JSON.stringify(res.body)}`).toBe(200);
      }
    });

    it("refuses URN grants at stage 1 (404) and at stage 2 (403)", async ({ h }) => {
      const t = await h.tenant();
      const { slug, portalId } = await makePortal(h, t);
      const ws = t.workspaceId;
      const body = { portal: slug, externalId: "user_urn", scopes: ["keys:read"] };
      for (const grants of [[`unkey:v1:${ws}:**#*`], [`unkey:v1:${ws}:portals/*#create_portal_session`, ...READ]]) {
        const res = await mint(h, await h.rootKey(ws, grants), body);
        expectV2Error(res, 404, "unkey/data/portal_not_found", NOT_FOUND);
        expect(JSON.stringify(res.body)).not.toContain(portalId);
      }
      const urnScope = await h.rootKey(ws, [MINT, `unkey:v1:${ws}:keyspaces/*/keys/*#read_key`, `unkey:v1:${ws}:keyspaces/*#read_api`]);
      expectV2Error(await mint(h, urnScope, body), 403, "unkey/authorization/insufficient_permissions");
      expect(await sessionsOf(h, t)).toBe(0);
    });
  });

  describe("stage 2: every scope within the root key's own permissions on the portal's API", () => {
    // Upstream's TestCreateSessionScopeEscalation (mint = portal.*.create_portal_session).
    const matrix: [string, string[], (apiId: string) => string[], boolean, number][] = [
      ["reroll without create_key", ["keys:reroll"], () => [], false, 403],
      ["read without key permissions", ["keys:read"], () => [], false, 403],
      ["analytics without read_analytics", ["analytics:read"], () => [], false, 403],
      ["create without create_key", ["keys:create"], () => [], false, 403],
      ["read with read_key and read_api", ["keys:read"], () => READ, false, 200],
      ["read with read_key but not read_api", ["keys:read"], () => ["api.*.read_key"], false, 403],
      ["read with read_api but not read_key", ["keys:read"], () => ["api.*.read_api"], false, 403],
      ["reroll with create_key", ["keys:reroll"], () => ["api.*.create_key"], false, 200],
      ["reroll with update_key only", ["keys:reroll"], () => ["api.*.update_key"], false, 403],
      ["api-scoped grants satisfy the check", ["keys:read"], (a) => [`api.${a}.read_key`, `api.${a}.read_api`], false, 200],
      ["grants of another API do not", ["keys:read"], () => ["api.api_other.read_key", "api.api_other.read_api"], false, 403],
      ["analytics with api-scoped read_analytics", ["analytics:read"], (a) => [`api.${a}.read_analytics`], false, 200],
      ["analytics with wildcard read_analytics", ["analytics:read"], () => ["api.*.read_analytics"], false, 200],
      ["read granted but reroll not", ["keys:read", "keys:reroll"], () => READ, false, 403],
      [
        "all requested scopes granted",
        ["keys:read", "keys:reroll", "keys:create", "analytics:read"],
        () => [...READ, "api.*.create_key", "api.*.read_analytics"],
        false,
        200,
      ],
      ["reroll on an unencrypted keyspace needs only create_key", ["keys:reroll"], () => ["api.*.create_key"], false, 200],
      ["reroll on an encrypted keyspace without encrypt_key", ["keys:reroll"], () => ["api.*.create_key"], true, 403],
      ["reroll on an encrypted keyspace with encrypt_key", ["keys:reroll"], () => ["api.*.create_key", "api.*.encrypt_key"], true, 200],
      ["create on an encrypted keyspace without encrypt_key", ["keys:create"], () => ["api.*.create_key"], true, 403],
    ];
    for (const [name, scopes, grants, encrypted, status] of matrix) {
      it(`${name}: ${status}`, async ({ h, t }) => {
        const apiId = await h.createApi(t, encrypted ? { storeEncryptedKeys: true } : {});
        const { slug } = await makePortal(h, t, apiId);
        const rootKey = await h.rootKey(t.workspaceId, [MINT, ...grants(apiId)]);
        const res = await mint(h, rootKey, { portal: slug, externalId: "user_scope", scopes });
        if (status === 200) expect(res.status, JSON.stringify(res.body)).toBe(200);
        else
          expectV2Error(
            res,
            403,
            "unkey/authorization/insufficient_permissions",
            /^You do not have permission to grant the "[a-z:]+" scope to a portal session\.$/,
          );
      });
    }

    it("names the first scope refused, in request order", async ({ h, t }) => {
      const { slug } = await makePortal(h, t);
      const rootKey = await h.rootKey(t.workspaceId, [MINT, ...READ]);
      const res = await mint(h, rootKey, { portal: slug, externalId: "u", scopes: ["keys:read", "analytics:read", "keys:reroll"] });
      expectV2Error(
        res,
        403,
        "unkey/authorization/insufficient_permissions",
        'You do not have permission to grant the "analytics:read" scope to a portal session.',
      );
    });

    it("writes nothing when it refuses: no session and no audit entry", async ({ h }) => {
      const t = await h.tenant();
      const { slug } = await makePortal(h, t);
      const externalId = uniqueExternalId("rejected");
      const rootKey = await h.rootKey(t.workspaceId, [MINT, ...READ]);
      const before = (await auditEntries(h, { workspaceId: t.workspaceId })).length;
      expectV2Error(
        await mint(h, rootKey, { portal: slug, externalId, scopes: ["keys:read", "keys:reroll"] }),
        403,
        "unkey/authorization/insufficient_permissions",
      );
      expectV2Error(
        await mint(h, await h.rootKey(t.workspaceId, []), { portal: slug, externalId, scopes: ["keys:read"] }),
        404,
        "unkey/data/portal_not_found",
      );
      expect(await sessionsOf(h, t)).toBe(0);
      const entries = await auditEntries(h, { workspaceId: t.workspaceId });
      expect(entries).toHaveLength(before);
      expect(entries.filter((e) => JSON.stringify(e).includes(externalId))).toEqual([]);
    });
  });

  it("403 Portal is disabled. for a caller holding everything, after stage 1", async ({ h }) => {
    const t = await h.tenant();
    const { slug, portalId } = await makePortal(h, t);
    expect((await h.post("/v2/keyhaven.updatePortal", { portalId, enabled: false }, t.rootKey)).status).toBe(200);
    const body = { portal: slug, externalId: "user_disabled", scopes: ["keys:read"] };
    expectV2Error(await mint(h, t.rootKey, body), 403, "unkey/authorization/forbidden", "Portal is disabled.");
    // Without the permission to mint, the portal stays hidden (stage 1 comes first).
    expectV2Error(await mint(h, await h.rootKey(t.workspaceId, READ), body), 404, "unkey/data/portal_not_found", NOT_FOUND);
    expect(await sessionsOf(h, t)).toBe(0);
  });

  it("404 for an unknown portal, and for another workspace's, without leaking what was asked", async ({ h }) => {
    const t = await h.tenant();
    const other = await h.tenant();
    const theirs = await makePortal(h, other);
    const unknown = await mint(h, t.rootKey, { portal: "pc_nonexistent_portal", externalId: "user_secret_ext", scopes: ["keys:read"] });
    expectV2Error(unknown, 404, "unkey/data/portal_not_found", NOT_FOUND);
    expect(JSON.stringify(unknown.body)).not.toContain("pc_nonexistent_portal");
    expect(JSON.stringify(unknown.body)).not.toContain("user_secret_ext");
    for (const portal of [theirs.portalId, theirs.slug]) {
      const res = await mint(h, t.rootKey, { portal, externalId: "user_123", scopes: ["keys:read"] });
      expectV2Error(res, 404, "unkey/data/portal_not_found", NOT_FOUND);
      expect(JSON.stringify(res.body)).not.toContain(theirs.portalId);
      expect(JSON.stringify(res.body)).not.toContain(other.workspaceId);
    }
    expect(await sessionsOf(h, other)).toBe(0);
  });

  it("404 for a portal whose API was deleted", async ({ h }) => {
    const t = await h.tenant();
    const { slug, apiId } = await makePortal(h, t);
    expect((await h.post("/v2/apis.deleteApi", { apiId }, t.rootKey)).status).toBe(200);
    expectV2Error(
      await mint(h, t.rootKey, { portal: slug, externalId: "u", scopes: ["keys:read"] }),
      404,
      "unkey/data/portal_not_found",
      NOT_FOUND,
    );
  });
});

describe("portal.exchangeCode", () => {
  it("exchanges a code for a pat_ token valid 24 hours; the row holds only the token's hash", async ({ h, t }) => {
    const { slug } = await makePortal(h, t);
    const minted = await mint(h, t.rootKey, { portal: slug, externalId: "user_exchange", scopes: ["keys:read"] });
    const before = Date.now();
    const res = await exchange(h, codeOf(minted.body.data.url));
    const after = Date.now();
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      meta: { requestId: expect.stringMatching(/^req_/) },
      data: { accessToken: expect.stringMatching(/^pat_[A-Za-z0-9]{24}$/), expiresAt: expect.any(Number) },
    });
    const { accessToken, expiresAt } = res.body.data;
    expect(expiresAt).toBeGreaterThanOrEqual(before + 24 * 3_600_000);
    expect(expiresAt).toBeLessThanOrEqual(after + 24 * 3_600_000);
    expect(res.headers["cache-control"]).toBe("no-store");
    expect(res.headers.pragma).toBe("no-cache");
    const [row] = await sessionWhere(h, `id = '${minted.body.data.id}'`);
    expect(row!.token_hash).toBe(hashKey(accessToken));
    expect(Number(row!.token_expires_at_m)).toBe(expiresAt);
    expect(await countIn(h, `portal_sessions where token_hash = '${accessToken}'`)).toBe(0);
    const dump = await h.sql<{ row: string }>(`select row_to_json(s)::text as row from portal_sessions s`);
    expect(dump.some((r) => r.row.includes(accessToken))).toBe(false);
    // One audit entry, by the session itself, holding neither the code nor the token.
    const [entry, ...more] = await auditEntries(h, { event: "portal.exchange_code" }).then((all) =>
      all.filter((e) => e.actorId === minted.body.data.id),
    );
    expect(more).toEqual([]);
    expect(entry).toMatchObject({ actorKind: "portal_session", workspaceId: t.workspaceId, targets: [{ id: minted.body.data.id }] });
    expect(JSON.stringify(entry)).not.toContain(accessToken);
    expect(JSON.stringify(entry)).not.toContain(codeOf(minted.body.data.url));
  });

  it("is single use: the second exchange of a code is a 401", async ({ h, t }) => {
    const { slug } = await makePortal(h, t);
    const minted = await mint(h, t.rootKey, { portal: slug, externalId: "user_once", scopes: ["keys:read"] });
    const code = codeOf(minted.body.data.url);
    expect((await exchange(h, code)).status).toBe(200);
    const again = await exchange(h, code);
    expectV2Error(again, 401, "unkey/authentication/portal_session_not_found", CODE_INVALID);
    expect(JSON.stringify(again.body)).not.toContain(code);
  });

  it("lets exactly one of 4 concurrent exchanges win; the others are 401, never a 5xx", async ({ h, t }) => {
    const { slug } = await makePortal(h, t);
    const minted = await mint(h, t.rootKey, { portal: slug, externalId: "user_race", scopes: ["keys:read"] });
    const code = codeOf(minted.body.data.url);
    const answers = await Promise.all(Array.from({ length: 4 }, () => exchange(h, code)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 401, 401, 401]);
    for (const a of answers.filter((a) => a.status === 401)) {
      expectV2Error(a, 401, "unkey/authentication/portal_session_not_found", CODE_INVALID);
    }
    const winner = answers.find((a) => a.status === 200)!;
    const [row] = await sessionWhere(h, `id = '${minted.body.data.id}'`);
    expect(row!.token_hash).toBe(hashKey(winner.body.data.accessToken));
    expect((await auditEntries(h, { event: "portal.exchange_code" })).filter((e) => e.actorId === minted.body.data.id)).toHaveLength(1);
  });

  it("refuses an unknown, an expired and a redeemed code alike (401), the body without the code", async ({ h, t }) => {
    const { slug } = await makePortal(h, t);
    const unknown = await exchange(h, "nonexistent_code");
    expectV2Error(unknown, 401, "unkey/authentication/portal_session_not_found", CODE_INVALID);
    expect(JSON.stringify(unknown.body)).not.toContain("nonexistent_code");

    const expired = await mint(h, t.rootKey, { portal: slug, externalId: "user_expired", scopes: ["keys:read"] });
    await h.sql(`update portal_sessions set code_expires_at_m = ${Date.now() - 3_600_000} where id = '${expired.body.data.id}'`);
    const expiredCode = codeOf(expired.body.data.url);
    const late = await exchange(h, expiredCode);
    expectV2Error(late, 401, "unkey/authentication/portal_session_not_found", CODE_INVALID);
    expect(JSON.stringify(late.body)).not.toContain(expiredCode);
    expect((await sessionWhere(h, `id = '${expired.body.data.id}'`))[0]!.token_hash).toBeNull();

    const redeemed = await mint(h, t.rootKey, { portal: slug, externalId: "user_redeemed", scopes: ["keys:read"] });
    const redeemedCode = codeOf(redeemed.body.data.url);
    expect((await exchange(h, redeemedCode)).status).toBe(200);
    const reused = await exchange(h, redeemedCode);
    expectV2Error(reused, 401, "unkey/authentication/portal_session_not_found", CODE_INVALID);
    expect(JSON.stringify(reused.body)).not.toContain(redeemedCode);
  });

  it("refuses an empty code (400), and needs no credentials: a root key changes nothing", async ({ h, t }) => {
    expectV2Error(await exchange(h, ""), 400, "unkey/application/invalid_input");
    expectV2Error(await h.post("/v2/portal.exchangeCode", {}), 400, "unkey/application/invalid_input");
    const { slug } = await makePortal(h, t);
    const minted = await mint(h, t.rootKey, { portal: slug, externalId: "user_bearer", scopes: ["keys:read"] });
    const res = await h.post("/v2/portal.exchangeCode", { code: codeOf(minted.body.data.url) }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });
});

describe("portal session authentication", () => {
  it("the cookie authenticates no root-key route, and a root key no portal route", async ({ h }) => {
    const t = await h.tenant();
    const { slug, apiId } = await makePortal(h, t);
    await v2Key(h, t, apiId, { externalId: "user_cross" });
    const session = await liveSession(h, t.rootKey, slug, "user_cross");
    // Upstream's TestProtectedRouteRejectsPortalSession: the cookie without Authorization on apis.listKeys.
    const listed = await h.post("/v2/apis.listKeys", { apiId }, undefined, cookieOf(session.token));
    expectV2Error(listed, 400, "unkey/application/invalid_input", "Authorization header for 'bearer' scheme");
    // TestRootKeyUnaffectedByPortalScoping: the root key still lists all of the API's keys.
    await v2Key(h, t, apiId);
    const all = await h.post("/v2/apis.listKeys", { apiId }, t.rootKey);
    expect(all.body.data).toHaveLength(2);
    // A root key (valid, holding `*`) on the portal routes: refused, with or without the cookie.
    for (const path of ["/v2/portal.listKeys", "/v2/portal.rerollKey", "/v2/portal.getVerifications"]) {
      const body = path.endsWith("rerollKey")
        ? { keyId: "key_missing", expiration: 0 }
        : path.endsWith("getVerifications")
          ? { startTime: 0, endTime: 60_000 }
          : {};
      for (const headers of [{}, cookieOf(session.token)]) {
        const res = await h.post(path, body, t.rootKey, headers);
        expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(400);
        expect(JSON.stringify(res.body)).not.toContain("pat_");
      }
      expectV2Error(await h.post(path, body), 400, "unkey/application/invalid_input", "API Key portal_session not found in cookies");
      expectV2Error(await h.post(path, body, undefined, { cookie: "portal_session=" }), 400, "unkey/authentication/portal_token_missing");
      expectV2Error(
        await h.post(path, body, undefined, cookieOf("pat_unknown")),
        401,
        "unkey/authentication/portal_session_not_found",
        SESSION_INVALID,
      );
    }
    // The session itself still works beside another cookie.
    const res = await h.post("/v2/portal.listKeys", {}, undefined, { cookie: `theme=dark; portal_session=${session.token}` });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });

  it("a minted session does nothing until its code is exchanged (the code is no token)", async ({ h, t }) => {
    const { slug } = await makePortal(h, t);
    const minted = await mint(h, t.rootKey, { portal: slug, externalId: "user_pending", scopes: ALL_SCOPES });
    const res = await h.post("/v2/portal.listKeys", {}, undefined, cookieOf(codeOf(minted.body.data.url)));
    expectV2Error(res, 401, "unkey/authentication/portal_session_not_found", SESSION_INVALID);
  });
});

describe("what ends a session: its routes then answer 401", () => {
  /** A tenant of its own, a portal, a key of `externalId`'s and a live session that lists it. */
  async function working(h: Harness) {
    const t = await h.tenant();
    const portal = await makePortal(h, t);
    const externalId = uniqueExternalId();
    const key = await v2Key(h, t, portal.apiId, { externalId });
    const session = await liveSession(h, t.rootKey, portal.slug, externalId);
    const res = await session.post("/v2/portal.listKeys");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.map((k: { keyId: string }) => k.keyId)).toEqual([key.keyId]);
    return { t, ...portal, externalId, key, session };
  }
  const expectEnded = async (session: Awaited<ReturnType<typeof liveSession>>) => {
    for (const [path, body] of [
      ["/v2/portal.listKeys", {}],
      ["/v2/portal.rerollKey", { keyId: "key_missing", expiration: 0 }],
      ["/v2/portal.getVerifications", { startTime: Date.now() - 60_000, endTime: Date.now() }],
    ] as const) {
      const res = await session.post(path, body);
      expectV2Error(res, 401, "unkey/authentication/portal_session_not_found", SESSION_INVALID);
      expect(JSON.stringify(res.body)).not.toContain(session.id);
      expect(JSON.stringify(res.body)).not.toContain(session.token);
    }
  };

  it("deleting the root key that minted it", async ({ h }) => {
    const w = await working(h);
    const res = await h.post("/v1/rootKeys.deleteRootKey", { keyId: w.t.rootKeyId }, ADMIN_TOKEN);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await expectEnded(w.session);
  });

  it("deleting its end user's identity (v2 identities.deleteIdentity)", async ({ h }) => {
    const w = await working(h);
    const res = await h.post("/v2/identities.deleteIdentity", { identity: w.externalId }, w.t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await expectEnded(w.session);
  });

  it("deleting its portal", async ({ h }) => {
    const w = await working(h);
    expect((await h.post("/v2/keyhaven.deletePortal", { portalId: w.portalId }, w.t.rootKey)).status).toBe(200);
    await expectEnded(w.session);
  });

  it("disabling its portal", async ({ h }) => {
    const w = await working(h);
    expect((await h.post("/v2/keyhaven.updatePortal", { portalId: w.portalId, enabled: false }, w.t.rootKey)).status).toBe(200);
    await expectEnded(w.session);
  });

  it("deleting its API", async ({ h }) => {
    const w = await working(h);
    expect((await h.post("/v2/apis.deleteApi", { apiId: w.apiId }, w.t.rootKey)).status).toBe(200);
    await expectEnded(w.session);
  });

  it("disabling its workspace", async ({ h }) => {
    const w = await working(h);
    await h.disableWorkspace(w.t.workspaceId);
    await expectEnded(w.session);
  });

  it("none of these ends another workspace's session, nor another user's of the same portal", async ({ h }) => {
    const w = await working(h);
    const other = await working(h);
    const neighbour = await liveSession(h, w.t.rootKey, w.slug, uniqueExternalId("neighbour"));
    expect((await h.post("/v2/identities.deleteIdentity", { identity: w.externalId }, w.t.rootKey)).status).toBe(200);
    await expectEnded(w.session);
    expect((await neighbour.post("/v2/portal.listKeys")).status).toBe(200);
    expect((await other.session.post("/v2/portal.listKeys")).status).toBe(200);
  });
});
