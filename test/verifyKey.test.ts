import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { MAX_WINDOW_MS } from "../src/storage/ratelimits/ratelimiter.js";
import { test } from "./fixtures.js";
import { createHarness, expectError, type Harness, type Tenant } from "./helper.js";

const secret = () => `sk_${randomBytes(16).toString("hex")}`;
// Caller addresses for the IP allow-list tests: one on the list, one not.
const LISTED = "203.0.113.7";
const UNLISTED = "198.51.100.1";

// The file's harness, tenant and API (`h`, `t`, `apiId` of test/fixtures.ts), and helpers over them.
const it = test
  .extend("importOne", async ({ h, t, apiId }) => async (key: Record<string, unknown>): Promise<string> => {
    const res = await h.post("/v1/migrations.createKeys", [{ apiId, ...key }], t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.keyIds[0];
  })
  .extend(
    "verify",
    async ({ h }) =>
      (body: Record<string, unknown>) =>
        h.post("/v1/keys.verifyKey", body, "this header is ignored"),
  )
  .extend(
    "verifyWith",
    async ({ h }) =>
      (authorization: string | undefined, body: Record<string, unknown>) =>
        h.post("/v1/keys.verifyKey", body, undefined, authorization === undefined ? {} : { authorization }),
  )
  .extend(
    "remainingOf",
    async ({ h }) =>
      async (keyId: string) =>
        (await h.sql<{ r: number }>(`select remaining_requests as r from keys where id = '${keyId}'`))[0]!.r,
  )
  .extend(
    "countsOf",
    async ({ h }) =>
      async (keyId: string) =>
        Number((await h.sql<{ n: string }>(`select count(*) as n from verification_counts where key_id = '${keyId}'`))[0]!.n),
  )
  .extend(
    "listedApi",
    async ({ h, t }) =>
      (list = `${LISTED}, 2001:db8::1`) =>
        h.createApi(t, { ipWhitelist: list }),
  )
  .extend(
    "verifyFrom",
    async ({ h }) =>
      (body: Record<string, unknown>, headers: Record<string, string> = {}, remoteAddress?: string) =>
        h.app
          .inject({
            method: "POST",
            url: "/v1/keys.verifyKey",
            headers: { "content-type": "application/json", ...headers },
            payload: JSON.stringify(body),
            ...(remoteAddress !== undefined && { remoteAddress }),
          })
          .then((res) => ({ status: res.statusCode, body: JSON.parse(res.body) })),
  );

describe("keys.verifyKey on imported keys", () => {
  it("verifies a key imported by plaintext", async ({ apiId, importOne, verify }) => {
    const key = secret();
    const keyId = await importOne({ plaintext: key, name: "plain", environment: "test", meta: { a: 1 } });
    const res = await verify({ key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      requestId: res.headers["unkey-request-id"],
      valid: true,
      code: "VALID",
      keyId,
      apiId,
      name: "plain",
      meta: { a: 1 },
      enabled: true,
      permissions: [],
      roles: [],
      environment: "test",
    });
  });

  it("verifies a key imported by its SHA-256 hash", async ({ apiId, importOne, verify }) => {
    const key = secret();
    const keyId = await importOne({ hash: { value: hashKey(key), variant: "sha256_base64" } });
    const res = await verify({ key, apiId });
    expect(res.body).toMatchObject({ valid: true, code: "VALID", keyId });
  });

  it("answers an unknown key with exactly NOT_FOUND and the request id", async ({ verify }) => {
    const res = await verify({ key: secret() });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ valid: false, code: "NOT_FOUND", requestId: res.headers["unkey-request-id"] });
  });

  it("answers a disabled imported key with DISABLED", async ({ importOne, verify }) => {
    const key = secret();
    const keyId = await importOne({ plaintext: key, enabled: false });
    expect((await verify({ key })).body).toMatchObject({ valid: false, code: "DISABLED", keyId, enabled: false });
  });

  it("answers an expired key with EXPIRED and a future one with VALID", async ({ importOne, verify }) => {
    const past = secret();
    const future = secret();
    await importOne({ plaintext: past, expires: Date.now() - 1000 });
    await importOne({ plaintext: future, expires: Date.now() + 60_000 });
    expect((await verify({ key: past })).body).toMatchObject({ valid: false, code: "EXPIRED" });
    expect((await verify({ key: future })).body).toMatchObject({ valid: true, code: "VALID" });
  });

  it("answers FORBIDDEN for another apiId, naming the key's own API (as every answer that names the key does)", async ({
    apiId,
    importOne,
    verify,
  }) => {
    const key = secret();
    await importOne({ plaintext: key });
    const res = await verify({ key, apiId: "api_someone_else" });
    expect(res.body).toMatchObject({ valid: false, code: "FORBIDDEN", apiId });
  });

  it("reports roles, permissions and the identity of an imported key", async ({ h, t, importOne, verify }) => {
    await h.post("/v1/permissions.createRole", { name: "verify.role" }, t.rootKey);
    await h.post("/v1/permissions.createPermission", { name: "verify.perm" }, t.rootKey);
    const key = secret();
    await importOne({ plaintext: key, roles: ["verify.role"], permissions: ["verify.perm"], externalId: "user-7", ownerId: "legacy" });
    const res = await verify({ key, authorization: { permissions: "verify.perm" } });
    expect(res.body).toMatchObject({
      valid: true,
      roles: ["verify.role"],
      permissions: ["verify.perm"],
      ownerId: "user-7",
      identity: { externalId: "user-7", meta: {} },
    });
    const denied = await verify({ key, authorization: { permissions: { and: ["verify.perm", "admin"] } } });
    expect(denied.body).toMatchObject({ valid: false, code: "INSUFFICIENT_PERMISSIONS" });
    expectError(await verify({ key, authorization: { permissions: { xor: [] } } }), 400, "BAD_REQUEST", "permission query is invalid");
  });

  it("takes permission queries of up to 100 nodes nested up to 10 levels, and refuses larger ones precisely", async ({
    h,
    t,
    importOne,
    verify,
  }) => {
    await h.post("/v1/permissions.createPermission", { name: "p.99" }, t.rootKey);
    const key = secret();
    await importOne({ plaintext: key, permissions: ["p.99"] });
    const or99 = { or: Array.from({ length: 99 }, (_, i) => `p.${i + 1}`) };
    expect((await verify({ key, authorization: { permissions: or99 } })).body).toMatchObject({ valid: true });
    const nested = (depth: number): unknown => (depth === 0 ? "p.99" : { and: [nested(depth - 1)] });
    expect((await verify({ key, authorization: { permissions: nested(10) } })).body).toMatchObject({ valid: true });

    const tooMany = { or: [...or99.or, "p.100"] };
    expectError(
      await verify({ key, authorization: { permissions: tooMany } }),
      400,
      "BAD_REQUEST",
      "permission query is invalid: it holds more than 100 permissions and operators",
    );
    expectError(
      await verify({ key, authorization: { permissions: nested(11) } }),
      400,
      "BAD_REQUEST",
      'permission query is invalid: "and" and "or" nest deeper than 10 levels',
    );
    expectError(
      await verify({ key, authorization: { permissions: "p".repeat(513) } }),
      400,
      "BAD_REQUEST",
      "permission query is invalid: a permission is longer than 512 characters",
    );
    for (const bad of ["", { or: [] }, { or: ["a"], and: ["b"] }, ["a"], null, 1, { or: ["a", {}] }]) {
      expectError(await verify({ key, authorization: { permissions: bad } }), 400, "BAD_REQUEST", "permission query is invalid");
    }
  });

  it("counts down remaining uses and stops at zero", async ({ importOne, verify }) => {
    const key = secret();
    await importOne({ plaintext: key, remaining: 2 });
    expect((await verify({ key })).body).toMatchObject({ valid: true, remaining: 1 });
    expect((await verify({ key })).body).toMatchObject({ valid: true, remaining: 0 });
    expect((await verify({ key })).body).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", remaining: 0 });
  });

  it("answers a key of a disabled workspace with the 403 envelope", async ({ h, verify }) => {
    const other = await h.tenant();
    const otherApi = (await h.post("/v1/apis.createApi", { name: "soon-disabled" }, other.rootKey)).body.apiId;
    const key = secret();
    await h.post("/v1/migrations.createKeys", [{ apiId: otherApi, plaintext: key }], other.rootKey);
    await h.disableWorkspace(other.workspaceId);
    expectError(await verify({ key }), 403, "FORBIDDEN", "workspace is disabled");
  });

  it("answers a soft-deleted key with NOT_FOUND on the very next call", async ({ h, importOne, verify }) => {
    const key = secret();
    const keyId = await importOne({ plaintext: key });
    expect((await verify({ key })).body.valid).toBe(true);
    await h.sql(`update keys set deleted_at_m = ${Date.now()} where id = '${keyId}'`);
    expect((await verify({ key })).body).toMatchObject({ valid: false, code: "NOT_FOUND" });
  });

  it("refuses a request without a key with 400", async ({ verify }) => {
    expectError(await verify({}), 400, "BAD_REQUEST", /^key: /);
    expectError(await verify({ key: "" }), 400, "BAD_REQUEST", "key: String must contain at least 1 character(s)");
  });

  it("refuses more than 20 rate limits, or an ad-hoc window over 30 days, with 400 and charges nothing", async ({ importOne, verify }) => {
    const key = secret();
    await importOne({ plaintext: key });
    const adhoc = (n: number, duration = 60_000) => Array.from({ length: n }, (_, i) => ({ name: `l${i}`, limit: 1, duration }));
    expectError(await verify({ key, ratelimits: adhoc(21) }), 400, "BAD_REQUEST", "ratelimits: at most 20 rate limits per request");
    expectError(
      await verify({ key, ratelimits: adhoc(1, MAX_WINDOW_MS + 1) }),
      400,
      "BAD_REQUEST",
      "ratelimits.0.duration: must be at most 2592000000 ms (30 days)",
    );
    // Nothing was charged: 20 of the same limits pass once, then refuse; so does the longest window.
    expect((await verify({ key, ratelimits: adhoc(20) })).body).toMatchObject({ valid: true, ratelimit: { remaining: 0 } });
    expect((await verify({ key, ratelimits: adhoc(20) })).body.code).toBe("RATE_LIMITED");
    const longest = [{ name: "longest", limit: 1, duration: MAX_WINDOW_MS }];
    expect((await verify({ key, ratelimits: longest })).body.valid).toBe(true);
    expect((await verify({ key, ratelimits: longest })).body.code).toBe("RATE_LIMITED");
  });
});

