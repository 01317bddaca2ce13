import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { answersNotFound, answersNotFoundLeaving, describeRootKeyAuthOf, listsNoneOfOwners } from "./auth-suite.js";
import { countIn, test } from "./fixtures.js";
import { expectError, type Harness, type Tenant } from "./helper.js";

const unique = (prefix: string) => `${prefix}.${randomBytes(4).toString("hex")}`;

async function newPermissionIn(h: Harness, tenant: Tenant, body: Record<string, string> = {}) {
  const name = body.name ?? unique("perm");
  const res = await h.post("/v1/permissions.createPermission", { name, ...body }, tenant.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { id: res.body.permissionId as string, name, slug: body.slug ?? name };
}

async function newRoleIn(h: Harness, tenant: Tenant, body: Record<string, string> = {}) {
  const name = body.name ?? unique("role");
  const res = await h.post("/v1/permissions.createRole", { name, ...body }, tenant.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { id: res.body.roleId as string, name };
}

const rbacRowsIn = async (h: Harness) =>
  (await countIn(h, "permissions")) +
  (await countIn(h, "roles")) +
  (await countIn(h, "roles_permissions")) +
  (await countIn(h, "keys_roles"));

// The file's harness and tenant (`h`, `t` of test/fixtures.ts), and helpers over them.
const it = test
  .extend(
    "newPermission",
    async ({ h }) =>
      (tenant: Tenant, body: Record<string, string> = {}) =>
        newPermissionIn(h, tenant, body),
  )
  .extend(
    "newRole",
    async ({ h }) =>
      (tenant: Tenant, body: Record<string, string> = {}) =>
        newRoleIn(h, tenant, body),
  )
  .extend(
    "rbacRows",
    async ({ h }) =>
      () =>
        rbacRowsIn(h),
  )
  .extend(
    "rolePermissionIds",
    async ({ h }) =>
      async (roleId: string) =>
        (await h.sql<{ permission_id: string }>(`select permission_id from roles_permissions where role_id = '${roleId}' order by 1`)).map(
          (r) => r.permission_id,
        ),
  )
  .extend("importKeyWithRole", async ({ h }) => async (tenant: Tenant, roleName: string) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "rbac-e2e" }, tenant.rootKey)).body;
    const plaintext = `e2e_${randomBytes(12).toString("hex")}`;
    const res = await h.post("/v1/migrations.createKeys", [{ apiId, plaintext, roles: [roleName] }], tenant.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return { apiId, key: plaintext };
  })
  .extend(
    "verify",
    async ({ h }) =>
      (key: string, permissions: unknown) =>
        h.post("/v1/keys.verifyKey", { key, authorization: { permissions } }),
  );

describe("permissions.getPermission", () => {
  it("reads a permission with its description", async ({ h, t, newPermission }) => {
    const p = await newPermission(t, { name: unique("files.read"), slug: unique("files-read"), description: "Read files" });
    const res = await h.get("/v1/permissions.getPermission", { permissionId: p.id }, t.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: p.id, name: p.name, slug: p.slug, description: "Read files" });
  });

  it("leaves out the description of a permission that has none", async ({ h, t, newPermission }) => {
    const p = await newPermission(t);
    const res = await h.get("/v1/permissions.getPermission", { permissionId: p.id }, t.rootKey);
    expect(res.body).toEqual({ id: p.id, name: p.name, slug: p.slug });
  });

  it("answers an unknown permission with 404", async ({ h, t }) => {
    expectError(
      await h.get("/v1/permissions.getPermission", { permissionId: "perm_nope" }, t.rootKey),
      404,
      "NOT_FOUND",
      "permission perm_nope not found",
    );
  });

  it("requires permissionId", async ({ h, t }) => {
    expectError(await h.get("/v1/permissions.getPermission", {}, t.rootKey), 400, "BAD_REQUEST", /^permissionId: /);
    expectError(
      await h.get("/v1/permissions.getPermission", { permissionId: "" }, t.rootKey),
      400,
      "BAD_REQUEST",
      "permissionId: String must contain at least 1 character(s)",
    );
  });

  it("accepts rbac.*.read_permission", async ({ h, t, newPermission }) => {
    const p = await newPermission(t);
    const reader = await h.rootKey(t.workspaceId, ["rbac.*.read_permission"]);
    expect((await h.get("/v1/permissions.getPermission", { permissionId: p.id }, reader)).status).toBe(200);
  });
});

