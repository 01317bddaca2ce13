import { z } from "zod";
import { defineRpc } from "../../rpc.js";
import { disconnectionSchema, entries, roleKind, removeFromKey } from "./key-rbac.js";

export const removeRoles = defineRpc({
  method: "POST",
  path: "/v1/keys.removeRoles",
  summary: "Disconnects roles (by id or name) from a key; every entry is honoured.",
  input: z.object({ keyId: z.string().min(1), roles: entries(disconnectionSchema) }),
  output: z.object({}),
  handler: (input, ctx) => removeFromKey(roleKind, { keyId: input.keyId, wanted: input.roles }, ctx),
});
