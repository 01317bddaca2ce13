import { requirePermission } from "../principal.js";
import { anyOfOne } from "../auth/permissions.query.js";
import { createPermissionPermission, type PermissionQuery } from "../auth/permissions.query.js";
import { type Db, isUniqueViolation } from "../../storage/client.js";
import { ConflictError, NotFoundError } from "../../errors.js";
import {
  changeRolePermissions,
  deletePermission as deletePermissionRow,
  deleteRole as deleteRoleRow,
  findPermission,
  findPermissionByIdOrSlug,
  findRole,
  findRoleByIdOrName,
  insertMissingPermissions,
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
import type { AuditTarget } from "../../storage/schema.js";
import type { Caller } from "../caller.js";
import type { RecordChange, WriteGate } from "../changes.js";
import type { RbacServices } from "./rbac.keyLinks.js";
import { requireNamesWithinBounds } from "./rbac.bounds.js";

/**
 * The rules of a workspace's roles and permissions themselves (v1: permissions.createRole / createPermission /
 * deleteRole / deletePermission, and keyhaven's addPermissionsToRole / removePermissionsFromRole). Each needs `*` or
 * its own rbac permission (PermissionDeniedError); names collide as ConflictError, unknown ids are NotFoundError.
 * Every change goes through the write gate (`changes`), which records it in the audit log in its own transaction.
 */
export type RolesPermissionsServices = RbacServices & { readonly changes: WriteGate };

const roleTarget = (role: { id: string; name: string }): AuditTarget => ({ type: "role", id: role.id, name: role.name });
const permissionTarget = (permission: { id: string; slug: string }): AuditTarget => ({
  type: "permission",
  id: permission.id,
  name: permission.slug,
});

/**
 * A role, by a name unique in the workspace (ConflictError when taken), with the permissions of these slugs (v2's
 * createRole; v1 creates a role without any): connecting them needs add_permission_to_role, and a slug the workspace
 * lacks is created (name = slug) when the caller may create permissions. One change: role.create, and
 * permission.create and authorization.connect_role_and_permission when it created or connected permissions.
 */
export async function createRole(
  services: RolesPermissionsServices,
  caller: Caller,
  input: { name: string; description?: string | undefined; permissions?: string[] | undefined },
): Promise<{ roleId: string }> {
  requireNamesWithinBounds([{ permissions: input.permissions }]);
  requirePermission(caller, anyOfOne("rbac.*.create_role"));
  const slugs = [...new Set(input.permissions ?? [])].sort();
  if (slugs.length > 0) requirePermission(caller, { or: ["*", "rbac.*.add_permission_to_role"] });
  const { permissions: _, ...role } = input;
  try {
    return await services.changes.change(caller, async (tx, record) => {
      const now = services.clock.now();
      const permissions = await ensurePermissionsBySlug(tx, record, caller, slugs, { or: ["*", "rbac.*.create_permission"] }, now);
      const roleId = await insertRole(tx, { ...role, workspaceId: caller.workspaceId }, now);
      const { connected } = await replaceRolePermissions(
        tx,
        caller.workspaceId,
        roleId,
        permissions.map((p) => p.id),
        now,
      );
      const target = roleTarget({ id: roleId, name: input.name });
      record({ event: "role.create", targets: [target], description: `created role ${roleId}` });
      recordLinks(record, "connect", target, permissions, connected);
      return { roleId };
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new ConflictError("role", { kind: "roleExists", name: input.name });
    throw err;
  }
}

/**
 * The permissions of these slugs, locked against deletion, in the order of `slugs`; the ones the workspace lacks are
 * created (name = slug, recorded as permission.create) when the caller satisfies `mayCreate` (else
 * PermissionDeniedError).
 */
async function ensurePermissionsBySlug(
  tx: Db,
  record: RecordChange,
  caller: Caller,
  slugs: string[],
  mayCreate: PermissionQuery,
  now: number,
): Promise<PermissionRow[]> {
  let found = await lockPermissionsBySlug(tx, caller.workspaceId, slugs);
  if (found.length < slugs.length) {
    requirePermission(caller, mayCreate);
    const have = new Set(found.map((p) => p.slug));
    const created = await insertMissingPermissions(
      tx,
      caller.workspaceId,
      slugs.filter((s) => !have.has(s)),
      now,
    );
    if (created.length > 0) {
      record({
        event: "permission.create",
        targets: created.map(permissionTarget),
        description: `created ${created.length === 1 ? "permission" : `${created.length} permissions`} ${created.map((p) => p.id).join(", ")}`,
      });
    }
    found = await lockPermissionsBySlug(tx, caller.workspaceId, slugs);
  }
  const bySlug = new Map(found.map((p) => [p.slug, p]));
  return slugs.flatMap((s) => {
    const p = bySlug.get(s);
    return p ? [p] : [];
  });
}

/** Records the links of a role to permissions that a change made (`connect`) or removed (`disconnect`), if any. */
function recordLinks(
  record: RecordChange,
  change: "connect" | "disconnect",
  role: AuditTarget,
  known: readonly PermissionRow[],
  permissionIds: readonly string[],
): void {
  if (permissionIds.length === 0) return;
  const byId = new Map(known.map((p) => [p.id, p]));
  const targets = [...permissionIds].sort().map((id) => {
    const p = byId.get(id);
    return p ? permissionTarget(p) : { type: "permission", id };
  });
  record({
    event: change === "connect" ? "authorization.connect_role_and_permission" : "authorization.disconnect_role_and_permission",
    targets: [role, ...targets],
    description: `${change === "connect" ? "connected" : "disconnected"} ${targets.length === 1 ? "permission" : `${targets.length} permissions`} ${change === "connect" ? "to" : "from"} role ${role.id}`,
  });
}

/**
 * Makes the role's permissions exactly these slugs (v2's setRolePermissions; `[]` clears): needs both
 * add_permission_to_role and remove_permission_from_role, the role by id (another workspace's is not found), and a
 * slug the workspace lacks is created when the caller may create permissions (tuple or URN). Repeating it changes
 * nothing (and records nothing). Answers the permissions, one per distinct slug, by slug.
 */
export async function setPermissionsOfRole(
  services: RolesPermissionsServices,
  caller: Caller,
  input: { roleId: string; permissions: string[] },
): Promise<PermissionRow[]> {
  requireNamesWithinBounds([{ permissions: input.permissions }]);
  requirePermission(caller, { or: ["*", { and: ["rbac.*.add_permission_to_role", "rbac.*.remove_permission_from_role"] }] });
  const slugs = [...new Set(input.permissions)].sort();
  const mayCreate = createPermissionPermission(caller.workspaceId);
  return services.changes.change(caller, async (tx, record) => {
    const role = await lockRole(tx, caller.workspaceId, input.roleId);
    if (!role) throw new NotFoundError("role", input.roleId);
    const now = services.clock.now();
    const found = await ensurePermissionsBySlug(tx, record, caller, slugs, mayCreate, now);
    const before = (await permissionsOfRoles(tx, [role.id])).get(role.id) ?? [];
    const { connected, disconnected } = await replaceRolePermissions(
      tx,
      caller.workspaceId,
      role.id,
      found.map((p) => p.id),
      now,
    );
    const target = roleTarget(role);
    recordLinks(record, "disconnect", target, before, disconnected);
    recordLinks(record, "connect", target, found, connected);
    return found;
  });
}

/** A permission, by a slug (default: the name) unique in the workspace (ConflictError when taken): permission.create. */
export async function createPermission(
  services: RolesPermissionsServices,
  caller: Caller,
  input: { name: string; slug?: string | undefined; description?: string | undefined },
): Promise<{ permissionId: string }> {
  requirePermission(caller, { or: ["*", "rbac.*.create_permission"] });
  const slug = input.slug ?? input.name;
  try {
    return await services.changes.change(caller, async (tx, record) => {
      const permissionId = await insertPermission(tx, { ...input, slug, workspaceId: caller.workspaceId }, services.clock.now());
      record({
        event: "permission.create",
        targets: [permissionTarget({ id: permissionId, slug })],
        description: `created permission ${permissionId}`,
      });
      return { permissionId };
    });
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

/** Deletes a role for good, with its links to keys and permissions: role.delete. */
export async function deleteRole(services: RolesPermissionsServices, caller: Caller, roleId: string, lookup: RbacLookup): Promise<void> {
  requirePermission(caller, anyOfOne("rbac.*.delete_role"));
  await services.changes.change(caller, async (tx, record) => {
    const id = lookup === "id" ? roleId : (await findRoleByIdOrName(tx, caller.workspaceId, roleId))?.id;
    const deleted = id === undefined ? undefined : await deleteRoleRow(tx, caller.workspaceId, id);
    if (!deleted) throw new NotFoundError("role", roleId, { kind: "roleToDeleteNotFound", roleId });
    record({ event: "role.delete", targets: [roleTarget(deleted)], description: `deleted role ${deleted.id}` });
  });
}

/** Deletes a permission for good, with its links to keys and roles: permission.delete. */
export async function deletePermission(
  services: RolesPermissionsServices,
  caller: Caller,
  permissionId: string,
  lookup: RbacLookup,
): Promise<void> {
  requirePermission(caller, anyOfOne("rbac.*.delete_permission"));
  await services.changes.change(caller, async (tx, record) => {
    const id = lookup === "id" ? permissionId : (await findPermissionByIdOrSlug(tx, caller.workspaceId, permissionId))?.id;
    const deleted = id === undefined ? undefined : await deletePermissionRow(tx, caller.workspaceId, id);
    if (!deleted) throw new NotFoundError("permission", permissionId, { kind: "permissionToDeleteNotFound", permissionId });
    record({ event: "permission.delete", targets: [permissionTarget(deleted)], description: `deleted permission ${deleted.id}` });
  });
}

/**
 * Connects (`add`) or disconnects (`remove`) permissions and a role; all or nothing, idempotent. One statement, which
 * re-checks a root key authorized from memory (`writeGuard`): the routes authenticate with authorizeWrite. The same
 * statement records authorization.connect_role_and_permission / disconnect_role_and_permission, naming the role and
 * the permissions it connected or disconnected (nothing when it changed no link).
 */
export async function changePermissionsOfRole(
  services: RolesPermissionsServices,
  caller: Caller,
  input: { roleId: string; permissions: PermissionRef[] },
  change: "add" | "remove",
): Promise<void> {
  if (change === "add") requireNamesWithinBounds([{ permissions: input.permissions.map((p) => p.id ?? p.slug ?? "") }]);
  requirePermission(caller, { or: ["*", change === "add" ? "rbac.*.add_permission_to_role" : "rbac.*.remove_permission_from_role"] });
  const recorded = {
    event: change === "add" ? "authorization.connect_role_and_permission" : "authorization.disconnect_role_and_permission",
    // The statement names the role (with its name) and the permissions it changed (changeRolePermissions).
    targets: [{ type: "role", id: input.roleId }],
    description: `${change === "add" ? "connected permissions to" : "disconnected permissions from"} role ${input.roleId}`,
  } as const;
  await services.changes.statement(caller, [recorded], (db, audit) =>
    changeRolePermissions(db, caller.workspaceId, input.roleId, input.permissions, change, services.clock.now(), caller.writeGuard, audit),
  );
}

/** A permission of the caller's workspace (one of another workspace is not found). */
export async function getPermission(
  services: RbacServices,
  caller: Caller,
  permissionId: string,
  lookup: RbacLookup,
): Promise<PermissionRow> {
  requirePermission(caller, anyOfOne("rbac.*.read_permission"));
  const permission =
    lookup === "id"
      ? await findPermission(services.db, caller.workspaceId, permissionId)
      : await findPermissionByIdOrSlug(services.db, caller.workspaceId, permissionId);
  if (!permission) throw new NotFoundError("permission", permissionId);
  return permission;
}

/** Every permission of the caller's workspace, oldest first. */
export async function listPermissions(services: RbacServices, caller: Caller): Promise<PermissionRow[]> {
  requirePermission(caller, anyOfOne("rbac.*.read_permission"));
  return listWorkspacePermissions(services.db, caller.workspaceId);
}

/** A role of the caller's workspace (one of another workspace is not found). */
export async function getRole(services: RbacServices, caller: Caller, roleId: string, lookup: RbacLookup): Promise<RoleRow> {
  requirePermission(caller, anyOfOne("rbac.*.read_role"));
  const role =
    lookup === "id"
      ? await findRole(services.db, caller.workspaceId, roleId)
      : await findRoleByIdOrName(services.db, caller.workspaceId, roleId);
  if (!role) throw new NotFoundError("role", roleId);
  return role;
}

/** Every role of the caller's workspace, oldest first. */
export async function listRoles(services: RbacServices, caller: Caller): Promise<RoleRow[]> {
  requirePermission(caller, anyOfOne("rbac.*.read_role"));
  return listWorkspaceRoles(services.db, caller.workspaceId);
}

/** A page of the caller's permissions by id, from `fromId` on (inclusive), matching `search`. */
export async function listPermissionsPage(services: RbacServices, caller: Caller, page: PageRequest): Promise<PermissionRow[]> {
  requirePermission(caller, anyOfOne("rbac.*.read_permission"));
  return listPermissionsPageRows(services.db, caller.workspaceId, page);
}

export type RoleWithPermissions = RoleRow & { permissions: PermissionRow[] };

/** A page of the caller's roles by id, from `fromId` on (inclusive), matching `search`, each with its permissions. */
export async function listRolesPage(services: RbacServices, caller: Caller, page: PageRequest): Promise<RoleWithPermissions[]> {
  requirePermission(caller, anyOfOne("rbac.*.read_role"));
  const rows = await listRolesPageRows(services.db, caller.workspaceId, page);
  const permissions = await permissionsOfRoles(
    services.db,
    rows.map((r) => r.id),
  );
  return rows.map((r) => ({ ...r, permissions: permissions.get(r.id) ?? [] }));
}

/** A role of the caller's workspace with its permissions (getRole's rules). */
export async function getRoleWithPermissions(
  services: RbacServices,
  caller: Caller,
  roleId: string,
  lookup: RbacLookup,
): Promise<RoleWithPermissions> {
  const role = await getRole(services, caller, roleId, lookup);
  return { ...role, permissions: (await permissionsOfRoles(services.db, [role.id])).get(role.id) ?? [] };
}
