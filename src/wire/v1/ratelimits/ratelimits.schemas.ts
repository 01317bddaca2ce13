import { z } from "zod";
import { MAX_ID_LENGTH } from "../inputBounds.js";
import { MAX_INT32 } from "../keys/keys.schemas.js";
import { MAX_WINDOW_MS } from "../../../storage/ratelimits/ratelimiter.js";
import type { LimitRules, OverrideReadRules } from "../../../core/ratelimits/ratelimits.core.js";

/** v1's limit: a namespace by name, and one that does not exist is not found for a key that may not create it. */
export const V1_LIMIT_RULES: LimitRules = { namespaceBy: "name", missingNamespace: "notFound" };

/** v1's getOverride reads the identifier's own override, matched literally. */
export const V1_OVERRIDE_READ_RULES: OverrideReadRules = { match: "literal" };

/** Namespace names and identifiers: up to 512 characters, the width upstream stored them in. */
export const MAX_NAME = 512;

/** The message for a window longer than the limiter keeps counters (see MAX_WINDOW_MS). */
export const maxWindowMessage = `must be at most ${MAX_WINDOW_MS} ms (30 days)`;

/** A window in milliseconds: at least one second, as for key rate limits, and at most 30 days, as upstream v2. */
export const durationSchema = z.int().min(1000).max(MAX_WINDOW_MS, { error: maxWindowMessage });

export const limitSchema = (min: number) => z.int().min(min).max(MAX_INT32);

export const overrideOutput = z.object({
  id: z.string(),
  identifier: z.string(),
  limit: z.number(),
  duration: z.number(),
  async: z.boolean(),
});

/** How setOverride, getOverride, listOverrides and deleteOverride name a namespace (in the body or the query). */
export const namespaceSelectorInput = {
  namespaceId: z.string().max(MAX_ID_LENGTH).optional(),
  namespaceName: z.string().max(MAX_NAME).optional(),
};