describe("permissions.listPermissions", () => {
  it("lists exactly the permissions of the workspace, oldest first", async ({ h, newPermission }) => {
    const tenant = await h.tenant();
    const a = await newPermission(tenant, { description: "first" });
    const b = await newPermission(tenant);
    await newPermission(await h.tenant());
    const res = await h.get("/v1/permissions.listPermissions", {}, tenant.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { id: a.id, name: a.name, slug: a.slug, description: "first" },
      { id: b.id, name: b.name, slug: b.slug },
    ]);
  });

  it("answers an empty array for a workspace without permissions", async ({ h }) => {
    const tenant = await h.tenant();
    const res = await h.get("/v1/permissions.listPermissions", {}, tenant.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
  });
});

describe("permissions.deletePermission", () => {
  it("deletes the permission with its links to keys and roles", async ({ h, t, count, newPermission, newRole, rolePermissionIds }) => {
    const p = await newPermission(t);
    const keep = await newPermission(t);
    const role = await newRole(t);
    await h.post("/v1/permissions.addPermissionsToRole", { roleId: role.id, permissions: [{ id: p.id }, { id: keep.id }] }, t.rootKey);
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "perm-delete" }, t.rootKey)).body;
    const key = await h.post("/v1/keys.createKey", { apiId, permissions: [p.slug] }, t.rootKey);
    expect(key.status, JSON.stringify(key.body)).toBe(200);
    expect(await count(`keys_permissions where permission_id = '${p.id}'`)).toBe(1);

    const res = await h.post("/v1/permissions.deletePermission", { permissionId: p.id }, t.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    expect(await count(`permissions where id = '${p.id}'`)).toBe(0);
    expect(await count(`keys_permissions where permission_id = '${p.id}'`)).toBe(0);
    expect(await rolePermissionIds(role.id)).toEqual([keep.id]);
    expectError(await h.get("/v1/permissions.getPermission", { permissionId: p.id }, t.rootKey), 404, "NOT_FOUND");
  });

  it("answers an unknown or already deleted permission with 404", async ({ h, t, newPermission }) => {
    const p = await newPermission(t);
    expect((await h.post("/v1/permissions.deletePermission", { permissionId: p.id }, t.rootKey)).status).toBe(200);
    expectError(
      await h.post("/v1/permissions.deletePermission", { permissionId: p.id }, t.rootKey),
      404,
      "NOT_FOUND",
      `Permission ${p.id} not found`,
    );
  });

  it.for<[Record<string, unknown>, string | RegExp]>([
    [{}, /^permissionId: /],
    [{ permissionId: "" }, "permissionId: String must contain at least 1 character(s)"],
    [{ permissionId: 42 }, /^permissionId: /],
  ])("refuses %j with 400", async ([body, message], { h, t }) => {
    expectError(await h.post("/v1/permissions.deletePermission", body, t.rootKey), 400, "BAD_REQUEST", message);
  });
});

describe("permissions.getRole, permissions.listRoles", () => {
  it("reads a role, with its description only when it has one", async ({ h, t, newRole }) => {
    const r = await newRole(t, { description: "Billing people" });
    expect((await h.get("/v1/permissions.getRole", { roleId: r.id }, t.rootKey)).body).toEqual({
      id: r.id,
      name: r.name,
      description: "Billing people",
    });
    const bare = await newRole(t);
    expect((await h.get("/v1/permissions.getRole", { roleId: bare.id }, t.rootKey)).body).toEqual({ id: bare.id, name: bare.name });
  });

  it("answers an unknown role with 404", async ({ h, t }) => {
    expectError(await h.get("/v1/permissions.getRole", { roleId: "role_nope" }, t.rootKey), 404, "NOT_FOUND", "role role_nope not found");
  });

  it("requires roleId", async ({ h, t }) => {
    expectError(await h.get("/v1/permissions.getRole", {}, t.rootKey), 400, "BAD_REQUEST", /^roleId: /);
  });

  it("lists exactly the roles of the workspace, oldest first", async ({ h, newRole }) => {
    const tenant = await h.tenant();
    expect((await h.get("/v1/permissions.listRoles", {}, tenant.rootKey)).body).toEqual([]);
    const a = await newRole(tenant);
    const b = await newRole(tenant, { description: "second" });
    await newRole(await h.tenant());
    const res = await h.get("/v1/permissions.listRoles", {}, tenant.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { id: a.id, name: a.name },
      { id: b.id, name: b.name, description: "second" },
    ]);
  });
});

