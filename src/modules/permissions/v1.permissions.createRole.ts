import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { isUniqueViolation } from "../../db/client.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { insertRole } from "./permissions.repository.js";
import { description } from "./permissions.schemas.js";

export const createRole = defineRpc({
  method: "POST",
  path: "/v1/permissions.createRole",
  summary: "Creates a role. Its name is unique in the workspace.",
  errors: [400, 403, 409, 503],
  returns: "The new role's id.",
  input: z.object({ name: z.string().min(3).max(256), description: description.optional() }),
  output: z.object({ roleId: z.string() }),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "rbac.*.create_role"] });
    try {
      return { roleId: await insertRole(deps.db, { ...input, workspaceId: auth.workspaceId }) };
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new ApiError("CONFLICT", `Role with name "${input.name}" already exists in this workspace`);
      }
      throw err;
    }
  },
});
