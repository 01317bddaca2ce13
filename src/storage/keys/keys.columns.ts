import { type SQL, sql } from "drizzle-orm";
import { identities, keys } from "../schema.js";

/**
 * What a key has in other tables (its roles, its permissions, its rate limits), each rule written once, in two shapes:
 * a correlated subquery per key, for any select over `keys` (key objects: one statement per page, never N+1
 * queries), and one grouped subquery for a whole batch of keys (`keyAggregatesOf`, the verification lookup).
 *
 * Each rule is a FROM … WHERE that takes which keys it is about (`KeysOf`: a condition on the column holding a key's
 * id), and the aggregate it folds the rows into.
 */
type KeysOf = (keyIdColumn: SQL) => SQL;

/** The one key of the outer select over `keys` (the correlated shape). */
const outerKey: KeysOf = (column) => sql`${column} = ${keys.id}`;
/** The keys whose ids are in the text[] `ids` (the grouped shape). */
const keysIn =
  (ids: SQL): KeysOf =>
  (column) =>
    sql`${column} = any(${ids})`;

const roleRows = (of: KeysOf) => sql`keys_roles kr join roles r on r.id = kr.role_id where ${of(sql`kr.key_id`)}`;
const roleNamesAggregate = sql`array_agg(r.name order by r.name)`;
/** The key's roles' ids, only to tag the cached key (verification.cache.ts): a change to one of its roles drops it. */
const roleIdsAggregate = sql`array_agg(kr.role_id)`;

const directPermissionRows = (of: KeysOf) =>
  sql`keys_permissions kp join permissions p on p.id = kp.permission_id where ${of(sql`kp.key_id`)}`;
/** Direct permissions and those reached through roles: (key_id, permission_id) pairs, each once. */
const effectivePermissionPairs = (of: KeysOf) => sql`select kp.key_id, kp.permission_id from keys_permissions kp where ${of(sql`kp.key_id`)}
    union select kr.key_id, rp.permission_id from keys_roles kr join roles_permissions rp on rp.role_id = kr.role_id
    where ${of(sql`kr.key_id`)}`;
const permissionNamesAggregate = sql`array_agg(distinct p.name order by p.name)`;
const permissionSlugsAggregate = sql`array_agg(distinct p.slug order by p.slug)`;

/** A rate limit of a key as verification reads it: the key's own, or its identity's. */
export type StoredRatelimit = {
  id: string;
  name: string;
  limit: number;
  duration: number;
  autoApply: boolean;
  owner: "key" | "identity";
};

/** A key's rate limits: its own and its identity's, each tagged with where it comes from (`StoredRatelimit`). */
const ratelimitsAggregate = sql`json_agg(json_build_object('id', rl.id, 'name', rl.name, 'limit', rl."limit",
    'duration', rl.duration, 'autoApply', rl.auto_apply, 'owner', case when rl.key_id is not null then 'key' else 'identity' end))`;

export const keyRoleNames = sql<string[]>`coalesce((select ${roleNamesAggregate} from ${roleRows(outerKey)}), '{}')`;

/** The key's own permissions, by name (what getKey lists). */
export const keyDirectPermissionNames = sql<string[]>`coalesce((
  select ${permissionNamesAggregate} from ${directPermissionRows(outerKey)}), '{}')`;

/** Direct permissions and those reached through roles, as slugs, each once (what verification and listKeys use). */
export const keyEffectivePermissionSlugs = sql<string[]>`coalesce((
  select ${permissionSlugsAggregate} from permissions p where p.id in (
    select pairs.permission_id from (${effectivePermissionPairs(outerKey)}) pairs)), '{}')`;

/**
 * The same, for every key of a batch at once, with the key's identity: `matched` names a CTE of `keys` rows (the
 * batch), and the answer is the CTEs to put after it in the same WITH (`ctes`) and what to select and join from them
 * (`columns`, `joins`, on `matched.id`), each column null when the key has none (coalesce it). One index scan per
 * table for the whole batch (`key_id = any(…)` on each table's key index) instead of one per key and column: on the
 * embedded store, where the statement runs on keyhaven's own thread, the verification lookup's correlated
 * subqueries took about half of a batch's time, and a join of `identities` per key a system call per key (PGlite
 * asks the file's size each time it starts an index scan of a table; issue 13 §2, docs/benchmarks.md).
 */
export function keyAggregatesOf(matched: SQL): { ctes: SQL; columns: SQL; joins: SQL } {
  const ids = sql`(select key_ids from batch_ids)::text[]`;
  const identityIds = sql`(select identity_ids from batch_ids)::text[]`;
  const of = keysIn(ids);
  const ctes = sql`batch_ids as (select array_agg(id) as key_ids,
      array_agg(identity_id) filter (where identity_id is not null) as identity_ids from ${matched}),
    batch_roles as (select kr.key_id, ${roleNamesAggregate} as names, ${roleIdsAggregate} as ids from ${roleRows(of)}
      group by kr.key_id),
    batch_permissions as (select pairs.key_id, ${permissionSlugsAggregate} as slugs
      from (${effectivePermissionPairs(of)}) pairs join permissions p on p.id = pairs.permission_id group by pairs.key_id),
    batch_ratelimits as (select rl.for_key as key_id, ${ratelimitsAggregate} as list
      from (select rl.key_id as for_key, rl.* from ratelimits rl where ${of(sql`rl.key_id`)}
        union all select m.id, rl.* from ${matched} m join ratelimits rl on rl.identity_id = m.identity_id
        where rl.identity_id = any(${identityIds})) rl
      group by rl.for_key),
    batch_identities as materialized (select i.id, i.external_id, i.meta from identities i where i.id = any(${identityIds}))`;
  const columns = sql`batch_roles.names as role_names, batch_roles.ids as role_ids,
    batch_permissions.slugs as permission_slugs, batch_ratelimits.list as ratelimits,
    batch_identities.id as identity_found_id, batch_identities.external_id as identity_external_id,
    batch_identities.meta as identity_meta`;
  const joins = sql`left join batch_roles on batch_roles.key_id = ${matched}.id
    left join batch_permissions on batch_permissions.key_id = ${matched}.id
    left join batch_ratelimits on batch_ratelimits.key_id = ${matched}.id
    left join batch_identities on batch_identities.id = ${matched}.identity_id`;
  return { ctes, columns, joins };
}

/** keyAggregatesOf's columns, read from the subquery named `keys` that selected them. */
export const batchKeyAggregates = {
  roles: sql<string[]>`coalesce("keys"."role_names", '{}')`,
  roleIds: sql<string[]>`coalesce("keys"."role_ids", '{}')`,
  ratelimits: sql<StoredRatelimit[]>`coalesce("keys"."ratelimits", '[]')`,
  permissions: sql<string[]>`coalesce("keys"."permission_slugs", '{}')`,
  // The key's identity (null: none, or gone), read once for the batch as its rate limits are.
  identityId: sql<string | null>`"keys"."identity_found_id"`,
  identityExternalId: sql<string | null>`"keys"."identity_external_id"`,
  identityMeta: sql<(typeof identities.$inferSelect)["meta"] | null>`"keys"."identity_meta"`.mapWith(identities.meta),
};
