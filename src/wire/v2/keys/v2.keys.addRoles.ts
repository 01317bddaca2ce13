import { z } from "zod";
import { addToKey, roleKind, keyRolesOf } from "../../../core/rbac/rbac.keyLinks.js";
import { v2Id } from "../inputBounds.js";
import { roleData, roleOutput } from "../permissions/permissions.schemas.js";
import { defineV2Rpc } from "../rpc.js";
import { V2_KEY_LINKS } from "./keys.rbac.rules.js";
import { roleNamesInput } from "./keys.rbac.schemas.js";

export const addRoles = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.addRoles",
  auth: "rootKey",
  summary: "Connects roles (by name) to a key; an unknown name is a 404. Idempotent.",
  errors: [400, 401, 403, 404, 503],
  returns: "The key's roles after the change, by name, each with its permissions.",
  input: z.object({ keyId: v2Id.describe("The key to change."), roles: roleNamesInput(1) }).strict(),
  output: z.array(roleOutput),
  handler: async (input, { deps, caller }) => {
    await addToKey(deps, caller, roleKind, { keyId: input.keyId, wanted: input.roles.map((name) => ({ name })) }, V2_KEY_LINKS);
    return { data: (await keyRolesOf(deps, caller, input.keyId)).map(roleData) };
  },
});
