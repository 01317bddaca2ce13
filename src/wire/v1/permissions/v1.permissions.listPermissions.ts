import { z } from "zod";
import { listPermissions as listPermissionsCore } from "../../../core/rbac/rbac.rolesPermissions.js";
import { defineRpc } from "../rpc.js";
import { permissionOutput, toPermissionOutput } from "./permissions.schemas.js";

export const listPermissions = defineRpc({
  method: "GET",
  path: "/v1/permissions.listPermissions",
  auth: "rootKey",
  summary: "Lists every permission of the workspace, oldest first (no pagination, as in v1).",
  errors: [403, 503],
  returns: "Every permission of the workspace.",
  input: z.object({}),
  output: z.array(permissionOutput),
  handler: async (_input, { deps, caller }) => {
    return (await listPermissionsCore(deps, caller)).map(toPermissionOutput);
  },
});
