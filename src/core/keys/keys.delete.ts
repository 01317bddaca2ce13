import { apiPermission, keyPermission } from "../auth/permissions.query.js";
import type { Caller } from "../caller.js";
import { requirePermission } from "../principal.js";
import { NotFoundError } from "../../errors.js";
import { deleteKeysOfApi } from "../../storage/apis/apis.repository.js";
import { findLiveKeyForWrite, hardDeleteKey, softDeleteKey } from "../../storage/keys/keys.writes.repository.js";
import type { KeyServices } from "./keys.services.js";

/**
 * Deletes a key: soft (it stops verifying, the row stays), or `permanent` (the row goes, so the same key can be
 * imported again). Another workspace's key is a missing one.
 */
export async function deleteKey(services: KeyServices, caller: Caller, input: { keyId: string; permanent: boolean }): Promise<void> {
  const key = await findLiveKeyForWrite(services.db, input.keyId);
  if (!key || key.workspaceId !== caller.workspaceId) throw new NotFoundError("key", input.keyId);
  requirePermission(caller, keyPermission(caller.access, caller.workspaceId, key.apiId, key.id, "delete_key"));
  await services.changes.change(caller, async (tx, record) => {
    const deleted = input.permanent ? await hardDeleteKey(tx, key.id) : await softDeleteKey(tx, key.id, services.clock.now());
    if (!deleted) throw new NotFoundError("key", input.keyId);
    record({
      event: "key.delete",
      targets: [
        { type: "key", id: key.id },
        { type: "api", id: key.apiId },
      ],
      description: `${input.permanent ? "permanently deleted" : "deleted"} key ${key.id} of ${key.apiId}`,
      details: { permanent: input.permanent },
    });
  });
}

/**
 * Deletes every key of an API (the API stays), as deleteKey would each; answers how many. One change: a key.delete
 * entry naming the API and every key deleted (none when there was no key to delete, as nothing changed).
 */
export async function deleteApiKeys(services: KeyServices, caller: Caller, input: { apiId: string; permanent: boolean }): Promise<number> {
  requirePermission(caller, apiPermission(input.apiId, "delete_key"));
  return services.changes.change(caller, async (tx, record) => {
    const deleted = await deleteKeysOfApi(tx, caller.workspaceId, input.apiId, input.permanent, services.clock.now());
    if (deleted === undefined) throw new NotFoundError("api", input.apiId);
    if (deleted.length > 0) {
      record({
        event: "key.delete",
        targets: [{ type: "api", id: input.apiId }, ...deleted.map((id) => ({ type: "key", id }))],
        description: `${input.permanent ? "permanently deleted" : "deleted"} ${deleted.length} ${deleted.length === 1 ? "key" : "keys"} of ${input.apiId}`,
        details: { count: deleted.length, permanent: input.permanent },
      });
    }
    return deleted.length;
  });
}
