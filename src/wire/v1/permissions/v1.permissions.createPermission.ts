import { z } from "zod";
import { defineRpc } from "../rpc.js";
import { createPermission as create } from "../../../core/rbac/rbac.rolesPermissions.js";
import { description, identifier } from "./permissions.schemas.js";

export const createPermission = defineRpc({
  method: "POST",
  path: "/v1/permissions.createPermission",
  auth: "rootKey",
  summary: "Creates a permission. Its slug (default: the name) is unique in the workspace.",
  errors: [400, 403, 409, 503],
  returns: "The new permission's id.",
  input: z.object({ name: identifier, slug: identifier.optional(), description: description.optional() }),
  output: z.object({ permissionId: z.string() }),
  handler: (input, { deps, caller }) => create(deps, caller, input),
});
