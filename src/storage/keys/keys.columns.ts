import { type SQL, sql } from "drizzle-orm";
import { keys } from "../schema.js";

/**
 * What a key has in other tables (its roles, its permissions, its rate limits), each rule written once, in two shapes:
 * a correlated subquery per key, for any select over `keys` (key objects: one statement per page, never N+1
 * queries), and one flat list for a whole batch of keys (`batchListsOf`, the verification lookup).
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

export const keyRoleNames = sql<string[]>`coalesce((select ${roleNamesAggregate} from ${roleRows(outerKey)}), '{}')`;

/** The key's own permissions, by name (what getKey lists). */
export const keyDirectPermissionNames = sql<string[]>`coalesce((
  select ${permissionNamesAggregate} from ${directPermissionRows(outerKey)}), '{}')`;

/** Direct permissions and those reached through roles, as slugs, each once (what verification and listKeys use). */
export const keyEffectivePermissionSlugs = sql<string[]>`coalesce((
  select ${permissionSlugsAggregate} from permissions p where p.id in (
    select pairs.permission_id from (${effectivePermissionPairs(outerKey)}) pairs)), '{}')`;

/** A key's rate limit in the batch lists (batchListsOf): whose it is (a key's id, or an identity's), then its fields. */
export type RatelimitOfBatch = [
  keyId: string | null,
  identityId: string | null,
  id: string,
  name: string,
  limit: number,
  duration: number,
  autoApply: boolean,
];

/**
 * The same, for every key of a batch at once: `ids` is a text[] of the keys' ids, `identityIds` of their identities'.
 * Each is one flat list for the whole batch, a json array of tuples that start with whose they are, which the caller
 * groups per key (keys.repository.ts, the verification lookup): the roles (key id, role id, name; by key, then name),
 * the effective permissions (key id, slug; each once, by key, then slug), the rate limits of the keys and of their
 * identities (RatelimitOfBatch), the identities (id, external id, meta). Null when empty.
 *
 * One index scan per table for the whole batch (`key_id = any(…)` on each table's key index) instead of one per key
 * and column: on the embedded store, where the statement runs on keyhaven's own thread, the lookup's correlated
 * subqueries took about half of a batch's time, and a join of `identities` per key a system call per key (PGlite asks
 * the file's size each time it starts an index scan of a table). Flat lists, not the grouped subqueries joined back
 * per key that were here before: those cost 7–9 µs more per key on PGlite and about 10 µs more of the client's CPU per
 * key on PostgreSQL, among 1,000,000 keys (issue 13 §2, docs/benchmarks.md).
 */
export function batchListsOf(ids: SQL, identityIds: SQL): { roles: SQL; permissions: SQL; ratelimits: SQL; identities: SQL } {
  const of = keysIn(ids);
  return {
    roles: sql`(select json_agg(json_build_array(kr.key_id, kr.role_id, r.name) order by kr.key_id, r.name) from ${roleRows(of)})`,
    permissions: sql`(select json_agg(json_build_array(s.key_id, s.slug) order by s.key_id, s.slug)
      from (select distinct pairs.key_id, p.slug from (${effectivePermissionPairs(of)}) pairs
        join permissions p on p.id = pairs.permission_id) s)`,
    ratelimits: sql`(select json_agg(json_build_array(rl.key_id, rl.identity_id, rl.id, rl.name, rl."limit", rl.duration, rl.auto_apply))
      from (select * from ratelimits where ${of(sql`key_id`)}
        union all select * from ratelimits where identity_id = any(${identityIds})) rl)`,
    identities: sql`(select json_agg(json_build_array(i.id, i.external_id, i.meta)) from identities i where i.id = any(${identityIds}))`,
  };
}
