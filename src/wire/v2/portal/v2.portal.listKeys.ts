import { z } from "zod";
import type { ListApiKeysRules } from "../../../core/apis/apis.core.js";
import { listPortalKeys } from "../../../core/portals/portals.access.js";
import { keyResponseData, keyResponseOutput } from "../keys/keys.schemas.js";
import { pageInput } from "../pagination.js";
import { defineV2Rpc } from "../rpc.js";

/** As apis.listKeys (v2): a cursor at the next page's first id, no total, each key's rate limits; never decrypted. */
const PORTAL_LIST_KEYS_RULES: ListApiKeysRules = { decryptNeedsEncryptingApi: true, cursor: "from", total: false, ratelimits: true };

export const listKeys = defineV2Rpc({
  method: "POST",
  path: "/v2/portal.listKeys",
  auth: "portalSession",
  summary:
    "A portal session's end user's live keys in the portal's API, by id, a page at a time (never their plaintext). Needs the session's `keys:read` scope.",
  errors: [400, 401, 403, 503],
  returns: "A page of keys (KeyResponseData).",
  paginated: true,
  input: z.object({ ...pageInput }).strict(),
  output: z.array(keyResponseOutput),
  handler: async (input, { deps, session, caller }) => {
    const page = await listPortalKeys(deps, session, caller, { limit: input.limit ?? 100, cursor: input.cursor }, PORTAL_LIST_KEYS_RULES);
    const hasMore = page.cursor !== undefined;
    return {
      data: page.keys.map((row) => keyResponseData(row, page.ratelimits!.get(row.id)!, undefined)),
      pagination: { hasMore, ...(hasMore && { cursor: page.cursor }) },
    };
  },
});
