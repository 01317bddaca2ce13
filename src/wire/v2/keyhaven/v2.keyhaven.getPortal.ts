import { z } from "zod";
import { getPortal as getPortalCore } from "../../../core/portals/portals.manage.js";
import { defineV2Rpc } from "../rpc.js";
import { portalBaseUrl, portalIdInput, portalOut, portalOutput } from "./portals.schemas.js";

export const getPortal = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.getPortal",
  auth: "rootKey",
  summary:
    "keyhaven extension: a customer portal, by id or slug. Needs `portal.*.read_portal` or `portal.<portalId>.read_portal` (or `*`).",
  errors: [400, 401, 403, 404, 503],
  returns: "The portal.",
  lookupOnly: ["portalId"],
  input: z.object({ portalId: portalIdInput }).strict(),
  output: portalOutput,
  handler: async (input, { deps, req, caller }) => ({
    data: portalOut(await getPortalCore(deps, caller, input.portalId), portalBaseUrl(deps, req)),
  }),
});