describe("keys.verifyKey scope", () => {
  let other: Tenant;
  it.beforeAll(async ({ h }) => {
    other = await h.tenant();
  });

  it("names the key's API in every answer that names the key", async ({ apiId, importOne, verify }) => {
    const key = secret();
    const keyId = await importOne({ plaintext: key, enabled: false });
    expect((await verify({ key })).body).toMatchObject({ code: "DISABLED", keyId, apiId });
  });

  it("answers a key of another workspace exactly as an unknown one to a valid root key, and spends nothing", async ({
    h,
    t,
    apiId,
    importOne,
    verifyWith,
    remainingOf,
    countsOf,
  }) => {
    const key = secret();
    const keyId = await importOne({ plaintext: key, remaining: 5 });
    // A root key with no permission at all still scopes: scoping grants nothing, it only narrows.
    const weakOther = await h.rootKey(other.workspaceId, []);
    for (const rootKey of [other.rootKey, weakOther]) {
      const res = await verifyWith(`Bearer ${rootKey}`, { key, remaining: { cost: 1 } });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ valid: false, code: "NOT_FOUND", requestId: res.headers["unkey-request-id"] });
      // With the other workspace's apiId too: NOT_FOUND, not FORBIDDEN.
      expect((await verifyWith(`bearer  ${rootKey} `, { key, apiId })).body).toMatchObject({ valid: false, code: "NOT_FOUND" });
    }
    expect(await remainingOf(keyId)).toBe(5);
    await h.jobs.analytics.flush();
    expect(await countsOf(keyId)).toBe(0);
    const weakOwner = await h.rootKey(t.workspaceId, []);
    expect((await verifyWith(`Bearer ${weakOwner}`, { key })).body).toMatchObject({ valid: true, keyId, apiId, remaining: 4 });
  });

  it("ignores an Authorization header that is not a valid root key, as v1 does", async ({ h, importOne, verifyWith }) => {
    const key = secret();
    const keyId = await importOne({ plaintext: key });
    const disabled = await h.tenant();
    await h.disableWorkspace(disabled.workspaceId);
    const foreignApiKey = secret();
    await h.post("/v1/migrations.createKeys", [{ apiId: await h.createApi(other), plaintext: foreignApiKey }], other.rootKey);
    const headers = [
      undefined,
      "",
      "Bearer public",
      "Bearer ",
      "Basic dXNlcjpwYXNzd29yZA==",
      "Bearer khroot_this_is_not_a_root_key_at_all",
      `Bearer ${foreignApiKey}`,
      `Bearer ${disabled.rootKey}`,
    ];
    for (const authorization of headers) {
      // Twice: the second answer may come from what the first one remembered.
      for (let i = 0; i < 2; i++) {
        const res = await verifyWith(authorization, { key });
        expect(res.body, String(authorization)).toMatchObject({ valid: true, code: "VALID", keyId });
      }
    }
  });

  it("stops scoping with a root key at once when it is deleted", async ({ h, importOne, verifyWith }) => {
    const key = secret();
    await importOne({ plaintext: key });
    const rootKey = await h.rootKey(other.workspaceId, []);
    expect((await verifyWith(`Bearer ${rootKey}`, { key })).body).toMatchObject({ code: "NOT_FOUND" });
    await h.sql(`delete from root_keys where hash = '${hashKey(rootKey)}'`);
    expect((await verifyWith(`Bearer ${rootKey}`, { key })).body).toMatchObject({ code: "VALID" });
  });
});

