import { z } from "zod";
import { listRoles as listRolesCore } from "../../../core/rbac/rbac.rolesPermissions.js";
import { defineRpc } from "../rpc.js";
import { roleOutput, toRoleOutput } from "./permissions.schemas.js";

export const listRoles = defineRpc({
  method: "GET",
  path: "/v1/permissions.listRoles",
  auth: "rootKey",
  summary: "Lists every role of the workspace, oldest first (no pagination, as in v1).",
  errors: [403, 503],
  returns: "Every role of the workspace.",
  input: z.object({}),
  output: z.array(roleOutput),
  handler: async (_input, { deps, caller }) => {
    return (await listRolesCore(deps, caller)).map(toRoleOutput);
  },
});
