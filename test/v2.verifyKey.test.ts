import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { ManualClock } from "../src/clock.js";
import { parseTextPermissionQuery } from "../src/core/auth/permissions.text.js";
import { harnessWith, testWith } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
import { countStatements } from "./recording-db.js";
import { expectV2Error } from "./v2-errors.js";

// v2's keys.verifyKey (contract §5, §14) over the one verification core v1's uses: a root key with verify_key, 200
// for every outcome of the key, v2's text permission query, credits that never overdraw, per-limit `ratelimits`, a
// 412 for a named limit that is not configured; keys of v1 verified through v2 and v1 seeing what v2 did.

const HOUR = 3_600_000;
// The app's clock stands still in the middle of an hour, ahead of the machine's: rate-limit windows (fixed, of a
// minute here) never turn during a test, and expiry is reached by moving the clock, never by waiting.
const clock = new ManualClock(Date.now() - (Date.now() % HOUR) + HOUR + 30 * 60_000);
const it = testWith(harnessWith({}, { clock }));
// The harness (a fresh database) is made under the hook's timeout, not the first test's.
it.beforeAll(async ({ h }) => {
  expect(h.clock).toBe(clock);
});

const unique = (name: string) => `${name}_${randomBytes(4).toString("hex")}`;
const QUERY_SYNTAX = "user/bad_request/permissions_query_syntax_error";