describe("keys.verifyKey with KEYHAVEN_VERIFY_REQUIRE_SCOPE=on", () => {
  let strict: Harness;
  let owner: Tenant;
  let api: string;
  beforeAll(async () => {
    strict = await createHarness({ KEYHAVEN_VERIFY_REQUIRE_SCOPE: "on" });
    owner = await strict.tenant();
    api = await strict.createApi(owner);
  });
  afterAll(() => strict.close());
  const verifyWith = (authorization: string | undefined, body: Record<string, unknown>) =>
    strict.post("/v1/keys.verifyKey", body, undefined, authorization === undefined ? {} : { authorization });

  it("refuses a verification with neither apiId nor a valid root key (400), spending nothing", async () => {
    const { key, keyId } = await strict.importKey(owner, api, { remaining: 3 });
    for (const authorization of [undefined, "Bearer public", "Bearer khroot_this_is_not_a_root_key_at_all"]) {
      expectError(await verifyWith(authorization, { key }), 400, "BAD_REQUEST", /^apiId is required: /);
      expectError(await verifyWith(authorization, { key: secret() }), 400, "BAD_REQUEST", /^apiId is required: /);
    }
    const [row] = await strict.sql<{ r: number }>(`select remaining_requests as r from keys where id = '${keyId}'`);
    expect(row!.r).toBe(3);
  });

  it("verifies with apiId, or with a valid root key of the key's workspace", async () => {
    const { key, keyId } = await strict.importKey(owner, api);
    expect((await verifyWith(undefined, { key, apiId: api })).body).toMatchObject({ valid: true, keyId, apiId: api });
    expect((await verifyWith(`Bearer ${owner.rootKey}`, { key })).body).toMatchObject({ valid: true, keyId, apiId: api });
    const stranger = await strict.tenant();
    expect((await verifyWith(`Bearer ${stranger.rootKey}`, { key })).body).toMatchObject({ valid: false, code: "NOT_FOUND" });
  });

  it("answers a key of another API FORBIDDEN and nothing else, whatever the key's or its workspace's state", async () => {
    const tenant = await strict.tenant();
    const [own, otherApi] = [await strict.createApi(tenant), await strict.createApi(tenant)];
    const role = `role_${randomBytes(4).toString("hex")}`;
    expect((await strict.post("/v1/permissions.createRole", { name: role }, tenant.rootKey)).status).toBe(200);
    const externalId = `user_${randomBytes(4).toString("hex")}`;
    const { key, keyId } = await strict.importKey(tenant, own, {
      name: "billing",
      externalId,
      meta: { plan: "pro" },
      roles: [role],
      remaining: 3,
      expires: Date.now() + 86_400_000,
      ratelimit: { limit: 10, refillRate: 10, refillInterval: 60_000 },
    });
    await strict.sql(`update identities set meta = '{"tier":"gold"}' where external_id = '${externalId}'`);
    const forbidden = { requestId: expect.any(String), valid: false, code: "FORBIDDEN" };
    const outOfScope = async () => {
      for (const [authorization, apiId] of [
        [undefined, otherApi],
        [undefined, ""],
        [`Bearer ${tenant.rootKey}`, otherApi],
      ] as const) {
        const res = await verifyWith(authorization, { key, apiId });
        expect(res.status).toBe(200);
        expect(res.body, `${authorization} ${apiId}`).toEqual(forbidden);
      }
    };
    await outOfScope();
    // In scope, the same key answers in full: the facts above are the key's, not missing.
    expect((await verifyWith(undefined, { key, apiId: own })).body).toMatchObject({
      valid: true,
      keyId,
      apiId: own,
      meta: { plan: "pro" },
      identity: { externalId, meta: { tier: "gold" } },
      remaining: 2,
    });
    // A disabled key, or a key of a disabled workspace, is not told apart from any other out of scope.
    expect((await strict.post("/v1/keys.updateKey", { keyId, enabled: false }, tenant.rootKey)).status).toBe(200);
    await outOfScope();
    await strict.disableWorkspace(tenant.workspaceId);
    expect((await verifyWith(undefined, { key, apiId: otherApi })).body).toEqual(forbidden);
    const [row] = await strict.sql<{ r: number }>(`select remaining_requests as r from keys where id = '${keyId}'`);
    expect(row!.r).toBe(2);
  });
});

