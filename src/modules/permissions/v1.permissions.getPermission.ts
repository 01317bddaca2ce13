import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { queryText } from "../../http/query.js";
import { defineRpc } from "../../rpc.js";
import { findPermission } from "./permissions.repository.js";
import { permissionOutput, toPermissionOutput } from "./permissions.schemas.js";

export const getPermission = defineRpc({
  method: "GET",
  path: "/v1/permissions.getPermission",
  summary: "Reads a permission by id.",
  errors: [400, 403, 404, 503],
  returns: "The permission.",
  input: z.object({ permissionId: queryText.min(1) }),
  output: permissionOutput,
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "rbac.*.read_permission"] });
    const permission = await findPermission(deps.db, auth.workspaceId, input.permissionId);
    if (!permission) throw new ApiError("NOT_FOUND", `permission ${input.permissionId} not found`);
    return toPermissionOutput(permission);
  },
});
