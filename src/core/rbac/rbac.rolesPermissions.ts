import { requirePermission } from "../principal.js";
import { isUniqueViolation } from "../../storage/client.js";
import { ConflictError, NotFoundError } from "../../errors.js";
import {
  changeRolePermissions,
  deletePermission as deletePermissionRow,
  deleteRole as deleteRoleRow,
  findPermission,
  findRole,
  insertPermission,
  insertRole,
  listWorkspacePermissions,
  listWorkspaceRoles,
  type PermissionRef,
  type PermissionRow,
  type RoleRow,
} from "../../storage/rbac/permissions.repository.js";
import type { Principal } from "../principal.js";
import type { RbacServices } from "./rbac.keyLinks.js";

/**
 * The rules of a workspace's roles and permissions themselves (v1: permissions.createRole / createPermission /
 * deleteRole / deletePermission, and keyhaven's addPermissionsToRole / removePermissionsFromRole). Each needs `*` or
 * its own rbac permission (PermissionDeniedError); names collide as ConflictError, unknown ids are NotFoundError.
 */

/** A role, by a name unique in the workspace (ConflictError when taken). */
export async function createRole(
  services: RbacServices,
  principal: Principal,
  input: { name: string; description?: string | undefined },
): Promise<{ roleId: string }> {
  requirePermission(principal, { or: ["*", "rbac.*.create_role"] });
  try {
    return { roleId: await insertRole(services.db, { ...input, workspaceId: principal.workspaceId }, services.clock.now()) };
  } catch (err) {
    if (isUniqueViolation(err)) throw new ConflictError("role", { kind: "roleExists", name: input.name });
    throw err;
  }
}

/** A permission, by a slug (default: the name) unique in the workspace (ConflictError when taken). */
export async function createPermission(
  services: RbacServices,
  principal: Principal,
  input: { name: string; slug?: string | undefined; description?: string | undefined },
): Promise<{ permissionId: string }> {
  requirePermission(principal, { or: ["*", "rbac.*.create_permission"] });
  const slug = input.slug ?? input.name;
  try {
    return {
      permissionId: await insertPermission(services.db, { ...input, slug, workspaceId: principal.workspaceId }, services.clock.now()),
    };
  } catch (err) {
    if (isUniqueViolation(err)) {
      // Named by the name, as v1 does (the slug, unique in the workspace, defaults to it).
      throw new ConflictError("permission", { kind: "permissionExists", name: input.name });
    }
    throw err;
  }
}

/** Deletes a role for good, with its links to keys and permissions. */
export async function deleteRole(services: RbacServices, principal: Principal, roleId: string): Promise<void> {
  requirePermission(principal, { or: ["*", "rbac.*.delete_role"] });
  if (!(await deleteRoleRow(services.db, principal.workspaceId, roleId)))
    throw new NotFoundError("role", roleId, { kind: "roleToDeleteNotFound", roleId });
}

/** Deletes a permission for good, with its links to keys and roles. */
export async function deletePermission(services: RbacServices, principal: Principal, permissionId: string): Promise<void> {
  requirePermission(principal, { or: ["*", "rbac.*.delete_permission"] });
  if (!(await deletePermissionRow(services.db, principal.workspaceId, permissionId))) {
    throw new NotFoundError("permission", permissionId, { kind: "permissionToDeleteNotFound", permissionId });
  }
}

/** Connects (`add`) or disconnects (`remove`) permissions and a role; all or nothing, idempotent. */
export async function changePermissionsOfRole(
  services: RbacServices,
  principal: Principal,
  input: { roleId: string; permissions: PermissionRef[] },
  change: "add" | "remove",
): Promise<void> {
  requirePermission(principal, { or: ["*", change === "add" ? "rbac.*.add_permission_to_role" : "rbac.*.remove_permission_from_role"] });
  await changeRolePermissions(services.db, principal.workspaceId, input.roleId, input.permissions, change, services.clock.now());
}

/** A permission of the caller's workspace (one of another workspace is not found). */
export async function getPermission(services: RbacServices, principal: Principal, permissionId: string): Promise<PermissionRow> {
  requirePermission(principal, { or: ["*", "rbac.*.read_permission"] });
  const permission = await findPermission(services.db, principal.workspaceId, permissionId);
  if (!permission) throw new NotFoundError("permission", permissionId);
  return permission;
}

/** Every permission of the caller's workspace, oldest first. */
export async function listPermissions(services: RbacServices, principal: Principal): Promise<PermissionRow[]> {
  requirePermission(principal, { or: ["*", "rbac.*.read_permission"] });
  return listWorkspacePermissions(services.db, principal.workspaceId);
}

/** A role of the caller's workspace (one of another workspace is not found). */
export async function getRole(services: RbacServices, principal: Principal, roleId: string): Promise<RoleRow> {
  requirePermission(principal, { or: ["*", "rbac.*.read_role"] });
  const role = await findRole(services.db, principal.workspaceId, roleId);
  if (!role) throw new NotFoundError("role", roleId);
  return role;
}

/** Every role of the caller's workspace, oldest first. */
export async function listRoles(services: RbacServices, principal: Principal): Promise<RoleRow[]> {
  requirePermission(principal, { or: ["*", "rbac.*.read_role"] });
  return listWorkspaceRoles(services.db, principal.workspaceId);
}