async function v1Key(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown> = {}) {
  const res = await h.post("/v1/keys.createKey", { apiId, ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { key: string; keyId: string };
}

/** A v2 verification answering 200: its `data`. */
async function verify(h: Harness, rootKey: string, body: Record<string, unknown>, headers?: Record<string, string>) {
  const res = await h.post("/v2/keys.verifyKey", body, rootKey, headers);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.meta.requestId).toMatch(/^req_/);
  return res.body.data;
}

async function createIdentity(h: Harness, t: Tenant, body: Record<string, unknown>) {
  const res = await h.post("/v2/identities.createIdentity", body, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.identityId as string;
}

/** A rate limit of a key, configured (v1 has no route for named key limits; v2's createKey belongs to another change). */
async function keyLimit(h: Harness, t: Tenant, keyId: string, name: string, limit: number, duration: number, autoApply = false) {
  const id = unique("rl");
  await h.sql(
    `insert into ratelimits (id, workspace_id, name, key_id, "limit", duration, auto_apply, created_at_m)
     values ('${id}', '${t.workspaceId}', '${name}', '${keyId}', ${limit}, ${duration}, ${autoApply}, 0)`,
  );
  return id;
}

describe("v2 keys.verifyKey: outcomes", () => {
  it("a v1 key verifies through v2 with what it carries (keyId, name, meta, expires, credits, permissions, roles, identity)", async ({
    h,
    t,
    apiId,
  }) => {
    const role = unique("reader");
    const externalId = unique("user");
    const identityId = await createIdentity(h, t, { externalId, meta: { tier: "gold" } });
    const expires = clock.now() + 10 * 60_000;
    const { key, keyId } = await v1Key(h, t, apiId, {
      name: "svc",
      meta: { plan: "pro" },
      remaining: 5,
      roles: [role],
      permissions: ["documents.read", "documents.write", "admin"],
      externalId,
      expires,
    });
    const data = await verify(h, t.rootKey, { key });
    expect(data).toEqual({
      valid: true,
      code: "VALID",
      keyId,
      name: "svc",
      meta: { plan: "pro" },
      expires,
      credits: 4,
      enabled: true,
      permissions: expect.arrayContaining(["documents.read", "documents.write", "admin"]),
      roles: [role],
      identity: { id: identityId, externalId, meta: { tier: "gold" } },
    });
    expect(data.permissions).toHaveLength(3);
  });

  it("a bare key answers only valid, code, keyId and enabled", async ({ h, t, apiId }) => {
    const { key, keyId } = await v1Key(h, t, apiId);
    expect(await verify(h, t.rootKey, { key })).toEqual({ valid: true, code: "VALID", keyId, enabled: true });
  });

  it("expiry: VALID until the clock passes it, then EXPIRED with the key's fields (nothing spent)", async ({ h, t, apiId }) => {
    const { key } = await v1Key(h, t, apiId, { expires: clock.now() + 60_000, remaining: 3, name: "soon" });
    expect(await verify(h, t.rootKey, { key })).toMatchObject({ valid: true, code: "VALID", credits: 2 });
    clock.advance(60_001);
    try {
      expect(await verify(h, t.rootKey, { key })).toMatchObject({ valid: false, code: "EXPIRED", name: "soon", enabled: true, credits: 2 });
    } finally {
      clock.advance(-60_001);
    }
  });

  it("a key disabled through v1's updateKey is DISABLED on the very next v2 verification, and VALID again once enabled", async ({
    h,
    t,
    apiId,
  }) => {
    const { key, keyId } = await v1Key(h, t, apiId, { remaining: 10 });
    expect((await verify(h, t.rootKey, { key })).code).toBe("VALID");
    expect((await h.post("/v1/keys.updateKey", { keyId, enabled: false }, t.rootKey)).status).toBe(200);
    expect(await verify(h, t.rootKey, { key })).toEqual({ valid: false, code: "DISABLED", keyId, enabled: false, credits: 9 });
    expect((await h.post("/v1/keys.updateKey", { keyId, enabled: true }, t.rootKey)).status).toBe(200);
    expect(await verify(h, t.rootKey, { key })).toMatchObject({ valid: true, code: "VALID", credits: 8 });
  });

  it("credits: default cost 1, cost 5 on 5, cost 15 on 5 (USAGE_EXCEEDED, nothing spent), cost 0 on 0; never overdrawn", async ({
    h,
    t,
    apiId,
  }) => {
    const { key, keyId } = await v1Key(h, t, apiId, { remaining: 6 });
    expect(await verify(h, t.rootKey, { key })).toMatchObject({ valid: true, code: "VALID", credits: 5 });
    expect(await verify(h, t.rootKey, { key, credits: { cost: 15 } })).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", credits: 5 });
    expect(await verify(h, t.rootKey, { key, credits: { cost: 5 } })).toMatchObject({ valid: true, code: "VALID", credits: 0 });
    expect(await verify(h, t.rootKey, { key })).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", credits: 0 });
    expect(await verify(h, t.rootKey, { key, credits: { cost: 0 } })).toMatchObject({ valid: true, code: "VALID", credits: 0 });
    expect(
      (await h.sql<{ remaining_requests: number }>(`select remaining_requests from keys where id = '${keyId}'`))[0]!.remaining_requests,
    ).toBe(0);
  });

  it("credits changed through v2's updateCredits are seen by v1's next verification, and v1's spends by v2's", async ({ h, t, apiId }) => {
    const { key, keyId } = await v1Key(h, t, apiId, { remaining: 2 });
    expect((await h.post("/v2/keys.updateCredits", { keyId, operation: "set", value: 10 }, t.rootKey)).status).toBe(200);
    const v1 = await h.post("/v1/keys.verifyKey", { key });
    expect(v1.body).toMatchObject({ valid: true, remaining: 9 });
    expect(await verify(h, t.rootKey, { key })).toMatchObject({ valid: true, credits: 8 });
    expect((await h.post("/v1/keys.verifyKey", { key })).body).toMatchObject({ valid: true, remaining: 7 });
    expect((await h.post("/v1/keys.updateKey", { keyId, remaining: null }, t.rootKey)).status).toBe(200);
    const unlimited = await verify(h, t.rootKey, { key });
    expect(unlimited.code).toBe("VALID");
    expect(unlimited).not.toHaveProperty("credits");
  });

  it("IP allow-list: the socket's peer must be listed or in a listed range, else FORBIDDEN; a client's X-Forwarded-For is not believed", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t, { ipWhitelist: "10.0.0.1,2001:db8::/32" });
    const { key } = await v1Key(h, t, apiId, { remaining: 5 });
    const from = async (remoteAddress: string, headers: Record<string, string> = {}) => {
      const res = await h.app.inject({
        method: "POST",
        url: "/v2/keys.verifyKey",
        headers: { "content-type": "application/json", authorization: `Bearer ${t.rootKey}`, ...headers },
        payload: JSON.stringify({ key }),
        remoteAddress,
      });
      expect(res.statusCode, res.body).toBe(200);
      return JSON.parse(res.body).data;
    };
    expect(await from("10.0.0.2")).toMatchObject({ valid: false, code: "FORBIDDEN", credits: 5 });
    expect((await from("10.0.0.1")).code).toBe("VALID");
    expect((await from("2001:db8:1::7")).code).toBe("VALID");
    // Without KEYHAVEN_TRUST_PROXY, X-Forwarded-For is anyone's to send (upstream believed its first entry).
    expect((await from("10.0.0.2", { "x-forwarded-for": "10.0.0.1" })).code).toBe("FORBIDDEN");
    expect((await from("10.0.0.1", { "x-forwarded-for": "10.0.0.9" })).code).toBe("VALID");
  });
});

