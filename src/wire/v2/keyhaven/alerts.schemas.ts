import { z } from "zod";
import { MAX_EXPIRING_WITHIN_MS } from "../../../core/webhooks/webhooks.alerts.js";
import type { AlertThresholds } from "../../../core/webhooks/webhooks.thresholds.js";

/** Exactly one of apiId and keyId: whose thresholds. */
export const thresholdTarget = {
  apiId: z.string().min(1).max(255).optional().describe("The API whose thresholds (its keys' unless a key sets its own)."),
  keyId: z.string().min(1).max(255).optional().describe("The key whose own thresholds (else its API's hold)."),
};

export const exactlyOneTarget: [
  (i: { apiId?: string | undefined; keyId?: string | undefined }) => boolean,
  { error: string; path: string[] },
] = [(i) => (i.apiId === undefined) !== (i.keyId === undefined), { error: "give exactly one of apiId and keyId", path: ["apiId"] }];

const creditsLowSchema = z.union([
  z
    .object({ percent: z.int().min(0).max(100).describe("Below this % of the refill amount, else of the starting credits; 0: never.") })
    .strict(),
  z.object({ remaining: z.int().min(1).max(2_147_483_647).describe("Below this many remaining uses.") }).strict(),
]);

export const creditsLowInput = creditsLowSchema
  .nullable()
  .describe("key.credits.low's threshold: {percent} or {remaining}; null removes it (inherited again).");

export const expiringWithinInput = z
  .int()
  .min(0)
  .max(MAX_EXPIRING_WITHIN_MS)
  .nullable()
  .describe("How long before its expiry a key is expiring (key.expiring), in ms (0: never; at most 90 days); null removes it.");

const from = z.enum(["key", "api", "default"]);

export const thresholdsSchema = z.object({
  apiId: z.string(),
  keyId: z.string().optional(),
  creditsLow: creditsLowSchema.optional().describe("Set on this API or key; absent: inherited."),
  expiringWithinMs: z.number().optional().describe("Set on this API or key; absent: inherited."),
  effective: z.object({
    creditsLow: creditsLowSchema,
    creditsLowFrom: from,
    expiringWithinMs: z.number(),
    expiringWithinFrom: from,
    creditsLowBelow: z.number().optional().describe("A key's: the remaining uses below which it is low now; absent: never."),
  }),
  alerts: z
    .array(z.string())
    .optional()
    .describe("A key's alerts that hold now: credits.low, credits.exhausted, expiring, expired, ratelimited."),
});

export const thresholdsOut = (t: AlertThresholds): z.input<typeof thresholdsSchema> => t;
