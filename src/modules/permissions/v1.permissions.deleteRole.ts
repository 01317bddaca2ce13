import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { deleteRole as deleteRoleRow } from "./permissions.repository.js";

export const deleteRole = defineRpc({
  method: "POST",
  path: "/v1/permissions.deleteRole",
  summary: "Deletes a role for good, with its links to keys and permissions; keys lose it at their next verification.",
  errors: [400, 403, 404, 503],
  returns: "The role and its links are deleted.",
  input: z.object({ roleId: idInput }),
  output: z.object({}),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "rbac.*.delete_role"] });
    if (!(await deleteRoleRow(deps.db, auth.workspaceId, input.roleId))) {
      throw new ApiError("NOT_FOUND", `Role ${input.roleId} not found`);
    }
    return {};
  },
});