describe("keys.verifyKey and the API's IP allow-list (contract 4.2 step 6)", () => {
  it("answers VALID to a listed caller, and FORBIDDEN (200) to an unlisted one", async ({ h, t, listedApi, verifyFrom }) => {
    const api = await listedApi();
    const { key, keyId } = await h.importKey(t, api);
    expect(await verifyFrom({ key }, {}, LISTED)).toMatchObject({ status: 200, body: { valid: true, code: "VALID" } });
    expect(await verifyFrom({ key }, {}, "2001:db8::1")).toMatchObject({ body: { valid: true } });
    const refused = await verifyFrom({ key }, {}, UNLISTED);
    expect(refused).toMatchObject({ status: 200, body: { valid: false, code: "FORBIDDEN", keyId, apiId: api } });
  });

  it("believes no header a client can send: True-Client-IP, CF-Connecting-IP and X-Forwarded-For name nobody", async ({
    h,
    t,
    listedApi,
    verifyFrom,
  }) => {
    const api = await listedApi();
    const { key } = await h.importKey(t, api);
    // No KEYHAVEN_TRUST_PROXY: the socket's peer is the caller, whatever the request says about itself.
    for (const name of ["true-client-ip", "cf-connecting-ip", "x-forwarded-for", "x-real-ip"]) {
      expect((await verifyFrom({ key }, { [name]: LISTED }, UNLISTED)).body.code, name).toBe("FORBIDDEN");
      expect((await verifyFrom({ key }, { [name]: UNLISTED }, LISTED)).body.code, name).toBe("VALID");
    }
  });

  it("accepts CIDR ranges, IPv4 and IPv6, beside addresses: a caller in a listed range passes", async ({ h, t, listedApi, verifyFrom }) => {
    const api = await listedApi("192.0.2.0/24, 2001:db8:a::/48, 198.51.100.77");
    const { key } = await h.importKey(t, api);
    for (const ip of ["192.0.2.1", "192.0.2.255", "::ffff:192.0.2.9", "2001:db8:a::1", "2001:db8:a:ffff::5", "198.51.100.77"]) {
      expect((await verifyFrom({ key }, {}, ip)).body.code, ip).toBe("VALID");
    }
    for (const ip of ["192.0.3.1", "2001:db8:b::1", "198.51.100.78", "::1"]) {
      expect((await verifyFrom({ key }, {}, ip)).body.code, ip).toBe("FORBIDDEN");
    }
    // A range may be written with host bits set (as operators do).
    const wide = await h.importKey(t, await listedApi("10.1.2.3/8"));
    expect((await verifyFrom({ key: wide.key }, {}, "10.200.0.1")).body.code).toBe("VALID");
    expect((await verifyFrom({ key: wide.key }, {}, "11.0.0.1")).body.code).toBe("FORBIDDEN");
    // ::/0 holds the IPv4-mapped addresses too, so it admits every caller; 0.0.0.0/0 admits IPv4 callers only.
    const everyone = await h.importKey(t, await listedApi("::/0"));
    for (const ip of ["2001:db8::99", "11.0.0.1"]) expect((await verifyFrom({ key: everyone.key }, {}, ip)).body.code, ip).toBe("VALID");
    const ipv4 = await h.importKey(t, await listedApi("0.0.0.0/0"));
    expect((await verifyFrom({ key: ipv4.key }, {}, "11.0.0.1")).body.code).toBe("VALID");
    expect((await verifyFrom({ key: ipv4.key }, {}, "2001:db8::99")).body.code).toBe("FORBIDDEN");
  });

  it("compares addresses, not spellings", async ({ h, t, listedApi, verifyFrom }) => {
    const api = await listedApi(`10.0.0.1, 2001:db8::1`);
    const { key } = await h.importKey(t, api);
    expect((await verifyFrom({ key }, {}, "2001:DB8:0:0:0:0:0:1")).body.code).toBe("VALID");
    // What a server listening on :: sees for an IPv4 client.
    expect((await verifyFrom({ key }, {}, "::ffff:10.0.0.1")).body.code).toBe("VALID");
  });

  it("lets every caller verify keys of an API without a list", async ({ h, t, apiId, verifyFrom }) => {
    const { key } = await h.importKey(t, apiId);
    expect((await verifyFrom({ key }, {}, UNLISTED)).body.code).toBe("VALID");
  });

  it("comes after DISABLED, the other-API FORBIDDEN and EXPIRED, and before permissions, rate limits and remaining uses", async ({
    h,
    t,
    listedApi,
    verifyFrom,
  }) => {
    const api = await listedApi();
    const disabled = await h.importKey(t, api, { enabled: false });
    expect((await verifyFrom({ key: disabled.key }, {}, UNLISTED)).body.code).toBe("DISABLED");
    const expired = await h.importKey(t, api, { expires: Date.now() - 1000 });
    expect((await verifyFrom({ key: expired.key }, {}, UNLISTED)).body.code).toBe("EXPIRED");

    const { key, keyId } = await h.importKey(t, api, { remaining: 1, ratelimit: { limit: 1, refillRate: 1, refillInterval: 3_600_000 } });
    const refused = await verifyFrom({ key, authorization: { permissions: "perm.missing" } }, {}, UNLISTED);
    expect(refused.body).toMatchObject({ valid: false, code: "FORBIDDEN" });
    expect(refused.body.ratelimit).toBeUndefined();
    expect(refused.body.remaining).toBeUndefined();
    // Refused before the limit and the uses were charged: a listed caller still gets both.
    expect((await verifyFrom({ key, authorization: { permissions: "perm.missing" } }, {}, LISTED)).body.code).toBe(
      "INSUFFICIENT_PERMISSIONS",
    );
    expect((await verifyFrom({ key }, {}, LISTED)).body).toMatchObject({ valid: true, remaining: 0 });
    const [row] = await h.sql<{ r: number }>(`select remaining_requests as r from keys where id = '${keyId}'`);
    expect(row!.r).toBe(0);
  });

  it("sees apiId's FORBIDDEN first when the key belongs to another API", async ({ h, t, apiId, listedApi, verifyFrom }) => {
    const api = await listedApi();
    const { key } = await h.importKey(t, api);
    expect((await verifyFrom({ key, apiId }, {}, LISTED)).body).toMatchObject({ code: "FORBIDDEN", apiId: api });
  });

  it("sees apis.updateApi's change on the very next verification (the cached key carries the list)", async ({ h, t, verifyFrom }) => {
    const api = await h.createApi(t);
    const { key } = await h.importKey(t, api);
    expect((await verifyFrom({ key }, {}, UNLISTED)).body.code).toBe("VALID");
    expect((await h.post("/v1/apis.updateApi", { apiId: api, ipWhitelist: LISTED }, t.rootKey)).status).toBe(200);
    expect((await verifyFrom({ key }, {}, UNLISTED)).body.code).toBe("FORBIDDEN");
    expect((await verifyFrom({ key }, {}, LISTED)).body.code).toBe("VALID");
    expect((await h.post("/v1/apis.updateApi", { apiId: api, ipWhitelist: "198.51.100.0/24" }, t.rootKey)).status).toBe(200);
    expect((await verifyFrom({ key }, {}, UNLISTED)).body.code).toBe("VALID");
    expect((await h.post("/v1/apis.updateApi", { apiId: api, ipWhitelist: null }, t.rootKey)).status).toBe(200);
    expect((await verifyFrom({ key }, {}, UNLISTED)).body.code).toBe("VALID");
  });
});