describe("permissions.deleteRole", () => {
  it("deletes the role with its links to keys and permissions, keeping the permissions", async ({
    h,
    t,
    count,
    newPermission,
    newRole,
  }) => {
    const p = await newPermission(t);
    const role = await newRole(t);
    await h.post("/v1/permissions.addPermissionsToRole", { roleId: role.id, permissions: [{ id: p.id }] }, t.rootKey);
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "role-delete" }, t.rootKey)).body;
    const key = await h.post("/v1/keys.createKey", { apiId, roles: [role.name] }, t.rootKey);
    expect(key.status, JSON.stringify(key.body)).toBe(200);

    const res = await h.post("/v1/permissions.deleteRole", { roleId: role.id }, t.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    expect(await count(`roles where id = '${role.id}'`)).toBe(0);
    expect(await count(`keys_roles where role_id = '${role.id}'`)).toBe(0);
    expect(await count(`roles_permissions where role_id = '${role.id}'`)).toBe(0);
    expect(await count(`permissions where id = '${p.id}'`)).toBe(1);
  });

  it("answers an unknown or already deleted role with 404", async ({ h, t, newRole }) => {
    const role = await newRole(t);
    expect((await h.post("/v1/permissions.deleteRole", { roleId: role.id }, t.rootKey)).status).toBe(200);
    expectError(await h.post("/v1/permissions.deleteRole", { roleId: role.id }, t.rootKey), 404, "NOT_FOUND", `Role ${role.id} not found`);
  });

  it("requires roleId", async ({ h, t }) => {
    expectError(await h.post("/v1/permissions.deleteRole", {}, t.rootKey), 400, "BAD_REQUEST", /^roleId: /);
  });
});

