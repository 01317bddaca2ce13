import { z } from "zod";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { changeRolePermissions } from "./permissions.repository.js";
import { permissionRefs } from "./permissions.schemas.js";

/** keyhaven extension: v1 did this only from its dashboard. Removing a permission the role lacks is a no-op. */
export const removePermissionsFromRole = defineRpc({
  method: "POST",
  path: "/v1/permissions.removePermissionsFromRole",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Disconnects permissions (by id or slug) from a role; keys with the role lose them at their next verification.",
  errors: [400, 403, 404, 503],
  returns: "The permissions are detached from the role.",
  input: z.object({ roleId: idInput, permissions: permissionRefs }),
  output: z.object({}),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, { or: ["*", "rbac.*.remove_permission_from_role"] });
    await changeRolePermissions(deps.db, auth.workspaceId, input.roleId, input.permissions, "remove");
    return {};
  },
});
