import { and, asc, count, eq, gt, inArray, isNull, type SQL, sql } from "drizzle-orm";
import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { hasPermission, type RootKeyAuth } from "../../auth/root-key.js";
import type { Keyring } from "../../crypto/keyring.js";
import type { Db } from "../../db/client.js";
import { apis, encryptedKeys, identities, keys, ratelimits } from "../../db/schema.js";
import { ApiError } from "../../errors.js";
import { keyDirectPermissionNames, keyEffectivePermissionSlugs, keyRoleNames } from "./key-columns.js";
import { metaSchema } from "./keys.schemas.js";
import { effectiveRemaining, refillDue } from "./refill.js";


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

/**
 * Which permissions a key object lists: getKey shows the key's direct permissions by name; listKeys shows direct
 * and role-derived ones by slug, each once (contract 2.1).
 */
export type PermissionView = "direct-names" | "effective-slugs";

const permissionColumns: Record<PermissionView, SQL<string[]>> = {
  "direct-names": keyDirectPermissionNames,
  "effective-slugs": keyEffectivePermissionSlugs,
};

// A refill that is due but not yet written (refills are lazy) is reported as having happened at its boundary,
// so that `lastRefillAt` agrees with the `remaining` it explains.
const effectiveLastRefillAtMs = sql<number | null>`floor(extract(epoch from (case when ${refillDue}
  then keyhaven_refill_boundary(${keys.refillDay}, now()) else ${keys.lastRefillAt} end)) * 1000)`.mapWith(Number);

/**
 * One statement loads everything the key objects of a whole page need: roles and permissions come from
 * correlated subqueries, the `default` rate limit, the identity and the ciphertext from joins (each at most one
 * row per key), so the number of queries never grows with the page.
 */
function selectKeyObjectRows(db: Db, view: PermissionView) {
  return db
    .select({
      id: keys.id,
      workspaceId: keys.workspaceId,
      apiId: keys.apiId,
      start: keys.start,
      name: keys.name,
      ownerId: keys.ownerId,
      meta: keys.meta,
      createdAtM: keys.createdAtM,
      updatedAtM: keys.updatedAtM,
      expires: keys.expires,
      remaining: effectiveRemaining,
      refillDay: keys.refillDay,
      refillAmount: keys.refillAmount,
      lastRefillAtM: effectiveLastRefillAtMs,
      enabled: keys.enabled,
      environment: keys.environment,
      ratelimitLimit: ratelimits.limit,
      ratelimitDuration: ratelimits.duration,
      identityId: identities.id,
      identityExternalId: identities.externalId,
      identityMeta: identities.meta,
      roles: keyRoleNames,
      permissions: permissionColumns[view],
      encrypted: encryptedKeys.encrypted,
      encryptionKeyId: encryptedKeys.encryptionKeyId,
    })
    .from(keys)
    .innerJoin(apis, and(eq(apis.id, keys.apiId), isNull(apis.deletedAtM)))
    .leftJoin(identities, eq(identities.id, keys.identityId))
    .leftJoin(ratelimits, and(eq(ratelimits.keyId, keys.id), eq(ratelimits.name, "default")))
    .leftJoin(encryptedKeys, eq(encryptedKeys.keyId, keys.id));
}

export type KeyObjectRow = Awaited<ReturnType<typeof selectKeyObjectRows>>[number];

/** A live key (not deleted, in a live API) by id or by hash, in any workspace: callers check the workspace. */
export async function findKeyObjectRow(
  db: Db,
  by: { id: string } | { hash: string },
  view: PermissionView,
): Promise<KeyObjectRow | undefined> {
  const match = "id" in by ? eq(keys.id, by.id) : eq(keys.hash, by.hash);
  const [row] = await selectKeyObjectRows(db, view)
    .where(and(match, isNull(keys.deletedAtM)))
    .limit(1);
  return row;
}

export type ApiKeysFilter = {
  workspaceId: string;
  apiId: string;
  /** Matches the identity's external id; wins over ownerId. */
  externalId?: string | undefined;
  /** Matches the `owner_id` column. */
  ownerId?: string | undefined;
};

function apiKeysCondition(db: Db, f: ApiKeysFilter): SQL | undefined {
  return and(
    eq(keys.workspaceId, f.workspaceId),
    eq(keys.apiId, f.apiId),
    isNull(keys.deletedAtM),
    f.externalId !== undefined
      ? inArray(
          keys.identityId,
          db
            .select({ id: identities.id })
            .from(identities)
            .where(and(eq(identities.workspaceId, f.workspaceId), eq(identities.externalId, f.externalId))),
        )
      : f.ownerId !== undefined
        ? eq(keys.ownerId, f.ownerId)
        : undefined,
  );
}

/** Up to `limit` live keys of an API matching the filter, with ids greater than `cursor`, by id ascending. */
export async function listKeyObjectRows(
  db: Db,
  filter: ApiKeysFilter,
  page: { cursor?: string | undefined; limit: number },
): Promise<KeyObjectRow[]> {
  return selectKeyObjectRows(db, "effective-slugs")
    .where(and(apiKeysCondition(db, filter), page.cursor !== undefined ? gt(keys.id, page.cursor) : undefined))
    .orderBy(asc(keys.id))
    .limit(page.limit);
}

/** The exact number of live keys of an API matching the filter (every page together). */
export async function countKeys(db: Db, filter: ApiKeysFilter): Promise<number> {
  const [row] = await db.select({ n: count() }).from(keys).where(apiKeysCondition(db, filter));
  return row?.n ?? 0;
}

/** v1 answers a missing decrypt permission with UNAUTHORIZED (not INSUFFICIENT_PERMISSIONS), on getKey and listKeys. */
export function requireDecryptPermission(auth: RootKeyAuth, apiId: string): void {
  if (!hasPermission(auth, apiPermission(apiId, "decrypt_key"))) {
    throw new ApiError("UNAUTHORIZED", "you're not allowed to decrypt this key");
  }
}

/** Plaintexts of the rows that have an encrypted copy, by key id. Call only after the decrypt permission check. */
export async function decryptKeyObjectRows(db: Db, keyring: Keyring, rows: KeyObjectRow[]): Promise<Map<string, string>> {
  const plaintexts = new Map<string, string>();
  const sealed = rows.filter((r) => r.encrypted !== null && r.encryptionKeyId !== null);
  if (sealed.length > 0 && !keyring.available) {
    throw new ApiError(
      "PRECONDITION_FAILED",
      "decrypting keys needs the encryption key they were stored with: set KEYHAVEN_ENCRYPTION_KEY and restart keyhaven",
    );
  }
  // One after another: the first decryption caches the workspace's data key for the rest of the page.
  for (const row of sealed) {
    plaintexts.set(row.id, await keyring.decrypt(db, row.workspaceId, row.encryptionKeyId!, row.id, row.encrypted!));
  }
  return plaintexts;
}

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
