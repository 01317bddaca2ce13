import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import { expectV2Error } from "./v2-errors.js";
import type { Harness, Tenant } from "./helper.js";

// v2's permissions.* routes (contract §8) over the core v1 uses: lookups by id or slug/name in one field, pages by
// id with v2's inclusive cursor, v2's errors; what one API writes, the other reads.

const unique = (prefix: string) => `${prefix}.${randomBytes(4).toString("hex")}`;

async function createPermission(h: Harness, t: Tenant, slug: string, extra: Record<string, unknown> = {}) {
  const res = await h.post("/v2/permissions.createPermission", { name: `name of ${slug}`, slug, ...extra }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.permissionId as string;
}

describe("v2 permissions", () => {
  test("createPermission, then getPermission by id and by slug, through v2 and v1", async ({ h, t }) => {
    const slug = unique("docs.read");
    const id = await createPermission(h, t, slug, { description: "read the docs" });
    expect(id).toMatch(/^perm_/);
    const expected = { id, name: `name of ${slug}`, slug, description: "read the docs" };
    for (const ref of [id, slug]) {
      const res = await h.post("/v2/permissions.getPermission", { permission: ref }, t.rootKey);
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual(expected);
    }
    expect((await h.get("/v1/permissions.getPermission", { permissionId: id }, t.rootKey)).body).toMatchObject({ id, slug });
    const noDescription = await createPermission(h, t, unique("bare"));
    const bare = await h.post("/v2/permissions.getPermission", { permission: noDescription }, t.rootKey);
    expect(bare.body.data).not.toHaveProperty("description");
  });

  test("a slug taken is 409 in v2's words; a bad slug is 400; nothing is written", async ({ h, t }) => {
    const slug = unique("taken");
    await createPermission(h, t, slug);
    expectV2Error(
      await h.post("/v2/permissions.createPermission", { name: "other name", slug }, t.rootKey),
      409,
      "unkey/data/permission_already_exists",
      `A permission with slug '${slug}' already exists in this workspace`,
    );
    expectV2Error(
      await h.post("/v2/permissions.createPermission", { name: "x", slug: "has space" }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
    const rows = await h.sql<{ n: string }>(`select count(*)::text as n from permissions where slug = '${slug}'`);
    expect(rows[0]!.n).toBe("1");
  });

  test("another workspace's permission, and a missing one, are 404 'The requested permission does not exist.'", async ({ h, t }) => {
    const other = await h.tenant();
    const theirs = await createPermission(h, other, unique("theirs"));
    for (const permission of [theirs, "perm_missing_1"]) {
      expectV2Error(
        await h.post("/v2/permissions.getPermission", { permission }, t.rootKey),
        404,
        "unkey/data/permission_not_found",
        "The requested permission does not exist.",
      );
      expectV2Error(await h.post("/v2/permissions.deletePermission", { permission }, t.rootKey), 404, "unkey/data/permission_not_found");
    }
    expect((await h.post("/v2/permissions.getPermission", { permission: theirs }, other.rootKey)).status).toBe(200);
  });

  test("deletePermission by slug removes it, and its links to roles", async ({ h, t }) => {
    const slug = unique("gone");
    const id = await createPermission(h, t, slug);
    const role = await h.post("/v1/permissions.createRole", { name: unique("role") }, t.rootKey);
    await h.post("/v1/permissions.addPermissionsToRole", { roleId: role.body.roleId, permissions: [{ id }] }, t.rootKey);
    const deleted = await h.post("/v2/permissions.deletePermission", { permission: slug }, t.rootKey);
    expect(deleted.status).toBe(200);
    expect(deleted.body.data).toEqual({});
    expectV2Error(await h.post("/v2/permissions.getPermission", { permission: id }, t.rootKey), 404, "unkey/data/permission_not_found");
    const got = await h.post("/v2/permissions.getRole", { role: role.body.roleId }, t.rootKey);
    expect(got.body.data).not.toHaveProperty("permissions");
  });

  test("listPermissions pages by id with v2's inclusive cursor and hasMore, and searches literally", async ({ h }) => {
    const t = await h.tenant();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await createPermission(h, t, `list_${i}.Item`));
    ids.push(await createPermission(h, t, "other_1"));
    ids.sort();
    const first = await h.post("/v2/permissions.listPermissions", { limit: 4 }, t.rootKey);
    expect(first.status).toBe(200);
    expect(first.body.data.map((p: { id: string }) => p.id)).toEqual(ids.slice(0, 4));
    expect(first.body.pagination).toEqual({ hasMore: true, cursor: ids[4] });
    const second = await h.post("/v2/permissions.listPermissions", { limit: 4, cursor: first.body.pagination.cursor }, t.rootKey);
    expect(second.body.data.map((p: { id: string }) => p.id)).toEqual(ids.slice(4));
    expect(second.body.pagination).toEqual({ hasMore: false });
    const searched = await h.post("/v2/permissions.listPermissions", { search: "  iTEM " }, t.rootKey);
    expect(searched.body.data).toHaveLength(5);
    const literal = await h.post("/v2/permissions.listPermissions", { search: "list_%" }, t.rootKey);
    expect(literal.body.data).toHaveLength(0);
    const empty = await h.post("/v2/permissions.listPermissions", {}, (await h.tenant()).rootKey);
    expect(empty.body).toEqual({ meta: { requestId: expect.any(String) }, data: [], pagination: { hasMore: false } });
  });

  test("needs its rbac permission: 403 in v2's words", async ({ h, t }) => {
    const reader = await h.rootKey(t.workspaceId, ["rbac.*.read_role"]);
    expectV2Error(
      await h.post("/v2/permissions.createPermission", { name: "n", slug: "s" }, reader),
      403,
      "unkey/authorization/insufficient_permissions",
      "Missing permission: 'rbac.*.create_permission'",
    );
    expectV2Error(
      await h.post("/v2/permissions.getPermission", { permission: "perm_missing_1" }, reader),
      403,
      "unkey/authorization/insufficient_permissions",
      "Missing one of these permissions: rbac.*.read_permission",
    );
    expectV2Error(await h.post("/v2/permissions.listPermissions", {}, reader), 403, "unkey/authorization/insufficient_permissions");
    expect((await h.post("/v2/permissions.listRoles", {}, reader)).status).toBe(200);
  });
});

describe("v2 roles", () => {
  test("getRole by id or name shows its permissions; listRoles pages them; deleteRole by name", async ({ h }) => {
    const t = await h.tenant();
    const a = await createPermission(h, t, "b.second");
    const b = await createPermission(h, t, "a.first");
    const name = unique("admin");
    const role = await h.post("/v1/permissions.createRole", { name, description: "admins" }, t.rootKey);
    const roleId = role.body.roleId as string;
    await h.post("/v1/permissions.addPermissionsToRole", { roleId, permissions: [{ id: a }, { id: b }] }, t.rootKey);
    const expected = {
      id: roleId,
      name,
      description: "admins",
      permissions: [
        { id: b, name: "name of a.first", slug: "a.first" },
        { id: a, name: "name of b.second", slug: "b.second" },
      ],
    };
    for (const ref of [roleId, name]) {
      const res = await h.post("/v2/permissions.getRole", { role: ref }, t.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data).toEqual(expected);
    }
    const bare = await h.post("/v1/permissions.createRole", { name: unique("bare") }, t.rootKey);
    const listed = await h.post("/v2/permissions.listRoles", { limit: 1 }, t.rootKey);
    expect(listed.body.data).toHaveLength(1);
    expect(listed.body.pagination.hasMore).toBe(true);
    const all = await h.post("/v2/permissions.listRoles", {}, t.rootKey);
    const byId = new Map(all.body.data.map((r: { id: string }) => [r.id, r]));
    expect(byId.get(roleId)).toEqual(expected);
    expect(byId.get(bare.body.roleId)).not.toHaveProperty("permissions");
    expect((await h.post("/v2/permissions.deleteRole", { role: name }, t.rootKey)).body.data).toEqual({});
    expectV2Error(
      await h.post("/v2/permissions.getRole", { role: roleId }, t.rootKey),
      404,
      "unkey/data/role_not_found",
      "The requested role does not exist.",
    );
    expectV2Error(await h.post("/v2/permissions.deleteRole", { role: name }, t.rootKey), 404, "unkey/data/role_not_found");
  });

  test("another workspace's role is not found", async ({ h, t }) => {
    const other = await h.tenant();
    const role = await h.post("/v1/permissions.createRole", { name: unique("theirs") }, other.rootKey);
    expectV2Error(await h.post("/v2/permissions.getRole", { role: role.body.roleId }, t.rootKey), 404, "unkey/data/role_not_found");
    expectV2Error(await h.post("/v2/permissions.deleteRole", { role: role.body.roleId }, t.rootKey), 404, "unkey/data/role_not_found");
    expect((await h.post("/v2/permissions.getRole", { role: role.body.roleId }, other.rootKey)).status).toBe(200);
  });
});
