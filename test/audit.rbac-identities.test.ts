import { describe, expect } from "vitest";
import { auditEntries } from "./audit-entries.js";
import { test as it } from "./fixtures.js";
import type { Harness, Response, Tenant } from "./helper.js";

// Every change of a workspace's roles and permissions, through v1 and v2, records its audit entries in the change's
// own transaction: the event, the root key that acted, the targets, the workspace, the surface and the request id.

/** The request id the answer quotes: v1's Unkey-Request-Id header, v2's meta.requestId. */
const requestIdOf = (res: Response): string =>
  (res.body?.meta?.requestId as string | undefined) ?? (res.headers["unkey-request-id"] as string);

async function entriesOf(h: Harness, t: Tenant, res: Response) {
  const id = requestIdOf(res);
  return (await auditEntries(h, { workspaceId: t.workspaceId })).filter((e) => e.requestId === id);
}

describe("audit log: roles and permissions", () => {
  it("v1 createRole, createPermission, addPermissionsToRole, removePermissionsFromRole, deleteRole and deletePermission each record their change", async ({
    h,
    t,
  }) => {
    const role = await h.post("/v1/permissions.createRole", { name: "audit-role" }, t.rootKey);
    expect(role.status).toBe(200);
    const roleId = role.body.roleId as string;
    const [created] = await entriesOf(h, t, role);
    expect(created).toMatchObject({
      event: "role.create",
      actorKind: "root_key",
      actorId: t.rootKeyId,
      workspaceId: t.workspaceId,
      surface: "v1",
      targets: [{ type: "role", id: roleId, name: "audit-role" }],
    });
    expect(await entriesOf(h, t, role)).toHaveLength(1);

    const permission = await h.post("/v1/permissions.createPermission", { name: "audit.perm" }, t.rootKey);
    const permissionId = permission.body.permissionId as string;
    expect(await entriesOf(h, t, permission)).toMatchObject([
      {
        event: "permission.create",
        actorId: t.rootKeyId,
        surface: "v1",
        targets: [{ type: "permission", id: permissionId, name: "audit.perm" }],
      },
    ]);

    const add = await h.post("/v1/permissions.addPermissionsToRole", { roleId, permissions: [{ slug: "audit.perm" }] }, t.rootKey);
    expect(add.status).toBe(200);
    const connect = [
      { type: "role", id: roleId, name: "audit-role" },
      { type: "permission", id: permissionId, name: "audit.perm" },
    ];
    expect(await entriesOf(h, t, add)).toMatchObject([
      { event: "authorization.connect_role_and_permission", actorId: t.rootKeyId, surface: "v1", targets: connect },
    ]);
    // Connecting again changes nothing, and records nothing.
    const again = await h.post("/v1/permissions.addPermissionsToRole", { roleId, permissions: [{ id: permissionId }] }, t.rootKey);
    expect(again.status).toBe(200);
    expect(await entriesOf(h, t, again)).toEqual([]);

    const remove = await h.post("/v1/permissions.removePermissionsFromRole", { roleId, permissions: [{ id: permissionId }] }, t.rootKey);
    expect(await entriesOf(h, t, remove)).toMatchObject([{ event: "authorization.disconnect_role_and_permission", targets: connect }]);

    const deleteRole = await h.post("/v1/permissions.deleteRole", { roleId }, t.rootKey);
    expect(await entriesOf(h, t, deleteRole)).toMatchObject([
      { event: "role.delete", actorId: t.rootKeyId, targets: [{ type: "role", id: roleId, name: "audit-role" }] },
    ]);
    const deletePermission = await h.post("/v1/permissions.deletePermission", { permissionId }, t.rootKey);
    expect(await entriesOf(h, t, deletePermission)).toMatchObject([
      { event: "permission.delete", targets: [{ type: "permission", id: permissionId, name: "audit.perm" }] },
    ]);
  });

  it("v2 createRole with permissions, setRolePermissions, deleteRole and deletePermission record theirs", async ({ h, t }) => {
    const role = await h.post("/v2/permissions.createRole", { name: "audit-v2-role", permissions: ["audit.v2.a"] }, t.rootKey);
    expect(role.status).toBe(200);
    const roleId = role.body.data.roleId as string;
    const entries = await entriesOf(h, t, role);
    expect(entries.map((e) => e.event).sort()).toEqual(["authorization.connect_role_and_permission", "permission.create", "role.create"]);
    for (const e of entries)
      expect(e).toMatchObject({ actorKind: "root_key", actorId: t.rootKeyId, surface: "v2", workspaceId: t.workspaceId });
    const createdPermission = entries.find((e) => e.event === "permission.create")!;
    const a = createdPermission.targets[0]!;
    expect(a).toMatchObject({ type: "permission", name: "audit.v2.a" });

    const set = await h.post("/v2/permissions.setRolePermissions", { roleId, permissions: ["audit.v2.b"] }, t.rootKey);
    expect(set.status).toBe(200);
    const setEntries = await entriesOf(h, t, set);
    expect(setEntries.map((e) => e.event).sort()).toEqual([
      "authorization.connect_role_and_permission",
      "authorization.disconnect_role_and_permission",
      "permission.create",
    ]);
    expect(setEntries.find((e) => e.event === "authorization.disconnect_role_and_permission")!.targets).toEqual([
      { type: "role", id: roleId, name: "audit-v2-role" },
      a,
    ]);

    const deleteRole = await h.post("/v2/permissions.deleteRole", { role: "audit-v2-role" }, t.rootKey);
    expect(await entriesOf(h, t, deleteRole)).toMatchObject([
      { event: "role.delete", surface: "v2", targets: [{ type: "role", id: roleId }] },
    ]);
    const deletePermission = await h.post("/v2/permissions.deletePermission", { permission: "audit.v2.a" }, t.rootKey);
    expect(await entriesOf(h, t, deletePermission)).toMatchObject([
      { event: "permission.delete", targets: [{ type: "permission", id: a.id }] },
    ]);
  });

  it("a refused call (403, 404, 409) records nothing", async ({ h, t }) => {
    const reader = await h.rootKey(t.workspaceId, ["rbac.*.read_role"]);
    const before = (await auditEntries(h, { workspaceId: t.workspaceId })).length;
    expect((await h.post("/v1/permissions.createRole", { name: "audit-denied" }, reader)).status).toBe(403);
    expect((await h.post("/v2/permissions.createRole", { name: "audit-denied" }, reader)).status).toBe(403);
    expect((await h.post("/v1/permissions.deleteRole", { roleId: "role_missing" }, t.rootKey)).status).toBe(404);
    expect((await h.post("/v2/permissions.setRolePermissions", { roleId: "role_missing", permissions: ["x.y"] }, t.rootKey)).status).toBe(
      404,
    );
    expect(
      (await h.post("/v1/permissions.addPermissionsToRole", { roleId: "role_missing", permissions: [{ slug: "x.y" }] }, t.rootKey)).status,
    ).toBe(404);
    await h.post("/v1/permissions.createRole", { name: "audit-taken" }, t.rootKey);
    const taken = (await auditEntries(h, { workspaceId: t.workspaceId })).length;
    expect((await h.post("/v1/permissions.createRole", { name: "audit-taken" }, t.rootKey)).status).toBe(409);
    expect(await auditEntries(h, { workspaceId: t.workspaceId })).toHaveLength(taken);
    expect(taken).toBe(before + 1);
  });
});
