import { z } from "zod";
import { defineRpc } from "../../rpc.js";
import { connectionSchema, entries, permissionKind, addToKey, connectedSchema } from "./key-rbac.js";

export const addPermissions = defineRpc({
  method: "POST",
  path: "/v1/keys.addPermissions",
  summary: "Connects permissions (by id, or by slug in `name`, created with `create`) to a key; answers all of them.",
  input: z.object({ keyId: z.string().min(1), permissions: entries(connectionSchema) }),
  output: connectedSchema,
  handler: (input, ctx) => addToKey(permissionKind, { keyId: input.keyId, wanted: input.permissions }, ctx),
});