describe("v2 keys.verifyKey: the permission query", () => {
  it("direct and role permissions satisfy leaves; AND binds tighter than OR; parentheses; missing is INSUFFICIENT_PERMISSIONS", async ({
    h,
    t,
    apiId,
    createRole,
    createPermission,
  }) => {
    const role = unique("editor");
    const roleId = await createRole(role);
    const [read, write, admin, billing] = ["read", "write", "admin", "billing"].map((p) => unique(`doc.${p}`)) as [
      string,
      string,
      string,
      string,
    ];
    const permissionId = await createPermission(write);
    expect((await h.post("/v1/permissions.addPermissionsToRole", { roleId, permissions: [{ id: permissionId }] }, t.rootKey)).status).toBe(
      200,
    );
    const { key, keyId } = await v1Key(h, t, apiId, { permissions: [read], roles: [role], remaining: 100 });
    const code = async (permissions: string) => (await verify(h, t.rootKey, { key, permissions })).code;
    expect(await code(read)).toBe("VALID");
    expect(await code(write)).toBe("VALID");
    expect(await code(`${read} AND ${write}`)).toBe("VALID");
    expect(await code(`${read} and (${admin} OR ${write})`)).toBe("VALID");
    expect(await code(`${admin} OR ${read} AND ${write}`)).toBe("VALID");
    expect(await code(`\t(${admin}\nOR ${read}) AND ${billing}`)).toBe("INSUFFICIENT_PERMISSIONS");
    expect(await code(`${admin} OR ${read} AND ${billing}`)).toBe("INSUFFICIENT_PERMISSIONS");
    const refused = await verify(h, t.rootKey, { key, permissions: admin });
    expect(refused).toMatchObject({ valid: false, code: "INSUFFICIENT_PERMISSIONS", keyId, credits: expect.any(Number) });
    // Refused verifications spend nothing: 5 VALID answers so far.
    expect(refused.credits).toBe(95);
  });

  it("names with a literal `*`, colons, slashes and dashes match exactly (no globbing); a 20+ permission query verifies", async ({
    h,
    t,
    apiId,
  }) => {
    const many = Array.from({ length: 25 }, (_, i) => `perm.${i}`);
    const { key } = await v1Key(h, t, apiId, { permissions: ["api.*.read", "urn:ws_1:docs/a", "a-b_c.d", ...many] });
    const code = async (permissions: string) => (await verify(h, t.rootKey, { key, permissions })).code;
    expect(await code("api.*.read")).toBe("VALID");
    expect(await code("api.x.read")).toBe("INSUFFICIENT_PERMISSIONS");
    expect(await code("urn:ws_1:docs/a")).toBe("VALID");
    expect(await code("urn:ws_1:docs/*")).toBe("INSUFFICIENT_PERMISSIONS");
    expect(await code("a-b_c.d AND api.*.read")).toBe("VALID");
    expect(await code(many.join(" AND "))).toBe("VALID");
    expect(await code(`(${many.join(" OR ")}) AND missing.one`)).toBe("INSUFFICIENT_PERMISSIONS");
  });

  it("parses into the core's one query tree: AND binds tighter than OR, parentheses group, AND/OR in any case", () => {
    expect(parseTextPermissionQuery("a")).toBe("a");
    expect(parseTextPermissionQuery("a OR b AND c")).toEqual({ or: ["a", { and: ["b", "c"] }] });
    expect(parseTextPermissionQuery("(a or b) and c AND d")).toEqual({ and: [{ or: ["a", "b"] }, "c", "d"] });
    expect(parseTextPermissionQuery("((a))")).toBe("a");
    expect(parseTextPermissionQuery("ANDROID or ORACLE")).toEqual({ or: ["ANDROID", "ORACLE"] });
  });

  it("syntax errors are 400 permissions_query_syntax_error with v2's details, even for a disabled key", async ({ h, t, apiId }) => {
    const { key, keyId } = await v1Key(h, t, apiId);
    await h.post("/v1/keys.updateKey", { keyId, enabled: false }, t.rootKey);
    const cases: [string, string][] = [
      ["permission_1 AND", "Unexpected end of query. Expected a permission identifier or opening parenthesis."],
      [
        "(permission_1 AND permission_2",
        "Missing closing parenthesis ')' at position 30. Every opening parenthesis must have a matching closing parenthesis.",
      ],
      ["permission_1 AND ()", "Empty parentheses found at position 18. Parentheses must contain at least one permission or expression."],
      ["AND permission_1", "Unexpected token 'AND' at position 0. Expected a permission identifier or opening parenthesis."],
      ["a OR )", "Unexpected token ')' at position 5. Expected a permission identifier or opening parenthesis."],
      ["a b", "Unexpected token 'b' at position 2. The query appears to have extra content after a valid expression."],
      ["(a) )", "Unexpected token ')' at position 4. The query appears to have extra content after a valid expression."],
      ["   ", "Unexpected end of input. Please provide a valid permission query."],
    ];
    for (const [permissions, detail] of cases) {
      const res = await h.post("/v2/keys.verifyKey", { key, permissions }, t.rootKey);
      expectV2Error(res, 400, QUERY_SYNTAX, detail);
      expect(res.body.error.title).toBe("Bad Request");
      expect(res.body.error.errors).toEqual([]);
    }
    // An invalid character: v2 says nothing (an empty detail); keyhaven names it.
    expectV2Error(await h.post("/v2/keys.verifyKey", { key, permissions: "a AND $b" }, t.rootKey), 400, QUERY_SYNTAX, /'\$' at position 6/);
  });

  it("a key that is not found, or not the caller's to verify, never reaches the parser (200 NOT_FOUND)", async ({ h, t, apiId }) => {
    const { key } = await v1Key(h, t, apiId);
    expect(await verify(h, t.rootKey, { key: "sk_unknown", permissions: "(" })).toEqual({ valid: false, code: "NOT_FOUND" });
    const other = await h.tenant();
    expect(await verify(h, other.rootKey, { key, permissions: "(" })).toEqual({ valid: false, code: "NOT_FOUND" });
  });
});

