import { z } from "zod";
import { createPortalSession, PORTAL_SCOPES } from "../../../core/portals/portals.sessions.js";
import { portalBaseUrl } from "../keyhaven/portals.schemas.js";
import { defineV2Rpc } from "../rpc.js";

export const createSession = defineV2Rpc({
  method: "POST",
  path: "/v2/portal.createSession",
  auth: "rootKey",
  summary:
    "Mints a customer portal session for one end user (`externalId`), with the scopes given, over the portal's API. Needs `portal.*.create_portal_session` or `portal.<portalId>.create_portal_session` (else the portal is answered as missing), and every scope within the root key's own permissions on the portal's API (keys:read: read_key and read_api; keys:reroll and keys:create: create_key, and encrypt_key on an API storing keys encrypted; analytics:read: read_analytics). The URL carries a single-use exchange code, valid 15 minutes.",
  errors: [400, 401, 403, 404, 503],
  returns: "The session's id and the portal page's URL with its exchange code.",
  lookupOnly: ["portal"],
  input: z
    .object({
      portal: z
        .string()
        .min(3)
        .max(255)
        .regex(/^[a-zA-Z0-9_-]+$/, { error: "must hold only letters, digits, underscores and hyphens" })
        .describe("The portal's id (`pc_…`) or slug."),
      externalId: z
        .string()
        .min(1)
        .max(256)
        .describe("The end user's id in your system: the externalId of the identity whose keys it sees."),
      scopes: z.array(z.enum(PORTAL_SCOPES)).min(1).describe("What the session may do."),
      preview: z.boolean().optional().describe("A preview session (the page shows a banner); default false."),
      returnUrl: z
        .union([z.literal(""), z.url({ protocol: /^https?$/, error: "must be an http or https URL" }).max(500)])
        .optional()
        .describe("Where the page's return link goes (default: the portal's)."),
    })
    .strict(),
  output: z.object({ id: z.string().describe("The session's id (not a credential)."), url: z.string() }),
  handler: async (input, { deps, req, reply, caller }) => {
    reply.header("Cache-Control", "no-store").header("Pragma", "no-cache");
    return { data: await createPortalSession(deps, caller, input, portalBaseUrl(deps, req)) };
  },
});
