import { z } from "zod";
import { defineRpc } from "../../rpc.js";
import { permissionSlugRemovalSchema, entries, permissionKind, removeFromKey } from "./key-rbac.js";

export const removePermissions = defineRpc({
  method: "POST",
  path: "/v1/keys.removePermissions",
  summary: "Disconnects permissions (by id, or by slug in `name`/`slug`) from a key; every entry is honoured.",
  input: z.object({ keyId: z.string().min(1), permissions: entries(permissionSlugRemovalSchema) }),
  output: z.object({}),
  handler: (input, ctx) => removeFromKey(permissionKind, { keyId: input.keyId, wanted: input.permissions }, ctx),
});
