import { sql } from "drizzle-orm";
import { keys } from "../schema.js";

/** Computed columns of a key, for any select over `keys`: one correlated subquery each, never N+1 queries. */

export const keyRoleNames = sql<string[]>`coalesce((
  select array_agg(r.name order by r.name) from keys_roles kr join roles r on r.id = kr.role_id
  where kr.key_id = ${keys.id}), '{}')`;

/** The key's own permissions, by name (what getKey lists). */
export const keyDirectPermissionNames = sql<string[]>`coalesce((
  select array_agg(distinct p.name order by p.name) from keys_permissions kp join permissions p on p.id = kp.permission_id
  where kp.key_id = ${keys.id}), '{}')`;

/** Direct permissions and those reached through roles, as slugs, each once (what verification and listKeys use). */
export const keyEffectivePermissionSlugs = sql<string[]>`coalesce((
  select array_agg(distinct p.slug order by p.slug) from permissions p where p.id in (
    select kp.permission_id from keys_permissions kp where kp.key_id = ${keys.id}
    union select rp.permission_id from keys_roles kr join roles_permissions rp on rp.role_id = kr.role_id
    where kr.key_id = ${keys.id})), '{}')`;
