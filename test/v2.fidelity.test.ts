import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
import { expectV2Error } from "./v2-errors.js";

// Cases of Unkey v2's own Go integration tests (issue 34 §3) that keyhaven answered otherwise: each test here sends
// what upstream's test sends and checks what upstream's test checks (their `require.Contains` as toContain).

const unique = (name: string) => `${name}_${randomBytes(4).toString("hex")}`;
const THIRTY_DAYS = 2_592_000_000;

// The file's harness, tenant and API are made in a hook (its deadline is the hooks' one), not in the first test.
test.beforeAll(async ({ h, t, apiId }) => {
  expect([h, t, apiId].every(Boolean)).toBe(true);
});

async function v2Key(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown> = {}) {
  const res = await h.post("/v2/keys.createKey", { apiId, ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { key: string; keyId: string };
}

describe("rate-limit windows up to 30 days on v2 (upstream's per_month example)", () => {
  test("createKey, updateKey, createIdentity and updateIdentity take a 30-day window; it reads back and verifies", async ({
    h,
    t,
    apiId,
  }) => {
    const monthly = { name: "per_month", limit: 1000, duration: THIRTY_DAYS, autoApply: true };
    const externalId = unique("customer");
    const created = await h.post("/v2/identities.createIdentity", { externalId, ratelimits: [monthly] }, t.rootKey);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const updated = await h.post(
      "/v2/identities.updateIdentity",
      { identity: externalId, ratelimits: [monthly, { ...monthly, name: "per_month_2" }] },
      t.rootKey,
    );
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    const identity = await h.post("/v2/identities.getIdentity", { identity: externalId }, t.rootKey);
    expect(identity.body.data.ratelimits.map((r: { duration: number }) => r.duration)).toEqual([THIRTY_DAYS, THIRTY_DAYS]);

    const { key, keyId } = await v2Key(h, t, apiId, { externalId, ratelimits: [monthly] });
    const updatedKey = await h.post("/v2/keys.updateKey", { keyId, ratelimits: [{ ...monthly, name: "key_month" }] }, t.rootKey);
    expect(updatedKey.status, JSON.stringify(updatedKey.body)).toBe(200);
    const got = await h.post("/v2/keys.getKey", { keyId }, t.rootKey);
    expect(got.body.data.ratelimits).toEqual([expect.objectContaining({ name: "key_month", duration: THIRTY_DAYS })]);
    expect(got.body.data.identity.ratelimits).toHaveLength(2);

    const verified = await h.post("/v2/keys.verifyKey", { key }, t.rootKey);
    expect(verified.body.data).toMatchObject({ valid: true, code: "VALID" });
    const counted = verified.body.data.ratelimits as { name: string; duration: number; remaining: number }[];
    expect(counted.map((r) => [r.name, r.duration, r.remaining]).sort()).toEqual([
      ["key_month", THIRTY_DAYS, 999],
      ["per_month", THIRTY_DAYS, 999],
      ["per_month_2", THIRTY_DAYS, 999],
    ]);
    // v1 reads the identity's monthly limits too.
    const v1 = await h.get("/v1/identities.getIdentity", { externalId }, t.rootKey);
    expect(v1.body.ratelimits.map((r: { duration: number }) => r.duration)).toEqual([THIRTY_DAYS, THIRTY_DAYS]);
  });

  test("a window over 30 days is a 400 whose errors[] names the numeric bound (maximum), not a string's", async ({ h, t, apiId }) => {
    const tooLong = { name: "per_quarter", limit: 1, duration: THIRTY_DAYS + 1, autoApply: true };
    for (const [path, body] of [
      ["/v2/keys.createKey", { apiId, ratelimits: [tooLong] }],
      ["/v2/identities.createIdentity", { externalId: unique("x"), ratelimits: [tooLong] }],
    ] as const) {
      const res = await h.post(path, body, t.rootKey);
      expectV2Error(res, 400, "unkey/application/invalid_input", `POST request body for '${path}' failed to validate schema`);
      expect(res.body.error.errors).toEqual([
        { location: "/properties/ratelimits/items/properties/duration/maximum", message: "maximum: got 2.592000001e+09, want 2.592e+09" },
      ]);
    }
    const tooShort = await h.post("/v2/keys.createKey", { apiId, ratelimits: [{ ...tooLong, duration: 999 }] }, t.rootKey);
    expect(tooShort.body.error.errors).toEqual([
      { location: "/properties/ratelimits/items/properties/duration/minimum", message: "minimum: got 999, want 1000" },
    ]);
  });
});

describe("v2's validator messages (upstream's v2_apis_create_api/400_test.go)", () => {
  test("a too-short API name: minLength: got 2, want 3; other kinds in the validator's words", async ({ h, t }) => {
    const short = await h.post("/v2/apis.createApi", { name: "ab" }, t.rootKey);
    expect(short.body.error.errors).toEqual([{ location: "/properties/name/minLength", message: "minLength: got 2, want 3" }]);
    const missing = await h.post("/v2/apis.createApi", {}, t.rootKey);
    expect(missing.body.error.errors).toEqual([{ location: "/required", message: "missing property 'name'" }]);
    const wrongType = await h.post("/v2/apis.createApi", { name: 3 }, t.rootKey);
    expect(wrongType.body.error.errors).toEqual([{ location: "/properties/name/type", message: "got number, want string" }]);
    const extra = await h.post("/v2/apis.createApi", { name: "fine-name", extra: true }, t.rootKey);
    expect(extra.body.error.errors).toEqual([{ location: "/additionalProperties", message: "additional properties 'extra' not allowed" }]);
  });
});

describe("a key that is not there: v2's sentences (upstream's 404 tests of every key route)", () => {
  test("unknown, deleted, short and other-workspace keys all answer a detail holding both of v2's sentences", async ({ h, t, apiId }) => {
    const other = await h.tenant();
    const { keyId: theirs } = await v2Key(h, other, await h.createApi(other));
    const { keyId: deleted } = await v2Key(h, t, apiId);
    expect((await h.post("/v2/keys.deleteKey", { keyId: deleted }, t.rootKey)).status).toBe(200);
    const routes: [string, Record<string, unknown>][] = [
      ["keys.getKey", {}],
      ["keys.updateKey", { enabled: false }],
      ["keys.deleteKey", {}],
      ["keys.updateCredits", { operation: "set", value: 1 }],
      ["keys.rerollKey", { expiration: 0 }],
      ["keys.addPermissions", { permissions: ["a.b"] }],
      ["keys.removePermissions", { permissions: ["a.b"] }],
      ["keys.setPermissions", { permissions: ["a.b"] }],
      ["keys.addRoles", { roles: ["r"] }],
      ["keys.removeRoles", { roles: ["r"] }],
      ["keys.setRoles", { roles: ["r"] }],
    ];
    const details = new Set<string>();
    for (const [route, body] of routes) {
      // "abc": upstream's ids are at least 3 characters, so a short one is looked up (404), not refused (400).
      for (const keyId of ["key_missing_123", "abc", deleted, theirs]) {
        const res = await h.post(`/v2/${route}`, { keyId, ...body }, t.rootKey);
        expectV2Error(res, 404, "unkey/data/key_not_found");
        expect(res.body.error.detail).toContain("The specified key was not found");
        expect(res.body.error.detail).toContain("We could not find the requested key");
        details.add(res.body.error.detail);
      }
    }
    expect(details.size).toBe(1);
    const whoami = await h.post("/v2/keys.whoami", { key: "sk_unknown_0123456789" }, t.rootKey);
    expect(whoami.body.error.detail).toBe([...details][0]);
  });
});

describe("ids as upstream bounds them", () => {
  test("an apiId of 3 characters reaches the lookup (404), a bad root key is a 401 first", async ({ h, t }) => {
    expectV2Error(await h.post("/v2/keys.createKey", { apiId: "abc" }, t.rootKey), 404, "unkey/data/api_not_found");
    expectV2Error(await h.post("/v2/keys.setRoles", { keyId: "abc", roles: [] }, "unkey_nope"), 401, "unkey/authentication/key_not_found");
    expectV2Error(await h.post("/v2/keys.createKey", { apiId: "ab" }, t.rootKey), 400, "unkey/application/invalid_input");
  });

  test("apis.listKeys: a very long apiId (NUL characters) and one with special characters are 404, never sent to the store", async ({
    h,
    t,
  }) => {
    for (const apiId of [`api_${"\u0000".repeat(500)}`, "api_special!@#$%^&*()", "invalid_format", `api_${"x".repeat(5000)}`]) {
      const res = await h.post("/v2/apis.listKeys", { apiId }, t.rootKey);
      expectV2Error(res, 404, "unkey/data/api_not_found", "The requested API does not exist or has been deleted.");
    }
  });

  test("identities: a very long identity, one with NUL characters or special characters, is 404 on get, update and delete", async ({
    h,
    t,
  }) => {
    for (const identity of [`test_${"\u0000".repeat(1000)}`, `very_long_${"x".repeat(2000)}`, "@#$%"]) {
      for (const [route, body] of [
        ["identities.getIdentity", {}],
        ["identities.updateIdentity", { meta: { a: 1 } }],
        ["identities.deleteIdentity", {}],
      ] as const) {
        const res = await h.post(`/v2/${route}`, { identity, ...body }, t.rootKey);
        expectV2Error(res, 404, "unkey/data/identity_not_found", "This identity does not exist.");
      }
    }
    // Elsewhere a NUL is still refused before anything is written: PostgreSQL's text cannot hold it.
    const stored = await h.post("/v2/identities.updateIdentity", { identity: "x_ok", meta: { a: "\u0000" } }, t.rootKey);
    expectV2Error(stored, 400, "unkey/application/invalid_input");
  });
});

describe("keys.addPermissions with an unknown permission (upstream's v2_keys_add_permissions/400_test.go)", () => {
  test("by id or by slug, without create_permission: 404 naming it; nothing created; with it, created", async ({ h, t, apiId }) => {
    const { keyId } = await v2Key(h, t, apiId);
    const adder = await h.rootKey(t.workspaceId, ["api.*.update_key", "rbac.*.add_permission_to_key"]);
    for (const missing of [unique("test"), "nonexistent.permission"]) {
      const res = await h.post("/v2/keys.addPermissions", { keyId, permissions: [missing] }, adder);
      expectV2Error(res, 404, "unkey/data/permission_not_found", `Permission '${missing}' was not found.`);
      expect(res.body.error.detail).toContain("was not found");
      expect(await h.sql(`select id from permissions where slug = '${missing}'`)).toEqual([]);
    }
    const creator = await h.rootKey(t.workspaceId, ["api.*.update_key", "rbac.*.add_permission_to_key", "rbac.*.create_permission"]);
    expect((await h.post("/v2/keys.addPermissions", { keyId, permissions: ["nonexistent.permission"] }, creator)).status).toBe(200);
  });
});

describe("identity meta over the limit is a 400, not a 413 (upstream's identities 400 tests)", () => {
  test("createIdentity with 70,000 meta properties, updateIdentity with a 1 MiB string", async ({ h, t }) => {
    const meta: Record<string, string> = {};
    for (let i = 0; i < 70_905; i++) meta[`key_${i}`] = `some_${i}`;
    const created = await h.post("/v2/identities.createIdentity", { externalId: unique("big"), meta }, t.rootKey);
    expectV2Error(
      created,
      400,
      "unkey/application/invalid_input",
      "POST request body for '/v2/identities.createIdentity' failed to validate schema",
    );
    const updated = await h.post(
      "/v2/identities.updateIdentity",
      { identity: "identity_123", meta: { large_field: "a".repeat(1024 * 1024) } },
      t.rootKey,
    );
    expectV2Error(updated, 400, "unkey/application/invalid_input");
    expect(updated.body.error.detail).toContain("Metadata is too large");
  });
});

describe("permission messages upstream's tests assert", () => {
  test("createRole and deletePermission: 403 Missing one of these permissions", async ({ h, t }) => {
    const reader = await h.rootKey(t.workspaceId, ["rbac.*.read_role"]);
    const role = await h.post("/v2/permissions.createRole", { name: unique("role") }, reader);
    expectV2Error(role, 403, "unkey/authorization/insufficient_permissions", "Missing one of these permissions: rbac.*.create_role");
    const deleted = await h.post("/v2/permissions.deletePermission", { permission: "perm_whatever" }, reader);
    expectV2Error(
      deleted,
      403,
      "unkey/authorization/insufficient_permissions",
      "Missing one of these permissions: rbac.*.delete_permission",
    );
    // A single permission upstream asks for alone keeps its own form.
    const perm = await h.post("/v2/permissions.createPermission", { name: "p", slug: unique("p") }, reader);
    expectV2Error(perm, 403, "unkey/authorization/insufficient_permissions", "Missing permission: 'rbac.*.create_permission'");
  });

  test("apis.listKeys with decrypt and no decrypt permission: 403 naming the permission", async ({ h, t, apiId }) => {
    const reader = await h.rootKey(t.workspaceId, ["api.*.read_key", "api.*.read_api"]);
    const res = await h.post("/v2/apis.listKeys", { apiId, decrypt: true }, reader);
    expectV2Error(
      res,
      403,
      "unkey/authorization/insufficient_permissions",
      `Missing one of these permissions: api.*.decrypt_key or api.${apiId}.decrypt_key or unkey:v1:${t.workspaceId}:keyspaces/${apiId}/keys/*#decrypt_key`,
    );
    expect(res.body.error.detail).toContain("permission");
  });
});

describe("empty meta (upstream's KeyResponseData: meta omitempty)", () => {
  test("v2 getKey and whoami leave out meta {}; v1 getKey shows it", async ({ h, t, apiId }) => {
    const { key, keyId } = await v2Key(h, t, apiId, { meta: {} });
    expect((await h.post("/v2/keys.getKey", { keyId }, t.rootKey)).body.data).not.toHaveProperty("meta");
    expect((await h.post("/v2/keys.whoami", { key }, t.rootKey)).body.data).not.toHaveProperty("meta");
    expect((await h.get("/v1/keys.getKey", { keyId }, t.rootKey)).body.meta).toEqual({});
  });
});
