import { z } from "zod";
import { defineRpc } from "../rpc.js";
import { deletePermission as remove } from "../../../core/rbac/rbac.rolesPermissions.js";
import { idInput } from "../inputBounds.js";

export const deletePermission = defineRpc({
  method: "POST",
  path: "/v1/permissions.deletePermission",
  auth: "rootKey",
  summary: "Deletes a permission for good, with its links to keys and roles; keys lose it at their next verification.",
  errors: [400, 403, 404, 503],
  returns: "The permission and its links are deleted.",
  input: z.object({ permissionId: idInput }),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await remove(deps, caller, input.permissionId, "id");
    return {};
  },
});
