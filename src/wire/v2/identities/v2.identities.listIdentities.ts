import { z } from "zod";
import { listIdentitiesByPage } from "../../../core/identities/identities.core.js";
import { pageInput } from "../pagination.js";
import { defineV2Rpc } from "../rpc.js";
import { identityData, identityOutput } from "./identities.schemas.js";

export const listIdentities = defineV2Rpc({
  method: "POST",
  path: "/v2/identities.listIdentities",
  auth: "rootKey",
  summary:
    "Lists the workspace's identities by id, a page at a time; `search` matches id or externalId. The root key must be allowed to read every identity of the page.",
  errors: [400, 401, 403, 503],
  returns: "A page of identities.",
  paginated: true,
  input: z
    .object({ ...pageInput, search: z.string().max(256).optional().describe("Case-insensitive substring; `%` and `_` are literal.") })
    .strict(),
  output: z.array(identityOutput),
  handler: async (input, { deps, caller }) => {
    const page = await listIdentitiesByPage(deps, caller, {
      fromId: input.cursor,
      limit: input.limit ?? 100,
      search: input.search?.trim() || undefined,
    });
    const hasMore = page.nextId !== undefined;
    return { data: page.identities.map(identityData), pagination: { hasMore, ...(hasMore && { cursor: page.nextId }) } };
  },
});