describe("keys.verifyKey's caller address behind a trusted proxy (KEYHAVEN_TRUST_PROXY)", () => {
  let proxied: Harness;
  let owner: Tenant;
  let key: string;
  beforeAll(async () => {
    proxied = await createHarness({ KEYHAVEN_TRUST_PROXY: "10.0.0.0/8" });
    owner = await proxied.tenant();
    const api = await proxied.createApi(owner, { ipWhitelist: "203.0.113.7" });
    key = (await proxied.importKey(owner, api)).key;
  });
  afterAll(() => proxied.close());
  const verifyVia = async (remoteAddress: string, headers: Record<string, string>) =>
    JSON.parse(
      (
        await proxied.app.inject({
          method: "POST",
          url: "/v1/keys.verifyKey",
          headers: { "content-type": "application/json", ...headers },
          payload: JSON.stringify({ key }),
          remoteAddress,
        })
      ).body,
    ).code;

  it("believes X-Forwarded-For from a trusted proxy, and only from one, on v2 as on v1", async () => {
    const v2Via = async (remoteAddress: string, headers: Record<string, string>) =>
      JSON.parse(
        (
          await proxied.app.inject({
            method: "POST",
            url: "/v2/keys.verifyKey",
            headers: { "content-type": "application/json", authorization: `Bearer ${owner.rootKey}`, ...headers },
            payload: JSON.stringify({ key }),
            remoteAddress,
          })
        ).body,
      ).data.code;
    expect(await v2Via("10.1.2.3", { "x-forwarded-for": "203.0.113.7" })).toBe("VALID");
    expect(await v2Via("10.1.2.3", { "x-forwarded-for": "203.0.113.7, 198.51.100.1" })).toBe("FORBIDDEN");
    expect(await v2Via("198.51.100.9", { "x-forwarded-for": "203.0.113.7" })).toBe("FORBIDDEN");
    expect(await verifyVia("10.1.2.3", { "x-forwarded-for": "203.0.113.7" })).toBe("VALID");
    expect(await verifyVia("10.1.2.3", { "x-forwarded-for": "198.51.100.1" })).toBe("FORBIDDEN");
    // A client's own X-Forwarded-For entry before the trusted proxy's is not believed either.
    expect(await verifyVia("10.1.2.3", { "x-forwarded-for": "203.0.113.7, 198.51.100.1" })).toBe("FORBIDDEN");
    // Not a trusted proxy: its header is ignored, and its own address is the caller's.
    expect(await verifyVia("198.51.100.9", { "x-forwarded-for": "203.0.113.7" })).toBe("FORBIDDEN");
    expect(await verifyVia("203.0.113.7", {})).toBe("VALID");
    // From a trusted proxy, True-Client-IP, else CF-Connecting-IP, names the client (Unkey v1's own tests send it);
    // from any other peer neither is believed, and a value that is not an address is ignored.
    expect(await verifyVia("10.1.2.3", { "x-forwarded-for": "198.51.100.1", "true-client-ip": "203.0.113.7" })).toBe("VALID");
    expect(await verifyVia("10.1.2.3", { "true-client-ip": "198.51.100.1", "cf-connecting-ip": "203.0.113.7" })).toBe("FORBIDDEN");
    expect(await verifyVia("10.1.2.3", { "cf-connecting-ip": "203.0.113.7" })).toBe("VALID");
    expect(await v2Via("10.1.2.3", { "true-client-ip": "203.0.113.7" })).toBe("VALID");
    expect(await verifyVia("10.1.2.3", { "true-client-ip": "not an address", "x-forwarded-for": "198.51.100.1" })).toBe("FORBIDDEN");
    expect(await verifyVia("198.51.100.9", { "true-client-ip": "203.0.113.7" })).toBe("FORBIDDEN");
    expect(await v2Via("198.51.100.9", { "cf-connecting-ip": "203.0.113.7" })).toBe("FORBIDDEN");
    // Through two trusted hops, the address the first trusted proxy saw.
    expect(await verifyVia("10.1.2.3", { "x-forwarded-for": "198.51.100.1, 203.0.113.7, 10.9.9.9" })).toBe("VALID");
  });
});
