import { z } from "zod";
import { listPortals as listPortalsCore } from "../../../core/portals/portals.manage.js";
import { pageInput } from "../pagination.js";
import { defineV2Rpc } from "../rpc.js";
import { portalBaseUrl, portalOut, portalOutput } from "./portals.schemas.js";

export const listPortals = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.listPortals",
  auth: "rootKey",
  summary:
    "keyhaven extension: the workspace's customer portals (optionally an API's), by id, a page at a time. Needs `portal.*.read_portal` (or `*`).",
  errors: [400, 401, 403, 503],
  returns: "A page of portals.",
  paginated: true,
  lookupOnly: ["apiId"],
  input: z.object({ apiId: z.string().min(1).max(255).optional().describe("Only this API's portal."), ...pageInput }).strict(),
  output: z.array(portalOutput),
  handler: async (input, { deps, req, caller }) => {
    const page = await listPortalsCore(deps, caller, { apiId: input.apiId, cursor: input.cursor, limit: input.limit ?? 100 });
    const base = portalBaseUrl(deps, req);
    return {
      data: page.portals.map((row) => portalOut(row, base)),
      pagination: { hasMore: page.cursor !== undefined, ...(page.cursor !== undefined && { cursor: page.cursor }) },
    };
  },
});
