import { z } from "zod";
import { addToKey, permissionKind, keyPermissionsOf } from "../../../core/rbac/rbac.keyLinks.js";
import { v2Id } from "../inputBounds.js";
import { permissionData, permissionOutput } from "../permissions/permissions.schemas.js";
import { defineV2Rpc } from "../rpc.js";
import { V2_KEY_LINKS } from "./keys.rbac.rules.js";
import { permissionSlugsInput } from "./keys.rbac.schemas.js";

export const addPermissions = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.addPermissions",
  auth: "rootKey",
  summary:
    "Connects permissions (by slug) to a key; a slug the workspace lacks is created when the root key may create permissions. Idempotent.",
  errors: [400, 401, 403, 404, 503],
  returns: "The key's direct permissions after the change, by slug.",
  input: z.object({ keyId: v2Id.describe("The key to change."), permissions: permissionSlugsInput(1) }).strict(),
  output: z.array(permissionOutput),
  handler: async (input, { deps, caller }) => {
    await addToKey(
      deps,
      caller,
      permissionKind,
      { keyId: input.keyId, wanted: input.permissions.map((name) => ({ name, create: true })) },
      V2_KEY_LINKS,
    );
    return { data: (await keyPermissionsOf(deps, caller, input.keyId)).map(permissionData) };
  },
});
