import { z } from "zod";
import { createPermission as createPermissionCore } from "../../../core/rbac/rbac.rolesPermissions.js";
import { defineV2Rpc } from "../rpc.js";
import { slugInput } from "./permissions.schemas.js";

export const createPermission = defineV2Rpc({
  method: "POST",
  path: "/v2/permissions.createPermission",
  auth: "rootKey",
  summary: "Creates a permission; its slug is unique in the workspace (409 when taken).",
  errors: [400, 401, 403, 409, 503],
  returns: "The new permission's id.",
  input: z
    .object({
      name: z.string().min(1).max(512).describe("A name for people."),
      slug: slugInput.describe("What keys hold and verifications ask for; unique in the workspace."),
      description: z.string().max(512).optional(),
    })
    .strict(),
  output: z.object({ permissionId: z.string().describe("The new permission's id (`perm_…`).") }),
  handler: async (input, { deps, caller }) => ({ data: await createPermissionCore(deps, caller, input) }),
});
