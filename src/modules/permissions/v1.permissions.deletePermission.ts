import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { deletePermission as deletePermissionRow } from "./permissions.repository.js";

export const deletePermission = defineRpc({
  method: "POST",
  path: "/v1/permissions.deletePermission",
  summary: "Deletes a permission for good, with its links to keys and roles; keys lose it at their next verification.",
  errors: [400, 403, 404, 503],
  returns: "The permission and its links are deleted.",
  input: z.object({ permissionId: idInput }),
  output: z.object({}),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "rbac.*.delete_permission"] });
    if (!(await deletePermissionRow(deps.db, auth.workspaceId, input.permissionId))) {
      throw new ApiError("NOT_FOUND", `Permission ${input.permissionId} not found`);
    }
    return {};
  },
});
