import { z } from "zod";
import { apiPermission } from "../../../core/auth/permissions.query.js";
import { requirePermission } from "../../../core/principal.js";
import { ApiError } from "../../../http/errors.js";
import { queryBoolean, queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { decryptKeyRows, requireDecryptPermission } from "../../../core/keys/keys.decrypt.js";
import { keyObjectSchema, toKeyObject } from "./keys.object.js";
import { findKeyObjectRow } from "../../../storage/keys/keyObjects.repository.js";

export const getKey = defineRpc({
  method: "GET",
  path: "/v1/keys.getKey",
  auth: "rootKey",
  summary:
    "Reads a key by id. A key of another workspace is answered as if it did not exist. `decrypt=true` adds the plaintext of a key stored encrypted.",
  errors: [400, 403, 404, 412, 503],
  returns: "The key's settings (and its plaintext with `decrypt=true`).",
  input: z.object({
    keyId: queryText.min(1),
    decrypt: queryBoolean.optional(),
  }),
  output: keyObjectSchema,
  handler: async (input, { deps, rootKey: auth }) => {
    const { db, keyring } = deps;
    const notFound = () => new ApiError("NOT_FOUND", `key ${input.keyId} not found`);
    // Authenticated before the lookup (v1 looked first): a wrong root key must not learn whether the id exists.
    const row = await findKeyObjectRow(db, { id: input.keyId }, "direct-names");
    if (!row || row.workspaceId !== auth.workspaceId) throw notFound();
    requirePermission(auth, apiPermission(row.apiId, "read_key"));
    if (!input.decrypt) return toKeyObject(row);
    requireDecryptPermission(auth, row.apiId);
    const plaintexts = await decryptKeyRows(db, keyring, [row]);
    return toKeyObject(row, plaintexts.get(row.id));
  },
});
