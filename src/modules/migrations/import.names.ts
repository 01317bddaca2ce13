import type { Db } from "../../db/client.js";
import { ApiError } from "../../errors.js";
import { findPermissionIdsByName, findRoleIdsByName } from "../permissions/permissions.repository.js";

/**
 * The ids of the roles and permissions the keys name (both by name, as v1's import does), or 412 naming the missing
 * ones. `migrations.createKeys` and `migrations.enqueueKeys` refuse such a batch before anything is written.
 */
export async function resolveImportNames(
  db: Db,
  workspaceId: string,
  items: { roles?: string[] | undefined; permissions?: string[] | undefined }[],
): Promise<{ roleIds: Map<string, string>; permissionIds: Map<string, string> }> {
  const roleNames = unique(items.flatMap((k) => k.roles ?? []));
  const roleIds = await findRoleIdsByName(db, workspaceId, roleNames);
  const missingRoles = roleNames.filter((r) => !roleIds.has(r));
  if (missingRoles.length > 0) {
    throw new ApiError("PRECONDITION_FAILED", `Roles ${JSON.stringify(missingRoles)} are missing, please create them first`, {
      missingRoles,
    });
  }
  const permissionNames = unique(items.flatMap((k) => k.permissions ?? []));
  const permissionIds = await findPermissionIdsByName(db, workspaceId, permissionNames);
  const missingPermissions = permissionNames.filter((p) => !permissionIds.has(p));
  if (missingPermissions.length > 0) {
    throw new ApiError(
      "PRECONDITION_FAILED",
      `Permissions ${JSON.stringify(missingPermissions)} are missing, please create them first`,
      { missingPermissions },
    );
  }
  return { roleIds, permissionIds };
}

function unique<T>(values: T[]): T[] {
  return [...new Set(values)];
}