describe("v2 keys.verifyKey: rate limits", () => {
  it("an auto-applied limit (v1's `default`) applies at cost 1 and is reported; exceeded is RATE_LIMITED without spending credits", async ({
    h,
    t,
    apiId,
  }) => {
    const { key } = await v1Key(h, t, apiId, { remaining: 10, ratelimit: { type: "fast", limit: 1, duration: 60_000 } });
    const first = await verify(h, t.rootKey, { key });
    expect(first).toMatchObject({ valid: true, code: "VALID", credits: 9 });
    expect(first.ratelimits).toEqual([
      {
        id: expect.stringMatching(/^rl_/),
        name: "default",
        limit: 1,
        duration: 60_000,
        autoApply: true,
        exceeded: false,
        remaining: 0,
        reset: expect.any(Number),
      },
    ]);
    expect(first.ratelimits[0].reset).toBeGreaterThan(clock.now());
    const second = await verify(h, t.rootKey, { key });
    expect(second).toMatchObject({ valid: false, code: "RATE_LIMITED", credits: 9 });
    expect(second.ratelimits[0]).toMatchObject({ name: "default", exceeded: true, remaining: 0 });
  });

  it("a flood of verifications of a key with credits refused by its rate limit costs no statement per refusal", async ({ h, t, apiId }) => {
    const { key } = await v1Key(h, t, apiId, { remaining: 1000, ratelimit: { type: "fast", limit: 1, duration: 60_000 } });
    expect(await verify(h, t.rootKey, { key })).toMatchObject({ valid: true, code: "VALID", credits: 999 });
    // Warm: the key and the root key are in memory, as under a flood.
    expect(await verify(h, t.rootKey, { key })).toMatchObject({ valid: false, code: "RATE_LIMITED", credits: 999 });
    const n = 50;
    const statements = countStatements(h);
    let answers: { code: string; credits: number }[];
    try {
      answers = await Promise.all(Array.from({ length: n }, () => verify(h, t.rootKey, { key })));
    } finally {
      statements.stop();
    }
    expect(answers.map((a) => [a.code, a.credits])).toEqual(Array.from({ length: n }, () => ["RATE_LIMITED", 999]));
    // The refusals' credits are read together (with the batch's epoch read, a few statements whatever n), as the
    // spends of valid verifications are; before, each refusal read its key's credits in a statement of its own.
    expect(statements.count).toBeLessThanOrEqual(6);
  });

  it("a configured limit that is not auto-applied applies only when named, with the request's cost", async ({ h, t, apiId }) => {
    const { key, keyId } = await v1Key(h, t, apiId);
    const id = await keyLimit(h, t, keyId, "tokens", 3, 60_000);
    const plain = await verify(h, t.rootKey, { key });
    expect(plain.code).toBe("VALID");
    expect(plain).not.toHaveProperty("ratelimits");
    const named = await verify(h, t.rootKey, { key, ratelimits: [{ name: "tokens", cost: 2 }] });
    expect(named.code).toBe("VALID");
    expect(named.ratelimits).toEqual([
      { id, name: "tokens", limit: 3, duration: 60_000, autoApply: false, exceeded: false, remaining: 1, reset: expect.any(Number) },
    ]);
    expect((await verify(h, t.rootKey, { key, ratelimits: [{ name: "tokens", cost: 2 }] })).code).toBe("RATE_LIMITED");
    expect((await verify(h, t.rootKey, { key, ratelimits: [{ name: "tokens" }] })).code).toBe("VALID");
  });

  it("an ad-hoc limit (limit and duration) needs no configuration: id '' and autoApply false", async ({ h, t, apiId }) => {
    const { key } = await v1Key(h, t, apiId);
    const adHoc = { name: "burst", limit: 20, duration: 60_000, cost: 15 };
    const first = await verify(h, t.rootKey, { key, ratelimits: [adHoc] });
    expect(first.code).toBe("VALID");
    expect(first.ratelimits).toEqual([
      { id: "", name: "burst", limit: 20, duration: 60_000, autoApply: false, exceeded: false, remaining: 5, reset: expect.any(Number) },
    ]);
    const second = await verify(h, t.rootKey, { key, ratelimits: [adHoc] });
    expect(second.code).toBe("RATE_LIMITED");
    expect(second.ratelimits[0]).toMatchObject({ exceeded: true });
  });

  it("an identity's limit is shared by its keys; a key's limit of the same name wins over it; the identity shows its others", async ({
    h,
    t,
    apiId,
  }) => {
    const externalId = unique("user");
    const identityId = await createIdentity(h, t, {
      externalId,
      ratelimits: [
        { name: "shared", limit: 4, duration: 60_000, autoApply: false },
        { name: "requests", limit: 1, duration: 60_000, autoApply: true },
      ],
    });
    const a = await v1Key(h, t, apiId, { externalId });
    const b = await v1Key(h, t, apiId, { externalId });
    // The key's own `requests` (4/min) shadows the identity's (1/min) for key a.
    await keyLimit(h, t, a.keyId, "requests", 4, 60_000, true);

    const first = await verify(h, t.rootKey, { key: a.key, ratelimits: [{ name: "shared", cost: 3 }] });
    expect(first.code).toBe("VALID");
    expect(first.identity).toEqual({
      id: identityId,
      externalId,
      ratelimits: [{ id: expect.stringMatching(/^rl_/), name: "shared", limit: 4, duration: 60_000, autoApply: false }],
    });
    expect(first.ratelimits).toHaveLength(2);
    expect(first.ratelimits.find((r: { name: string }) => r.name === "requests")).toMatchObject({ limit: 4, remaining: 3 });
    expect((await verify(h, t.rootKey, { key: a.key })).code).toBe("VALID");
    expect((await verify(h, t.rootKey, { key: a.key })).code).toBe("VALID");
    // Key b has the identity's `requests` (1/min) and shares `shared` (1 left of 4).
    expect((await verify(h, t.rootKey, { key: b.key, ratelimits: [{ name: "shared", cost: 1 }] })).code).toBe("VALID");
    const limited = await verify(h, t.rootKey, { key: b.key, ratelimits: [{ name: "shared", cost: 1 }] });
    expect(limited.code).toBe("RATE_LIMITED");
    expect((await verify(h, t.rootKey, { key: a.key, ratelimits: [{ name: "shared", cost: 1 }] })).code).toBe("RATE_LIMITED");
  });

  it("several limits are all or nothing: a refused batch charges none, and each limit says whether it was exceeded", async ({
    h,
    t,
    apiId,
  }) => {
    const { key } = await v1Key(h, t, apiId);
    const limits = [
      { name: "minute", limit: 1, duration: 60_000 },
      { name: "month", limit: 10, duration: 30 * 24 * HOUR },
    ];
    const first = await verify(h, t.rootKey, { key, ratelimits: limits });
    expect(first.code).toBe("VALID");
    const second = await verify(h, t.rootKey, { key, ratelimits: limits });
    expect(second.code).toBe("RATE_LIMITED");
    const byName = Object.fromEntries(second.ratelimits.map((r: { name: string }) => [r.name, r]));
    expect(byName.minute).toMatchObject({ exceeded: true, remaining: 0 });
    expect(byName.month).toMatchObject({ exceeded: false });
    const month = await verify(h, t.rootKey, { key, ratelimits: [limits[1]] });
    expect(month.ratelimits[0]).toMatchObject({ name: "month", remaining: 8 });
  });

  it("a named limit that is configured nowhere is a 412 naming the key and, when it has one, its identity", async ({ h, t, apiId }) => {
    const externalId = unique("user");
    const identityId = await createIdentity(h, t, { externalId });
    const withIdentity = await v1Key(h, t, apiId, { externalId });
    const res = await h.post("/v2/keys.verifyKey", { key: withIdentity.key, ratelimits: [{ name: "does-not-exist" }] }, t.rootKey);
    expectV2Error(
      res,
      412,
      "unkey/application/precondition_failed",
      `ratelimit 'does-not-exist' was requested but does not exist for key '${withIdentity.keyId}' nor identity: '${identityId}' external ID: '${externalId}'`,
    );
    expect(res.body.error.title).toBe("Precondition Failed");
    const bare = await v1Key(h, t, apiId);
    expectV2Error(
      await h.post("/v2/keys.verifyKey", { key: bare.key, ratelimits: [{ name: "does-not-exist", cost: 4 }] }, t.rootKey),
      412,
      "unkey/application/precondition_failed",
      `ratelimit 'does-not-exist' was requested but does not exist for key '${bare.keyId}' and there is no identity connected.`,
    );
  });
});

