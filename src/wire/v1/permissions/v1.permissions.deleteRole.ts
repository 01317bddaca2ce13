import { z } from "zod";
import { defineRpc } from "../rpc.js";
import { deleteRole as remove } from "../../../core/rbac/rbac.rolesPermissions.js";
import { idInput } from "../inputBounds.js";

export const deleteRole = defineRpc({
  method: "POST",
  path: "/v1/permissions.deleteRole",
  auth: "rootKey",
  summary: "Deletes a role for good, with its links to keys and permissions; keys lose it at their next verification.",
  errors: [400, 403, 404, 503],
  returns: "The role and its links are deleted.",
  input: z.object({ roleId: idInput }),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await remove(deps, caller, input.roleId, "id");
    return {};
  },
});
