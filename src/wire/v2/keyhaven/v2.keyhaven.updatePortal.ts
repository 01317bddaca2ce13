import { z } from "zod";
import { updatePortal as updatePortalCore } from "../../../core/portals/portals.manage.js";
import { defineV2Rpc } from "../rpc.js";
import { brandingInput, portalBaseUrl, portalIdInput, portalOut, portalOutput, portalSettingsInput } from "./portals.schemas.js";

export const updatePortal = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.updatePortal",
  auth: "rootKey",
  summary:
    "keyhaven extension: changes what is given of a customer portal (null removes the return link or a branding field). A disabled portal mints no session, and its live sessions stop working. Needs `portal.*.update_portal` or `portal.<portalId>.update_portal` (or `*`).",
  errors: [400, 401, 403, 404, 409, 503],
  returns: "The portal as it now is.",
  lookupOnly: ["portalId"],
  input: z
    .object({
      portalId: portalIdInput,
      slug: portalSettingsInput.slug.optional(),
      name: portalSettingsInput.name.optional(),
      returnUrl: z.string().min(1).max(500).nullable().optional().describe("The page's default return link; null removes it."),
      enabled: z.boolean().optional(),
      branding: brandingInput.optional(),
    })
    .strict()
    .refine((i) => Object.keys(i).length > 1, { error: "give at least one field to change", path: ["portalId"] }),
  output: portalOutput,
  handler: async (input, { deps, req, caller }) => ({
    data: portalOut(await updatePortalCore(deps, caller, input), portalBaseUrl(deps, req)),
  }),
});
