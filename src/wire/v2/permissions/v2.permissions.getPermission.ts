import { z } from "zod";
import { getPermission as getPermissionCore } from "../../../core/rbac/rbac.rolesPermissions.js";
import { defineV2Rpc } from "../rpc.js";
import { permissionData, permissionOutput, slugInput } from "./permissions.schemas.js";

export const getPermission = defineV2Rpc({
  method: "POST",
  path: "/v2/permissions.getPermission",
  auth: "rootKey",
  summary: "Reads a permission by id or slug.",
  errors: [400, 401, 403, 404, 503],
  returns: "The permission.",
  input: z.object({ permission: slugInput.describe("The permission's id or slug.") }).strict(),
  output: permissionOutput,
  handler: async (input, { deps, caller }) => ({
    data: permissionData(await getPermissionCore(deps, caller, input.permission, "idOrName")),
  }),
});
