import { z } from "zod";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";
import { V1_KEY_LINKS } from "./keys.rbac.rules.js";
import { permissionSlugRemovalSchema, entries } from "./keys.rbac.schemas.js";
import { removeFromKey, permissionKind } from "../../../core/rbac/rbac.keyLinks.js";

export const removePermissions = defineRpc({
  method: "POST",
  path: "/v1/keys.removePermissions",
  auth: "rootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  summary:
    "Disconnects permissions (by id, or by slug in `name`/`slug`) from a key; every entry is honoured, and one naming no permission of the key changes nothing.",
  errors: [400, 403, 404, 503],
  returns: "The permissions are removed from the key.",
  input: z.object({ keyId: idInput, permissions: entries(permissionSlugRemovalSchema) }),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await removeFromKey(deps, caller, permissionKind, { keyId: input.keyId, wanted: input.permissions }, V1_KEY_LINKS);
    return {};
  },
});
