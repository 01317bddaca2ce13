import { z } from "zod";
import { expectedReceived } from "../../../validation.messages.js";

import { MAX_INT32 } from "../../../storage/int32.js";

export { MAX_INT32 };
/** 9999-12-31T23:59:59.999Z: the last instant PostgreSQL and JavaScript dates agree on. */
export const MAX_TIMESTAMP_MS = 253_402_300_799_999;

export const int32 = (min: number) => z.int().min(min).max(MAX_INT32);

/** Unix milliseconds; 0 means "never". */
export const expiresSchema = z.int().min(0).max(MAX_TIMESTAMP_MS);

export const refillSchema = z.object({
  interval: z.enum(["daily", "monthly"]),
  amount: int32(1),
  refillDay: z.int().min(1).max(31).optional(),
});

/** A key's own (`default`) rate limit as createKey and updateKey take it; `limit`/`duration` win over the deprecated pair. */
export const keyRatelimitSchema = z
  .object({
    // Accepted for old clients; a key's own limit is always checked synchronously.
    async: z.boolean().optional(),
    type: z.enum(["fast", "consistent"]).optional(),
    limit: int32(1),
    duration: z.int().min(1000).max(Number.MAX_SAFE_INTEGER).optional(),
    refillRate: int32(1).optional(),
    refillInterval: z.int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
  })
  .refine((r) => r.duration !== undefined || r.refillInterval !== undefined, {
    path: ["duration"],
    message: "duration is required (or the deprecated refillInterval)",
  });

/**
 * `meta`: any JSON object. Checked without visiting its properties, which JSON parsing already made JSON: a record
 * schema validates and copies every property, hundreds of milliseconds for the 100,000 of a body of 1 MiB.
 */
export const metaSchema = z
  .custom<Record<string, unknown>>((v) => typeof v === "object" && v !== null && !Array.isArray(v), {
    // What zod 3's record said (v1's meta was one).
    error: (issue) => expectedReceived("object", issue.input),
  })
  .meta({ type: "object", additionalProperties: {} });
