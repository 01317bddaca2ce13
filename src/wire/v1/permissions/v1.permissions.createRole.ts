import { z } from "zod";
import { defineRpc } from "../rpc.js";
import { createRole as create } from "../../../core/rbac/rbac.rolesPermissions.js";
import { description } from "./permissions.schemas.js";

export const createRole = defineRpc({
  method: "POST",
  path: "/v1/permissions.createRole",
  auth: "rootKey",
  summary: "Creates a role. Its name is unique in the workspace.",
  errors: [400, 403, 409, 503],
  returns: "The new role's id.",
  input: z.object({ name: z.string().min(3).max(256), description: description.optional() }),
  output: z.object({ roleId: z.string() }),
  handler: (input, { deps, caller }) => create(deps, caller, input),
});
