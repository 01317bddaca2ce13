import { z } from "zod";
import { requirePermission } from "../../../core/principal.js";
import { ApiError } from "../../../http/errors.js";
import { queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { findPermission } from "../../../storage/rbac/permissions.repository.js";
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
  handler: async (input, { deps, rootKey: auth }) => {
    requirePermission(auth, { or: ["*", "rbac.*.read_permission"] });
    const permission = await findPermission(deps.db, auth.workspaceId, input.permissionId);
    if (!permission) throw new ApiError("NOT_FOUND", `permission ${input.permissionId} not found`);
    return toPermissionOutput(permission);
  },
});