describe("v2 keys.verifyKey and v1 on one store", () => {
  it("one limiter and one credit count: v1 and v2 verifications of a key draw from the same limits and uses", async ({ h, t, apiId }) => {
    const externalId = unique("user");
    await createIdentity(h, t, { externalId, ratelimits: [{ name: "per-minute", limit: 2, duration: 60_000, autoApply: true }] });
    const { key } = await v1Key(h, t, apiId, { externalId, remaining: 10 });
    expect((await h.post("/v1/keys.verifyKey", { key })).body).toMatchObject({ valid: true, remaining: 9 });
    const v2 = await verify(h, t.rootKey, { key });
    expect(v2).toMatchObject({ valid: true, code: "VALID", credits: 8 });
    expect(v2.ratelimits).toEqual([expect.objectContaining({ name: "per-minute", autoApply: true, remaining: 0 })]);
    expect((await h.post("/v1/keys.verifyKey", { key })).body).toMatchObject({ valid: false, code: "RATE_LIMITED" });
    expect(await verify(h, t.rootKey, { key })).toMatchObject({ valid: false, code: "RATE_LIMITED", credits: 8 });
  });

  it("v1 reads its JSON query (a string is one permission's name), v2 its text query, on the same key", async ({ h, t, apiId }) => {
    const { key } = await v1Key(h, t, apiId, { permissions: ["p.read", "p.write"] });
    const v1 = await h.post("/v1/keys.verifyKey", { key, authorization: { permissions: { and: ["p.read", "p.write"] } } });
    expect(v1.body).toMatchObject({ valid: true, code: "VALID" });
    expect((await verify(h, t.rootKey, { key, permissions: "p.read AND p.write" })).code).toBe("VALID");
    expect((await h.post("/v1/keys.verifyKey", { key, authorization: { permissions: "p.read AND" } })).body).toMatchObject({
      valid: false,
      code: "INSUFFICIENT_PERMISSIONS",
    });
  });
});

