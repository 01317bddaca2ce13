import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { changeRolePermissions } from "./permissions.repository.js";
import { permissionRefs } from "./permissions.schemas.js";

/** keyhaven extension: v1 did this only from its dashboard. Idempotent; all or nothing. */
export const addPermissionsToRole = defineRpc({
  method: "POST",
  path: "/v1/permissions.addPermissionsToRole",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Connects permissions (by id or slug) to a role; keys with the role hold them at their next verification.",
  errors: [400, 403, 404, 503],
  returns: "The permissions are attached to the role.",
  input: z.object({ roleId: idInput, permissions: permissionRefs }),
  output: z.object({}),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "rbac.*.add_permission_to_role"] });
    await changeRolePermissions(deps.db, auth.workspaceId, input.roleId, input.permissions, "add");
    return {};
  },
});
