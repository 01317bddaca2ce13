import { z } from "zod";
import { createRole as createRoleCore } from "../../../core/rbac/rbac.rolesPermissions.js";
import { defineV2Rpc } from "../rpc.js";
import { slugInput } from "./permissions.schemas.js";

export const createRole = defineV2Rpc({
  method: "POST",
  path: "/v2/permissions.createRole",
  auth: "rootKey",
  summary:
    "Creates a role; its name is unique in the workspace (409 when taken). `permissions` (slugs) are connected to it (needs add_permission_to_role); a slug the workspace lacks is created (needs create_permission).",
  errors: [400, 401, 403, 409, 503],
  returns: "The new role's id.",
  input: z
    .object({
      name: z.string().min(1).max(128).describe("Unique in the workspace."),
      description: z.string().max(512).optional(),
      permissions: z.array(slugInput).max(1000).optional().describe("Slugs of the role's permissions."),
    })
    .strict(),
  output: z.object({ roleId: z.string().describe("The new role's id (`role_…`).") }),
  handler: async (input, { deps, caller }) => ({ data: await createRoleCore(deps, caller, input) }),
});
