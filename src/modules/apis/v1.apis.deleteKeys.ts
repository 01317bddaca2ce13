import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { deleteKeysOfApi } from "./apis.repository.js";

export const deleteKeys = defineRpc({
  method: "POST",
  path: "/v1/apis.deleteKeys",
  auth: "rootKey",
  summary:
    "Deletes every key of an API (the API stays). With `permanent: true` every key row is removed, soft-deleted ones included, and their hashes can be imported again. Answers how many keys were deleted.",
  errors: [400, 403, 404, 503],
  returns: "How many keys were deleted.",
  input: z.object({
    apiId: idInput.describe("The API whose keys are deleted; the API stays."),
    permanent: z
      .boolean()
      .default(false)
      .describe(
        "Remove the rows, soft-deleted ones included, so that the keys can be imported again. Default false: deleted keys stop verifying but stay stored.",
      ),
  }),
  output: z.object({ deletedKeys: z.int().describe("How many keys were deleted.") }),
  handler: async (input, { deps, rootKey: auth }) => {
    requirePermission(auth, apiPermission(input.apiId, "delete_key"));
    const deletedKeys = await deleteKeysOfApi(deps.db, auth.workspaceId, input.apiId, input.permanent, Date.now());
    if (deletedKeys === undefined) throw new ApiError("NOT_FOUND", `api ${input.apiId} not found`);
    return { deletedKeys };
  },
});
