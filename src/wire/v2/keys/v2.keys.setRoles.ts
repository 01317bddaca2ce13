import { z } from "zod";
import { setOnKey, roleKind, keyRolesOf } from "../../../core/rbac/rbac.keyLinks.js";
import { v2Id } from "../inputBounds.js";
import { roleData, roleOutput } from "../permissions/permissions.schemas.js";
import { defineV2Rpc } from "../rpc.js";
import { V2_KEY_LINKS } from "./keys.rbac.rules.js";
import { roleNamesInput } from "./keys.rbac.schemas.js";

export const setRoles = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.setRoles",
  auth: "rootKey",
  summary: "Makes the key's roles exactly these names (`[]` removes all); an unknown name is a 404.",
  errors: [400, 401, 403, 404, 503],
  returns: "The key's roles after the change, by name, each with its permissions.",
  input: z.object({ keyId: v2Id.describe("The key to change."), roles: roleNamesInput(0) }).strict(),
  output: z.array(roleOutput),
  handler: async (input, { deps, caller }) => {
    await setOnKey(deps, caller, roleKind, { keyId: input.keyId, wanted: input.roles.map((name) => ({ name })) }, V2_KEY_LINKS);
    return { data: (await keyRolesOf(deps, caller, input.keyId)).map(roleData) };
  },
});
