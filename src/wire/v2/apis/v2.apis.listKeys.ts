import { z } from "zod";
import { type ListApiKeysRules, listApiKeys } from "../../../core/apis/apis.core.js";
import { withAccess } from "../../../core/caller.js";
import { keyResponseData, keyResponseOutput } from "../keys/keys.schemas.js";
import { v2LookupRef } from "../inputBounds.js";
import { pageInput } from "../pagination.js";
import { defineV2Rpc } from "../rpc.js";

/** v2's listing: a cursor at the next page's first id, no total, each key's rate limits; `decrypt` needs an encrypting API (412). */
const V2_LIST_KEYS_RULES: ListApiKeysRules = { decryptNeedsEncryptingApi: true, cursor: "from", total: false, ratelimits: true };

export const listKeys = defineV2Rpc({
  method: "POST",
  path: "/v2/apis.listKeys",
  auth: "rootKey",
  lookupOnly: ["apiId"],
  summary:
    "Lists an API's live keys by id, a page at a time, optionally only those of an identity (`externalId`); `decrypt: true` adds the plaintext of keys stored encrypted. A root key that may not read the API's keys is answered 404, as for a missing API.",
  errors: [400, 401, 403, 404, 412, 503],
  returns: "A page of keys (KeyResponseData).",
  paginated: true,
  input: z
    .object({
      apiId: v2LookupRef.describe("The API whose keys are listed."),
      ...pageInput,
      externalId: z.string().min(1).max(255).optional().describe("Only the keys of the identity with this externalId."),
      decrypt: z.boolean().optional().describe("Add each key's plaintext (needs decrypt_key and an API storing keys encrypted)."),
      revalidateKeysCache: z.boolean().optional().describe("Accepted and ignored: keyhaven's caches are never stale."),
    })
    .strict(),
  output: z.array(keyResponseOutput),
  handler: async (input, { deps, caller }) => {
    // A root key that may not read the API's keys cannot tell it from a missing API: both are 404.
    const page = await listApiKeys(
      deps,
      withAccess(caller, { denied: "notFound" }),
      { apiId: input.apiId, limit: input.limit ?? 100, cursor: input.cursor, externalId: input.externalId, decrypt: input.decrypt },
      V2_LIST_KEYS_RULES,
    );
    const hasMore = page.cursor !== undefined;
    return {
      data: page.keys.map((row) => keyResponseData(row, page.ratelimits!.get(row.id)!, page.plaintexts.get(row.id))),
      pagination: { hasMore, ...(hasMore && { cursor: page.cursor }) },
    };
  },
});
