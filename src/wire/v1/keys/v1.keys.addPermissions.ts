import { z } from "zod";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";
import { V1_KEY_LINKS } from "./keys.rbac.rules.js";
import { connectionSchema, entries, connectedSchema } from "./keys.rbac.schemas.js";
import { addToKey, permissionKind } from "../../../core/rbac/rbac.keyLinks.js";

export const addPermissions = defineRpc({
  method: "POST",
  path: "/v1/keys.addPermissions",
  auth: "rootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Connects permissions (by id, or by slug in `name`, created with `create`) to a key; answers all of them.",
  errors: [400, 403, 404, 503],
  returns: "The permissions added to the key, by id and name.",
  input: z.object({ keyId: idInput, permissions: entries(connectionSchema) }),
  output: connectedSchema,
  handler: (input, { deps, caller }) =>
    addToKey(deps, caller, permissionKind, { keyId: input.keyId, wanted: input.permissions }, V1_KEY_LINKS),
});
