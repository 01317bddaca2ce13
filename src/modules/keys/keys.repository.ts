import { and, eq, gte, isNull, or, sql } from "drizzle-orm";
import type { Db } from "../../db/client.js";
import { apis, identities, keys, workspaces } from "../../db/schema.js";

/** Everything verification needs about a live key, in one query by hash; undefined when it does not exist. */
export async function findKeyForVerification(db: Db, hash: string) {
  const [row] = await db
    .select({
      id: keys.id,
      apiId: keys.apiId,
      name: keys.name,
      ownerId: keys.ownerId,
      meta: keys.meta,
      expires: keys.expires,
      remaining: keys.remaining,
      enabled: keys.enabled,
      environment: keys.environment,
      workspaceEnabled: workspaces.enabled,
      identityId: identities.id,
      identityExternalId: identities.externalId,
      identityMeta: identities.meta,
      roles: sql<string[]>`coalesce((
        select array_agg(r.name order by r.name) from keys_roles kr join roles r on r.id = kr.role_id
        where kr.key_id = ${keys.id}), '{}')`,
      // Direct permissions and those reached through roles, as slugs, each once.
      permissions: sql<string[]>`coalesce((
        select array_agg(distinct p.slug) from permissions p where p.id in (
          select kp.permission_id from keys_permissions kp where kp.key_id = ${keys.id}
          union select rp.permission_id from keys_roles kr join roles_permissions rp on rp.role_id = kr.role_id
          where kr.key_id = ${keys.id})), '{}')`,
    })
    .from(keys)
    .innerJoin(apis, and(eq(apis.id, keys.apiId), isNull(apis.deletedAtM)))
    .innerJoin(workspaces, eq(workspaces.id, keys.workspaceId))
    .leftJoin(identities, eq(identities.id, keys.identityId))
    .where(and(eq(keys.hash, hash), isNull(keys.deletedAtM)))
    .limit(1);
  return row;
}

/**
 * Spends `cost` uses in one atomic statement: succeeds only when enough are left (cost 0 always succeeds),
 * so concurrent verifications can never overdraw. Returns the uses left after it, or undefined when refused.
 */
export async function spendRemaining(db: Db, keyId: string, cost: number): Promise<number | undefined> {
  const [row] = await db
    .update(keys)
    .set({ remaining: sql`${keys.remaining} - ${cost}` })
    .where(and(eq(keys.id, keyId), or(gte(keys.remaining, cost), sql`${cost} = 0`)))
    .returning({ remaining: keys.remaining });
  return row?.remaining ?? undefined;
}
