import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { deleteIdentity as removeIdentity } from "./identities.repository.js";

export const deleteIdentity = defineRpc({
  method: "POST",
  path: "/v1/identities.deleteIdentity",
  summary: "Hard-deletes an identity and its rate limits; its keys keep working without an identity.",
  errors: [400, 403, 404, 503],
  returns: "The identity is deleted; its keys keep verifying without it.",
  input: z.object({ identityId: idInput }),
  output: z.object({}),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, {
      or: ["*", "identity.*.delete_identity", `identity.${input.identityId}.delete_identity`],
    });
    if (!(await removeIdentity(deps.db, auth.workspaceId, input.identityId))) {
      throw new ApiError("NOT_FOUND", `identity ${input.identityId} not found`);
    }
    return {};
  },
});
