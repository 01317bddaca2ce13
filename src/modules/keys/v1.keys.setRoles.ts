import { z } from "zod";
import { defineRpc } from "../../rpc.js";
import { connectionSchema, entries, roleKind, setOnKey, connectedSchema } from "./key-rbac.js";

export const setRoles = defineRpc({
  method: "POST",
  path: "/v1/keys.setRoles",
  summary: "Makes the key's roles exactly the given ones (by id or name, created with `create`).",
  input: z.object({ keyId: z.string().min(1), roles: entries(connectionSchema) }),
  output: connectedSchema,
  handler: (input, ctx) => setOnKey(roleKind, { keyId: input.keyId, wanted: input.roles }, ctx),
});
