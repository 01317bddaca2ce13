import { z } from "zod";
import { setPermissionsOfRole } from "../../../core/rbac/rbac.rolesPermissions.js";
import { defineV2Rpc } from "../rpc.js";
import { permissionData, permissionOutput, slugInput } from "./permissions.schemas.js";

export const setRolePermissions = defineV2Rpc({
  method: "POST",
  path: "/v2/permissions.setRolePermissions",
  auth: "rootKey",
  summary:
    "Makes a role's permissions exactly these slugs (`[]` clears them); a slug the workspace lacks is created (needs create_permission). Repeating it changes nothing.",
  errors: [400, 401, 403, 404, 503],
  returns: "The role's permissions, one per distinct slug, by slug.",
  input: z
    .object({
      roleId: z
        .string()
        .min(3)
        .max(255)
        .regex(/^[a-zA-Z0-9_-]+$/, { error: "must hold only letters, digits, _ and -" })
        .describe("The role's id (not its name)."),
      permissions: z.array(slugInput).max(1000).describe("Slugs of the role's permissions."),
    })
    .strict(),
  output: z.array(permissionOutput),
  handler: async (input, { deps, caller }) => ({ data: (await setPermissionsOfRole(deps, caller, input)).map(permissionData) }),
});
