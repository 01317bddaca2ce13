import { z } from "zod";
import { setAlertThresholds as setAlertThresholdsCore } from "../../../core/webhooks/webhooks.thresholds.js";
import { defineV2Rpc } from "../rpc.js";
import {
  creditsLowInput,
  exactlyOneTarget,
  expiringWithinInput,
  thresholdTarget,
  thresholdsOut,
  thresholdsSchema,
} from "./alerts.schemas.js";

export const setAlertThresholds = defineV2Rpc({
  method: "POST",
  path: "/v2/keyhaven.setAlertThresholds",
  auth: "rootKey",
  summary:
    "keyhaven extension: sets an API's or a key's thresholds of key.credits.low and key.expiring (what is given; null removes one). Needs update_api on the API, or update_key on the key's API.",
  errors: [400, 401, 403, 404, 503],
  returns: "The thresholds as they now are.",
  lookupOnly: ["apiId", "keyId"],
  input: z
    .object({ ...thresholdTarget, creditsLow: creditsLowInput.optional(), expiringWithinMs: expiringWithinInput.optional() })
    .strict()
    .refine(...exactlyOneTarget)
    .refine((i) => i.creditsLow !== undefined || i.expiringWithinMs !== undefined, {
      error: "give creditsLow, expiringWithinMs, or both",
      path: ["creditsLow"],
    }),
  output: thresholdsSchema,
  handler: async (input, { deps, caller }) => {
    const { apiId, keyId, ...changes } = input;
    const target = keyId !== undefined ? { keyId } : { apiId: apiId! };
    return { data: thresholdsOut(await setAlertThresholdsCore(deps, caller, { ...target, ...changes })) };
  },
});
