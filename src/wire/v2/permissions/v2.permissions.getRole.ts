import { z } from "zod";
import { getRoleWithPermissions } from "../../../core/rbac/rbac.rolesPermissions.js";
import { defineV2Rpc } from "../rpc.js";
import { roleData, roleOutput } from "./permissions.schemas.js";

export const getRole = defineV2Rpc({
  method: "POST",
  path: "/v2/permissions.getRole",
  auth: "rootKey",
  summary: "Reads a role by id or name, with its permissions.",
  errors: [400, 401, 403, 404, 503],
  returns: "The role.",
  input: z.object({ role: z.string().min(1).max(128).describe("The role's id or name.") }).strict(),
  output: roleOutput,
  handler: async (input, { deps, caller }) => ({ data: roleData(await getRoleWithPermissions(deps, caller, input.role, "idOrName")) }),
});
