import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { answersNotFound, createsInOwnWorkspace, describeRootKeyAuth, rowsOf } from "./auth-suite.js";
import { createHarness, expectError, type Harness } from "./helper.js";

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const createApiIn = async (h: Harness, rootKey: string) =>
  (await h.post("/v1/apis.createApi", { name: "auth-suite-api" }, rootKey)).body.apiId as string;

describeRootKeyAuth(() => h, {
  method: "POST",
  path: "/v1/apis.createApi",
  validRequest: async () => ({ body: { name: "an-api" } }),
  insufficientPermissions: ["api.*.read_api", "api.*.create_key"],
  countRows: rowsOf("apis"),
  expectForOtherWorkspace: createsInOwnWorkspace("apis", "apiId"),
});

describeRootKeyAuth(() => h, {
  method: "GET",
  path: "/v1/apis.getApi",
  validRequest: async (h, owner) => ({ query: { apiId: await createApiIn(h, owner.rootKey) } }),
  insufficientPermissions: ["api.*.create_api", "api.other.read_api"],
  countRows: rowsOf("apis"),
  expectForOtherWorkspace: answersNotFound(/^api api_\w+ not found$/),
});

describeRootKeyAuth(() => h, {
  method: "POST",
  path: "/v1/apis.updateApi",
  validRequest: async (h, owner) => ({ body: { apiId: await createApiIn(h, owner.rootKey), ipWhitelist: "10.0.0.1" } }),
  insufficientPermissions: ["api.*.read_api", "api.*.create_api", "api.other.update_api"],
  countRows: rowsOf("apis where ip_whitelist is not null"),
  expectForOtherWorkspace: answersNotFound(/^api api_\w+ not found$/),
  missingRequest: (valid) => ({ body: { ...(valid.body as Record<string, unknown>), apiId: "api_missing" } }),
});

describeRootKeyAuth(() => h, {
  method: "POST",
  path: "/v1/permissions.createRole",
  validRequest: async () => ({ body: { name: `role-${Math.random().toString(36).slice(2)}` } }),
  insufficientPermissions: ["rbac.*.create_permission", "rbac.*.read_role"],
  countRows: rowsOf("roles"),
  expectForOtherWorkspace: createsInOwnWorkspace("roles", "roleId"),
});

describeRootKeyAuth(() => h, {
  method: "POST",
  path: "/v1/permissions.createPermission",
  validRequest: async () => ({ body: { name: `perm.${Math.random().toString(36).slice(2)}` } }),
  insufficientPermissions: ["rbac.*.create_role"],
  countRows: rowsOf("permissions"),
  expectForOtherWorkspace: createsInOwnWorkspace("permissions", "permissionId"),
});

describeRootKeyAuth(() => h, {
  method: "POST",
  path: "/v1/migrations.createKeys",
  validRequest: async (h, owner) => {
    const apiId = await createApiIn(h, owner.rootKey);
    return { body: [{ apiId, hash: { value: hashKey(`k-${Math.random()}`), variant: "sha256_base64" } }] };
  },
  insufficientPermissions: ["api.*.read_key", "api.*.encrypt_key", "api.other.create_key"],
  countRows: rowsOf("keys"),
  async expectForOtherWorkspace(res, h) {
    expectError(res, 404, "NOT_FOUND", /^api api_\w+ not found$/);
    expect(await rowsOf("keys")(h)).toBeGreaterThanOrEqual(0);
  },
});

describe("root keys and customer keys are not interchangeable", () => {
  it("answers a customer's API key used as a root key with 403 root key required", async () => {
    const t = await h.tenant();
    const apiId = await createApiIn(h, t.rootKey);
    const customerKey = "customer_key_for_the_auth_test";
    expect((await h.post("/v1/migrations.createKeys", [{ apiId, plaintext: customerKey }], t.rootKey)).status).toBe(200);
    expectError(await h.post("/v1/apis.createApi", { name: "nope" }, customerKey), 403, "UNAUTHORIZED", "root key required");
  });

  it("does not accept a root key where a customer key is verified", async () => {
    const t = await h.tenant();
    const res = await h.post("/v1/keys.verifyKey", { key: t.rootKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ valid: false, code: "NOT_FOUND", requestId: res.headers["unkey-request-id"] });
  });

  it("stores root keys only as SHA-256 hashes", async () => {
    const t = await h.tenant();
    const rows = await h.sql<{ row: string }>(`select row_to_json(r)::text as row from root_keys r`);
    expect(rows.some((r) => r.row.includes(t.rootKey))).toBe(false);
    expect(rows.some((r) => r.row.includes(hashKey(t.rootKey)))).toBe(true);
  });
});

describe("the Authorization header", () => {
  it("accepts the Bearer scheme in any case, and a bare token as v1 did", async () => {
    const t = await h.tenant();
    for (const header of [`Bearer ${t.rootKey}`, `bearer ${t.rootKey}`, `BEARER  ${t.rootKey}`, t.rootKey]) {
      const res = await h.app.inject({
        method: "POST",
        url: "/v1/apis.createApi",
        headers: { authorization: header, "content-type": "application/json" },
        payload: { name: "scheme-test" },
      });
      expect(res.statusCode, header).toBe(200);
    }
  });
});
