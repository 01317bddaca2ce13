import { z } from "zod";
import { listOverrides as listOverridesCore } from "../../../core/ratelimits/ratelimits.core.js";
import { pageInput, pageOf } from "../pagination.js";
import { defineV2Rpc } from "../rpc.js";
import { namespaceInput, overrideData, overrideOutput } from "./ratelimit.schemas.js";

/** v2's handler default (its schema says 10). */
const DEFAULT_PAGE = 50;

export const listOverrides = defineV2Rpc({
  method: "POST",
  path: "/v2/ratelimit.listOverrides",
  auth: "rootKey",
  summary: "Lists a namespace's overrides by id, a page at a time (default 50).",
  errors: [400, 401, 403, 404, 503],
  returns: "A page of overrides.",
  paginated: true,
  input: z
    .object({ namespace: namespaceInput, ...pageInput, limit: pageInput.limit.describe("Rows per page, 1 to 100 (default 50).") })
    .strict(),
  output: z.array(overrideOutput),
  handler: async (input, { deps, caller }) => {
    const limit = input.limit ?? DEFAULT_PAGE;
    const { overrides } = await listOverridesCore(
      deps,
      caller,
      { namespaceIdOrName: input.namespace },
      { limit: limit + 1, fromId: input.cursor },
    );
    const page = pageOf(overrides, limit);
    return { data: page.rows.map(overrideData), pagination: page.pagination };
  },
});
