import { z } from "zod";
import { withAccess } from "../../../core/caller.js";
import { listPendingKeys as listPendingKeysCore } from "../../../core/import/import.copyStatus.js";
import { v2LookupRef } from "../inputBounds.js";
import { pageInput } from "../pagination.js";
import { defineV2Rpc } from "../rpc.js";

export const listPendingKeys = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.listPendingKeys",
  auth: "rootKey",
  lookupOnly: ["apiId"],
  paginated: true,
  summary:
    "keyhaven extension: lists an API's pending keys (copied from hosted Unkey without their secret, not adopted yet) by id, a page at a time, with their owner's externalId, so that a team can reissue just those. A root key that may not read the API's keys is answered 404, as apis.listKeys answers.",
  errors: [400, 401, 403, 404, 503],
  returns: "A page of pending keys.",
  input: z
    .object({
      apiId: v2LookupRef.describe("The API whose pending keys are listed."),
      ...pageInput,
    })
    .strict(),
  output: z.array(
    z.object({
      keyId: z.string(),
      start: z.string().describe("The key's first characters, as hosted Unkey showed them."),
      name: z.string().optional(),
      externalId: z.string().optional().describe("The externalId of the key's identity, when it has one."),
      createdAt: z.number().describe("Unix milliseconds."),
    }),
  ),
  handler: async (input, { deps, caller }) => {
    const page = await listPendingKeysCore(deps, withAccess(caller, { denied: "notFound" }), {
      apiId: input.apiId,
      limit: input.limit ?? 100,
      cursor: input.cursor,
    });
    const hasMore = page.cursor !== undefined;
    return {
      data: page.keys.map((k) => ({
        keyId: k.id,
        start: k.start,
        ...(k.name !== null && { name: k.name }),
        ...(k.externalId !== null && { externalId: k.externalId }),
        createdAt: k.createdAtM,
      })),
      pagination: { hasMore, ...(hasMore && { cursor: page.cursor }) },
    };
  },
});
