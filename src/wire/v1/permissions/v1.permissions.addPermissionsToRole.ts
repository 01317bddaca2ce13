import { z } from "zod";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { changePermissionsOfRole } from "../../../core/rbac/rbac.rolesPermissions.js";
import { idInput } from "../inputBounds.js";
import { permissionRefs } from "./permissions.schemas.js";

/** keyhaven extension: v1 did this only from its dashboard. Idempotent; all or nothing. */
export const addPermissionsToRole = defineRpc({
  method: "POST",
  path: "/v1/permissions.addPermissionsToRole",
  auth: "rootKeyCheckedByWrite",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Connects permissions (by id or slug) to a role; keys with the role hold them at their next verification.",
  errors: [400, 403, 404, 503],
  returns: "The permissions are attached to the role.",
  input: z.object({ roleId: idInput, permissions: permissionRefs }),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await changePermissionsOfRole(deps, caller, input, "add");
    return {};
  },
});
