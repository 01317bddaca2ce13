import type { Db } from "../../storage/client.js";
import { ConflictError, PreconditionFailedError } from "../../errors.js";
import {
  findPermissionIdsByName,
  findPermissionsByIdOrSlug,
  findRolesByIdOrName,
  insertMissingPermissions,
  insertMissingRoles,
  missingNames,
} from "../../storage/rbac/permissions.repository.js";
import type { RecordChange } from "../changes.js";
import type { NamingItem } from "../rbac/rbac.bounds.js";

/**
 * The ids of the roles and permissions the keys name (both by name, as v1's import does), by name; names the
 * workspace lacks are absent. Those found are locked FOR SHARE until the caller's transaction ends, so that a
 * concurrent delete waits for the keys' links instead of breaking their foreign keys (run it in the transaction
 * that writes the links). migrations.createKeys, migrations.enqueueKeys and the migration worker resolve them here.
 */
export async function findImportNames(
  db: Db,
  workspaceId: string,
  items: readonly NamingItem[],
): Promise<{ roleIds: Map<string, string>; permissionIds: Map<string, string> }> {
  const roleIds = await lockRoleIdsByName(db, workspaceId, unique(items.flatMap((k) => k.roles ?? [])));
  const permissionIds = await findPermissionIdsByName(db, workspaceId, unique(items.flatMap((k) => k.permissions ?? [])), {
    lockForShare: true,
  });
  return { roleIds, permissionIds };
}

/**
 * findImportNames, or a PreconditionFailedError naming the missing ones. `migrations.createKeys` (in its write
 * transaction) and `migrations.enqueueKeys` refuse such a batch before anything is written.
 */
export async function resolveImportNames(
  db: Db,
  workspaceId: string,
  items: readonly NamingItem[],
): Promise<{ roleIds: Map<string, string>; permissionIds: Map<string, string> }> {
  const roleNames = unique(items.flatMap((k) => k.roles ?? []));
  const roleIds = await lockRoleIdsByName(db, workspaceId, roleNames);
  const missingRoles = missingNames(roleNames, roleIds);
  if (missingRoles.length > 0) {
    throw new PreconditionFailedError("role", { kind: "importRolesMissing", names: missingRoles }, missingRoles, { missingRoles });
  }
  const permissionNames = unique(items.flatMap((k) => k.permissions ?? []));
  const permissionIds = await findPermissionIdsByName(db, workspaceId, permissionNames, { lockForShare: true });
  const missingPermissions = missingNames(permissionNames, permissionIds);
  if (missingPermissions.length > 0) {
    throw new PreconditionFailedError("permission", { kind: "importPermissionsMissing", names: missingPermissions }, missingPermissions, {
      missingPermissions,
    });
  }
  return { roleIds, permissionIds };
}

// A name deleted by a concurrent call between its creation (here: found existing) and its lock: create it again, this often.
const CREATE_ATTEMPTS = 3;

/**
 * v2's keys.migrateKeys: the roles (by name) and permissions (by slug, as v2 names them) the keys name, the missing
 * ones created first (a permission with name = slug), inside the caller's transaction, and all of them locked FOR
 * SHARE until it ends (as findImportNames). One that a concurrent call deletes between being found existing and
 * being locked is created again. The maps are keyed by what the keys name, as findImportNames' are, so one planner
 * builds the rows of both. Those it created are recorded (role.create, permission.create) with `record`.
 */
export async function createImportNames(
  db: Db,
  workspaceId: string,
  items: readonly NamingItem[],
  now: number,
  record: RecordChange,
): Promise<{ roleIds: Map<string, string>; permissionIds: Map<string, string> }> {
  const roleIds = new Map<string, string>();
  const permissionIds = new Map<string, string>();
  let roleNames = unique(items.flatMap((k) => k.roles ?? []));
  let slugs = unique(items.flatMap((k) => k.permissions ?? []));
  for (let attempt = 1; roleNames.length + slugs.length > 0; attempt++) {
    if (attempt > CREATE_ATTEMPTS) {
      throw new ConflictError("role", "roles or permissions of the request were deleted meanwhile, again and again");
    }
    const createdRoles = await insertMissingRoles(db, workspaceId, roleNames, now);
    const createdPermissions = await insertMissingPermissions(db, workspaceId, slugs, now);
    if (createdRoles.length > 0) {
      record({
        event: "role.create",
        targets: createdRoles.map((r) => ({ type: "role", id: r.id, name: r.name })),
        description: `created ${createdRoles.length === 1 ? "role" : `${createdRoles.length} roles`} ${createdRoles.map((r) => r.id).join(", ")} for the keys migrated`,
      });
    }
    if (createdPermissions.length > 0) {
      record({
        event: "permission.create",
        targets: createdPermissions.map((p) => ({ type: "permission", id: p.id, name: p.slug })),
        description: `created ${createdPermissions.length === 1 ? "permission" : `${createdPermissions.length} permissions`} ${createdPermissions.map((p) => p.id).join(", ")} for the keys migrated`,
      });
    }
    for (const [name, id] of await lockRoleIdsByName(db, workspaceId, roleNames)) roleIds.set(name, id);
    for (const p of await findPermissionsByIdOrSlug(db, workspaceId, [], slugs, { lockForShare: true })) permissionIds.set(p.slug, p.id);
    roleNames = missingNames(roleNames, roleIds);
    slugs = missingNames(slugs, permissionIds);
  }
  return { roleIds, permissionIds };
}

/** Role ids by name, the roles locked FOR SHARE until the transaction ends. */
async function lockRoleIdsByName(db: Db, workspaceId: string, names: string[]): Promise<Map<string, string>> {
  const rows = await findRolesByIdOrName(db, workspaceId, [], names, { lockForShare: true });
  return new Map(rows.map((r) => [r.name, r.id]));
}

function unique<T>(values: T[]): T[] {
  return [...new Set(values)];
}
