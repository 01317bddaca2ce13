import { z } from "zod";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { changePermissionsOfRole } from "../../../core/rbac/rbac.rolesPermissions.js";
import { idInput } from "../inputBounds.js";
import { permissionRefs } from "./permissions.schemas.js";

/** keyhaven extension: v1 did this only from its dashboard. Removing a permission the role lacks is a no-op. */
export const removePermissionsFromRole = defineRpc({
  method: "POST",
  path: "/v1/permissions.removePermissionsFromRole",
  auth: "rootKeyCheckedByWrite",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Disconnects permissions (by id or slug) from a role; keys with the role lose them at their next verification.",
  errors: [400, 403, 404, 503],
  returns: "The permissions are detached from the role.",
  input: z.object({ roleId: idInput, permissions: permissionRefs }),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await changePermissionsOfRole(deps, caller, input, "remove");
    return {};
  },
});
