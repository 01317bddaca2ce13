import { type SQL, and, asc, count, eq, gt, gte, inArray, isNull, sql } from "drizzle-orm";
import type { Db } from "../client.js";
import { indexFirst } from "../indexFirst.js";
import { apis, encryptedKeys, identities, keyLastUsed, keys, ratelimits } from "../schema.js";
import { keyDirectPermissionNames, keyEffectivePermissionSlugs, keyRoleNames } from "./keys.columns.js";
import { effectiveRemaining, refillDue } from "./keys.refill.js";

// The SQL behind v1's key object (wire/v1/keys/keys.object.ts): one statement per page of key objects.

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
 * correlated subqueries, the `default` rate limit, the identity, the ciphertext and the last use from joins (each at
 * most one row per key), so the number of queries never grows with the page.
 */
function selectKeyObjectRows(db: Db, view: PermissionView, source: typeof keys = keys) {
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
      // The key's last verification as last written (about once a second: storage/lastUsed); null: never verified.
      lastUsedAtM: keyLastUsed.lastUsedAtM,
    })
    .from(source)
    .innerJoin(apis, and(eq(apis.id, keys.apiId), isNull(apis.deletedAtM)))
    .leftJoin(identities, eq(identities.id, keys.identityId))
    .leftJoin(ratelimits, and(eq(ratelimits.keyId, keys.id), eq(ratelimits.name, "default")))
    .leftJoin(encryptedKeys, eq(encryptedKeys.keyId, keys.id))
    .leftJoin(keyLastUsed, eq(keyLastUsed.keyId, keys.id));
}

export type KeyObjectRow = Awaited<ReturnType<typeof selectKeyObjectRows>>[number];

/**
 * The key object's lookups (keys.getKey and keys.whoami, v1 and v2): a live key (not deleted, in a live API) by id or
 * by hash, in any workspace (callers check the workspace). Prepared once per database handle (services.ts), one
 * statement per way and view: built by drizzle on every call (its joins and permission subqueries), it cost more of
 * a keys.getKey's CPU than the rest of the route (issue 13 §3, docs/benchmarks.md).
 */
export function prepareKeyObjectReads(db: Db) {
  const prepare = (column: "id" | "hash", view: PermissionView) =>
    // From the key's unique index whatever the statistics say (indexFirst.ts).
    selectKeyObjectRows(db, view, indexFirst(keys, eq(keys[column], sql.placeholder("match"))))
      .where(isNull(keys.deletedAtM))
      .limit(1)
      .prepare(`keyhaven_key_object_by_${column}_${view}`);
  const statements = {
    id: { "direct-names": prepare("id", "direct-names"), "effective-slugs": prepare("id", "effective-slugs") },
    hash: { "direct-names": prepare("hash", "direct-names"), "effective-slugs": prepare("hash", "effective-slugs") },
  };
  return {
    async find(by: { id: string } | { hash: string }, view: PermissionView): Promise<KeyObjectRow | undefined> {
      const [row] =
        "id" in by ? await statements.id[view].execute({ match: by.id }) : await statements.hash[view].execute({ match: by.hash });
      return row;
    },
  };
}

export type KeyObjectReads = ReturnType<typeof prepareKeyObjectReads>;

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
  /** After `cursor` (exclusive, v1's), or from `fromId` on (inclusive, v2's). */
  page: { cursor?: string | undefined; fromId?: string | undefined; limit: number },
): Promise<KeyObjectRow[]> {
  return selectKeyObjectRows(db, "effective-slugs")
    .where(
      and(
        apiKeysCondition(db, filter),
        page.cursor !== undefined ? gt(keys.id, page.cursor) : undefined,
        page.fromId !== undefined ? gte(keys.id, page.fromId) : undefined,
      ),
    )
    .orderBy(asc(keys.id))
    .limit(page.limit);
}

/** The exact number of live keys of an API matching the filter (every page together). */
export async function countKeys(db: Db, filter: ApiKeysFilter): Promise<number> {
  const [row] = await db.select({ n: count() }).from(keys).where(apiKeysCondition(db, filter));
  return row?.n ?? 0;
}
