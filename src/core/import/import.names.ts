import type { Db } from "../../storage/client.js";
import { PreconditionFailedError } from "../../errors.js";
import {
  createMissingPermissions,
  createMissingRoles,
  findPermissionIdsByName,
  findPermissionsByIdOrSlug,
  findRoleIdsByName,
  missingNames,
} from "../../storage/rbac/permissions.repository.js";

type NamingItem = { roles?: string[] | undefined; permissions?: string[] | undefined };

/**
 * The ids of the roles and permissions the keys name (both by name, as v1's import does), by name; names the
 * workspace lacks are absent. migrations.createKeys, migrations.enqueueKeys and the migration worker resolve
 * them here.
 */
export async function findImportNames(
  db: Db,
  workspaceId: string,
  items: NamingItem[],
): Promise<{ roleIds: Map<string, string>; permissionIds: Map<string, string> }> {
  const roleIds = await findRoleIdsByName(db, workspaceId, unique(items.flatMap((k) => k.roles ?? [])));
  const permissionIds = await findPermissionIdsByName(db, workspaceId, unique(items.flatMap((k) => k.permissions ?? [])));
  return { roleIds, permissionIds };
}

/**
 * findImportNames, or a PreconditionFailedError naming the missing ones. `migrations.createKeys` and
 * `migrations.enqueueKeys` refuse such a batch before anything is written.
 */
export async function resolveImportNames(
  db: Db,
  workspaceId: string,
  items: NamingItem[],
): Promise<{ roleIds: Map<string, string>; permissionIds: Map<string, string> }> {
  const roleNames = unique(items.flatMap((k) => k.roles ?? []));
  const roleIds = await findRoleIdsByName(db, workspaceId, roleNames);
  const missingRoles = missingNames(roleNames, roleIds);
  if (missingRoles.length > 0) {
    throw new PreconditionFailedError("role", { kind: "importRolesMissing", names: missingRoles }, missingRoles, { missingRoles });
  }
  const permissionNames = unique(items.flatMap((k) => k.permissions ?? []));
  const permissionIds = await findPermissionIdsByName(db, workspaceId, permissionNames);
  const missingPermissions = missingNames(permissionNames, permissionIds);
  if (missingPermissions.length > 0) {
    throw new PreconditionFailedError("permission", { kind: "importPermissionsMissing", names: missingPermissions }, missingPermissions, {
      missingPermissions,
    });
  }
  return { roleIds, permissionIds };
}

/**
 * v2's keys.migrateKeys: the roles (by name) and permissions (by slug, as v2 names them) the keys name, the missing
 * ones created first (a permission with name = slug), inside the caller's transaction. The maps are keyed by what
 * the keys name, as findImportNames' are, so one planner builds the rows of both.
 */
export async function createImportNames(
  db: Db,
  workspaceId: string,
  items: NamingItem[],
  now: number,
): Promise<{ roleIds: Map<string, string>; permissionIds: Map<string, string> }> {
  const roleNames = unique(items.flatMap((k) => k.roles ?? []));
  const slugs = unique(items.flatMap((k) => k.permissions ?? []));
  await createMissingRoles(db, workspaceId, roleNames, now);
  await createMissingPermissions(db, workspaceId, slugs, now);
  const roleIds = await findRoleIdsByName(db, workspaceId, roleNames);
  const found = await findPermissionsByIdOrSlug(db, workspaceId, [], slugs, { lockForShare: true });
  return { roleIds, permissionIds: new Map(found.map((p) => [p.slug, p.id])) };
}

function unique<T>(values: T[]): T[] {
  return [...new Set(values)];
}
