import { z } from "zod";
import { requirePermission } from "../../../core/principal.js";
import { ApiError } from "../../../http/errors.js";
import { queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { findRole } from "../../../storage/rbac/permissions.repository.js";
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
  handler: async (input, { deps, rootKey: auth }) => {
    requirePermission(auth, { or: ["*", "rbac.*.read_role"] });
    const role = await findRole(deps.db, auth.workspaceId, input.roleId);
    if (!role) throw new ApiError("NOT_FOUND", `role ${input.roleId} not found`);
    return toRoleOutput(role);
  },
});
