import { z } from "zod";
import type { RemainingAfterChange } from "../../../core/keys/keys.updateRemaining.js";
import type { KeyObjectRow } from "../../../storage/keys/keyObjects.repository.js";
import type { NamedRatelimit } from "../../../storage/keys/keys.ratelimit.repository.js";
import { MAX_INT32 } from "../../../storage/int32.js";

const ratelimitOutput = z.object({
  id: z.string().describe("The rate limit's id (`rl_…`)."),
  name: z.string().describe("The name verifications refer to it by (`default` for a key's v1 rate limit)."),
  limit: z.number(),
  duration: z.number().describe("The window, in milliseconds."),
  autoApply: z.boolean().describe("Applied to every verification of the key."),
});

/** v2's KeyCreditsData (contract §2.1): `remaining` null when unlimited; `refill` when the key has one. */
export const keyCreditsOutput = z.object({
  remaining: z.number().nullable().describe("Uses left; null: unlimited."),
  refill: z
    .object({
      interval: z.enum(["daily", "monthly"]),
      amount: z.number().describe("What `remaining` is set to at each refill."),
      refillDay: z.number().optional().describe("The day of the month of a monthly refill."),
    })
    .optional()
    .describe("Absent when the key is not refilled."),
});

/** v2's KeyResponseData (contract §2.1): empty fields are left out. */
export const keyResponseOutput = z.object({
  keyId: z.string(),
  start: z.string().describe("The first characters of the key, to recognise it by."),
  enabled: z.boolean(),
  createdAt: z.number().describe("Unix milliseconds."),
  name: z.string().optional(),
  meta: z.record(z.string(), z.unknown()).optional().describe("Absent when empty."),
  updatedAt: z.number().optional(),
  lastUsedAt: z
    .number()
    .optional()
    .describe(
      "Unix milliseconds of the key's last verification (any outcome), as written about once a second: up to a second (and a write) behind. Absent when never verified.",
    ),
  expires: z.number().optional().describe("Unix milliseconds; absent when the key does not expire."),
  permissions: z.array(z.string()).optional().describe("Slugs of the key's permissions, direct and through its roles."),
  roles: z.array(z.string()).optional().describe("Names of the key's roles."),
  credits: keyCreditsOutput.optional().describe("Absent when the key's uses are unlimited."),
  identity: z
    .object({
      id: z.string(),
      externalId: z.string(),
      meta: z.record(z.string(), z.unknown()).optional(),
      ratelimits: z.array(ratelimitOutput).optional().describe("The identity's rate limits."),
    })
    .optional(),
  plaintext: z.string().optional().describe("The key itself, with `decrypt: true`, when it is stored encrypted."),
  ratelimits: z.array(ratelimitOutput).optional().describe("The key's own rate limits."),
});

type Meta = Record<string, unknown>;

/** A JSON object with at least one property (v2 leaves out `{}` and null alike). */
const nonEmpty = (value: unknown): value is Meta =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length > 0;

/** A refill as KeyCreditsData shows it: monthly iff it has a day. */
const refillData = (amount: number, day: number | null) =>
  day !== null ? { interval: "monthly" as const, amount, refillDay: day } : { interval: "daily" as const, amount };

/** The credits of updateCredits' answer: `remaining` always (null: unlimited). */
export const creditsData = (after: RemainingAfterChange) => ({
  remaining: after.remaining,
  ...(after.refill !== null && { refill: refillData(after.refill.amount, after.refill.day) }),
});

/** A key as v2 shows it (KeyResponseData), from the core's key row: absent, zero and empty values are left out. */
export function keyResponseData(
  row: KeyObjectRow,
  ratelimits: { key: NamedRatelimit[]; identity: NamedRatelimit[] },
  plaintext?: string,
): z.input<typeof keyResponseOutput> {
  return {
    keyId: row.id,
    start: row.start,
    enabled: row.enabled,
    createdAt: row.createdAtM,
    ...(row.name !== null && row.name !== "" && { name: row.name }),
    ...(nonEmpty(row.meta) && { meta: row.meta }),
    ...(row.updatedAtM !== null && row.updatedAtM !== 0 && { updatedAt: row.updatedAtM }),
    ...(row.lastUsedAtM !== null && row.lastUsedAtM !== 0 && { lastUsedAt: row.lastUsedAtM }),
    ...(row.expires !== null && { expires: row.expires.getTime() }),
    ...(row.permissions.length > 0 && { permissions: row.permissions }),
    ...(row.roles.length > 0 && { roles: row.roles }),
    ...(row.remaining !== null && {
      credits: {
        remaining: row.remaining,
        ...(row.refillAmount !== null && { refill: refillData(row.refillAmount, row.refillDay) }),
      },
    }),
    ...(row.identityId !== null &&
      row.identityExternalId !== null && {
        identity: {
          id: row.identityId,
          externalId: row.identityExternalId,
          ...(nonEmpty(row.identityMeta) && { meta: row.identityMeta }),
          ...(ratelimits.identity.length > 0 && { ratelimits: ratelimits.identity }),
        },
      }),
    ...(plaintext !== undefined && plaintext !== "" && { plaintext }),
    ...(ratelimits.key.length > 0 && { ratelimits: ratelimits.key }),
  };
}

/** The latest `expires` v2 takes (2100-01-01T00:00:00Z), in unix milliseconds. */
export const V2_MAX_EXPIRES = 4_102_444_800_000;

export const expiresInput = z.int().min(0).max(V2_MAX_EXPIRES).describe("When the key stops verifying, in unix milliseconds.");

/** v2's role names on a key: any characters, spaces included. */
export const keyRolesInput = z.array(z.string().min(1).max(128)).max(100).describe("Names of roles; each must exist.");

/** v2's permission slugs on a key. */
export const keyPermissionsInput = z
  .array(
    z
      .string()
      .min(1)
      .max(128)
      .regex(/^[a-zA-Z0-9_:\-.*]+$/, { error: "must hold only letters, digits and _ : - . *" }),
  )
  .max(1000)
  .describe("Slugs of permissions given to the key directly; missing ones are created.");

/** KeyCreditsRefill as a request gives it. */
export const refillInput = z
  .object({
    interval: z.enum(["daily", "monthly"]),
    amount: z.int().min(1).max(MAX_INT32).describe("What `remaining` is set to at each refill."),
    refillDay: z.int().min(1).max(31).optional().describe("The day of the month of a monthly refill (required for monthly)."),
  })
  .strict();

/** A key's `start`, `key` and id, as keys.createKey and keys.rerollKey answer them. */
export const createdKeyOutput = z.object({
  keyId: z.string().describe("The key's id (`key_…`)."),
  key: z.string().describe("The key itself, shown only in this answer: keyhaven stores its hash."),
});
