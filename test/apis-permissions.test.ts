import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, expectError, type Harness, type Tenant } from "./helper.js";

let h: Harness;
let t: Tenant;
beforeAll(async () => {
  h = await createHarness();
  t = await h.tenant();
});
afterAll(() => h.close());

describe("apis.createApi and apis.getApi", () => {
  it("creates an API with its settings and reads it back", async () => {
    const res = await h.post(
      "/v1/apis.createApi",
      { name: "payments", storeEncryptedKeys: true, defaultPrefix: "pay", defaultBytes: 24, deleteProtection: true },
      t.rootKey,
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ apiId: expect.stringMatching(/^api_/), name: "payments" });
    const [row] = await h.sql<any>(`select * from apis where id = '${res.body.apiId}'`);
    expect(row).toMatchObject({
      workspace_id: t.workspaceId,
      name: "payments",
      store_encrypted_keys: true,
      default_prefix: "pay",
      default_bytes: 24,
      delete_protection: true,
      deleted_at_m: null,
    });
    const got = await h.get("/v1/apis.getApi", { apiId: res.body.apiId }, t.rootKey);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ id: res.body.apiId, workspaceId: t.workspaceId, name: "payments" });
  });

  it.each([
    [{ name: "ab" }, "name: String must contain at least 3 character(s)"],
    [{ name: "okay", defaultPrefix: "123456789" }, "defaultPrefix: String must contain at most 8 character(s)"],
    [{ name: "okay", defaultBytes: 15 }, "defaultBytes: Number must be greater than or equal to 16"],
    [{ name: "okay", defaultBytes: 256 }, "defaultBytes: Number must be less than or equal to 255"],
    [{ name: "okay", storeEncryptedKeys: "yes" }, /^storeEncryptedKeys: /],
  ])("refuses %j with 400", async (body, message) => {
    expectError(await h.post("/v1/apis.createApi", body, t.rootKey), 400, "BAD_REQUEST", message);
  });

  it("answers an unknown or deleted API with 404", async () => {
    expectError(await h.get("/v1/apis.getApi", { apiId: "api_nope" }, t.rootKey), 404, "NOT_FOUND", "api api_nope not found");
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "to-delete" }, t.rootKey)).body;
    await h.sql(`update apis set deleted_at_m = 1 where id = '${apiId}'`);
    expectError(await h.get("/v1/apis.getApi", { apiId }, t.rootKey), 404, "NOT_FOUND");
  });

  it("accepts api.<apiId>.read_api for that API only", async () => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "scoped" }, t.rootKey)).body;
    const scoped = await h.rootKey(t.workspaceId, [`api.${apiId}.read_api`]);
    expect((await h.get("/v1/apis.getApi", { apiId }, scoped)).status).toBe(200);
    const { apiId: other } = (await h.post("/v1/apis.createApi", { name: "other" }, t.rootKey)).body;
    expectError(await h.get("/v1/apis.getApi", { apiId: other }, scoped), 403, "INSUFFICIENT_PERMISSIONS");
  });

  it("refuses a NUL character in the query (%00) with 400, not a 500", async () => {
    expectError(
      await h.get("/v1/apis.getApi", { apiId: "api_\u0000" }, t.rootKey),
      400,
      "BAD_REQUEST",
      "apiId: must not contain the NUL character or unpaired surrogates",
    );
  });

  it("requires apiId", async () => {
    expectError(await h.get("/v1/apis.getApi", {}, t.rootKey), 400, "BAD_REQUEST", /^apiId: /);
  });
});

describe("permissions.createPermission and permissions.createRole", () => {
  it("creates a permission whose slug defaults to its name", async () => {
    const res = await h.post("/v1/permissions.createPermission", { name: "files.write", description: "Write files" }, t.rootKey);
    expect(res.status).toBe(200);
    const [row] = await h.sql<any>(`select * from permissions where id = '${res.body.permissionId}'`);
    expect(row).toMatchObject({ workspace_id: t.workspaceId, name: "files.write", slug: "files.write", description: "Write files" });
  });

  it("refuses a second permission with the same slug with 409, in v1's words naming the name", async () => {
    await h.post("/v1/permissions.createPermission", { name: "dup.perm" }, t.rootKey);
    expectError(
      await h.post("/v1/permissions.createPermission", { name: "dup.perm" }, t.rootKey),
      409,
      "CONFLICT",
      'Permission with name "dup.perm" already exists in this workspace',
    );
    const other = await h.tenant();
    expect((await h.post("/v1/permissions.createPermission", { name: "dup.perm" }, other.rootKey)).status).toBe(200);
  });

  it.each([
    [{ name: "ab" }, "name: String must contain at least 3 character(s)"],
    [{ name: "has space" }, /^name: must contain only letters, digits/],
    [{ name: "ok.name", slug: "bad/slug" }, /^slug: /],
    [{ name: "ok.name", description: "ab" }, /^description: /],
  ])("refuses the permission %j with 400", async (body, message) => {
    expectError(await h.post("/v1/permissions.createPermission", body, t.rootKey), 400, "BAD_REQUEST", message);
  });

  it("creates a role and refuses its name twice in a workspace", async () => {
    const res = await h.post("/v1/permissions.createRole", { name: "billing.admin", description: "" }, t.rootKey);
    expect(res.status).toBe(200);
    const [row] = await h.sql<any>(`select * from roles where id = '${res.body.roleId}'`);
    expect(row).toMatchObject({ workspace_id: t.workspaceId, name: "billing.admin", description: null });
    expectError(
      await h.post("/v1/permissions.createRole", { name: "billing.admin" }, t.rootKey),
      409,
      "CONFLICT",
      'Role with name "billing.admin" already exists in this workspace',
    );
  });
});
