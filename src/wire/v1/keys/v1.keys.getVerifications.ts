import { z } from "zod";
import { getKeyVerifications, keyVerificationsWindow } from "../../../core/analytics/analytics.core.js";
import { queryInt, queryText } from "../query.js";
import { defineRpc } from "../rpc.js";

export const getVerifications = defineRpc({
  method: "GET",
  path: "/v1/keys.getVerifications",
  auth: "rootKey",
  summary:
    "Daily verification counts (UTC days) of a key, or of every key of an owner (`ownerId`: the key's ownerId or its identity's externalId). The window defaults to the last 24 hours.",
  errors: [400, 403, 404, 503],
  returns: "Verification counts per UTC day.",
  input: z.object({
    keyId: queryText.min(1).optional(),
    ownerId: queryText.min(1).optional(),
    start: queryInt(0, Number.MAX_SAFE_INTEGER).optional(),
    end: queryInt(0, Number.MAX_SAFE_INTEGER).optional(),
    granularity: z.enum(["day"]).default("day"),
  }),
  output: z.object({
    verifications: z.array(z.object({ time: z.number(), success: z.number(), rateLimited: z.number(), usageExceeded: z.number() })),
  }),
  // The input's own 400s come before authentication, as before.
  beforeAuth: (input, { deps }) => keyVerificationsWindow(input, deps.clock.now()),
  handler: async (input, { deps, rootKey, checked: window }) => ({
    verifications: await getKeyVerifications(deps, rootKey, input, window),
  }),
});
