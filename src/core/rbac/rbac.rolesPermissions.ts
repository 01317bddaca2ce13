import { requirePermission } from "../principal.js";
import { anyOfOne } from "../auth/permissions.query.js";
import { createPermissionPermission, type PermissionQuery } from "../auth/permissions.query.js";
import { isUniqueViolation } from "../../storage/client.js";
import { ConflictError, NotFoundError } from "../../errors.js";
import {
  changeRolePermissions,
  createMissingPermissions,
  deletePermission as deletePermissionRow,
  deleteRole as deleteRoleRow,
  findPermission,
  findPermissionByIdOrSlug,
  findRole,
  findRoleByIdOrName,
  insertPermission,
  insertRole,
  listWorkspacePermissions,
  listWorkspaceRoles,
  listPermissionsPage as listPermissionsPageRows,
  listRolesPage as listRolesPageRows,
  lockPermissionsBySlug,
  lockRole,
  type PageRequest,
  type PermissionRef,
  permissionsOfRoles,
  type PermissionRow,
  replaceRolePermissions,
  type RoleRow,
} from "../../storage/rbac/permissions.repository.js";
import type { Principal } from "../principal.js";
import type { RbacServices } from "./rbac.keyLinks.js";
import { requireNamesWithinBounds } from "./rbac.bounds.js";

/**
 * The rules of a workspace's roles and permissions themselves (v1: permissions.createRole / createPermission /
 * deleteRole / deletePermission, and keyhaven's addPermissionsToRole / removePermissionsFromRole). Each needs `*` or
 * its own rbac permission (PermissionDeniedError); names collide as ConflictError, unknown ids are NotFoundError.
 */

/**
 * A role, by a name unique in the workspace (ConflictError when taken), with the permissions of these slugs (v2's
 * createRole; v1 creates a role without any): connecting them needs add_permission_to_role, and a slug the workspace
 * lacks is created (name = slug) when the caller may create permissions. One transaction.
 */
export async function createRole(
  services: RbacServices,
  principal: Principal,
  input: { name: string; description?: string | undefined; permissions?: string[] | undefined },
): Promise<{ roleId: string }> {
  requireNamesWithinBounds([{ permissions: input.permissions }]);
  requirePermission(principal, anyOfOne("rbac.*.create_role"));
  const slugs = [...new Set(input.permissions ?? [])].sort();
  if (slugs.length > 0) requirePermission(principal, { or: ["*", "rbac.*.add_permission_to_role"] });
  const { permissions: _, ...role } = input;
  try {
    return await services.db.transaction(async (tx) => {
      const now = services.clock.now();
      const permissionIds = (await ensurePermissionsBySlug(tx, principal, slugs, { or: ["*", "rbac.*.create_permission"] }, now)).map(
        (p) => p.id,
      );
      const roleId = await insertRole(tx, { ...role, workspaceId: principal.workspaceId }, now);
      await replaceRolePermissions(tx, principal.workspaceId, roleId, permissionIds, now);
      return { roleId };
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ConflictError("role", { kind: "roleExists", name: input.name });
    throw err;
  }
}

/**
 * The permissions of these slugs, locked against deletion, in the order of `slugs`; the ones the workspace lacks are
 * created (name = slug) when the caller satisfies `mayCreate` (else PermissionDeniedError).
 */
async function ensurePermissionsBySlug(
  tx: RbacServices["db"],
  principal: Principal,
  slugs: string[],
  mayCreate: PermissionQuery,
  now: number,
): Promise<PermissionRow[]> {
  let found = await lockPermissionsBySlug(tx, principal.workspaceId, slugs);
  if (found.length < slugs.length) {
    requirePermission(principal, mayCreate);
    const have = new Set(found.map((p) => p.slug));
    await createMissingPermissions(
      tx,
      principal.workspaceId,
      slugs.filter((s) => !have.has(s)),
      now,
    );
    found = await lockPermissionsBySlug(tx, principal.workspaceId, slugs);
  }
  const bySlug = new Map(found.map((p) => [p.slug, p]));
  return slugs.flatMap((s) => {
    const p = bySlug.get(s);
    return p ? [p] : [];
  });
}

/**
 * Makes the role's permissions exactly these slugs (v2's setRolePermissions; `[]` clears): needs both
 * add_permission_to_role and remove_permission_from_role, the role by id (another workspace's is not found), and a
 * slug the workspace lacks is created when the caller may create permissions (tuple or URN). Repeating it changes
 * nothing. Answers the permissions, one per distinct slug, by slug.
 */
export async function setPermissionsOfRole(
  services: RbacServices,
  principal: Principal,
  input: { roleId: string; permissions: string[] },
): Promise<PermissionRow[]> {
  requireNamesWithinBounds([{ permissions: input.permissions }]);
  requirePermission(principal, { or: ["*", { and: ["rbac.*.add_permission_to_role", "rbac.*.remove_permission_from_role"] }] });
  const slugs = [...new Set(input.permissions)].sort();
  const mayCreate = createPermissionPermission(principal.workspaceId);
  return services.db.transaction(async (tx) => {
    const role = await lockRole(tx, principal.workspaceId, input.roleId);
    if (!role) throw new NotFoundError("role", input.roleId);
    const now = services.clock.now();
    const found = await ensurePermissionsBySlug(tx, principal, slugs, mayCreate, now);
    await replaceRolePermissions(
      tx,
      principal.workspaceId,
      role.id,
      found.map((p) => p.id),
      now,
    );
    return found;
  });
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
      throw new ConflictError("permission", { kind: "permissionExists", name: input.name, slug });
    }
    throw err;
  }
}

