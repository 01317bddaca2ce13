import { z } from "zod";
import { deletePermission as deletePermissionCore } from "../../../core/rbac/rbac.rolesPermissions.js";
import { defineV2Rpc } from "../rpc.js";
import { slugInput } from "./permissions.schemas.js";

export const deletePermission = defineV2Rpc({
  method: "POST",
  path: "/v2/permissions.deletePermission",
  auth: "rootKey",
  summary: "Deletes a permission (by id or slug) for good, with its links to keys and roles.",
  errors: [400, 401, 403, 404, 503],
  returns: "Nothing (an empty object).",
  input: z.object({ permission: slugInput.describe("The permission's id or slug.") }).strict(),
  output: z.object({}).strict(),
  handler: async (input, { deps, caller }) => {
    await deletePermissionCore(deps, caller, input.permission, "idOrName");
    return { data: {} };
  },
});
