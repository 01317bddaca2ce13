import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { findLiveKeyForWrite, hardDeleteKey, softDeleteKey } from "./keys.writes.repository.js";

export const deleteKey = defineRpc({
  method: "POST",
  path: "/v1/keys.deleteKey",
  auth: "rootKey",
  summary: "Deletes a key: it stops verifying at once. With `permanent: true` the row is removed, so the same key can be imported again.",
  errors: [400, 403, 404, 503],
  returns: "The key is deleted.",
  input: z.object({ keyId: idInput, permanent: z.boolean().default(false) }),
  output: z.object({}),
  handler: async (input, { deps, rootKey: auth }) => {
    const { db } = deps;
    const notFound = new ApiError("NOT_FOUND", `key ${input.keyId} not found`);
    // Authenticated before the lookup (v1 looked first), so a wrong root key learns nothing about the id; another
    // workspace's key is answered as a missing one.
    const key = await findLiveKeyForWrite(db, input.keyId);
    if (!key || key.workspaceId !== auth.workspaceId) throw notFound;
    requirePermission(auth, apiPermission(key.apiId, "delete_key"));
    const deleted = input.permanent ? await hardDeleteKey(db, key.id) : await softDeleteKey(db, key.id, Date.now());
    if (!deleted) throw notFound;
    return {};
  },
});
