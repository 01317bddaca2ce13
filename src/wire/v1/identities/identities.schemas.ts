import { z } from "zod";
import { MAX_INT32 } from "../keys/keys.schemas.js";
import { type IdentityRules, MAX_IDENTITY_META_JSON } from "../../../core/identities/identities.core.js";

/** v1's identity rules: meta of less than 64k characters as JSON. */
export const V1_IDENTITY_RULES: IdentityRules = { maxMetaJson: MAX_IDENTITY_META_JSON };

// Bounded by what the columns hold (an int4 limit; names and ids in unique indexes), so bad input is a 400.
export const ratelimitInput = z.object({
  name: z.string().min(1).max(256),
  limit: z.int().min(1).max(MAX_INT32),
  duration: z.int().min(1000).max(Number.MAX_SAFE_INTEGER),
});

/** An identity's named rate limits: v1 set no bound; a hundred is far more than any client defines. */
export const MAX_IDENTITY_RATELIMITS = 100;
export const ratelimitsInput = z.array(ratelimitInput).max(MAX_IDENTITY_RATELIMITS);

/** An identity's externalId: at least 3 characters (v1), at most 256 (as on keys). */
export const externalIdInput = z.string().min(3).max(256);

export const ratelimitOutput = z.object({ name: z.string(), limit: z.number(), duration: z.number() });

export { metaSchema as meta } from "../keys/keys.schemas.js";
