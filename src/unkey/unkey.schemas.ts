/**
 * What the Unkey client reads of hosted Unkey's v2 answers (shared/reference/v2-wire-contract.md §2.1 and the routes'
 * sections): only the fields the contract documents. Unknown fields are dropped (zod's default), so a newer Unkey
 * adding fields is read as before; a documented field of the wrong type is an error naming it (see unkey.client.ts).
 * Go's encoder writes a nil slice as `null`, so an optional field may arrive as null: it is read as absent.
 */
import { z } from "zod";

/** An optional field: absent, or null, is undefined. */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);

const int = z.int();
const meta = z.record(z.string(), z.unknown());

/** RatelimitResponse: a key's or an identity's own named rate limit. */
export const ratelimitSchema = z.object({
  id: z.string(),
  name: z.string(),
  limit: int,
  /** Milliseconds. */
  duration: int,
  autoApply: z.boolean(),
});

/** Identity, as identities.listIdentities answers it and as a key's `identity`. */
export const identitySchema = z.object({
  id: z.string(),
  externalId: z.string(),
  meta: optional(meta),
  ratelimits: optional(z.array(ratelimitSchema)),
});

/** KeyCreditsData: `remaining` null when unlimited; `refill` monthly iff it has a day. */
export const creditsSchema = z.object({
  remaining: int.nullable(),
  refill: optional(
    z.object({
      interval: z.enum(["daily", "monthly"]),
      amount: int,
      refillDay: optional(int),
    }),
  ),
});

/** KeyResponseData (apis.listKeys items). Timestamps are unix milliseconds. */
export const keySchema = z.object({
  keyId: z.string(),
  start: z.string(),
  enabled: z.boolean(),
  createdAt: int,
  name: optional(z.string()),
  meta: optional(meta),
  updatedAt: optional(int),
  lastUsedAt: optional(int),
  expires: optional(int),
  /** Slugs, direct and through roles. */
  permissions: optional(z.array(z.string())),
  /** Role names. */
  roles: optional(z.array(z.string())),
  /** Absent when the key's uses are unlimited. */
  credits: optional(creditsSchema),
  identity: optional(identitySchema),
  /** Only with `decrypt: true`, for a key stored encrypted. */
  plaintext: optional(z.string()),
  ratelimits: optional(z.array(ratelimitSchema)),
});

export const apiSchema = z.object({ id: z.string(), name: z.string() });

export const permissionSchema = z.object({
  id: z.string(),
  name: z.string(),
  slug: z.string(),
  description: optional(z.string()),
});

export const roleSchema = z.object({
  id: z.string(),
  name: z.string(),
  description: optional(z.string()),
  permissions: optional(z.array(permissionSchema)),
});

export const overrideSchema = z.object({
  overrideId: z.string(),
  identifier: z.string(),
  limit: int,
  duration: int,
});

/** The success envelope (§1.2): `data`, and `pagination` on list routes (`cursor` only while `hasMore`). */
export const envelopeOf = <T extends z.ZodType>(data: T) =>
  z.object({
    meta: optional(z.object({ requestId: optional(z.string()) })),
    data,
    pagination: optional(z.object({ hasMore: z.boolean(), cursor: optional(z.string()) })),
  });

export type UnkeyApi = z.output<typeof apiSchema>;
export type UnkeyKey = z.output<typeof keySchema>;
export type UnkeyIdentity = z.output<typeof identitySchema>;
export type UnkeyRatelimit = z.output<typeof ratelimitSchema>;
export type UnkeyPermission = z.output<typeof permissionSchema>;
export type UnkeyRole = z.output<typeof roleSchema>;
export type UnkeyOverride = z.output<typeof overrideSchema>;

/**
 * V2KeysVerifyKeyResponseData (contract §5.3), the fields the fallback reads: `keyId` (whatever the code: Unkey knows
 * the key) and the state an adoption refreshes. Bounded: an id or a name longer than keyhaven stores is malformed.
 */
export const verifyKeyAnswerSchema = z.object({
  valid: z.boolean(),
  code: z.string().max(64),
  keyId: optional(z.string().min(1).max(255)),
  name: optional(z.string().max(255)),
  meta: optional(meta),
  // Within what a date (and keyhaven's integer column of uses) can hold.
  expires: optional(int.min(0).max(8_640_000_000_000_000)),
  credits: optional(int.min(0).max(2_147_483_647)),
  enabled: optional(z.boolean()),
});

export type UnkeyVerifyAnswer = z.output<typeof verifyKeyAnswerSchema>;
