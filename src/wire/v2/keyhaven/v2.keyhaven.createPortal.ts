import { z } from "zod";
import { createPortal as createPortalCore } from "../../../core/portals/portals.manage.js";
import { v2LookupRef } from "../inputBounds.js";
import { defineV2Rpc } from "../rpc.js";
import { brandingInput, portalSettingsInput } from "./portals.schemas.js";

export const createPortal = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.createPortal",
  auth: "rootKey",
  summary:
    "keyhaven extension: creates the customer portal of an API (one per API), where its keys' owners see and reroll their keys and read their usage, through sessions minted with portal.createSession. Needs `portal.*.create_portal` (or `*`).",
  errors: [400, 401, 403, 404, 409, 503],
  returns: "The new portal's id.",
  lookupOnly: ["apiId"],
  input: z
    .object({
      apiId: v2LookupRef.describe("The API (keyspace) whose keys the portal shows."),
      ...portalSettingsInput,
      returnUrl: z.string().min(1).max(500).optional().describe("The page's return link (http or https) when a session names none."),
      branding: brandingInput.optional(),
    })
    .strict(),
  output: z.object({ portalId: z.string() }),
  handler: async (input, { deps, caller }) => {
    const row = await createPortalCore(deps, caller, input);
    return { data: { portalId: row.id } };
  },
});