describe("permissions.addPermissionsToRole and permissions.removePermissionsFromRole (keyhaven extensions)", () => {
  it("connects permissions by id and by slug, and is idempotent", async ({ h, t, newPermission, newRole, rolePermissionIds }) => {
    const a = await newPermission(t);
    const b = await newPermission(t, { name: unique("b"), slug: unique("b-slug") });
    const role = await newRole(t);
    const body = { roleId: role.id, permissions: [{ id: a.id }, { slug: b.slug }] };
    const res = await h.post("/v1/permissions.addPermissionsToRole", body, t.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    expect((await h.post("/v1/permissions.addPermissionsToRole", body, t.rootKey)).status).toBe(200);
    expect(await rolePermissionIds(role.id)).toEqual([a.id, b.id].sort());
  });

  it("disconnects permissions, and removing one the role lacks changes nothing", async ({
    h,
    t,
    count,
    newPermission,
    newRole,
    rolePermissionIds,
  }) => {
    const a = await newPermission(t);
    const b = await newPermission(t);
    const role = await newRole(t);
    await h.post("/v1/permissions.addPermissionsToRole", { roleId: role.id, permissions: [{ id: a.id }, { id: b.id }] }, t.rootKey);
    const res = await h.post("/v1/permissions.removePermissionsFromRole", { roleId: role.id, permissions: [{ slug: a.slug }] }, t.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    expect(await rolePermissionIds(role.id)).toEqual([b.id]);
    expect(
      (await h.post("/v1/permissions.removePermissionsFromRole", { roleId: role.id, permissions: [{ id: a.id }] }, t.rootKey)).status,
    ).toBe(200);
    expect(await rolePermissionIds(role.id)).toEqual([b.id]);
    expect(await count(`permissions where id = '${a.id}'`)).toBe(1);
  });

  it.for(["addPermissionsToRole", "removePermissionsFromRole"])(
    "%s answers an unknown permission with 404 naming it, and changes nothing",
    async (method, { h, t, newPermission, newRole, rolePermissionIds }) => {
      const a = await newPermission(t);
      const b = await newPermission(t);
      const role = await newRole(t);
      await h.post("/v1/permissions.addPermissionsToRole", { roleId: role.id, permissions: [{ id: a.id }] }, t.rootKey);
      const path = `/v1/permissions.${method}`;
      // Each request also names a permission it would change (b added, a removed): all or nothing.
      expectError(
        await h.post(path, { roleId: role.id, permissions: [{ id: a.id }, { id: b.id }, { id: "perm_nope" }] }, t.rootKey),
        404,
        "NOT_FOUND",
        "permission perm_nope not found",
      );
      expectError(
        await h.post(path, { roleId: role.id, permissions: [{ id: a.id }, { id: b.id }, { slug: "no.such.slug" }] }, t.rootKey),
        404,
        "NOT_FOUND",
        'permission with slug "no.such.slug" not found',
      );
      expect(await rolePermissionIds(role.id)).toEqual([a.id]);
    },
  );

  it.for(["addPermissionsToRole", "removePermissionsFromRole"])(
    "%s answers an unknown role with 404",
    async (method, { h, t, newPermission }) => {
      const a = await newPermission(t);
      expectError(
        await h.post(`/v1/permissions.${method}`, { roleId: "role_nope", permissions: [{ id: a.id }] }, t.rootKey),
        404,
        "NOT_FOUND",
        "role role_nope not found",
      );
    },
  );

  it.for<[Record<string, unknown>, string | RegExp]>([
    [{ permissions: [{ slug: "x.y.z" }] }, /^roleId: /],
    [{ roleId: "role_x" }, /^permissions: /],
    [{ roleId: "role_x", permissions: [] }, "permissions: Array must contain at least 1 element(s)"],
    [{ roleId: "role_x", permissions: [{}] }, /^permissions\.0: provide either id or slug$/],
    [{ roleId: "role_x", permissions: [{ id: "" }] }, "permissions.0.id: String must contain at least 1 character(s)"],
    [{ roleId: "role_x", permissions: "p" }, /^permissions: /],
  ])("refuses %j with 400", async ([body, message], { h, t }) => {
    for (const method of ["addPermissionsToRole", "removePermissionsFromRole"]) {
      expectError(await h.post(`/v1/permissions.${method}`, body, t.rootKey), 400, "BAD_REQUEST", message);
    }
  });

  it("accepts the rbac.*.add_permission_to_role and rbac.*.remove_permission_from_role permissions", async ({
    h,
    t,
    newPermission,
    newRole,
    rolePermissionIds,
  }) => {
    const a = await newPermission(t);
    const role = await newRole(t);
    const adder = await h.rootKey(t.workspaceId, ["rbac.*.add_permission_to_role"]);
    const remover = await h.rootKey(t.workspaceId, ["rbac.*.remove_permission_from_role"]);
    const body = { roleId: role.id, permissions: [{ id: a.id }] };
    expect((await h.post("/v1/permissions.addPermissionsToRole", body, adder)).status).toBe(200);
    expectError(await h.post("/v1/permissions.removePermissionsFromRole", body, adder), 403, "INSUFFICIENT_PERMISSIONS");
    expectError(await h.post("/v1/permissions.addPermissionsToRole", body, remover), 403, "INSUFFICIENT_PERMISSIONS");
    expect((await h.post("/v1/permissions.removePermissionsFromRole", body, remover)).status).toBe(200);
    expect(await rolePermissionIds(role.id)).toEqual([]);
  });
});

describe("concurrent changes to roles and permissions", () => {
  it("never answers a 500 when links are added while their permissions and roles are being deleted", async ({
    h,
    count,
    newPermission,
    newRole,
  }) => {
    const tenant = await h.tenant();
    const perms = await Promise.all(Array.from({ length: 6 }, () => newPermission(tenant)));
    const roles = await Promise.all(Array.from({ length: 3 }, () => newRole(tenant)));
    const requests = [
      ...roles.flatMap((r) => [
        h.post("/v1/permissions.addPermissionsToRole", { roleId: r.id, permissions: perms.map((p) => ({ id: p.id })) }, tenant.rootKey),
        h.post(
          "/v1/permissions.removePermissionsFromRole",
          { roleId: r.id, permissions: perms.slice(0, 2).map((p) => ({ slug: p.slug })) },
          tenant.rootKey,
        ),
      ]),
      ...perms.slice(0, 3).map((p) => h.post("/v1/permissions.deletePermission", { permissionId: p.id }, tenant.rootKey)),
      h.post("/v1/permissions.deleteRole", { roleId: roles[0]!.id }, tenant.rootKey),
    ];
    const statuses = (await Promise.all(requests)).map((r) => r.status);
    expect(
      statuses.every((s) => s === 200 || s === 404),
      JSON.stringify(statuses),
    ).toBe(true);
    expect(
      await count(`roles_permissions rp where rp.workspace_id = '${tenant.workspaceId}'
      and not exists (select 1 from permissions p where p.id = rp.permission_id)`),
    ).toBe(0);
    expect(await count(`roles_permissions where role_id = '${roles[0]!.id}'`)).toBe(0);
  });
});

describe("another workspace's roles and permissions are answered as missing", () => {
  it("gives the same 404 as for an id that does not exist, and changes nothing", async ({ h, newPermission, newRole, rbacRows }) => {
    const owner = await h.tenant();
    const other = await h.tenant();
    const p = await newPermission(owner);
    const role = await newRole(owner);
    const mine = await newRole(other);
    const myPerm = await newPermission(other);
    const before = await rbacRows();
    expectError(
      await h.get("/v1/permissions.getPermission", { permissionId: p.id }, other.rootKey),
      404,
      "NOT_FOUND",
      `permission ${p.id} not found`,
    );
    expectError(await h.get("/v1/permissions.getRole", { roleId: role.id }, other.rootKey), 404, "NOT_FOUND", `role ${role.id} not found`);
    expectError(
      await h.post("/v1/permissions.deletePermission", { permissionId: p.id }, other.rootKey),
      404,
      "NOT_FOUND",
      `Permission ${p.id} not found`,
    );
    expectError(
      await h.post("/v1/permissions.deleteRole", { roleId: role.id }, other.rootKey),
      404,
      "NOT_FOUND",
      `Role ${role.id} not found`,
    );
    for (const method of ["addPermissionsToRole", "removePermissionsFromRole"]) {
      expectError(
        await h.post(`/v1/permissions.${method}`, { roleId: role.id, permissions: [{ id: myPerm.id }] }, other.rootKey),
        404,
        "NOT_FOUND",
        `role ${role.id} not found`,
      );
      expectError(
        await h.post(`/v1/permissions.${method}`, { roleId: mine.id, permissions: [{ id: p.id }] }, other.rootKey),
        404,
        "NOT_FOUND",
        `permission ${p.id} not found`,
      );
      expectError(
        await h.post(`/v1/permissions.${method}`, { roleId: mine.id, permissions: [{ slug: p.slug }] }, other.rootKey),
        404,
        "NOT_FOUND",
        `permission with slug "${p.slug}" not found`,
      );
    }
    expect(await rbacRows()).toBe(before);
  });
});

describe("role-based checks set up through the API are seen by the very next verification", () => {
  it("grants P through role R once added, and refuses it right after it is removed", async ({
    h,
    newPermission,
    newRole,
    importKeyWithRole,
    verify,
  }) => {
    const tenant = await h.tenant();
    const role = await newRole(tenant, { name: "role.R" });
    const p = await newPermission(tenant, { name: "perm.P" });
    const { key } = await importKeyWithRole(tenant, "role.R");
    expect((await verify(key, "perm.P")).body).toMatchObject({ valid: false, code: "INSUFFICIENT_PERMISSIONS" });

    expect(
      (await h.post("/v1/permissions.addPermissionsToRole", { roleId: role.id, permissions: [{ slug: "perm.P" }] }, tenant.rootKey)).status,
    ).toBe(200);
    const granted = await verify(key, "perm.P");
    expect(granted.status).toBe(200);
    expect(granted.body).toMatchObject({ valid: true, code: "VALID" });

    expect(
      (await h.post("/v1/permissions.removePermissionsFromRole", { roleId: role.id, permissions: [{ id: p.id }] }, tenant.rootKey)).status,
    ).toBe(200);
    expect((await verify(key, "perm.P")).body).toMatchObject({ valid: false, code: "INSUFFICIENT_PERMISSIONS" });
  });

  it("refuses P at the next verification once P is deleted", async ({ h, newPermission, newRole, importKeyWithRole, verify }) => {
    const tenant = await h.tenant();
    const role = await newRole(tenant, { name: "role.R" });
    const p = await newPermission(tenant, { name: "perm.P" });
    const { key } = await importKeyWithRole(tenant, "role.R");
    await h.post("/v1/permissions.addPermissionsToRole", { roleId: role.id, permissions: [{ id: p.id }] }, tenant.rootKey);
    expect((await verify(key, "perm.P")).body).toMatchObject({ valid: true, code: "VALID" });
    expect((await h.post("/v1/permissions.deletePermission", { permissionId: p.id }, tenant.rootKey)).status).toBe(200);
    expect((await verify(key, "perm.P")).body).toMatchObject({ valid: false, code: "INSUFFICIENT_PERMISSIONS" });
  });

  it("refuses P at the next verification once R is deleted", async ({ h, count, newPermission, newRole, importKeyWithRole, verify }) => {
    const tenant = await h.tenant();
    const role = await newRole(tenant, { name: "role.R" });
    const p = await newPermission(tenant, { name: "perm.P" });
    const { key } = await importKeyWithRole(tenant, "role.R");
    await h.post("/v1/permissions.addPermissionsToRole", { roleId: role.id, permissions: [{ id: p.id }] }, tenant.rootKey);
    expect((await verify(key, "perm.P")).body).toMatchObject({ valid: true, code: "VALID" });
    expect((await h.post("/v1/permissions.deleteRole", { roleId: role.id }, tenant.rootKey)).status).toBe(200);
    const res = await verify(key, "perm.P");
    expect(res.body).toMatchObject({ valid: false, code: "INSUFFICIENT_PERMISSIONS" });
    expect(await count(`permissions where id = '${p.id}'`)).toBe(1);
  });
});

// ---- the shared root-key auth suite, for every route ----

async function roleWithPermission(h: Harness, owner: Tenant, linked: boolean) {
  const role = await newRoleIn(h, owner);
  const p = await newPermissionIn(h, owner);
  if (linked) {
    await h.post("/v1/permissions.addPermissionsToRole", { roleId: role.id, permissions: [{ id: p.id }] }, owner.rootKey);
  }
  return { roleId: role.id, permissions: [{ id: p.id }] };
}

describeRootKeyAuthOf(it, { countRows: rbacRowsIn }, [
  {
    method: "GET",
    path: "/v1/permissions.getPermission",
    validRequest: async (h, owner) => ({ query: { permissionId: (await newPermissionIn(h, owner)).id } }),
    insufficientPermissions: ["rbac.*.create_permission", "rbac.*.read_role"],
    expectForOtherWorkspace: answersNotFound(/^permission perm_\S+ not found$/),
  },
  {
    method: "GET",
    path: "/v1/permissions.listPermissions",
    validRequest: async (h, owner) => {
      await newPermissionIn(h, owner);
      return { query: {} };
    },
    insufficientPermissions: ["rbac.*.create_permission", "rbac.*.read_role"],
    expectForOtherWorkspace: listsNoneOfOwners("permissions"),
  },
  {
    method: "POST",
    path: "/v1/permissions.deletePermission",
    validRequest: async (h, owner) => ({ body: { permissionId: (await newPermissionIn(h, owner)).id } }),
    insufficientPermissions: ["rbac.*.read_permission", "rbac.*.delete_role"],
    expectForOtherWorkspace: answersNotFoundLeaving(/^Permission perm_\S+ not found$/, "permissions", 1),
  },
  {
    method: "GET",
    path: "/v1/permissions.getRole",
    validRequest: async (h, owner) => ({ query: { roleId: (await newRoleIn(h, owner)).id } }),
    insufficientPermissions: ["rbac.*.create_role", "rbac.*.read_permission"],
    expectForOtherWorkspace: answersNotFound(/^role role_\S+ not found$/),
  },
  {
    method: "GET",
    path: "/v1/permissions.listRoles",
    validRequest: async (h, owner) => {
      await newRoleIn(h, owner);
      return { query: {} };
    },
    insufficientPermissions: ["rbac.*.create_role", "rbac.*.read_permission"],
    expectForOtherWorkspace: listsNoneOfOwners("roles"),
  },
  {
    method: "POST",
    path: "/v1/permissions.deleteRole",
    validRequest: async (h, owner) => ({ body: { roleId: (await newRoleIn(h, owner)).id } }),
    insufficientPermissions: ["rbac.*.read_role", "rbac.*.delete_permission"],
    expectForOtherWorkspace: answersNotFoundLeaving(/^Role role_\S+ not found$/, "roles", 1),
  },
  {
    method: "POST",
    path: "/v1/permissions.addPermissionsToRole",
    validRequest: async (h, owner) => ({ body: await roleWithPermission(h, owner, false) }),
    insufficientPermissions: ["rbac.*.remove_permission_from_role", "rbac.*.create_role", "rbac.*.add_permission_to_key"],
    expectForOtherWorkspace: answersNotFoundLeaving(/^role role_\S+ not found$/, "roles_permissions", 0),
  },
  {
    method: "POST",
    path: "/v1/permissions.removePermissionsFromRole",
    validRequest: async (h, owner) => ({ body: await roleWithPermission(h, owner, true) }),
    insufficientPermissions: ["rbac.*.add_permission_to_role", "rbac.*.delete_role", "rbac.*.remove_permission_from_key"],
    expectForOtherWorkspace: answersNotFoundLeaving(/^role role_\S+ not found$/, "roles_permissions", 1),
  },
]);
