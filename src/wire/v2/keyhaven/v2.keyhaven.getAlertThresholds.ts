import { z } from "zod";
import { getAlertThresholds as getAlertThresholdsCore } from "../../../core/webhooks/webhooks.thresholds.js";
import { defineV2Rpc } from "../rpc.js";
import { exactlyOneTarget, thresholdTarget, thresholdsOut, thresholdsSchema } from "./alerts.schemas.js";

export const getAlertThresholds = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.getAlertThresholds",
  auth: "rootKey",
  summary:
    "keyhaven extension: the thresholds of an API's or a key's threshold events (key.credits.low, key.expiring): what is set on it and what holds. Needs read_api on the API, or read_key on the key's API.",
  errors: [400, 401, 403, 404, 503],
  returns: "What is set, what holds (and from where), and for a key its threshold now and its alerts.",
  lookupOnly: ["apiId", "keyId"],
  input: z
    .object(thresholdTarget)
    .strict()
    .refine(...exactlyOneTarget),
  output: thresholdsSchema,
  handler: async (input, { deps, caller }) => {
    const target = input.keyId !== undefined ? { keyId: input.keyId } : { apiId: input.apiId! };
    return { data: thresholdsOut(await getAlertThresholdsCore(deps, caller, target)) };
  },
});
