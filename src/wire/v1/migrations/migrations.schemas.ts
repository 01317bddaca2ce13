import { z } from "zod";
import { expiresSchema, MAX_INT32, metaSchema, refillSchema } from "../keys/keys.schemas.js";
import { UNPREFIXED } from "../../../validation.messages.js";
import { refillWithoutRemaining } from "../../../core/keys/keys.credits.js";

export const MAX_KEYS_PER_IMPORT = 100;

/** The fields a key has in both import routes (`createKeys` adds `apiId`, `externalId` and its own `ratelimit`). */
const sharedKeyFields = {
  prefix: z.string().max(8).optional().describe("The key's prefix, kept for display."),
  name: z.string().max(1024).optional().describe("A name for people."),
  plaintext: z
    .string()
    .min(1)
    .max(1024)
    .optional()
    .describe(
      "The key itself: stored as its SHA-256 hash and encrypted (needs an encryption key; `create_key` suffices, as for a hash). Exactly one of `plaintext` and `hash`.",
    ),
  hash: z
    .object({
      value: z.string().min(1).max(512),
      variant: z.enum(["sha256_base64"]),
    })
    .optional()
    .describe(
      "The key's SHA-256 as standard padded base64 (`openssl dgst -sha256 -binary | base64`), when you do not have the key itself.",
    ),
  start: z.string().max(64).optional().describe("The first characters shown for the key. Default: taken from the plaintext."),
  ownerId: z.string().max(256).optional().describe("Deprecated in v1: kept as given."),
  meta: metaSchema.optional().describe("Any JSON object; verifications return it."),
  roles: z.array(z.string().min(1).max(512)).max(1000).optional().describe("Names of existing roles (412 when one is missing)."),
  permissions: z
    .array(z.string().min(1).max(512))
    .max(1000)
    .optional()
    .describe("Names (slugs) of existing permissions (412 when one is missing)."),
  expires: expiresSchema.optional().describe("When the key expires, unix ms; 0 means never."),
  // The spec states "greater than 1"; keyhaven accepts 1 so that a key with one use left can be imported.
  remaining: z.int().min(1).max(MAX_INT32).optional().describe("Uses left. Unset: unlimited."),
  refill: refillSchema.optional().describe("Refill of `remaining`, daily or monthly (on `refillDay`, default 1). Needs `remaining`."),
  enabled: z.boolean().optional().describe("Default true."),
  environment: z.string().max(256).optional().describe("A free label, such as `test` or `live`."),
};

/** The checks across fields that both import routes make on each key. */
function checkImportKey(
  key: { hash?: unknown; plaintext?: unknown; remaining?: number; refill?: z.output<typeof refillSchema> },
  ctx: z.RefinementCtx,
): void {
  if (key.hash === undefined && key.plaintext === undefined) {
    ctx.addIssue({ code: "custom", message: "provide either `hash` or `plaintext`" });
  } else if (key.hash !== undefined && key.plaintext !== undefined) {
    ctx.addIssue({ code: "custom", message: "provide either `hash` or `plaintext`, not both" });
  }
  if (refillWithoutRemaining(key)) {
    ctx.addIssue({ code: "custom", path: ["refill"], message: "remaining must be set if you are using refill." });
  }
  if (key.refill?.interval === "daily" && key.refill.refillDay !== undefined) {
    // v1 raised this one in its handler: answered without the field's path.
    ctx.addIssue({
      code: "custom",
      path: ["refill", "refillDay"],
      message: "when interval is set to 'daily', 'refillDay' must be null.",
      params: UNPREFIXED,
    });
  }
}

/** One key of `migrations.createKeys`: v1's fields, with the limits keyhaven enforces (see docs/differences-from-v1.md). */
export const importKeySchema = z
  .object({
    apiId: z.string().max(256).describe("The API the key is imported into."),
    ...sharedKeyFields,
    externalId: z.string().min(1).max(256).optional().describe("Links the workspace's identity with this id, created if needed."),
    ratelimit: z
      .object({
        async: z.boolean().optional(),
        type: z.enum(["fast", "consistent"]).optional(),
        limit: z.int().min(1).max(MAX_INT32),
        refillRate: z.int().min(1).max(MAX_INT32),
        refillInterval: z.int().min(1).max(Number.MAX_SAFE_INTEGER),
      })
      .optional()
      .describe("Kept as the key's `default` rate limit: `limit` verifications per `refillInterval` ms."),
  })
  .superRefine(checkImportKey);

export const createKeysInputSchema = z.array(importKeySchema).max(MAX_KEYS_PER_IMPORT).describe("Up to 100 keys, imported all or nothing.");

/**
 * One key of `migrations.enqueueKeys` (contract 6.3): createKeys' fields without `apiId` (given once for the
 * batch) and `externalId`, and v1's newer `ratelimit` shape with a window `duration` in ms (at least 1 s).
 */
export const enqueueKeySchema = z
  .object({
    ...sharedKeyFields,
    ratelimit: z
      .object({
        async: z.boolean().optional(),
        type: z.enum(["fast", "consistent"]).optional(),
        limit: z.int().min(1).max(MAX_INT32),
        duration: z.int().min(1000).max(Number.MAX_SAFE_INTEGER),
        refillRate: z.int().min(1).max(MAX_INT32).optional(),
        refillInterval: z.int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
      })
      .optional()
      .describe("Kept as the key's `default` rate limit: `limit` verifications per `duration` ms."),
  })
  .superRefine(checkImportKey);

export const enqueueKeysInputSchema = z.object({
  migrationId: z
    .string()
    .min(1)
    .max(256)
    .describe("Your name for the migration; migrations.getMigration reports on every batch enqueued under it."),
  apiId: z.string().min(1).max(256).describe("The API the keys are imported into."),
  keys: z.array(enqueueKeySchema).max(MAX_KEYS_PER_IMPORT).describe("Up to 100 keys, stored at once and imported by a worker."),
});
