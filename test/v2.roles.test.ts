import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { countIn, test } from "./fixtures.js";
import { expectV2Error } from "./v2-errors.js";

// v2's permissions.createRole and permissions.setRolePermissions (contract §8.5, §8.9) over the roles core v1 uses.

const unique = (name: string) => `${name}.${randomBytes(4).toString("hex")}`;
const FORBIDDEN = "unkey/authorization/insufficient_permissions";

describe("v2 permissions.createRole", () => {
  test("creates a role with existing and missing permissions (missing ones created, name = slug); v1 and v2 read it", async ({ h, t }) => {
    const existing = unique("exists");
    await h.post("/v2/permissions.createPermission", { name: "existing one", slug: existing }, t.rootKey);
    const fresh = unique("fresh");
    const name = unique("admin");
    const res = await h.post(
      "/v2/permissions.createRole",
      { name, description: "admins", permissions: [fresh, existing, fresh] },
      t.rootKey,
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const roleId = res.body.data.roleId;
    expect(roleId).toMatch(/^role_/);
    const got = await h.post("/v2/permissions.getRole", { role: name }, t.rootKey);
    expect(got.body.data).toMatchObject({ id: roleId, name, description: "admins" });
    expect(got.body.data.permissions.map((p: any) => [p.slug, p.name])).toEqual(
      [
        [existing, "existing one"],
        [fresh, fresh],
      ].sort(),
    );
    expect((await h.get("/v1/permissions.getRole", { roleId }, t.rootKey)).body).toMatchObject({ id: roleId, name });
    const bare = await h.post("/v2/permissions.createRole", { name: unique("bare") }, t.rootKey);
    expect(bare.status).toBe(200);
  });

  test("a name taken is 409 in v2's words, and no permission it named is left behind", async ({ h, t }) => {
    const name = unique("taken");
    await h.post("/v2/permissions.createRole", { name }, t.rootKey);
    const fresh = unique("orphan");
    expectV2Error(
      await h.post("/v2/permissions.createRole", { name, permissions: [fresh] }, t.rootKey),
      409,
      "unkey/data/role_already_exists",
      `A role with name '${name}' already exists in this workspace`,
    );
    expect(await countIn(h, `permissions where slug = '${fresh}'`)).toBe(0);
  });

  test("create_role, then add_permission_to_role for permissions, then create_permission for a missing one (403s)", async ({ h, t }) => {
    const existing = unique("exists");
    await h.post("/v2/permissions.createPermission", { name: existing, slug: existing }, t.rootKey);
    const none = await h.rootKey(t.workspaceId, ["rbac.*.read_role"]);
    expectV2Error(
      await h.post("/v2/permissions.createRole", { name: unique("r") }, none),
      403,
      FORBIDDEN,
      "Missing one of these permissions: rbac.*.create_role",
    );
    const create = await h.rootKey(t.workspaceId, ["rbac.*.create_role"]);
    expect((await h.post("/v2/permissions.createRole", { name: unique("r") }, create)).status).toBe(200);
    expectV2Error(
      await h.post("/v2/permissions.createRole", { name: unique("r"), permissions: [existing] }, create),
      403,
      FORBIDDEN,
      "Missing permission: 'rbac.*.add_permission_to_role'",
    );
    const add = await h.rootKey(t.workspaceId, ["rbac.*.create_role", "rbac.*.add_permission_to_role"]);
    expect((await h.post("/v2/permissions.createRole", { name: unique("r"), permissions: [existing] }, add)).status).toBe(200);
    const name = unique("r");
    expectV2Error(
      await h.post("/v2/permissions.createRole", { name, permissions: [existing, unique("missing")] }, add),
      403,
      FORBIDDEN,
      "Missing permission: 'rbac.*.create_permission'",
    );
    expect(await countIn(h, `roles where name = '${name}'`)).toBe(0);
  });

  test("schema failures are 400", async ({ h, t }) => {
    for (const body of [
      {},
      { name: "" },
      { name: "x".repeat(129) },
      { name: "r", description: "d".repeat(513) },
      { name: "r", permissions: ["bad slug"] },
      { name: "r", x: 1 },
    ]) {
      expectV2Error(await h.post("/v2/permissions.createRole", body, t.rootKey), 400, "unkey/application/invalid_input");
    }
  });
});

describe("v2 permissions.setRolePermissions", () => {
  test("replaces, de-duplicates and creates; repeating changes nothing; [] clears; a key with the role verifies accordingly", async ({
    h,
    t,
    apiId,
  }) => {
    const [old, keep, fresh] = [unique("old"), unique("keep"), unique("new")];
    const name = unique("role");
    const { roleId } = (await h.post("/v2/permissions.createRole", { name, permissions: [old, keep] }, t.rootKey)).body.data;
    const key = (await h.post("/v1/keys.createKey", { apiId, roles: [name] }, t.rootKey)).body.key;
    const verify = async (p: string) => (await h.post("/v1/keys.verifyKey", { key, authorization: { permissions: p } })).body.valid;
    expect(await verify(old)).toBe(true);

    const res = await h.post("/v2/permissions.setRolePermissions", { roleId, permissions: [keep, fresh, fresh] }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.map((p: any) => p.slug)).toEqual([keep, fresh].sort());
    expect(await verify(old)).toBe(false);
    expect(await verify(fresh)).toBe(true);
    const again = await h.post("/v2/permissions.setRolePermissions", { roleId, permissions: [fresh, keep] }, t.rootKey);
    expect(again.body.data).toEqual(res.body.data);
    expect(await countIn(h, `permissions where slug = '${fresh}'`)).toBe(1);
    const cleared = await h.post("/v2/permissions.setRolePermissions", { roleId, permissions: [] }, t.rootKey);
    expect(cleared.body.data).toEqual([]);
    expect((await h.post("/v2/permissions.getRole", { role: roleId }, t.rootKey)).body.data).not.toHaveProperty("permissions");
  });

  test("an unknown role, a role named by its name, and another workspace's role are 404", async ({ h, t }) => {
    const other = await h.tenant();
    const theirs = (await h.post("/v2/permissions.createRole", { name: unique("theirs") }, other.rootKey)).body.data.roleId;
    const name = `mine_${randomBytes(4).toString("hex")}`; // a name that passes roleId's pattern
    await h.post("/v2/permissions.createRole", { name }, t.rootKey);
    for (const roleId of [theirs, "role_missing_1", name]) {
      expectV2Error(
        await h.post("/v2/permissions.setRolePermissions", { roleId, permissions: [] }, t.rootKey),
        404,
        "unkey/data/role_not_found",
        "The requested role does not exist.",
      );
    }
  });

  test("needs add and remove permission_to_role, and create_permission (tuple or URN) for a missing slug", async ({ h, t }) => {
    const existing = unique("exists");
    await h.post("/v2/permissions.createPermission", { name: existing, slug: existing }, t.rootKey);
    const { roleId } = (await h.post("/v2/permissions.createRole", { name: unique("role") }, t.rootKey)).body.data;
    const removeOnly = await h.rootKey(t.workspaceId, ["rbac.*.remove_permission_from_role"]);
    expectV2Error(
      await h.post("/v2/permissions.setRolePermissions", { roleId, permissions: [] }, removeOnly),
      403,
      FORBIDDEN,
      "Missing permission: 'rbac.*.add_permission_to_role'",
    );
    const addOnly = await h.rootKey(t.workspaceId, ["rbac.*.add_permission_to_role"]);
    expectV2Error(
      await h.post("/v2/permissions.setRolePermissions", { roleId, permissions: [] }, addOnly),
      403,
      FORBIDDEN,
      "Missing permission: 'rbac.*.remove_permission_from_role'",
    );
    const both = await h.rootKey(t.workspaceId, ["rbac.*.add_permission_to_role", "rbac.*.remove_permission_from_role"]);
    expect((await h.post("/v2/permissions.setRolePermissions", { roleId, permissions: [existing] }, both)).status).toBe(200);
    const missing = unique("missing");
    expectV2Error(
      await h.post("/v2/permissions.setRolePermissions", { roleId, permissions: [missing] }, both),
      403,
      FORBIDDEN,
      `Missing one of these permissions: unkey:v1:${t.workspaceId}:rbac/permissions/*#create_permission or rbac.*.create_permission`,
    );
    expect(await countIn(h, `permissions where slug = '${missing}'`)).toBe(0);
    const urn = await h.rootKey(t.workspaceId, [
      "rbac.*.add_permission_to_role",
      "rbac.*.remove_permission_from_role",
      `unkey:v1:${t.workspaceId}:rbac/**#create_permission`,
    ]);
    expect((await h.post("/v2/permissions.setRolePermissions", { roleId, permissions: [missing] }, urn)).status).toBe(200);
  });

  test("schema failures are 400", async ({ h, t }) => {
    for (const body of [
      { permissions: [] },
      { roleId: "role_abc" },
      { roleId: "role_abc", permissions: [""] },
      { roleId: "r", permissions: [] },
      { roleId: "role abc", permissions: [] },
    ]) {
      expectV2Error(await h.post("/v2/permissions.setRolePermissions", body, t.rootKey), 400, "unkey/application/invalid_input");
    }
  });
});
