import { z } from "zod";
import { deleteRole as deleteRoleCore } from "../../../core/rbac/rbac.rolesPermissions.js";
import { defineV2Rpc } from "../rpc.js";

export const deleteRole = defineV2Rpc({
  method: "POST",
  path: "/v2/permissions.deleteRole",
  auth: "rootKey",
  summary: "Deletes a role (by id or name) for good, with its links to keys and permissions.",
  errors: [400, 401, 403, 404, 503],
  returns: "Nothing (an empty object).",
  input: z.object({ role: z.string().min(1).max(128).describe("The role's id or name.") }).strict(),
  output: z.object({}).strict(),
  handler: async (input, { deps, caller }) => {
    await deleteRoleCore(deps, caller, input.role, "idOrName");
    return { data: {} };
  },
});
