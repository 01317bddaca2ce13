import { z } from "zod";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";
import { V1_KEY_LINKS } from "./keys.rbac.rules.js";
import { connectionSchema, entries, connectedSchema } from "./keys.rbac.schemas.js";
import { addToKey, roleKind } from "../../../core/rbac/rbac.keyLinks.js";

export const addRoles = defineRpc({
  method: "POST",
  path: "/v1/keys.addRoles",
  auth: "rootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  summary: "Connects roles (by id or name, created with `create`) to a key; answers all of them.",
  errors: [400, 403, 404, 503],
  returns: "The roles added to the key, by id and name.",
  input: z.object({ keyId: idInput, roles: entries(connectionSchema) }),
  output: connectedSchema,
  handler: (input, { deps, caller }) => addToKey(deps, caller, roleKind, { keyId: input.keyId, wanted: input.roles }, V1_KEY_LINKS),
});
