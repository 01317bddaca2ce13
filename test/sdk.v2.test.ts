import { createHash, randomBytes } from "node:crypto";
import { Unkey } from "unkey-api-v2";
import * as errors from "unkey-api-v2/models/errors";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { served } from "./v2-served.js";

/**
 * The v2 TypeScript SDK (@unkey/api 2.5.1, installed as `unkey-api-v2`), unchanged, pointed at keyhaven over a real
 * socket: every method it has for the routes of the v2 contract (§2), success paths with what they answer, and the
 * SDK's typed errors. The SDK checks each answer against its own schemas, so a field keyhaven leaves out or types
 * wrongly fails here as a ResponseValidationError. Cases of routes keyhaven does not serve yet are guarded by `served`
 * and run once the route is merged; data they would need is made through v1 meanwhile.
 */
let h: Harness;
let t: Tenant;
let baseUrl: string;
let unkey: Unkey;
/** A client with another root key (no retries: a 5xx must show, not be retried for 10 s). */
const sdk = (rootKey: string) => new Unkey({ rootKey, serverURL: baseUrl, retryConfig: { strategy: "none" } });

beforeAll(async () => {
  h = await createHarness();
  t = await h.tenant();
  baseUrl = await h.app.listen({ port: 0, host: "127.0.0.1" });
  unkey = sdk(t.rootKey);
});
afterAll(() => h.close());

const unique = (name: string) => `${name}_${randomBytes(4).toString("hex")}`;

/**
 * The SDK threw its error class `cls` for this v2 error (contract §1.3): the HTTP status, and in the body the same
 * status, the type URL of `type` and, when given, the detail. Answers the parsed body.
 */
async function rejects(
  call: Promise<unknown>,
  cls: abstract new (...args: never[]) => errors.UnkeyError,
  status: number,
  type: string,
  detail?: string | RegExp,
) {
  const err = await call.then(
    (value) => new Error(`expected the SDK to throw, it answered ${JSON.stringify(value)}`),
    (e: unknown) => e,
  );
  expect(err, String(err)).toBeInstanceOf(cls);
  const e = err as errors.UnkeyError;
  expect(e.statusCode, e.body).toBe(status);
  const body = JSON.parse(e.body);
  expect(body.meta.requestId).toMatch(/^req_/);
  expect(body.error).toMatchObject({ status, type: `https://unkey.com/docs/errors/${type}`, title: expect.any(String) });
  if (detail instanceof RegExp) expect(body.error.detail).toMatch(detail);
  else if (detail !== undefined) expect(body.error.detail).toBe(detail);
  return body;
}

/** A key made through v1's keys.createKey (for data the v2 routes under test need), with any v1 fields. */
async function v1Key(apiId: string, fields: Record<string, unknown> = {}, tenant = t) {
  const res = await h.post("/v1/keys.createKey", { apiId, ...fields }, tenant.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { key: string; keyId: string };
}

/** A role made through v1, holding the permissions (slugs) given, created if missing. */
async function v1Role(name: string, permissions: string[] = []) {
  const role = await h.post("/v1/permissions.createRole", { name }, t.rootKey);
  expect(role.status, JSON.stringify(role.body)).toBe(200);
  for (const slug of permissions) {
    const perm = await h.post("/v1/permissions.createPermission", { name: slug, slug }, t.rootKey);
    expect([200, 409]).toContain(perm.status);
  }
  if (permissions.length > 0) {
    const linked = await h.post(
      "/v1/permissions.addPermissionsToRole",
      { roleId: role.body.roleId, permissions: permissions.map((slug) => ({ slug })) },
      t.rootKey,
    );
    expect(linked.status, JSON.stringify(linked.body)).toBe(200);
  }
  return role.body.roleId as string;
}

const sha256Base64 = (key: string) => createHash("sha256").update(key).digest("base64");

describe("@unkey/api 2.5.1 against keyhaven: liveness and authentication", () => {
  it("liveness: the SDK has no method for it; GET /v2/liveness answers the envelope the contract gives", async () => {
    const res = await fetch(`${baseUrl}/v2/liveness`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ meta: { requestId: expect.stringMatching(/^req_/) }, data: { message: "we're cooking" } });
  });

  it("a wrong root key is the SDK's UnauthorizedErrorResponse (401), with the contract's detail", async () => {
    await rejects(
      sdk("not-a-root-key-0123456789abcdef").apis.getApi({ apiId: "api_missing" }),
      errors.UnauthorizedErrorResponse,
      401,
      "unkey/authentication/key_not_found",
      "The provided root key is invalid. We could not find the requested key.",
    );
  });

  it("a disabled workspace is the SDK's ForbiddenErrorResponse (403)", async () => {
    const other = await h.tenant();
    await h.disableWorkspace(other.workspaceId);
    await rejects(
      sdk(other.rootKey).apis.createApi({ name: "nope" }),
      errors.ForbiddenErrorResponse,
      403,
      "unkey/authorization/workspace_disabled",
    );
  });
});

