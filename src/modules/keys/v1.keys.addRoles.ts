import { z } from "zod";
import { defineRpc } from "../../rpc.js";
import { connectionSchema, entries, roleKind, addToKey, connectedSchema } from "./key-rbac.js";

export const addRoles = defineRpc({
  method: "POST",
  path: "/v1/keys.addRoles",
  summary: "Connects roles (by id or name, created with `create`) to a key; answers all of them.",
  input: z.object({ keyId: z.string().min(1), roles: entries(connectionSchema) }),
  output: connectedSchema,
  handler: (input, ctx) => addToKey(roleKind, { keyId: input.keyId, wanted: input.roles }, ctx),
});