/**
 * How a route names a role or a permission: by id alone (v1), or by id or else its name (a role) or slug (a
 * permission) in one string (v2).
 */
export type RbacLookup = "id" | "idOrName";

/** Deletes a role for good, with its links to keys and permissions. */
export async function deleteRole(services: RbacServices, principal: Principal, roleId: string, lookup: RbacLookup = "id"): Promise<void> {
  requirePermission(principal, anyOfOne("rbac.*.delete_role"));
  const id = lookup === "id" ? roleId : (await findRoleByIdOrName(services.db, principal.workspaceId, roleId))?.id;
  if (id === undefined || !(await deleteRoleRow(services.db, principal.workspaceId, id)))
    throw new NotFoundError("role", roleId, { kind: "roleToDeleteNotFound", roleId });
}

/** Deletes a permission for good, with its links to keys and roles. */
export async function deletePermission(
  services: RbacServices,
  principal: Principal,
  permissionId: string,
  lookup: RbacLookup = "id",
): Promise<void> {
  requirePermission(principal, anyOfOne("rbac.*.delete_permission"));
  const id = lookup === "id" ? permissionId : (await findPermissionByIdOrSlug(services.db, principal.workspaceId, permissionId))?.id;
  if (id === undefined || !(await deletePermissionRow(services.db, principal.workspaceId, id))) {
    throw new NotFoundError("permission", permissionId, { kind: "permissionToDeleteNotFound", permissionId });
  }
}

/**
 * Connects (`add`) or disconnects (`remove`) permissions and a role; all or nothing, idempotent. One statement, which
 * re-checks a root key authorized from memory (`writeGuard`): the routes authenticate with authorizeWrite.
 */
export async function changePermissionsOfRole(
  services: RbacServices,
  principal: Principal,
  input: { roleId: string; permissions: PermissionRef[] },
  change: "add" | "remove",
): Promise<void> {
  if (change === "add") requireNamesWithinBounds([{ permissions: input.permissions.map((p) => p.id ?? p.slug ?? "") }]);
  requirePermission(principal, { or: ["*", change === "add" ? "rbac.*.add_permission_to_role" : "rbac.*.remove_permission_from_role"] });
  await changeRolePermissions(
    services.db,
    principal.workspaceId,
    input.roleId,
    input.permissions,
    change,
    services.clock.now(),
    principal.writeGuard,
  );
}

/** A permission of the caller's workspace (one of another workspace is not found). */
export async function getPermission(
  services: RbacServices,
  principal: Principal,
  permissionId: string,
  lookup: RbacLookup = "id",
): Promise<PermissionRow> {
  requirePermission(principal, anyOfOne("rbac.*.read_permission"));
  const permission =
    lookup === "id"
      ? await findPermission(services.db, principal.workspaceId, permissionId)
      : await findPermissionByIdOrSlug(services.db, principal.workspaceId, permissionId);
  if (!permission) throw new NotFoundError("permission", permissionId);
  return permission;
}

/** Every permission of the caller's workspace, oldest first. */
export async function listPermissions(services: RbacServices, principal: Principal): Promise<PermissionRow[]> {
  requirePermission(principal, anyOfOne("rbac.*.read_permission"));
  return listWorkspacePermissions(services.db, principal.workspaceId);
}

/** A role of the caller's workspace (one of another workspace is not found). */
export async function getRole(services: RbacServices, principal: Principal, roleId: string, lookup: RbacLookup = "id"): Promise<RoleRow> {
  requirePermission(principal, anyOfOne("rbac.*.read_role"));
  const role =
    lookup === "id"
      ? await findRole(services.db, principal.workspaceId, roleId)
      : await findRoleByIdOrName(services.db, principal.workspaceId, roleId);
  if (!role) throw new NotFoundError("role", roleId);
  return role;
}

/** Every role of the caller's workspace, oldest first. */
export async function listRoles(services: RbacServices, principal: Principal): Promise<RoleRow[]> {
  requirePermission(principal, anyOfOne("rbac.*.read_role"));
  return listWorkspaceRoles(services.db, principal.workspaceId);
}

/** A page of the caller's permissions by id, from `fromId` on (inclusive), matching `search`. */
export async function listPermissionsPage(services: RbacServices, principal: Principal, page: PageRequest): Promise<PermissionRow[]> {
  requirePermission(principal, anyOfOne("rbac.*.read_permission"));
  return listPermissionsPageRows(services.db, principal.workspaceId, page);
}

export type RoleWithPermissions = RoleRow & { permissions: PermissionRow[] };

/** A page of the caller's roles by id, from `fromId` on (inclusive), matching `search`, each with its permissions. */
export async function listRolesPage(services: RbacServices, principal: Principal, page: PageRequest): Promise<RoleWithPermissions[]> {
  requirePermission(principal, anyOfOne("rbac.*.read_role"));
  const rows = await listRolesPageRows(services.db, principal.workspaceId, page);
  const permissions = await permissionsOfRoles(
    services.db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => ({ ...r, permissions: permissions.get(r.id) ?? [] }));
}

/** A role of the caller's workspace with its permissions (getRole's rules). */
export async function getRoleWithPermissions(
  services: RbacServices,
  principal: Principal,
  roleId: string,
  lookup: RbacLookup,
): Promise<RoleWithPermissions> {
  const role = await getRole(services, principal, roleId, lookup);
  return { ...role, permissions: (await permissionsOfRoles(services.db, [role.id])).get(role.id) ?? [] };
}