describe("v2 keys.verifyKey: who may verify which key", () => {
  it("api.*.verify_key and api.<apiId>.verify_key verify; verify_key for another API, none, or another workspace is NOT_FOUND", async ({
    h,
    t,
    apiId,
  }) => {
    const { key } = await v1Key(h, t, apiId);
    const otherApi = await h.createApi(t);
    const anyApi = await h.rootKey(t.workspaceId, ["api.*.verify_key"]);
    const thisApi = await h.rootKey(t.workspaceId, [`api.${apiId}.verify_key`]);
    const thatApi = await h.rootKey(t.workspaceId, [`api.${otherApi}.verify_key`]);
    const readOnly = await h.rootKey(t.workspaceId, ["api.*.read_key"]);
    expect((await verify(h, anyApi, { key })).code).toBe("VALID");
    expect((await verify(h, thisApi, { key })).code).toBe("VALID");
    for (const rootKey of [thatApi, readOnly, (await h.tenant()).rootKey]) {
      expect(await verify(h, rootKey, { key })).toEqual({ valid: false, code: "NOT_FOUND" });
    }
  });

  it("out of scope, a key with every fact (meta, identity, credits, limits, roles; disabled or not) is NOT_FOUND and nothing else", async ({
    h,
  }) => {
    const t = await h.tenant();
    const api = await h.createApi(t);
    const [role, perm, externalId] = [unique("role"), unique("perm"), unique("user")];
    expect((await h.post("/v2/permissions.createRole", { name: role }, t.rootKey)).status).toBe(200);
    expect((await h.post("/v2/permissions.createPermission", { name: perm, slug: perm }, t.rootKey)).status).toBe(200);
    await createIdentity(h, t, {
      externalId,
      meta: { tier: "gold" },
      ratelimits: [{ name: "ident", limit: 5, duration: 60_000, autoApply: false }],
    });
    const created = await h.post(
      "/v2/keys.createKey",
      {
        apiId: api,
        name: "billing",
        externalId,
        meta: { plan: "pro" },
        roles: [role],
        permissions: [perm],
        expires: clock.now() + HOUR,
        credits: { remaining: 3 },
        ratelimits: [{ name: "calls", limit: 10, duration: 60_000, autoApply: true }],
      },
      t.rootKey,
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const { key, keyId } = created.body.data as { key: string; keyId: string };
    const otherApi = await h.rootKey(t.workspaceId, [`api.${await h.createApi(t)}.verify_key`]);
    const outOfScope = [otherApi, await h.rootKey(t.workspaceId, ["api.*.read_key"]), (await h.tenant()).rootKey];
    const unseen = async () => {
      for (const rootKey of outOfScope) {
        expect(await verify(h, rootKey, { key, tags: ["a"], ratelimits: [{ name: "calls" }] })).toEqual({
          valid: false,
          code: "NOT_FOUND",
        });
      }
    };
    await unseen();
    expect((await h.post("/v2/keys.updateKey", { keyId, enabled: false }, t.rootKey)).status).toBe(200);
    await unseen();
    const [row] = await h.sql<{ r: number }>(`select remaining_requests as r from keys where id = '${keyId}'`);
    expect(row!.r).toBe(3);
    // In scope the facts are there: the answers above left them out.
    expect(await verify(h, t.rootKey, { key })).toMatchObject({ code: "DISABLED", keyId, meta: { plan: "pro" }, credits: 3 });
  });

  it("an unknown key, a deleted key and a key of a deleted API are 200 NOT_FOUND", async ({ h, t, apiId }) => {
    expect(await verify(h, t.rootKey, { key: "sk_does_not_exist" })).toEqual({ valid: false, code: "NOT_FOUND" });
    const deleted = await v1Key(h, t, apiId);
    expect((await h.post("/v1/keys.deleteKey", { keyId: deleted.keyId }, t.rootKey)).status).toBe(200);
    expect(await verify(h, t.rootKey, { key: deleted.key })).toEqual({ valid: false, code: "NOT_FOUND" });
    const gone = await h.createApi(t);
    const ofGone = await v1Key(h, t, gone);
    expect((await h.post("/v2/apis.deleteApi", { apiId: gone }, t.rootKey)).status).toBe(200);
    expect(await verify(h, t.rootKey, { key: ofGone.key })).toEqual({ valid: false, code: "NOT_FOUND" });
  });

  it("needs a root key: no Authorization is 400, a wrong bearer 401, a header without `Bearer ` 400, a customer key 401", async ({
    h,
    t,
    apiId,
  }) => {
    const { key } = await v1Key(h, t, apiId);
    expectV2Error(
      await h.post("/v2/keys.verifyKey", { key }),
      400,
      "unkey/application/invalid_input",
      "Authorization header for 'bearer' scheme",
    );
    expectV2Error(
      await h.post("/v2/keys.verifyKey", { key }, "not_a_root_key_0123456789"),
      401,
      "unkey/authentication/key_not_found",
      "The provided root key is invalid. We could not find the requested key.",
    );
    expectV2Error(
      await h.post("/v2/keys.verifyKey", { key }, undefined, { authorization: `Basic ${t.rootKey}` }),
      400,
      "unkey/authentication/malformed",
    );
    expectV2Error(
      await h.post("/v2/keys.verifyKey", { key }, key),
      401,
      "unkey/authentication/key_not_found",
      "The provided root key is invalid. We could not find the requested key.",
    );
  });

  it("a disabled workspace's root key is refused (403) before any key is looked at", async ({ h, apiId: _ }) => {
    const tenant = await h.tenant();
    const api = await h.createApi(tenant);
    const { key } = await v1Key(h, tenant, api);
    await h.disableWorkspace(tenant.workspaceId);
    expectV2Error(await h.post("/v2/keys.verifyKey", { key }, tenant.rootKey), 403, "unkey/authorization/workspace_disabled");
  });
});

describe("v2 keys.verifyKey: input", () => {
  it("refuses what the contract's schema refuses (400 invalid_input) and accepts tags of any characters and a migrationId", async ({
    h,
    t,
    apiId,
  }) => {
    const { key } = await v1Key(h, t, apiId);
    const bad: Record<string, unknown>[] = [
      {},
      { key: "" },
      { key: "x".repeat(513) },
      { key, ratelimits: [{ name: "abc", cost: -1 }] },
      { key, credits: { cost: -1 } },
      { key, credits: {} },
      { key, tags: Array.from({ length: 21 }, (_, i) => `t${i}`) },
      { key, tags: [""] },
      { key, tags: ["x".repeat(513)] },
      { key, permissions: "" },
      { key, permissions: "a".repeat(1001) },
      { key, ratelimits: [{ name: "ab" }] },
      { key, migrationId: "m".repeat(257) },
      { key, apiId },
      { key, remaining: { cost: 1 } },
    ];
    for (const body of bad) {
      const res = await h.post("/v2/keys.verifyKey", body, t.rootKey);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.type).toBe("https://unkey.com/docs/errors/unkey/application/invalid_input");
    }
    expect((await verify(h, t.rootKey, { key, tags: ["päth=/a b?c", "x".repeat(512)] })).code).toBe("VALID");
    expect((await verify(h, t.rootKey, { key, migrationId: "mig_123" })).code).toBe("VALID");
    expect(await verify(h, t.rootKey, { key: "sk_unknown", migrationId: "mig_123" })).toEqual({ valid: false, code: "NOT_FOUND" });
  });

  it("is in the OpenAPI document as a POST with a root key", async ({ h }) => {
    const doc = (await h.app.inject({ method: "GET", url: "/openapi.json" })).json();
    expect(Object.keys(doc.paths)).toContain("/v2/keys.verifyKey");
  });
});
