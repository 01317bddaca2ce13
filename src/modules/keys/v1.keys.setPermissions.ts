import { z } from "zod";
import { defineRpc } from "../../rpc.js";
import { permissionSlugSchema, entries, permissionKind, setOnKey, connectedSchema } from "./key-rbac.js";

export const setPermissions = defineRpc({
  method: "POST",
  path: "/v1/keys.setPermissions",
  summary: "Makes the key's direct permissions exactly the given ones (by id, or by slug, created with `create`).",
  input: z.object({ keyId: z.string().min(1), permissions: entries(permissionSlugSchema) }),
  output: connectedSchema,
  handler: (input, ctx) => setOnKey(permissionKind, { keyId: input.keyId, wanted: input.permissions }, ctx),
});
