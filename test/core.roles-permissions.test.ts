import { describe, expect } from "vitest";
import {
  changePermissionsOfRole,
  createPermission,
  createRole,
  deletePermission,
  deleteRole,
} from "../src/core/rbac/rbac.rolesPermissions.js";
import { ConflictError, NotFoundError, PermissionDeniedError } from "../src/errors.js";
import { rootKeyCaller } from "../src/core/caller.js";
import { V1_ACCESS } from "../src/wire/v1/caller.js";
import { test as it } from "./fixtures.js";
import { v1WordsOfRejection } from "./v1-words.js";

// A workspace's roles and permissions through the core, with a plain principal: domain errors carry v1's messages,
// which the v1 adapter answers unchanged (409, 404, 403).

const principalOf = (workspaceId: string, ...permissions: string[]) =>
  rootKeyCaller({ rootKeyId: "key_core_test", workspaceId, permissions: new Set(permissions) }, V1_ACCESS, { surface: "v1" });

describe("core rbac: roles and permissions", () => {
  it("creates, connects and deletes, and a taken name is a ConflictError", async ({ h, t }) => {
    const all = principalOf(t.workspaceId, "*");
    const { roleId } = await createRole(h.services, all, { name: "core-role" });
    const { permissionId } = await createPermission(h.services, all, { name: "core.perm" });
    await changePermissionsOfRole(h.services, all, { roleId, permissions: [{ slug: "core.perm" }] }, "add");
    expect(await h.sql(`select 1 from roles_permissions where role_id = '${roleId}' and permission_id = '${permissionId}'`)).toHaveLength(
      1,
    );
    await changePermissionsOfRole(h.services, all, { roleId, permissions: [{ id: permissionId }] }, "remove");
    expect(await h.sql(`select 1 from roles_permissions where role_id = '${roleId}'`)).toHaveLength(0);

    const again = createRole(h.services, all, { name: "core-role" });
    await expect(again).rejects.toBeInstanceOf(ConflictError);
    expect(await v1WordsOfRejection(again)).toContain('Role with name "core-role" already exists in this workspace');
    const againPermission = createPermission(h.services, all, { name: "core.perm" });
    await expect(againPermission).rejects.toBeInstanceOf(ConflictError);
    expect(await v1WordsOfRejection(againPermission)).toContain('Permission with name "core.perm" already exists in this workspace');

    await deleteRole(h.services, all, roleId, "id");
    await deletePermission(h.services, all, permissionId, "id");
    const gone = deleteRole(h.services, all, roleId, "id");
    await expect(gone).rejects.toBeInstanceOf(NotFoundError);
    expect(await v1WordsOfRejection(gone)).toContain(`Role ${roleId} not found`);
    expect(await v1WordsOfRejection(deletePermission(h.services, all, permissionId, "id"))).toContain(
      `Permission ${permissionId} not found`,
    );
  });

  it("needs each operation's own permission", async ({ h, t }) => {
    const reader = principalOf(t.workspaceId, "rbac.*.read_role");
    await expect(createRole(h.services, reader, { name: "core-denied" })).rejects.toBeInstanceOf(PermissionDeniedError);
    expect(
      await v1WordsOfRejection(
        changePermissionsOfRole(h.services, reader, { roleId: "role_x", permissions: [{ id: "perm_x" }] }, "remove"),
      ),
    ).toContain('Missing permissions: need one of ["*", "rbac.*.remove_permission_from_role"], have ["rbac.*.read_role"]');
  });
});
