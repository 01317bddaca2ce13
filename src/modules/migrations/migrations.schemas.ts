import { z } from "zod";
import { expiresSchema, MAX_INT32, refillSchema } from "../keys/keys.schemas.js";

export const MAX_KEYS_PER_IMPORT = 100;

/** One key of `migrations.createKeys`: v1's fields, with the limits keyhaven enforces (see the README). */
export const importKeySchema = z
  .object({
    apiId: z.string().max(256),
    prefix: z.string().max(8).optional(),
    name: z.string().max(1024).optional(),
    plaintext: z.string().min(1).max(1024).optional(),
    hash: z
      .object({
        value: z.string().min(1).max(512),
        variant: z.enum(["sha256_base64"]),
      })
      .optional(),
    start: z.string().max(64).optional(),
    ownerId: z.string().max(256).optional(),
    externalId: z.string().min(1).max(256).optional(),
    meta: z.record(z.string(), z.unknown()).optional(),
    roles: z.array(z.string().min(1).max(512)).max(1000).optional(),
    permissions: z.array(z.string().min(1).max(512)).max(1000).optional(),
    expires: expiresSchema.optional(),
    // The spec states "greater than 1"; keyhaven accepts 1 so that a key with one use left can be imported.
    remaining: z.int().min(1).max(MAX_INT32).optional(),
    refill: refillSchema.optional(),
    ratelimit: z
      .object({
        async: z.boolean().optional(),
        type: z.enum(["fast", "consistent"]).optional(),
        limit: z.int().min(1).max(MAX_INT32),
        refillRate: z.int().min(1).max(MAX_INT32),
        refillInterval: z.int().min(1).max(Number.MAX_SAFE_INTEGER),
      })
      .optional(),
    enabled: z.boolean().optional(),
    environment: z.string().max(256).optional(),
  })
  .superRefine((key, ctx) => {
    if (key.hash === undefined && key.plaintext === undefined) {
      ctx.addIssue({ code: "custom", message: "provide either `hash` or `plaintext`" });
    } else if (key.hash !== undefined && key.plaintext !== undefined) {
      ctx.addIssue({ code: "custom", message: "provide either `hash` or `plaintext`, not both" });
    }
    if (key.refill !== undefined && key.remaining === undefined) {
      ctx.addIssue({ code: "custom", path: ["refill"], message: "remaining must be set if you are using refill." });
    }
    if (key.refill?.interval === "daily" && key.refill.refillDay !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["refill", "refillDay"],
        message: "when interval is set to 'daily', 'refillDay' must be null.",
      });
    }
  });

export type ImportKey = z.output<typeof importKeySchema>;

export const createKeysInputSchema = z.array(importKeySchema).max(MAX_KEYS_PER_IMPORT);
