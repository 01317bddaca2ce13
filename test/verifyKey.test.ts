import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { MAX_WINDOW_MS } from "../src/ratelimit/ratelimiter.js";
import { createHarness, expectError, type Harness, type Tenant } from "./helper.js";

let h: Harness;
let t: Tenant;
let apiId: string;
beforeAll(async () => {
  h = await createHarness();
  t = await h.tenant();
  apiId = (await h.post("/v1/apis.createApi", { name: "verify-api" }, t.rootKey)).body.apiId;
});
afterAll(() => h.close());

const secret = () => `sk_${randomBytes(16).toString("hex")}`;
async function importOne(key: Record<string, unknown>): Promise<string> {
  const res = await h.post("/v1/migrations.createKeys", [{ apiId, ...key }], t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.keyIds[0];
}
const verify = (body: Record<string, unknown>) => h.post("/v1/keys.verifyKey", body, "this header is ignored");

describe("keys.verifyKey on imported keys", () => {
  it("verifies a key imported by plaintext", async () => {
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

  it("verifies a key imported by its SHA-256 hash", async () => {
    const key = secret();
    const keyId = await importOne({ hash: { value: hashKey(key), variant: "sha256_base64" } });
    const res = await verify({ key, apiId });
    expect(res.body).toMatchObject({ valid: true, code: "VALID", keyId });
  });

  it("answers an unknown key with exactly NOT_FOUND and the request id", async () => {
    const res = await verify({ key: secret() });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ valid: false, code: "NOT_FOUND", requestId: res.headers["unkey-request-id"] });
  });

  it("answers a disabled imported key with DISABLED", async () => {
    const key = secret();
    const keyId = await importOne({ plaintext: key, enabled: false });
    expect((await verify({ key })).body).toMatchObject({ valid: false, code: "DISABLED", keyId, enabled: false });
  });

  it("answers an expired key with EXPIRED and a future one with VALID", async () => {
    const past = secret();
    const future = secret();
    await importOne({ plaintext: past, expires: Date.now() - 1000 });
    await importOne({ plaintext: future, expires: Date.now() + 60_000 });
    expect((await verify({ key: past })).body).toMatchObject({ valid: false, code: "EXPIRED" });
    expect((await verify({ key: future })).body).toMatchObject({ valid: true, code: "VALID" });
  });

  it("answers FORBIDDEN for another apiId, naming the key's own API (as every answer that names the key does)", async () => {
    const key = secret();
    await importOne({ plaintext: key });
    const res = await verify({ key, apiId: "api_someone_else" });
    expect(res.body).toMatchObject({ valid: false, code: "FORBIDDEN", apiId });
  });

  it("reports roles, permissions and the identity of an imported key", async () => {
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

  it("takes permission queries of up to 100 nodes nested up to 10 levels, and refuses larger ones precisely", async () => {
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

  it("counts down remaining uses and stops at zero", async () => {
    const key = secret();
    await importOne({ plaintext: key, remaining: 2 });
    expect((await verify({ key })).body).toMatchObject({ valid: true, remaining: 1 });
    expect((await verify({ key })).body).toMatchObject({ valid: true, remaining: 0 });
    expect((await verify({ key })).body).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", remaining: 0 });
  });

  it("answers a key of a disabled workspace with the 403 envelope", async () => {
    const other = await h.tenant();
    const otherApi = (await h.post("/v1/apis.createApi", { name: "soon-disabled" }, other.rootKey)).body.apiId;
    const key = secret();
    await h.post("/v1/migrations.createKeys", [{ apiId: otherApi, plaintext: key }], other.rootKey);
    await h.disableWorkspace(other.workspaceId);
    expectError(await verify({ key }), 403, "FORBIDDEN", "workspace is disabled");
  });

  it("answers a soft-deleted key with NOT_FOUND on the very next call", async () => {
    const key = secret();
    const keyId = await importOne({ plaintext: key });
    expect((await verify({ key })).body.valid).toBe(true);
    await h.sql(`update keys set deleted_at_m = ${Date.now()} where id = '${keyId}'`);
    expect((await verify({ key })).body).toMatchObject({ valid: false, code: "NOT_FOUND" });
  });

  it("refuses a request without a key with 400", async () => {
    expectError(await verify({}), 400, "BAD_REQUEST", /^key: /);
    expectError(await verify({ key: "" }), 400, "BAD_REQUEST", "key: String must contain at least 1 character(s)");
  });

  it("refuses more than 20 rate limits, or an ad-hoc window over 30 days, with 400 and charges nothing", async () => {
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
  beforeAll(async () => {
    other = await h.tenant();
  });
  const verifyWith = (authorization: string | undefined, body: Record<string, unknown>) =>
    h.post("/v1/keys.verifyKey", body, undefined, authorization === undefined ? {} : { authorization });
  const remainingOf = async (keyId: string) =>
    (await h.sql<{ r: number }>(`select remaining_requests as r from keys where id = '${keyId}'`))[0]!.r;
  const countsOf = async (keyId: string) =>
    Number((await h.sql<{ n: string }>(`select count(*) as n from verification_counts where key_id = '${keyId}'`))[0]!.n);

  it("names the key's API in every answer that names the key", async () => {
    const key = secret();
    const keyId = await importOne({ plaintext: key, enabled: false });
    expect((await verify({ key })).body).toMatchObject({ code: "DISABLED", keyId, apiId });
  });

  it("answers a key of another workspace exactly as an unknown one to a valid root key, and spends nothing", async () => {
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

  it("ignores an Authorization header that is not a valid root key, as v1 does", async () => {
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

  it("stops scoping with a root key at once when it is deleted", async () => {
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
});
