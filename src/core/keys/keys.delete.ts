import type { PermissionDialect } from "../auth/permissions.query.js";
import { apiPermission, keyPermission } from "../auth/permissions.query.js";
import { requirePermission } from "../principal.js";
import { NotFoundError } from "../../errors.js";
import { deleteKeysOfApi } from "../../storage/apis/apis.repository.js";
import { findLiveKeyForWrite, hardDeleteKey, softDeleteKey } from "../../storage/keys/keys.writes.repository.js";
import type { Principal } from "../principal.js";
import type { KeyServices } from "./keys.services.js";

/**
 * Deletes a key: soft (it stops verifying, the row stays), or `permanent` (the row goes, so the same key can be
 * imported again). Another workspace's key is a missing one.
 */
export async function deleteKey(
  services: KeyServices,
  principal: Principal,
  input: { keyId: string; permanent: boolean },
  dialect: PermissionDialect = "v1",
): Promise<void> {
  const { db } = services;
  const key = await findLiveKeyForWrite(db, input.keyId);
  if (!key || key.workspaceId !== principal.workspaceId) throw new NotFoundError("key", input.keyId);
  requirePermission(principal, keyPermission({ urnGrants: dialect === "v2" }, principal.workspaceId, key.apiId, key.id, "delete_key"));
  const deleted = input.permanent ? await hardDeleteKey(db, key.id) : await softDeleteKey(db, key.id, services.clock.now());
  if (!deleted) throw new NotFoundError("key", input.keyId);
}

/** Deletes every key of an API (the API stays), as deleteKey would each; answers how many. */
export async function deleteApiKeys(
  services: KeyServices,
  principal: Principal,
  input: { apiId: string; permanent: boolean },
): Promise<number> {
  requirePermission(principal, apiPermission(input.apiId, "delete_key"));
  const deleted = await deleteKeysOfApi(services.db, principal.workspaceId, input.apiId, input.permanent, services.clock.now());
  if (deleted === undefined) throw new NotFoundError("api", input.apiId);
  return deleted;
}
