import { z } from "zod";
import { removeFromKey, roleKind, keyRolesOf } from "../../../core/rbac/rbac.keyLinks.js";
import { v2Id } from "../inputBounds.js";
import { roleData, roleOutput } from "../permissions/permissions.schemas.js";
import { defineV2Rpc } from "../rpc.js";
import { V2_KEY_LINKS } from "./keys.rbac.rules.js";
import { roleNamesInput } from "./keys.rbac.schemas.js";

export const removeRoles = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.removeRoles",
  auth: "rootKey",
  summary: "Disconnects roles (by name) from a key; each must exist in the workspace (404), one the key lacks changes nothing.",
  errors: [400, 401, 403, 404, 503],
  returns: "The key's roles after the change, by name, each with its permissions.",
  input: z.object({ keyId: v2Id.describe("The key to change."), roles: roleNamesInput(1) }).strict(),
  output: z.array(roleOutput),
  handler: async (input, { deps, caller }) => {
    await removeFromKey(deps, caller, roleKind, { keyId: input.keyId, wanted: input.roles.map((name) => ({ name })) }, V2_KEY_LINKS);
    return { data: (await keyRolesOf(deps, caller, input.keyId)).map(roleData) };
  },
});
