import { z } from "zod";
import { type ListApiKeysRules, listApiKeys } from "../../../core/apis/apis.core.js";
import { queryBoolean, queryInt, queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { keyObjectSchema, toKeyObject } from "../keys/keys.object.js";

/** v1's listing: a cursor after the page's last id, the exact total, no rate limits; `decrypt` on any API. */
const V1_LIST_KEYS_RULES: ListApiKeysRules = { decryptNeedsEncryptingApi: false, cursor: "after", total: true, ratelimits: false };

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
  handler: async (input, { deps, caller }) => {
    // Checked before the API is looked up and refused 403 (v1's access policy), then 404 for a missing API.
    const { keys, cursor, total, plaintexts } = await listApiKeys(deps, caller, input, V1_LIST_KEYS_RULES);
    return {
      keys: keys.map((row) => toKeyObject(row, plaintexts.get(row.id))),
      ...(cursor !== undefined && { cursor }),
      total: total!,
    };
  },
});
