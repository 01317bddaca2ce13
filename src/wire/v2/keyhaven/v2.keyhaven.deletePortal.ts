import { z } from "zod";
import { deletePortal as deletePortalCore } from "../../../core/portals/portals.manage.js";
import { defineV2Rpc } from "../rpc.js";
import { portalIdInput } from "./portals.schemas.js";

export const deletePortal = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.deletePortal",
  auth: "rootKey",
  summary:
    "keyhaven extension: deletes a customer portal; every session of it ends. Needs `portal.*.delete_portal` or `portal.<portalId>.delete_portal` (or `*`).",
  errors: [400, 401, 403, 404, 503],
  returns: "Nothing.",
  lookupOnly: ["portalId"],
  input: z.object({ portalId: portalIdInput }).strict(),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await deletePortalCore(deps, caller, input.portalId);
    return { data: {} };
  },
});
