import { z } from "zod";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";
import { V1_KEY_LINKS } from "./keys.rbac.rules.js";
import { connectionSchema, entries, connectedSchema } from "./keys.rbac.schemas.js";
import { setOnKey, roleKind } from "../../../core/rbac/rbac.keyLinks.js";

export const setRoles = defineRpc({
  method: "POST",
  path: "/v1/keys.setRoles",
  auth: "rootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Makes the key's roles exactly the given ones (by id or name, created with `create`).",
  errors: [400, 403, 404, 503],
  returns: "The key's roles after the change, by id and name.",
  input: z.object({ keyId: idInput, roles: entries(connectionSchema) }),
  output: connectedSchema,
  handler: (input, { deps, caller }) => setOnKey(deps, caller, roleKind, { keyId: input.keyId, wanted: input.roles }, V1_KEY_LINKS),
});
