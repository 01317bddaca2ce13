import { z } from "zod";
import { getPermission as getPermissionCore } from "../../../core/rbac/rbac.rolesPermissions.js";
import { queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { permissionOutput, toPermissionOutput } from "./permissions.schemas.js";

export const getPermission = defineRpc({
  method: "GET",
  path: "/v1/permissions.getPermission",
  auth: "rootKey",
  summary: "Reads a permission by id.",
  errors: [400, 403, 404, 503],
  returns: "The permission.",
  input: z.object({ permissionId: queryText.min(1) }),
  output: permissionOutput,
  handler: async (input, { deps, caller }) => {
    return toPermissionOutput(await getPermissionCore(deps, caller, input.permissionId, "id"));
  },
});
