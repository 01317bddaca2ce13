import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { softDeleteApiWithKeys } from "./apis.repository.js";

export const deleteApi = defineRpc({
  method: "POST",
  path: "/v1/apis.deleteApi",
  summary: "Deletes an API and all its keys, which stop verifying at once; refused for an API protected from deletions.",
  errors: [400, 403, 404, 412, 503],
  returns: "The API and its keys are deleted.",
  input: z.object({ apiId: idInput.describe("The API to delete, with all its keys.") }),
  output: z.object({}),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, apiPermission(input.apiId, "delete_api"));
    const outcome = await softDeleteApiWithKeys(deps.db, auth.workspaceId, input.apiId, Date.now());
    if (outcome === "not_found") throw new ApiError("NOT_FOUND", `api ${input.apiId} not found`);
    if (outcome === "protected") {
      throw new ApiError("DELETE_PROTECTED", `api ${input.apiId} is protected from deletions`);
    }
    return {};
  },
});
