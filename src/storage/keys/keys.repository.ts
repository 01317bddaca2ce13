import { and, eq, isNull, sql } from "drizzle-orm";
import { type Db, rowsOf } from "../client.js";
import { epochSum } from "../epoch.js";
import { indexFirst } from "../indexFirst.js";
import { apis, identities, keys, workspaces } from "../schema.js";
import { keyEffectivePermissionSlugs, keyRoleNames } from "./keys.columns.js";
import { effectiveRemaining, lastRefillAfterWrite } from "./keys.refill.js";

export type StoredRatelimit = {
  name: string;
  limit: number;
  duration: number;
  autoApply: boolean;
  owner: "key" | "identity";
};

/**
 * Everything verification needs about the live keys with these hashes (`{ hashes }`), in one query, each row with
 * the verification epoch of the same snapshot. `remaining` is the stored value: only whether it is null matters
 * here, since spending reads and writes it in the database. Verification is the hot path: the verification cache
 * (verification.cache.ts) prepares it once and runs it as a prepared statement (drizzle then skips building the
 * SQL, and PostgreSQL planning it), instead of once per request.
 */
export function prepareVerificationLookup(db: Db) {
  return (
    db
      .select({
        hash: keys.hash,
        // Read in the same snapshot as the key: see verification.cache.ts.
        epoch: epochSum,
        id: keys.id,
        workspaceId: keys.workspaceId,
        apiId: keys.apiId,
        name: keys.name,
        ownerId: keys.ownerId,
        meta: keys.meta,
        expires: keys.expires,
        remaining: keys.remaining,
        enabled: keys.enabled,
        environment: keys.environment,
        workspaceEnabled: workspaces.enabled,
        apiIpWhitelist: apis.ipWhitelist,
        identityId: identities.id,
        identityExternalId: identities.externalId,
        identityMeta: identities.meta,
        roles: keyRoleNames,
        // The key's own limits and its identity's, each tagged with where it comes from.
        ratelimits: sql<StoredRatelimit[]>`coalesce((
        select json_agg(json_build_object('name', rl.name, 'limit', rl."limit", 'duration', rl.duration,
          'autoApply', rl.auto_apply, 'owner', case when rl.key_id is not null then 'key' else 'identity' end))
        from ratelimits rl
        where rl.key_id = ${keys.id} or (${keys.identityId} is not null and rl.identity_id = ${keys.identityId})), '[]')`,
        permissions: keyEffectivePermissionSlugs,
      })
      // From the hash index whatever the statistics say (indexFirst.ts).
      .from(indexFirst(keys, sql`${keys.hash} = any(${sql.placeholder("hashes")}::text[])`))
      .innerJoin(apis, and(eq(apis.id, keys.apiId), isNull(apis.deletedAtM)))
      .innerJoin(workspaces, eq(workspaces.id, keys.workspaceId))
      .leftJoin(identities, eq(identities.id, keys.identityId))
      .where(isNull(keys.deletedAtM))
      .prepare("keyhaven_verification_lookup")
  );
}

export type VerificationLookup = ReturnType<typeof prepareVerificationLookup>;
export type KeyForVerification = Awaited<ReturnType<VerificationLookup["execute"]>>[number];

/**
 * Spends `cost` uses for each of `count` verifications of one key in one atomic statement, after applying any
 * refill that is due. The key's row is locked first and its uses before the spend returned, so the caller knows
 * exactly which of the verifications got their uses: the first `granted`, in order, as far as the uses go (all of
 * them when `cost` is 0). Concurrent statements, on any number of processes, never overdraw. Undefined when the key
 * is gone or has no usage limit.
 */
export async function spendRemaining(db: Db, keyId: string, cost: number, count: number) {
  const granted = sql`least(${count}::int, case when ${cost}::int = 0 then ${count}::int else cur.before / ${cost}::int end)`;
  const rows = rowsOf<{ before: number }>(
    await db.execute(sql`update ${keys} set ${sql.identifier(keys.remaining.name)} = cur.before - ${cost}::int * ${granted},
        ${sql.identifier(keys.lastRefillAt.name)} = ${lastRefillAfterWrite}
      from (select ${keys.id} as id, ${effectiveRemaining} as before from ${keys}
        where ${keys.id} = ${keyId} and ${keys.remaining} is not null for update) cur
      where ${keys.id} = cur.id
      returning cur.before`),
  );
  const before = rows[0]?.before;
  if (before === undefined || before === null) return undefined;
  return { before, granted: count === 0 ? 0 : cost === 0 ? count : Math.min(count, Math.floor(before / cost)) };
}
