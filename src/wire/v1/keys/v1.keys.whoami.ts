import { z } from "zod";
import { findKeyBySecret, requireKeyVisible } from "../../../core/keys/keys.read.js";
import { defineRpc } from "../rpc.js";
import { isRecord } from "./keys.object.js";
import { metaSchema } from "./keys.schemas.js";

export const whoami = defineRpc({
  method: "POST",
  path: "/v1/keys.whoami",
  auth: "rootKey",
  summary:
    "Tells which key a secret is. The key is looked up (by its hash) before authentication, as in v1; a key of another workspace is answered as if it did not exist.",
  errors: [400, 403, 404, 503],
  returns: "The key the request names by its plaintext.",
  input: z.object({ key: z.string().min(1).max(1024) }),
  output: z.object({
    id: z.string(),
    name: z.string().optional(),
    remaining: z.number().optional(),
    identity: z.object({ id: z.string(), externalId: z.string() }).optional(),
    meta: metaSchema.optional(),
    createdAt: z.number(),
    enabled: z.boolean(),
    environment: z.string().optional(),
  }),
  // The key is looked up before authenticating, as v1 did: an unknown key is 404 whoever asks.
  beforeAuth: (input, { deps }) => findKeyBySecret(deps, input.key, { permissions: "direct-names" }),
  handler: async (_input, { caller, checked }) => {
    const row = requireKeyVisible(caller, checked);
    return {
      id: row.id,
      ...(row.name !== null && { name: row.name }),
      ...(row.remaining !== null && { remaining: row.remaining }),
      ...(row.identityId !== null &&
        row.identityExternalId !== null && { identity: { id: row.identityId, externalId: row.identityExternalId } }),
      ...(isRecord(row.meta) && Object.keys(row.meta).length > 0 && { meta: row.meta }),
      createdAt: row.createdAtM,
      enabled: row.enabled,
      ...(row.environment !== null && { environment: row.environment }),
    };
  },
});
