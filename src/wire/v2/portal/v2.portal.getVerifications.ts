import { z } from "zod";
import { portalVerifications } from "../../../core/portals/portals.access.js";
import { defineV2Rpc } from "../rpc.js";

const count = z.int();

export const getVerifications = defineV2Rpc({
  method: "POST",
  path: "/v2/portal.getVerifications",
  auth: "portalSession",
  summary:
    "The portal session's end user's verifications in [startTime, endTime) by outcome, in minutes (windows up to 3 hours), hours (up to 4 days) or days, empty buckets as zeros; at most 30 days. Needs the session's `analytics:read` scope; 412 with KEYHAVEN_ANALYTICS=off.",
  errors: [400, 401, 403, 412, 503],
  returns: "The buckets, oldest first.",
  lookupOnly: ["keyId"],
  input: z
    .object({
      startTime: z.int().min(0).describe("Unix ms, inclusive."),
      endTime: z.int().min(0).describe("Unix ms, exclusive."),
      keyId: z.string().max(255).optional().describe("Only this key's verifications (one of the end user's)."),
    })
    .strict(),
  output: z.array(
    z.object({
      time: count.describe("The bucket's start, unix ms (UTC)."),
      total: count,
      valid: count,
      rateLimited: count,
      insufficientPermissions: count,
      forbidden: count,
      disabled: count,
      expired: count,
      usageExceeded: count,
    }),
  ),
  handler: async (input, { deps, session }) => ({ data: await portalVerifications(deps, session, input) }),
});
