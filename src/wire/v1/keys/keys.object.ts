import { z } from "zod";
import type { KeyObjectRow } from "../../../storage/keys/keyObjects.repository.js";
import { metaSchema } from "./keys.schemas.js";

/** v1's key object (contract 2.1), shared by keys.getKey and apis.listKeys. Absent values are omitted, never null. */
export const keyObjectSchema = z.object({
  id: z.string(),
  start: z.string(),
  workspaceId: z.string(),
  apiId: z.string().optional(),
  name: z.string().optional(),
  ownerId: z.string().optional(),
  meta: metaSchema.optional(),
  createdAt: z.number(),
  updatedAt: z.number().optional(),
  expires: z.number().optional(),
  remaining: z.number().optional(),
  refill: z
    .object({
      interval: z.enum(["daily", "monthly"]),
      amount: z.number(),
      // The one null on the wire: v1 sends `refillDay: null` for daily refills, and v1 clients may test for it.
      refillDay: z.number().nullable(),
      lastRefillAt: z.number().optional(),
    })
    .optional(),
  ratelimit: z
    .object({
      async: z.boolean(),
      type: z.enum(["fast", "consistent"]).optional(),
      limit: z.number(),
      duration: z.number(),
      refillRate: z.number().optional(),
      refillInterval: z.number().optional(),
    })
    .optional(),
  roles: z.array(z.string()),
  permissions: z.array(z.string()),
  enabled: z.boolean(),
  plaintext: z.string().optional(),
  identity: z.object({ id: z.string(), externalId: z.string(), meta: metaSchema.optional() }).optional(),
  environment: z.string().optional(),
});

export type KeyObject = z.input<typeof keyObjectSchema>;

export function toKeyObject(row: KeyObjectRow, plaintext?: string): KeyObject {
  return {
    id: row.id,
    start: row.start,
    workspaceId: row.workspaceId,
    apiId: row.apiId,
    ...(row.name !== null && { name: row.name }),
    ...(row.ownerId !== null && { ownerId: row.ownerId }),
    ...(isRecord(row.meta) && { meta: row.meta }),
    createdAt: row.createdAtM,
    ...(row.updatedAtM !== null && { updatedAt: row.updatedAtM }),
    ...(row.expires !== null && { expires: row.expires.getTime() }),
    ...(row.remaining !== null && { remaining: row.remaining }),
    ...(row.refillAmount !== null && {
      refill: {
        interval: row.refillDay !== null ? ("monthly" as const) : ("daily" as const),
        amount: row.refillAmount,
        refillDay: row.refillDay,
        ...(row.lastRefillAtM !== null && { lastRefillAt: row.lastRefillAtM }),
      },
    }),
    ...(row.ratelimitLimit !== null &&
      row.ratelimitDuration !== null && {
        ratelimit: {
          async: false,
          limit: row.ratelimitLimit,
          duration: row.ratelimitDuration,
          refillRate: row.ratelimitLimit,
          refillInterval: row.ratelimitDuration,
        },
      }),
    roles: row.roles,
    permissions: row.permissions,
    enabled: row.enabled,
    ...(plaintext !== undefined && { plaintext }),
    ...(row.identityId !== null &&
      row.identityExternalId !== null && {
        identity: {
          id: row.identityId,
          externalId: row.identityExternalId,
          ...(isRecord(row.identityMeta) && { meta: row.identityMeta }),
        },
      }),
    ...(row.environment !== null && { environment: row.environment }),
  };
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
