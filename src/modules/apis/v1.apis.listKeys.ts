import { z } from "zod";
import { requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { queryBoolean, queryInt, queryText } from "../../http/query.js";
import { defineRpc } from "../../rpc.js";
import { decryptKeyRows, requireDecryptPermission } from "../../core/keys/decrypt-keys.js";
import { keyObjectSchema, toKeyObject } from "../keys/key-object.js";
import { type ApiKeysFilter, countKeys, listKeyObjectRows } from "../keys/key-objects.repository.js";
import { findApi } from "./apis.repository.js";

export const listKeys = defineRpc({
  method: "GET",
  path: "/v1/apis.listKeys",
  auth: "rootKey",
  summary:
    "Lists an API's keys by id, a page at a time: pass the returned `cursor` to get the next page; there is none after the last. `total` is the exact number of keys matching the filters.",
  errors: [400, 403, 404, 412, 503],
  returns: "A page of the API's keys, the cursor of the next page when there is one, and the exact total.",
  input: z.object({
    apiId: queryText.min(1).describe("The API whose keys are listed."),
    limit: queryInt(1, 100).default(100).describe("Keys per page, 1–100."),
    cursor: queryText.optional().describe("The `cursor` of the previous page, for the next one."),
    ownerId: queryText.min(1).optional().describe("Only the keys with this `ownerId`."),
    externalId: queryText.min(1).optional().describe("Only the keys of the identity with this `externalId`."),
    decrypt: queryBoolean.optional().describe("`true`: add the plaintext of keys stored encrypted (needs `decrypt_key`)."),
    // v1 clients send it. listKeys reads the database, never the verification cache, so every read is already fresh.
    revalidateKeysCache: queryBoolean.optional().describe("Accepted for v1 clients, without effect: the answer is always fresh."),
  }),
  output: z.object({
    keys: z.array(keyObjectSchema).describe("This page of keys, by id."),
    cursor: z.string().optional().describe("Pass it as `cursor` for the next page; absent on the last page."),
    total: z.number().describe("How many keys match the filters, exactly."),
  }),
  handler: async (input, { deps, rootKey: auth }) => {
    const { db, keyring } = deps;
    const { apiId } = input;
    requirePermission(auth, {
      or: [
        "*",
        {
          and: [{ or: ["api.*.read_key", `api.${apiId}.read_key`] }, { or: ["api.*.read_api", `api.${apiId}.read_api`] }],
        },
      ],
    });
    const api = await findApi(db, auth.workspaceId, apiId);
    if (!api) throw new ApiError("NOT_FOUND", `api ${apiId} not found`);
    if (input.decrypt) requireDecryptPermission(auth, apiId);

    const filter: ApiKeysFilter = {
      workspaceId: auth.workspaceId,
      apiId,
      externalId: input.externalId,
      ownerId: input.externalId === undefined ? input.ownerId : undefined,
    };
    // One row more than the page tells whether another page follows, so the last page carries no cursor.
    const rows = await listKeyObjectRows(db, filter, { cursor: input.cursor, limit: input.limit + 1 });
    const page = rows.slice(0, input.limit);
    const total = await countKeys(db, filter);
    const plaintexts = input.decrypt ? await decryptKeyRows(db, keyring, page) : new Map<string, string>();
    return {
      keys: page.map((row) => toKeyObject(row, plaintexts.get(row.id))),
      ...(rows.length > input.limit && { cursor: page.at(-1)!.id }),
      total,
    };
  },
});
