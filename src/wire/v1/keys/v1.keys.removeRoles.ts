import { z } from "zod";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";
import { V1_KEY_LINKS } from "./keys.rbac.rules.js";
import { disconnectionSchema, entries } from "./keys.rbac.schemas.js";
import { removeFromKey, roleKind } from "../../../core/rbac/rbac.keyLinks.js";

export const removeRoles = defineRpc({
  method: "POST",
  path: "/v1/keys.removeRoles",
  auth: "rootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Disconnects roles (by id or name) from a key; every entry is honoured, and one naming no role of the key changes nothing.",
  errors: [400, 403, 404, 503],
  returns: "The roles are removed from the key.",
  input: z.object({ keyId: idInput, roles: entries(disconnectionSchema) }),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await removeFromKey(deps, caller, roleKind, { keyId: input.keyId, wanted: input.roles }, V1_KEY_LINKS);
    return {};
  },
});
