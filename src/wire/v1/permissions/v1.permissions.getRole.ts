import { z } from "zod";
import { getRole as getRoleCore } from "../../../core/rbac/rbac.rolesPermissions.js";
import { queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { roleOutput, toRoleOutput } from "./permissions.schemas.js";

export const getRole = defineRpc({
  method: "GET",
  path: "/v1/permissions.getRole",
  auth: "rootKey",
  summary: "Reads a role by id.",
  errors: [400, 403, 404, 503],
  returns: "The role.",
  input: z.object({ roleId: queryText.min(1) }),
  output: roleOutput,
  handler: async (input, { deps, caller }) => {
    return toRoleOutput(await getRoleCore(deps, caller, input.roleId, "id"));
  },
});
