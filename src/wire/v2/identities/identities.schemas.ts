import { z } from "zod";
import type { Identity, IdentityRules } from "../../../core/identities/identities.core.js";
import { MAX_INT32 } from "../../../storage/int32.js";
import { v2LookupRef } from "../inputBounds.js";
import { MAX_WINDOW_MS } from "../../../storage/ratelimits/ratelimiter.window.js";

/** v2's limit on an identity's meta, as JSON (1.0 MB). */
export const V2_MAX_IDENTITY_META_JSON = 1_000_000;

/**
 * The body v2's createIdentity and updateIdentity read (2 MiB): twice the meta limit, so that a meta over it is parsed
 * and refused in v2's words (400 `Metadata is too large`, or the schema's 100 properties), as upstream (whose limit is
 * 10 MiB) answers its own tests' bodies of 1.05 and 1.75 MB, not with a 413. The JSON parser's bounds (properties,
 * containers) still apply first.
 */
export const V2_IDENTITY_BODY_LIMIT = 2 * 1024 * 1024;

/** v2's identity rules: its meta bound (the identity URN granting as the tuples do is V2_ACCESS's urnGrants). */
export const V2_IDENTITY_RULES: IdentityRules = { maxMetaJson: V2_MAX_IDENTITY_META_JSON };

export const externalIdInput = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[a-zA-Z0-9_.-]+$/, { error: "must hold only letters, digits and _ . -" });

export const metaInput = z
  .record(z.string(), z.unknown())
  .refine((m) => Object.keys(m).length <= 100, { error: "must have at most 100 properties" })
  .describe("Any JSON object of at most 100 properties (1.0 MB as JSON).");

/**
 * A key's or an identity's named rate limits (v2's RatelimitRequest). The window is one second to 30 days, the bound
 * of every window keyhaven counts (ratelimit.limit's, upstream's own 30-day example); it is stored as bigint.
 */
export const ratelimitsInput = z
  .array(
    z.object({
      name: z.string().min(3).max(128).describe("The name verifications refer to it by."),
      limit: z.int().min(1).max(MAX_INT32),
      duration: z.int().min(1000).max(MAX_WINDOW_MS).describe("The window, in milliseconds: 1000 to 2592000000 (30 days)."),
      autoApply: z.boolean().describe("Apply it to every verification of the identity's keys."),
    }),
  )
  .max(50);

/** The identity a route names: its id or its externalId, only looked up (v2LookupRef: unbounded but by the body). */
export const identityRef = v2LookupRef.describe("The identity's id or its externalId.");

export const identityOutput = z.object({
  id: z.string().describe("The identity's id (`id_…`)."),
  externalId: z.string(),
  meta: z.record(z.string(), z.unknown()).optional().describe("Absent when empty."),
  ratelimits: z
    .array(z.object({ id: z.string(), name: z.string(), limit: z.number(), duration: z.number(), autoApply: z.boolean() }))
    .optional()
    .describe("The identity's own rate limits; absent when it has none."),
});

/** An identity as v2 shows it: empty meta and no rate limits are left out. */
export const identityData = (identity: Identity) => ({
  id: identity.id,
  externalId: identity.externalId,
  ...(Object.keys(identity.meta).length > 0 && { meta: identity.meta }),
  ...(identity.ratelimits.length > 0 && { ratelimits: identity.ratelimits }),
});