describe("@unkey/api 2.5.1: apis.*", () => {
  it("createApi, getApi, listKeys (paged by the SDK's own iterator), deleteApi", async () => {
    const created = await unkey.apis.createApi({ name: "sdk-v2-api" });
    expect(created.meta.requestId).toMatch(/^req_/);
    const apiId = created.data.apiId;
    expect(apiId).toMatch(/^api_/);
    expect((await unkey.apis.getApi({ apiId })).data).toEqual({ id: apiId, name: "sdk-v2-api" });

    const keyIds: string[] = [];
    for (let i = 0; i < 3; i++) keyIds.push((await v1Key(apiId, { name: `k${i}`, meta: { i } })).keyId);
    const first = await unkey.apis.listKeys({ apiId, limit: 2 });
    expect(first.result.data).toHaveLength(2);
    expect(first.result.pagination).toEqual({ hasMore: true, cursor: expect.any(String) });
    const seen: string[] = [];
    for await (const page of first) seen.push(...page.result.data.map((k) => k.keyId));
    expect(seen).toEqual([...keyIds].sort());
    const all = await unkey.apis.listKeys({ apiId });
    expect(all.result.pagination).toEqual({ hasMore: false });
    expect(all.result.data.find((k) => k.keyId === keyIds[1])).toMatchObject({
      keyId: keyIds[1],
      start: expect.any(String),
      enabled: true,
      name: "k1",
      meta: { i: 1 },
      createdAt: expect.any(Number),
    });

    expect((await unkey.apis.deleteApi({ apiId })).data).toEqual({});
    await rejects(
      unkey.apis.getApi({ apiId }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/api_not_found",
      "The requested API does not exist or has been deleted.",
    );
  });

  it("listKeys filters by externalId and decrypts with decrypt: true", async () => {
    const apiId = await h.createApi(t, { storeEncryptedKeys: true });
    const externalId = unique("sdk_owner");
    const mine = await v1Key(apiId, { externalId, recoverable: true });
    await v1Key(apiId);
    const listed = await unkey.apis.listKeys({ apiId, externalId, decrypt: true });
    expect(listed.result.data).toEqual([
      expect.objectContaining({ keyId: mine.keyId, plaintext: mine.key, identity: expect.objectContaining({ externalId }) }),
    ]);
  });

  it("errors: 400 (bad input, with errors[]), 403 (no create_api), 404 (another workspace's API), 412 (delete protection)", async () => {
    const bad = await rejects(unkey.apis.createApi({ name: "ab" }), errors.BadRequestErrorResponse, 400, "unkey/application/invalid_input");
    expect(bad.error.errors.length).toBeGreaterThan(0);
    const reader = await h.rootKey(t.workspaceId, ["api.*.read_api"]);
    await rejects(
      sdk(reader).apis.createApi({ name: "forbidden" }),
      errors.ForbiddenErrorResponse,
      403,
      "unkey/authorization/insufficient_permissions",
      "Missing permission: 'api.*.create_api'",
    );
    const other = await h.tenant();
    const theirs = await h.createApi(other);
    await rejects(unkey.apis.getApi({ apiId: theirs }), errors.NotFoundErrorResponse, 404, "unkey/data/api_not_found");
    await rejects(unkey.apis.listKeys({ apiId: theirs }), errors.NotFoundErrorResponse, 404, "unkey/data/api_not_found");
    await rejects(unkey.apis.deleteApi({ apiId: theirs }), errors.NotFoundErrorResponse, 404, "unkey/data/api_not_found");
    const kept = await h.createApi(t, { deleteProtection: true });
    await rejects(
      unkey.apis.deleteApi({ apiId: kept }),
      errors.PreconditionFailedErrorResponse,
      412,
      "unkey/application/protected_resource",
      "This API has delete protection enabled. Disable it before attempting to delete.",
    );
  });
});

describe("@unkey/api 2.5.1: keys.* (served)", () => {
  it("getKey and whoami answer KeyResponseData with credits, refill, rate limits, identity, roles and permissions", async () => {
    const apiId = await h.createApi(t);
    const externalId = unique("sdk_user");
    const roleName = unique("sdk.role");
    await v1Role(roleName, [unique("sdk.via_role")]);
    const direct = unique("sdk.direct");
    const { key, keyId } = await v1Key(apiId, {
      prefix: "sdk",
      name: "from v1",
      externalId,
      meta: { plan: "pro" },
      roles: [roleName],
      permissions: [direct],
      remaining: 10,
      refill: { interval: "daily", amount: 10 },
      ratelimit: { limit: 100, duration: 60_000 },
    });
    const got = (await unkey.keys.getKey({ keyId })).data;
    expect(got).toMatchObject({
      keyId,
      start: expect.stringMatching(/^sdk_/),
      enabled: true,
      name: "from v1",
      meta: { plan: "pro" },
      createdAt: expect.any(Number),
      credits: { remaining: 10, refill: { interval: "daily", amount: 10 } },
      roles: [roleName],
      identity: { id: expect.any(String), externalId },
      ratelimits: [{ id: expect.any(String), name: "default", limit: 100, duration: 60_000, autoApply: true }],
    });
    expect(got.permissions?.sort()).toEqual(expect.arrayContaining([direct]));
    expect(got.permissions).toHaveLength(2);
    const who = (await unkey.keys.whoami({ key })).data;
    expect(who).toMatchObject({ keyId, name: "from v1", credits: { remaining: 10 } });
    expect(who.permissions).toEqual([...who.permissions!].sort());
    expect(who).not.toHaveProperty("plaintext");
  });

  it("getKey decrypts a recoverable key; whoami of an unknown key is 404", async () => {
    const apiId = await h.createApi(t, { storeEncryptedKeys: true });
    const { key, keyId } = await v1Key(apiId, { recoverable: true });
    expect((await unkey.keys.getKey({ keyId, decrypt: true })).data.plaintext).toBe(key);
    await rejects(unkey.keys.whoami({ key: "sk_not_a_key_anywhere" }), errors.NotFoundErrorResponse, 404, "unkey/data/key_not_found");
  });

  it("updateCredits: set, increment, decrement and set null answer KeyCreditsData (remaining: null when unlimited)", async () => {
    const apiId = await h.createApi(t);
    const { keyId } = await v1Key(apiId, { remaining: 5 });
    expect((await unkey.keys.updateCredits({ keyId, operation: "set", value: 7 })).data).toEqual({ remaining: 7 });
    expect((await unkey.keys.updateCredits({ keyId, operation: "increment", value: 3 })).data).toEqual({ remaining: 10 });
    expect((await unkey.keys.updateCredits({ keyId, operation: "decrement", value: 20 })).data).toEqual({ remaining: 0 });
    expect((await unkey.keys.updateCredits({ keyId, operation: "set", value: null })).data).toEqual({ remaining: null });
    await rejects(
      unkey.keys.updateCredits({ keyId, operation: "increment", value: 1 }),
      errors.BadRequestErrorResponse,
      400,
      "unkey/application/invalid_input",
      "You cannot increment or decrement a key with unlimited credits.",
    );
  });

  it("deleteKey (soft, then permanent) answers {}; the key is then 404", async () => {
    const apiId = await h.createApi(t);
    const soft = await v1Key(apiId);
    expect((await unkey.keys.deleteKey({ keyId: soft.keyId })).data).toEqual({});
    await rejects(unkey.keys.getKey({ keyId: soft.keyId }), errors.NotFoundErrorResponse, 404, "unkey/data/key_not_found");
    const hard = await v1Key(apiId);
    expect((await unkey.keys.deleteKey({ keyId: hard.keyId, permanent: true })).data).toEqual({});
    await rejects(unkey.keys.deleteKey({ keyId: hard.keyId }), errors.NotFoundErrorResponse, 404, "unkey/data/key_not_found");
  });

  it("errors: 400 (bad keyId), 403 (no read_key / update_key / delete_key), 404 (another workspace's key)", async () => {
    const apiId = await h.createApi(t);
    const { keyId } = await v1Key(apiId, { remaining: 1 });
    await rejects(unkey.keys.getKey({ keyId: "k!" }), errors.BadRequestErrorResponse, 400, "unkey/application/invalid_input");
    const nobody = sdk(await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    const insufficient = "unkey/authorization/insufficient_permissions";
    await rejects(nobody.keys.getKey({ keyId }), errors.ForbiddenErrorResponse, 403, insufficient);
    await rejects(nobody.keys.updateCredits({ keyId, operation: "set", value: 2 }), errors.ForbiddenErrorResponse, 403, insufficient);
    await rejects(nobody.keys.deleteKey({ keyId }), errors.ForbiddenErrorResponse, 403, insufficient);
    const other = sdk((await h.tenant()).rootKey);
    await rejects(other.keys.getKey({ keyId }), errors.NotFoundErrorResponse, 404, "unkey/data/key_not_found");
    await rejects(
      other.keys.updateCredits({ keyId, operation: "set", value: 2 }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/key_not_found",
    );
    await rejects(other.keys.deleteKey({ keyId }), errors.NotFoundErrorResponse, 404, "unkey/data/key_not_found");
    expect((await unkey.keys.getKey({ keyId })).data.credits).toEqual({ remaining: 1 });
  });
});

describe("@unkey/api 2.5.1: keys.* being built (run once served)", () => {
  it.runIf(served("/v2/keys.createKey"))("createKey: every field, read back through getKey; 404 for another workspace's API", async () => {
    const apiId = await h.createApi(t);
    const roleName = unique("sdk.create_role");
    await v1Role(roleName);
    const externalId = unique("sdk_created");
    const created = await unkey.keys.createKey({
      apiId,
      prefix: "sdkv2",
      name: "made by the v2 SDK",
      byteLength: 24,
      externalId,
      meta: { tier: "gold" },
      roles: [roleName],
      permissions: ["sdk.created.read"],
      expires: Date.now() + 86_400_000,
      credits: { remaining: 5, refill: { interval: "monthly", amount: 5, refillDay: 3 } },
      ratelimits: [{ name: "requests", limit: 10, duration: 60_000, autoApply: true }],
      enabled: true,
    });
    const { keyId, key } = created.data;
    expect(key).toMatch(/^sdkv2_/);
    expect((await unkey.keys.getKey({ keyId })).data).toMatchObject({
      keyId,
      name: "made by the v2 SDK",
      meta: { tier: "gold" },
      expires: expect.any(Number),
      credits: { remaining: 5, refill: { interval: "monthly", amount: 5, refillDay: 3 } },
      roles: [roleName],
      permissions: ["sdk.created.read"],
      identity: { externalId },
      ratelimits: [{ name: "requests", limit: 10, duration: 60_000, autoApply: true }],
    });
    await rejects(
      unkey.keys.createKey({ apiId, roles: [unique("missing_role")] }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/role_not_found",
    );
    await rejects(sdk((await h.tenant()).rootKey).keys.createKey({ apiId }), errors.NotFoundErrorResponse, 404, "unkey/data/api_not_found");
    await rejects(
      unkey.keys.createKey({ apiId, credits: { remaining: 1, refill: { interval: "monthly", amount: 1 } } }),
      errors.BadRequestErrorResponse,
      400,
      "unkey/application/invalid_input",
    );
  });

  it.runIf(served("/v2/keys.updateKey"))("updateKey: three-state fields, answered {} and read back; 403 without update_key", async () => {
    const apiId = await h.createApi(t);
    const { keyId } = await v1Key(apiId, { name: "before", meta: { a: 1 }, remaining: 3 });
    const roleName = unique("sdk.update_role");
    await v1Role(roleName);
    expect(
      (
        await unkey.keys.updateKey({
          keyId,
          name: "after",
          meta: null,
          credits: { remaining: 9, refill: { interval: "daily", amount: 9 } },
          ratelimits: [{ name: "burst", limit: 2, duration: 1000, autoApply: false }],
          enabled: false,
          roles: [roleName],
          permissions: ["sdk.updated"],
          externalId: unique("sdk_upd"),
        })
      ).data,
    ).toEqual({});
    const got = (await unkey.keys.getKey({ keyId })).data;
    expect(got).toMatchObject({
      name: "after",
      enabled: false,
      credits: { remaining: 9, refill: { interval: "daily", amount: 9 } },
      roles: [roleName],
      ratelimits: [{ name: "burst", limit: 2, duration: 1000, autoApply: false }],
    });
    expect(got).not.toHaveProperty("meta");
    expect(got.permissions).toContain("sdk.updated");
    await unkey.keys.updateKey({ keyId, name: null, externalId: null, credits: null });
    const cleared = (await unkey.keys.getKey({ keyId })).data;
    expect(cleared).not.toHaveProperty("name");
    expect(cleared).not.toHaveProperty("identity");
    expect(cleared).not.toHaveProperty("credits");
    const nobody = sdk(await h.rootKey(t.workspaceId, ["api.*.read_key"]));
    await rejects(
      nobody.keys.updateKey({ keyId, name: "x" }),
      errors.ForbiddenErrorResponse,
      403,
      "unkey/authorization/insufficient_permissions",
    );
    await rejects(
      unkey.keys.updateKey({ keyId, credits: { refill: { interval: "daily", amount: 1, refillDay: 2 } } }),
      errors.BadRequestErrorResponse,
      400,
      "unkey/application/invalid_input",
    );
  });

  it.runIf(served("/v2/keys.rerollKey"))("rerollKey: a new key with the old one's settings; 404 for an unknown key", async () => {
    const apiId = await h.createApi(t);
    const old = await v1Key(apiId, { prefix: "rr", name: "rolled", meta: { m: 1 }, remaining: 4 });
    const rolled = (await unkey.keys.rerollKey({ keyId: old.keyId, expiration: 0 })).data;
    expect(rolled.keyId).not.toBe(old.keyId);
    expect(rolled.key).toMatch(/^rr_/);
    expect((await unkey.keys.getKey({ keyId: rolled.keyId })).data).toMatchObject({
      name: "rolled",
      meta: { m: 1 },
      credits: { remaining: 4 },
    });
    expect((await unkey.keys.getKey({ keyId: old.keyId })).data.expires).toEqual(expect.any(Number));
    await rejects(
      unkey.keys.rerollKey({ keyId: "key_missing", expiration: 0 }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/key_not_found",
    );
  });

  it.runIf(served("/v2/keys.verifyKey"))(
    "verifyKey: VALID with credits, rate limits, identity, permissions; codes for the rest; 400 for a bad query",
    async () => {
      const apiId = await h.createApi(t);
      const externalId = unique("sdk_verify");
      const roleName = unique("sdk.verify_role");
      await v1Role(roleName, ["docs.write"]);
      const { key, keyId } = await v1Key(apiId, {
        name: "verified",
        meta: { plan: "pro" },
        externalId,
        roles: [roleName],
        permissions: ["docs.read"],
        remaining: 2,
        ratelimit: { limit: 10, duration: 60_000 },
      });
      const ok = (await unkey.keys.verifyKey({ key, permissions: "docs.read AND (docs.write OR admin)", tags: ["sdk"] })).data;
      expect(ok).toMatchObject({
        valid: true,
        code: "VALID",
        keyId,
        name: "verified",
        meta: { plan: "pro" },
        credits: 1,
        enabled: true,
        roles: [roleName],
        identity: { externalId },
      });
      expect(ok.permissions).toEqual(expect.arrayContaining(["docs.read", "docs.write"]));
      expect(ok.ratelimits).toEqual([
        expect.objectContaining({ name: "default", limit: 10, remaining: 9, exceeded: false, autoApply: true }),
      ]);
      expect((await unkey.keys.verifyKey({ key, permissions: "admin" })).data).toMatchObject({
        valid: false,
        code: "INSUFFICIENT_PERMISSIONS",
      });
      expect((await unkey.keys.verifyKey({ key, credits: { cost: 5 } })).data).toMatchObject({
        valid: false,
        code: "USAGE_EXCEEDED",
        credits: 1,
      });
      expect((await unkey.keys.verifyKey({ key: "sk_nothing_like_it" })).data).toEqual({ valid: false, code: "NOT_FOUND" });
      await rejects(
        unkey.keys.verifyKey({ key, permissions: "docs.read AND" }),
        errors.BadRequestErrorResponse,
        400,
        "user/bad_request/permissions_query_syntax_error",
        "Unexpected end of query. Expected a permission identifier or opening parenthesis.",
      );
      const nobody = sdk(await h.rootKey(t.workspaceId, ["api.*.read_key"]));
      expect((await nobody.keys.verifyKey({ key })).data).toEqual({ valid: false, code: "NOT_FOUND" });
      const disabled = await v1Key(apiId, { enabled: false });
      expect((await unkey.keys.verifyKey({ key: disabled.key })).data).toMatchObject({ valid: false, code: "DISABLED" });
      await rejects(
        unkey.keys.verifyKey({ key, ratelimits: [{ name: "no_such_limit" }] }),
        errors.UnkeyError,
        412,
        "unkey/application/precondition_failed",
      );
    },
  );

  it.runIf(served("/v2/keys.migrateKeys"))("migrateKeys: keys by hash, verified by their plaintext; a taken hash in failed", async () => {
    const apiId = await h.createApi(t);
    const plaintext = `sk_${randomBytes(16).toString("hex")}`;
    const migrationId = unique("sdk_migration");
    const hash = sha256Base64(plaintext);
    const res = (
      await unkey.keys.migrateKeys({
        migrationId,
        apiId,
        keys: [
          {
            hash,
            name: "migrated",
            externalId: unique("sdk_mig"),
            roles: [unique("mig.role")],
            permissions: ["mig.read"],
            credits: { remaining: 3 },
          },
        ],
      })
    ).data;
    expect(res.migrated).toEqual([{ hash, keyId: expect.any(String) }]);
    expect(res.failed).toEqual([]);
    expect((await unkey.keys.getKey({ keyId: res.migrated[0]!.keyId })).data).toMatchObject({
      name: "migrated",
      credits: { remaining: 3 },
    });
    const again = (await unkey.keys.migrateKeys({ migrationId, apiId, keys: [{ hash }] })).data;
    expect(again).toEqual({ migrated: [], failed: [hash] });
    const nobody = sdk(await h.rootKey(t.workspaceId, ["api.*.read_key"]));
    await rejects(
      nobody.keys.migrateKeys({ migrationId, apiId, keys: [{ hash: sha256Base64("other") }] }),
      errors.ForbiddenErrorResponse,
      403,
      "unkey/authorization/insufficient_permissions",
    );
    await rejects(
      unkey.keys.migrateKeys({ migrationId, apiId: "api_missing_sdk", keys: [{ hash: sha256Base64("x") }] }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/api_not_found",
    );
  });

  const rbacServed =
    served("/v2/keys.addPermissions") &&
    served("/v2/keys.removePermissions") &&
    served("/v2/keys.setPermissions") &&
    served("/v2/keys.addRoles") &&
    served("/v2/keys.removeRoles") &&
    served("/v2/keys.setRoles");
  it.runIf(rbacServed)("add/remove/set a key's permissions and roles answer Permission[] / Role[]; unknown role 404", async () => {
    const apiId = await h.createApi(t);
    const { keyId } = await v1Key(apiId);
    const a = unique("sdk.perm_a");
    const b = unique("sdk.perm_b");
    const added = (await unkey.keys.addPermissions({ keyId, permissions: [a] })).data;
    expect(added).toEqual([expect.objectContaining({ id: expect.any(String), name: a, slug: a })]);
    expect((await unkey.keys.setPermissions({ keyId, permissions: [b] })).data.map((p) => p.slug)).toEqual([b]);
    expect((await unkey.keys.removePermissions({ keyId, permissions: [b] })).data).toEqual([]);
    await rejects(
      unkey.keys.removePermissions({ keyId, permissions: [unique("sdk.never")] }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/permission_not_found",
    );

    const roleA = unique("sdk.role_a");
    const roleB = unique("sdk.role_b");
    await v1Role(roleA, [a]);
    await v1Role(roleB);
    const roles = (await unkey.keys.addRoles({ keyId, roles: [roleA] })).data;
    expect(roles).toEqual([expect.objectContaining({ name: roleA, permissions: [expect.objectContaining({ slug: a })] })]);
    expect((await unkey.keys.setRoles({ keyId, roles: [roleB] })).data.map((r) => r.name)).toEqual([roleB]);
    expect((await unkey.keys.removeRoles({ keyId, roles: [roleB] })).data).toEqual([]);
    await rejects(
      unkey.keys.addRoles({ keyId, roles: [unique("sdk.no_role")] }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/role_not_found",
    );
    const nobody = sdk(await h.rootKey(t.workspaceId, ["api.*.read_key"]));
    await rejects(
      nobody.keys.addRoles({ keyId, roles: [roleA] }),
      errors.ForbiddenErrorResponse,
      403,
      "unkey/authorization/insufficient_permissions",
    );
    const other = sdk((await h.tenant()).rootKey);
    await rejects(other.keys.setPermissions({ keyId, permissions: [] }), errors.NotFoundErrorResponse, 404, "unkey/data/key_not_found");
  });
});

describe("@unkey/api 2.5.1: identities.*", () => {
  it("createIdentity, getIdentity (by id and externalId), listIdentities, updateIdentity, deleteIdentity", async () => {
    const externalId = unique("sdk_identity");
    const created = await unkey.identities.createIdentity({
      externalId,
      meta: { plan: "pro" },
      ratelimits: [{ name: "requests", limit: 10, duration: 60_000, autoApply: true }],
    });
    const identityId = created.data.identityId;
    expect(identityId).toMatch(/^id_/);
    const expected = {
      id: identityId,
      externalId,
      meta: { plan: "pro" },
      ratelimits: [{ id: expect.any(String), name: "requests", limit: 10, duration: 60_000, autoApply: true }],
    };
    expect((await unkey.identities.getIdentity({ identity: identityId })).data).toEqual(expected);
    expect((await unkey.identities.getIdentity({ identity: externalId })).data).toEqual(expected);

    const seen: string[] = [];
    for await (const page of await unkey.identities.listIdentities({ limit: 1 })) seen.push(...page.result.data.map((i) => i.id));
    expect(seen).toContain(identityId);
    expect(new Set(seen).size).toBe(seen.length);

    const updated = await unkey.identities.updateIdentity({
      identity: externalId,
      meta: { plan: "team" },
      ratelimits: [{ name: "tokens", limit: 5, duration: 1000, autoApply: false }],
    });
    expect(updated.data).toMatchObject({ id: identityId, externalId, meta: { plan: "team" }, ratelimits: [{ name: "tokens", limit: 5 }] });

    const deleted = await unkey.identities.deleteIdentity({ identity: identityId });
    expect(deleted).toEqual({ meta: { requestId: expect.stringMatching(/^req_/) } });
    await rejects(
      unkey.identities.getIdentity({ identity: identityId }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/identity_not_found",
      "This identity does not exist.",
    );
  });

  it("errors: 409 (taken externalId), 400 (bad externalId), 403 (no permission), 404 (another workspace's)", async () => {
    const externalId = unique("sdk_taken");
    await unkey.identities.createIdentity({ externalId });
    await rejects(
      unkey.identities.createIdentity({ externalId }),
      errors.ConflictErrorResponse,
      409,
      "unkey/data/identity_already_exists",
      `Identity with externalId '${externalId}' already exists in this workspace.`,
    );
    await rejects(
      unkey.identities.createIdentity({ externalId: "has space" }),
      errors.BadRequestErrorResponse,
      400,
      "unkey/application/invalid_input",
    );
    const nobody = sdk(await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    const insufficient = "unkey/authorization/insufficient_permissions";
    await rejects(nobody.identities.createIdentity({ externalId: unique("x") }), errors.ForbiddenErrorResponse, 403, insufficient);
    await rejects(nobody.identities.getIdentity({ identity: externalId }), errors.ForbiddenErrorResponse, 403, insufficient);
    await rejects(nobody.identities.updateIdentity({ identity: externalId, meta: {} }), errors.ForbiddenErrorResponse, 403, insufficient);
    // identities.deleteIdentity declares its errors as application/problem+json while asking for application/json, which
    // upstream answers (contract §1.3) and so does keyhaven: the SDK throws its generic APIError, an UnkeyError.
    await rejects(nobody.identities.deleteIdentity({ identity: externalId }), errors.UnkeyError, 403, insufficient);
    const other = sdk((await h.tenant()).rootKey);
    await rejects(
      other.identities.getIdentity({ identity: externalId }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/identity_not_found",
    );
    await rejects(
      other.identities.updateIdentity({ identity: externalId, meta: {} }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/identity_not_found",
    );
    await rejects(other.identities.deleteIdentity({ identity: externalId }), errors.UnkeyError, 404, "unkey/data/identity_not_found");
    expect((await other.identities.listIdentities({})).result.data).toEqual([]);
  });
});

describe("@unkey/api 2.5.1: permissions.*", () => {
  it("createPermission, getPermission (id or slug), listPermissions (paged), deletePermission", async () => {
    const slug = unique("sdk.perm");
    const permissionId = (await unkey.permissions.createPermission({ name: "SDK permission", slug, description: "made by the SDK" })).data
      .permissionId;
    expect(permissionId).toMatch(/^perm_/);
    const expected = { id: permissionId, name: "SDK permission", slug, description: "made by the SDK" };
    expect((await unkey.permissions.getPermission({ permission: permissionId })).data).toEqual(expected);
    expect((await unkey.permissions.getPermission({ permission: slug })).data).toEqual(expected);
    const seen: string[] = [];
    for await (const page of await unkey.permissions.listPermissions({ limit: 1 })) seen.push(...page.result.data.map((p) => p.id));
    expect(seen).toContain(permissionId);
    expect(new Set(seen).size).toBe(seen.length);
    expect((await unkey.permissions.listPermissions({ search: slug })).result.data).toEqual([expected]);
    expect((await unkey.permissions.deletePermission({ permission: slug })).data).toEqual({});
    await rejects(
      unkey.permissions.getPermission({ permission: permissionId }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/permission_not_found",
      "The requested permission does not exist.",
    );
  });

  it("getRole (id or name) with its permissions, listRoles (paged), deleteRole", async () => {
    const name = unique("sdk.role");
    const slug = unique("sdk.role_perm");
    const roleId = await v1Role(name, [slug]);
    const got = (await unkey.permissions.getRole({ role: name })).data;
    expect(got).toEqual({ id: roleId, name, permissions: [expect.objectContaining({ slug, name: slug })] });
    expect((await unkey.permissions.getRole({ role: roleId })).data).toEqual(got);
    const seen: string[] = [];
    for await (const page of await unkey.permissions.listRoles({ limit: 1 })) seen.push(...page.result.data.map((r) => r.id));
    expect(seen).toContain(roleId);
    expect(new Set(seen).size).toBe(seen.length);
    expect((await unkey.permissions.deleteRole({ role: roleId })).data).toEqual({});
    await rejects(unkey.permissions.getRole({ role: roleId }), errors.NotFoundErrorResponse, 404, "unkey/data/role_not_found");
  });

  it("errors: 409 (slug taken), 400 (bad slug), 403 (no rbac permission), 404 (another workspace's)", async () => {
    const slug = unique("sdk.dup");
    await unkey.permissions.createPermission({ name: slug, slug });
    await rejects(
      unkey.permissions.createPermission({ name: slug, slug }),
      errors.ConflictErrorResponse,
      409,
      "unkey/data/permission_already_exists",
      `A permission with slug '${slug}' already exists in this workspace`,
    );
    await rejects(
      unkey.permissions.createPermission({ name: "x", slug: "bad slug" }),
      errors.BadRequestErrorResponse,
      400,
      "unkey/application/invalid_input",
    );
    const nobody = sdk(await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    const insufficient = "unkey/authorization/insufficient_permissions";
    await rejects(
      nobody.permissions.createPermission({ name: "x", slug: unique("x") }),
      errors.ForbiddenErrorResponse,
      403,
      insufficient,
      "Missing permission: 'rbac.*.create_permission'",
    );
    await rejects(nobody.permissions.getPermission({ permission: slug }), errors.ForbiddenErrorResponse, 403, insufficient);
    await rejects(nobody.permissions.listPermissions({}), errors.ForbiddenErrorResponse, 403, insufficient);
    await rejects(nobody.permissions.deletePermission({ permission: slug }), errors.ForbiddenErrorResponse, 403, insufficient);
    await rejects(nobody.permissions.getRole({ role: "r" }), errors.ForbiddenErrorResponse, 403, insufficient);
    await rejects(nobody.permissions.listRoles({}), errors.ForbiddenErrorResponse, 403, insufficient);
    await rejects(nobody.permissions.deleteRole({ role: "r" }), errors.ForbiddenErrorResponse, 403, insufficient);
    const other = sdk((await h.tenant()).rootKey);
    await rejects(
      other.permissions.getPermission({ permission: slug }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/permission_not_found",
    );
    await rejects(
      other.permissions.deletePermission({ permission: slug }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/permission_not_found",
    );
    const roleName = unique("sdk.their_role");
    await v1Role(roleName);
    await rejects(other.permissions.getRole({ role: roleName }), errors.NotFoundErrorResponse, 404, "unkey/data/role_not_found");
    // permissions.deleteRole declares no 404 in the SDK: its generic APIError.
    await rejects(other.permissions.deleteRole({ role: roleName }), errors.UnkeyError, 404, "unkey/data/role_not_found");
    expect((await other.permissions.listRoles({})).result.data).toEqual([]);
  });

  it.runIf(served("/v2/permissions.createRole") && served("/v2/permissions.setRolePermissions"))(
    "createRole with permissions, setRolePermissions replaces them; 409 for a taken name",
    async () => {
      const name = unique("sdk.new_role");
      const [p1, p2] = [unique("sdk.rp1"), unique("sdk.rp2")];
      const roleId = (await unkey.permissions.createRole({ name, description: "by the SDK", permissions: [p1] })).data.roleId;
      expect(roleId).toMatch(/^role_/);
      expect((await unkey.permissions.getRole({ role: roleId })).data).toMatchObject({
        id: roleId,
        name,
        description: "by the SDK",
        permissions: [expect.objectContaining({ slug: p1 })],
      });
      const set = (await unkey.permissions.setRolePermissions({ roleId, permissions: [p2] })).data;
      expect(set).toEqual([expect.objectContaining({ slug: p2 })]);
      expect((await unkey.permissions.getRole({ role: roleId })).data.permissions?.map((p) => p.slug)).toEqual([p2]);
      await rejects(unkey.permissions.createRole({ name }), errors.ConflictErrorResponse, 409, "unkey/data/role_already_exists");
      await rejects(
        unkey.permissions.setRolePermissions({ roleId: "role_missing_sdk", permissions: [] }),
        errors.NotFoundErrorResponse,
        404,
        "unkey/data/role_not_found",
      );
    },
  );
});

describe("@unkey/api 2.5.1: ratelimit.*", () => {
  it("limit counts down; setOverride, getOverride (wildcards), listOverrides (paged), deleteOverride", async () => {
    const namespace = unique("sdk_ns");
    const first = (await unkey.ratelimit.limit({ namespace, identifier: "user_1", limit: 2, duration: 3_600_000 })).data;
    expect(first).toEqual({ success: true, limit: 2, remaining: 1, reset: expect.any(Number) });
    expect(first.reset).toBeGreaterThan(Date.now());
    await unkey.ratelimit.limit({ namespace, identifier: "user_1", limit: 2, duration: 3_600_000 });
    expect((await unkey.ratelimit.limit({ namespace, identifier: "user_1", limit: 2, duration: 3_600_000 })).data).toMatchObject({
      success: false,
      remaining: 0,
    });
    expect((await unkey.ratelimit.limit({ namespace, identifier: "user_2", limit: 2, duration: 3_600_000, cost: 0 })).data).toMatchObject({
      success: true,
      remaining: 2,
    });

    const overrideId = (await unkey.ratelimit.setOverride({ namespace, identifier: "vip_*", limit: 50, duration: 60_000 })).data.overrideId;
    expect(overrideId).toMatch(/^rlor_/);
    expect((await unkey.ratelimit.limit({ namespace, identifier: "vip_7", limit: 2, duration: 3_600_000 })).data).toMatchObject({
      success: true,
      limit: 50,
      remaining: 49,
      overrideId,
    });
    const override = { overrideId, identifier: "vip_*", limit: 50, duration: 60_000 };
    expect((await unkey.ratelimit.getOverride({ namespace, identifier: "vip_*" })).data).toEqual(override);
    expect((await unkey.ratelimit.getOverride({ namespace, identifier: "vip_42" })).data).toEqual(override);
    const second = (await unkey.ratelimit.setOverride({ namespace, identifier: "exact", limit: 1, duration: 1000 })).data.overrideId;
    const seen: string[] = [];
    for await (const page of await unkey.ratelimit.listOverrides({ namespace, limit: 1 }))
      seen.push(...page.result.data.map((o) => o.overrideId));
    expect(seen.sort()).toEqual([overrideId, second].sort());
    expect((await unkey.ratelimit.deleteOverride({ namespace, identifier: "vip_*" })).data).toEqual({});
    await rejects(
      unkey.ratelimit.getOverride({ namespace, identifier: "vip_*" }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/ratelimit_override_not_found",
      "This override does not exist.",
    );
  });

  it("errors: 400 (bad duration), 403 (no permission), 404 (another workspace's namespace)", async () => {
    const namespace = unique("sdk_ns_err");
    await unkey.ratelimit.limit({ namespace, identifier: "a", limit: 1, duration: 1000 });
    await rejects(
      unkey.ratelimit.limit({ namespace, identifier: "a", limit: 1, duration: 10 }),
      errors.BadRequestErrorResponse,
      400,
      "unkey/application/invalid_input",
    );
    const nobody = sdk(await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    const insufficient = "unkey/authorization/insufficient_permissions";
    await rejects(
      nobody.ratelimit.limit({ namespace, identifier: "a", limit: 1, duration: 1000 }),
      errors.ForbiddenErrorResponse,
      403,
      insufficient,
    );
    await rejects(
      nobody.ratelimit.limit({ namespace: unique("sdk_new_ns"), identifier: "a", limit: 1, duration: 1000 }),
      errors.ForbiddenErrorResponse,
      403,
      insufficient,
      "Missing permission: 'ratelimit.*.create_namespace'",
    );
    await rejects(
      nobody.ratelimit.setOverride({ namespace, identifier: "a", limit: 1, duration: 1000 }),
      errors.ForbiddenErrorResponse,
      403,
      insufficient,
    );
    await rejects(nobody.ratelimit.listOverrides({ namespace }), errors.ForbiddenErrorResponse, 403, insufficient);
    await rejects(nobody.ratelimit.deleteOverride({ namespace, identifier: "a" }), errors.ForbiddenErrorResponse, 403, insufficient);
    const other = sdk((await h.tenant()).rootKey);
    const notFound = "unkey/data/ratelimit_namespace_not_found";
    await rejects(
      other.ratelimit.setOverride({ namespace, identifier: "a", limit: 1, duration: 1000 }),
      errors.NotFoundErrorResponse,
      404,
      notFound,
    );
    await rejects(other.ratelimit.getOverride({ namespace, identifier: "a" }), errors.NotFoundErrorResponse, 404, notFound);
    await rejects(other.ratelimit.listOverrides({ namespace }), errors.NotFoundErrorResponse, 404, notFound);
    await rejects(other.ratelimit.deleteOverride({ namespace, identifier: "a" }), errors.NotFoundErrorResponse, 404, notFound);
  });

  it.runIf(served("/v2/ratelimit.multiLimit"))("multiLimit: all-or-nothing over several namespaces, in request order", async () => {
    const [a, b] = [unique("sdk_ml_a"), unique("sdk_ml_b")];
    const ok = (
      await unkey.ratelimit.multiLimit([
        { namespace: a, identifier: "u", limit: 1, duration: 60_000 },
        { namespace: b, identifier: "u", limit: 2, duration: 60_000 },
      ])
    ).data;
    expect(ok).toEqual({
      passed: true,
      limits: [
        { namespace: a, identifier: "u", limit: 1, remaining: 0, reset: expect.any(Number), passed: true },
        { namespace: b, identifier: "u", limit: 2, remaining: 1, reset: expect.any(Number), passed: true },
      ],
    });
    const refused = (
      await unkey.ratelimit.multiLimit([
        { namespace: b, identifier: "u", limit: 2, duration: 60_000 },
        { namespace: a, identifier: "u", limit: 1, duration: 60_000 },
      ])
    ).data;
    expect(refused.passed).toBe(false);
    expect(refused.limits.map((l) => l.passed)).toEqual([true, false]);
    // Nothing was spent by the refused batch: b still has its one left.
    expect((await unkey.ratelimit.limit({ namespace: b, identifier: "u", limit: 2, duration: 60_000 })).data).toMatchObject({
      success: true,
      remaining: 0,
    });
    const nobody = sdk(await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    await rejects(
      nobody.ratelimit.multiLimit([{ namespace: a, identifier: "u", limit: 1, duration: 60_000 }]),
      errors.ForbiddenErrorResponse,
      403,
      "unkey/authorization/insufficient_permissions",
    );
  });
});

describe("@unkey/api 2.5.1: analytics.getVerifications", () => {
  it.runIf(served("/v2/analytics.getVerifications"))(
    "answers the query's rows in data; 400 invalid_analytics_table for another table; 403 without read_analytics",
    async () => {
      const res = await unkey.analytics.getVerifications({ query: "SELECT count(*) AS n FROM key_verifications_v1 WHERE key_id = 'none'" });
      expect(res.data).toEqual([{ n: 0 }]);
      await rejects(
        unkey.analytics.getVerifications({ query: "SELECT * FROM users" }),
        errors.BadRequestErrorResponse,
        400,
        "user/bad_request/invalid_analytics_table",
        "Access to table 'users' is not allowed",
      );
      const nobody = sdk(await h.rootKey(t.workspaceId, ["api.*.read_api"]));
      await rejects(
        nobody.analytics.getVerifications({ query: "SELECT 1" }),
        errors.ForbiddenErrorResponse,
        403,
        "unkey/authorization/insufficient_permissions",
        "Missing permission: 'api.*.read_analytics'",
      );
    },
  );
});

describe("@unkey/api 2.5.1: portal.*", () => {
  /** A portal (keyhaven.createPortal: the SDK has no method for it) over a new API, and a key of `externalId`'s in it. */
  async function portalWithKey(externalId: string) {
    const apiId = (await unkey.apis.createApi({ name: unique("sdk-portal-api") })).data.apiId;
    const slug = `sdk-${randomBytes(4).toString("hex")}`;
    const created = await h.post("/v2/keyhaven.createPortal", { apiId, slug, name: "SDK portal" }, t.rootKey);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const key = (await unkey.keys.createKey({ apiId, externalId })).data;
    return { apiId, slug, portalId: created.body.data.portalId as string, key };
  }

  it("createSession (root key), exchangeCode (no credentials), then listKeys, rerollKey and getVerifications with the session's cookie", async () => {
    const externalId = unique("sdk_portal_user");
    const { apiId, slug, key } = await portalWithKey(externalId);
    const minted = await unkey.portal.createSession({ portal: slug, externalId, scopes: ["keys:read", "keys:reroll", "analytics:read"] });
    expect(minted.result.meta.requestId).toMatch(/^req_/);
    expect(minted.result.data.id).toMatch(/^ps_/);
    const url = new URL(minted.result.data.url);
    expect(`${url.origin}${url.pathname}`).toBe(`${baseUrl}/portal/`);
    const code = url.searchParams.get("code")!;
    expect(code).toMatch(/^pst_/);
    expect(minted.headers["cache-control"]).toEqual(["no-store"]);

    // exchangeCode sends no root key: a client without one does it.
    const anonymous = new Unkey({ serverURL: baseUrl, retryConfig: { strategy: "none" } });
    const exchanged = await anonymous.portal.exchangeCode({ code });
    expect(exchanged.result.data.accessToken).toMatch(/^pat_/);
    expect(exchanged.result.data.expiresAt).toBeGreaterThan(Date.now() + 23 * 3_600_000);
    await rejects(
      anonymous.portal.exchangeCode({ code }),
      errors.UnauthorizedErrorResponse,
      401,
      "unkey/authentication/portal_session_not_found",
      "Session is invalid, expired, or has already been used.",
    );
    const security = { portalSession: exchanged.result.data.accessToken };

    // listKeys, through the SDK's own page iterator (limit 1 over two keys).
    const second = (await unkey.keys.createKey({ apiId, externalId })).data;
    const seen: string[] = [];
    for await (const page of await unkey.portal.listKeys(security, { limit: 1 })) {
      expect(page.result.data.length).toBeLessThanOrEqual(1);
      seen.push(...page.result.data.map((k) => k.keyId));
    }
    expect(seen).toEqual([key.keyId, second.keyId].sort());
    const all = await unkey.portal.listKeys(security, {});
    expect(all.result.data.every((k) => k.identity?.externalId === externalId)).toBe(true);
    expect(all.result.pagination?.hasMore).toBe(false);

    // getVerifications: the key's verifications, once counted.
    for (let i = 0; i < 3; i++) expect((await unkey.keys.verifyKey({ key: key.key })).data.valid).toBe(true);
    await h.jobs.verificationLog.flush();
    await h.jobs.analytics.flush();
    const now = Date.now();
    const points = await unkey.portal.getVerifications(security, { startTime: now - 3_600_000, endTime: now + 60_000 });
    expect(points.meta.requestId).toMatch(/^req_/);
    expect(points.data.reduce((n, p) => n + p.total, 0)).toBe(3);
    expect(points.data.reduce((n, p) => n + p.valid, 0)).toBe(3);
    const byKey = await unkey.portal.getVerifications(security, { startTime: now - 3_600_000, endTime: now + 60_000, keyId: second.keyId });
    expect(byKey.data.reduce((n, p) => n + p.total, 0)).toBe(0);
    await rejects(
      unkey.portal.getVerifications(security, { startTime: now - 40 * 86_400_000, endTime: now }),
      errors.BadRequestErrorResponse,
      400,
      "unkey/application/invalid_input",
      "The requested time window is too large. The maximum window is 30 days.",
    );

    // rerollKey: a new key of the same user; the old one expires now.
    const rerolled = await unkey.portal.rerollKey(security, { keyId: key.keyId, expiration: 0 });
    expect(rerolled.data.keyId).not.toBe(key.keyId);
    expect((await unkey.keys.verifyKey({ key: rerolled.data.key })).data.valid).toBe(true);
    expect((await unkey.keys.verifyKey({ key: key.key })).data).toMatchObject({ valid: false, code: "EXPIRED" });
    await rejects(
      unkey.portal.rerollKey(security, { keyId: "key_1234567890abcdefghij", expiration: 0 }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/key_not_found",
      /^The specified key was not found\./,
    );
  });

  it("the SDK's typed errors: 404 masked portal, 403 scope ceiling and missing scope, 401 for a wrong token", async () => {
    const externalId = unique("sdk_portal_err");
    const { slug, portalId, key } = await portalWithKey(externalId);
    const reader = sdk(await h.rootKey(t.workspaceId, ["api.*.read_key", "api.*.read_api"]));
    const body = await rejects(
      reader.portal.createSession({ portal: slug, externalId, scopes: ["keys:read"] }),
      errors.NotFoundErrorResponse,
      404,
      "unkey/data/portal_not_found",
      "Portal not found.",
    );
    expect(JSON.stringify(body)).not.toContain(portalId);
    const minter = sdk(await h.rootKey(t.workspaceId, ["portal.*.create_portal_session", "api.*.read_key", "api.*.read_api"]));
    await rejects(
      minter.portal.createSession({ portal: portalId, externalId, scopes: ["keys:read", "keys:reroll"] }),
      errors.ForbiddenErrorResponse,
      403,
      "unkey/authorization/insufficient_permissions",
      'You do not have permission to grant the "keys:reroll" scope to a portal session.',
    );
    const readOnly = await minter.portal.createSession({ portal: portalId, externalId, scopes: ["keys:read"] });
    const code = new URL(readOnly.result.data.url).searchParams.get("code")!;
    const token = (await unkey.portal.exchangeCode({ code })).result.data.accessToken;
    await rejects(
      unkey.portal.rerollKey({ portalSession: token }, { keyId: key.keyId, expiration: 0 }),
      errors.ForbiddenErrorResponse,
      403,
      "unkey/authorization/insufficient_permissions",
      "Missing permission: 'keys:reroll'",
    );
    await rejects(
      unkey.portal.getVerifications({ portalSession: token }, { startTime: 0, endTime: 60_000 }),
      errors.ForbiddenErrorResponse,
      403,
      "unkey/authorization/insufficient_permissions",
      "Missing permission: 'analytics:read'",
    );
    await rejects(
      unkey.portal.listKeys({ portalSession: "pat_not_a_session_token_000" }, {}),
      errors.UnauthorizedErrorResponse,
      401,
      "unkey/authentication/portal_session_not_found",
      "The portal session is invalid or has expired.",
    );
  });
});
