import { z } from "zod";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";
import { V1_KEY_LINKS } from "./keys.rbac.rules.js";
import { permissionSlugSchema, entries, connectedSchema } from "./keys.rbac.schemas.js";
import { setOnKey, permissionKind } from "../../../core/rbac/rbac.keyLinks.js";

export const setPermissions = defineRpc({
  method: "POST",
  path: "/v1/keys.setPermissions",
  auth: "rootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Makes the key's direct permissions exactly the given ones (by id, or by slug, created with `create`).",
  errors: [400, 403, 404, 503],
  returns: "The key's permissions after the change, by id and name.",
  input: z.object({ keyId: idInput, permissions: entries(permissionSlugSchema) }),
  output: connectedSchema,
  handler: (input, { deps, caller }) =>
    setOnKey(deps, caller, permissionKind, { keyId: input.keyId, wanted: input.permissions }, V1_KEY_LINKS),
});
