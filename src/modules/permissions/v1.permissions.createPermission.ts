import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { isUniqueViolation } from "../../db/client.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { insertPermission } from "./permissions.repository.js";
import { description, identifier } from "./permissions.schemas.js";

export const createPermission = defineRpc({
  method: "POST",
  path: "/v1/permissions.createPermission",
  summary: "Creates a permission. Its slug (default: the name) is unique in the workspace.",
  errors: [400, 403, 409, 503],
  returns: "The new permission's id.",
  input: z.object({ name: identifier, slug: identifier.optional(), description: description.optional() }),
  output: z.object({ permissionId: z.string() }),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "rbac.*.create_permission"] });
    const slug = input.slug ?? input.name;
    try {
      const permissionId = await insertPermission(deps.db, { ...input, slug, workspaceId: auth.workspaceId });
      return { permissionId };
    } catch (err) {
      if (isUniqueViolation(err)) {
        // v1's message, which names the name (the slug, unique in the workspace, defaults to it).
        throw new ApiError("CONFLICT", `Permission with name "${input.name}" already exists in this workspace`);
      }
      throw err;
    }
  },
});
