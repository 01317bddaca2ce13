import { and, eq, getTableColumns, or, type SQL, sql } from "drizzle-orm";
import { insertRecordset, textArray } from "../bulk.js";
import { containsLiteral } from "../search.js";
import { type Db, preparedPerHandle, rowsOf } from "../client.js";
import { auditLog, permissions, roles, rolesPermissions } from "../schema.js";
import { NotFoundError } from "../../errors.js";
import { rootKeyStillGrantsFor, type WriteGuard } from "../rootKeys/rootKeys.auth.repository.js";
import { newId } from "../../ids.js";

export async function insertPermission(
  db: Db,
  input: { workspaceId: string; name: string; slug: string; description?: string | undefined },
  now: number,
): Promise<string> {
  const id = newId("perm");
  await db.insert(permissions).values({ id, ...input, description: input.description || null, createdAtM: now });
  return id;
}

export async function insertRole(
  db: Db,
  input: { workspaceId: string; name: string; description?: string | undefined },
  now: number,
): Promise<string> {
  const id = newId("role");
  await db.insert(roles).values({ id, ...input, description: input.description || null, createdAtM: now });
  return id;
}

/**
 * Roles of the workspace with one of these ids or names (one parameter each list, however long). `lockForShare`
 * locks them (in id order, so concurrent callers cannot deadlock) until the caller's transaction ends, so a
 * concurrent delete waits. The one lookup of roles by name: keys.createKey, the key RBAC routes and the imports.
 */
export async function findRolesByIdOrName(
  db: Db,
  workspaceId: string,
  ids: string[],
  names: string[],
  { lockForShare = false } = {},
): Promise<{ id: string; name: string }[]> {
  if (ids.length === 0 && names.length === 0) return [];
  const query = db
    .select({ id: roles.id, name: roles.name })
    .from(roles)
    .where(
      and(
        eq(roles.workspaceId, workspaceId),
        or(
          ids.length > 0 ? sql`${roles.id} = any(${textArray(ids)})` : undefined,
          names.length > 0 ? sql`${roles.name} = any(${textArray(names)})` : undefined,
        ),
      ),
    )
    .orderBy(roles.id);
  return lockForShare ? query.for("share") : query;
}

/** Role ids by name in the workspace (names are unique per workspace). */
export async function findRoleIdsByName(db: Db, workspaceId: string, names: string[]): Promise<Map<string, string>> {
  const rows = await findRolesByIdOrName(db, workspaceId, [], names);
  return new Map(rows.map((r) => [r.name, r.id]));
}

/**
 * Permission ids by name in the workspace, as v1's import names them (`lockForShare`: locked as findRolesByIdOrName's). Names are not unique (slugs are); when several
 * permissions share a name, the one whose slug equals the name wins, else the oldest, so the choice never changes
 * between calls.
 */
export async function findPermissionIdsByName(
  db: Db,
  workspaceId: string,
  names: string[],
  { lockForShare = false } = {},
): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const query = db
    .select({ id: permissions.id, name: permissions.name, slug: permissions.slug, createdAtM: permissions.createdAtM })
    .from(permissions)
    .where(and(eq(permissions.workspaceId, workspaceId), sql`${permissions.name} = any(${textArray(names)})`))
    .orderBy(permissions.createdAtM, permissions.id);
  // Every permission of these names is locked (a name may be shared): shared locks never wait for each other.
  const rows = lockForShare ? await query.for("share") : await query;
  const byName = new Map<string, string>();
  for (const r of rows) {
    if (!byName.has(r.name) || r.slug === r.name) byName.set(r.name, r.id);
  }
  return byName;
}

/** The names among `wanted` that `found` lacks, each once, in request order. */
export function missingNames(wanted: Iterable<string>, found: { has(name: string): boolean }): string[] {
  return [...new Set(wanted)].filter((n) => !found.has(n));
}

/**
 * Creates the roles of these names that the workspace lacks; a concurrent creation of the same name is no error.
 * One parameter per statement of at most MAX_ROWS_PER_STATEMENT roles (insertRecordset): a multi-row VALUES took
 * four parameters a role, and 8,192 new roles made a statement the embedded store cannot answer (client.ts).
 */
export async function createMissingRoles(db: Db, workspaceId: string, names: string[], now: number): Promise<void> {
  if (names.length === 0) return;
  // Inserted in one fixed order, so that concurrent creates of the same new roles cannot deadlock.
  await insertRecordset(
    db,
    roles,
    [...new Set(names)].sort().map((name) => ({ id: newId("role"), workspaceId, name, createdAtM: now })),
    sql.raw(`on conflict ("${roles.workspaceId.name}", "${roles.name.name}") do nothing`),
  );
}

/**
 * createMissingRoles, answering the roles this call created (not those that existed or that a concurrent call
 * created first): what an audit entry of their creation names.
 */
export async function insertMissingRoles(
  db: Db,
  workspaceId: string,
  names: string[],
  now: number,
): Promise<{ id: string; name: string }[]> {
  if (names.length === 0) return [];
  return insertRecordset<typeof roles, { id: string; name: string }>(
    db,
    roles,
    [...new Set(names)].sort().map((name) => ({ id: newId("role"), workspaceId, name, createdAtM: now })),
    sql.raw(`on conflict ("${roles.workspaceId.name}", "${roles.name.name}") do nothing returning id, name`),
  );
}

/** Creates the permissions of these slugs (name = slug) that the workspace lacks, like createMissingRoles. */
export async function createMissingPermissions(db: Db, workspaceId: string, slugs: string[], now: number): Promise<void> {
  await insertMissingPermissions(db, workspaceId, slugs, now);
}

/**
 * createMissingPermissions, answering the permissions this call created (not those that existed or that a concurrent
 * call created first), by slug: what an audit entry of their creation names.
 */
export async function insertMissingPermissions(
  db: Db,
  workspaceId: string,
  slugs: string[],
  now: number,
): Promise<{ id: string; slug: string }[]> {
  if (slugs.length === 0) return [];
  return insertRecordset<typeof permissions, { id: string; slug: string }>(
    db,
    permissions,
    [...new Set(slugs)].sort().map((slug) => ({ id: newId("perm"), workspaceId, name: slug, slug, createdAtM: now })),
    sql.raw(`on conflict ("${permissions.workspaceId.name}", "${permissions.slug.name}") do nothing returning id, slug`),
  );
}

/**
 * The role with this name, created when missing, and locked against deletion until the transaction ends;
 * undefined when a concurrent delete removed it meanwhile.
 */
export async function ensureRole(db: Db, workspaceId: string, name: string, now: number): Promise<string | undefined> {
  await createMissingRoles(db, workspaceId, [name], now);
  const [row] = await findRolesByIdOrName(db, workspaceId, [], [name], { lockForShare: true });
  return row?.id;
}

/** The permission with this slug, created (name = slug) when missing, and locked like ensureRole's role. */
export async function ensurePermission(db: Db, workspaceId: string, slug: string, now: number): Promise<string | undefined> {
  await createMissingPermissions(db, workspaceId, [slug], now);
  const [row] = await findPermissionsByIdOrSlug(db, workspaceId, [], [slug], { lockForShare: true });
  return row?.id;
}

// ---- permissions.get/list/deletePermission, permissions.get/list/deleteRole, role <-> permission links ----

export type PermissionRow = { id: string; name: string; slug: string; description: string | null };
export type RoleRow = { id: string; name: string; description: string | null };

const permissionColumns = {
  id: permissions.id,
  name: permissions.name,
  slug: permissions.slug,
  description: permissions.description,
};
const roleColumns = { id: roles.id, name: roles.name, description: roles.description };

/** The permission with this id in the workspace; one of another workspace is not found. */
export async function findPermission(db: Db, workspaceId: string, id: string): Promise<PermissionRow | undefined> {
  const [row] = await findPermissionStatement(db).execute({ workspaceId, id });
  return row;
}

const findPermissionStatement = preparedPerHandle((db) =>
  db
    .select(permissionColumns)
    .from(permissions)
    .where(and(eq(permissions.workspaceId, sql.placeholder("workspaceId")), eq(permissions.id, sql.placeholder("id"))))
    .prepare("keyhaven_find_permission"),
);

/** Every permission of the workspace, oldest first. */
export async function listWorkspacePermissions(db: Db, workspaceId: string): Promise<PermissionRow[]> {
  return db
    .select(permissionColumns)
    .from(permissions)
    .where(eq(permissions.workspaceId, workspaceId))
    .orderBy(permissions.createdAtM, permissions.id);
}

/**
 * Deletes the permission; its links to keys and roles go with it in the same statement (the foreign keys of
 * keys_permissions and roles_permissions cascade). Answers what was deleted; undefined when the workspace has no such
 * permission.
 */
export async function deletePermission(db: Db, workspaceId: string, id: string): Promise<PermissionRow | undefined> {
  const [row] = await db
    .delete(permissions)
    .where(and(eq(permissions.workspaceId, workspaceId), eq(permissions.id, id)))
    .returning(permissionColumns);
  return row;
}

/** The role with this id in the workspace; one of another workspace is not found. */
export async function findRole(db: Db, workspaceId: string, id: string): Promise<RoleRow | undefined> {
  const [row] = await findRoleStatement(db).execute({ workspaceId, id });
  return row;
}

const findRoleStatement = preparedPerHandle((db) =>
  db
    .select(roleColumns)
    .from(roles)
    .where(and(eq(roles.workspaceId, sql.placeholder("workspaceId")), eq(roles.id, sql.placeholder("id"))))
    .prepare("keyhaven_find_role"),
);

/** Every role of the workspace, oldest first. */
export async function listWorkspaceRoles(db: Db, workspaceId: string): Promise<RoleRow[]> {
  return db.select(roleColumns).from(roles).where(eq(roles.workspaceId, workspaceId)).orderBy(roles.createdAtM, roles.id);
}

/**
 * Deletes the role; its links in keys_roles and roles_permissions cascade in the same statement. Answers what was
 * deleted; undefined when the workspace has no such role.
 */
export async function deleteRole(db: Db, workspaceId: string, id: string): Promise<RoleRow | undefined> {
  const [row] = await db
    .delete(roles)
    .where(and(eq(roles.workspaceId, workspaceId), eq(roles.id, id)))
    .returning(roleColumns);
  return row;
}

/** A permission named by id, or else by slug. */
export type PermissionRef = { id?: string | undefined; slug?: string | undefined };

/**
 * Permissions of the workspace with one of these ids or slugs. `lockForShare` locks them (in id order, so
 * concurrent callers cannot deadlock) until the caller's transaction ends, so a concurrent delete waits.
 */
export async function findPermissionsByIdOrSlug(
  db: Db,
  workspaceId: string,
  ids: string[],
  slugs: string[],
  { lockForShare = false } = {},
) {
  if (ids.length === 0 && slugs.length === 0) return [];
  const query = db
    .select({ id: permissions.id, slug: permissions.slug, name: permissions.name })
    .from(permissions)
    .where(
      and(
        eq(permissions.workspaceId, workspaceId),
        or(
          ids.length > 0 ? sql`${permissions.id} = any(${textArray(ids)})` : undefined,
          slugs.length > 0 ? sql`${permissions.slug} = any(${textArray(slugs)})` : undefined,
        ),
      ),
    )
    .orderBy(permissions.id);
  return lockForShare ? query.for("share") : query;
}

/** An audit row as the write gate builds it (core/changes.ts), for a change this repository writes in one statement. */
export type AuditRowOf = typeof auditLog.$inferInsert;

/**
 * Connects (`add`) or disconnects (`remove`) permissions and a role, in one statement (one round trip: it was a
 * transaction of five, and a role change is one of the writes that verification shares the event loop with, issue
 * 13 §1). The role and the permissions are locked FOR SHARE first (the permissions in id order, so concurrent callers
 * cannot deadlock), so a concurrent delete of either waits rather than breaking a foreign key; the change is made
 * only when the role and every permission named were found. Throws NOT_FOUND for a role or a permission that the
 * workspace does not have; then nothing changes. With a `guard` (a root key authorized from memory, core Principal's
 * writeGuard), the role is found only while that root key still grants what it did (rootKeyStillGrants): otherwise
 * nothing changes, and the NOT_FOUND makes authorizeWrite authenticate again and answer as for a fresh root key.
 * The same statement writes `audit` (the write gate's rows) when it changed a link, with their targets made the role
 * (by id and name) and the permissions it connected or disconnected (by id and slug): none when nothing changed.
 * Answers how many links changed.
 */
export async function changeRolePermissions(
  db: Db,
  workspaceId: string,
  roleId: string,
  refs: PermissionRef[],
  change: "add" | "remove",
  now: number,
  guard: WriteGuard | undefined,
  audit: AuditRowOf[],
): Promise<number> {
  const ids = [...new Set(refs.flatMap((r) => (r.id !== undefined ? [r.id] : [])))];
  const slugs = [...new Set(refs.flatMap((r) => (r.id === undefined && r.slug !== undefined ? [r.slug] : [])))];
  const complete = sql`(select count(*) from role) = 1
    and not exists (select 1 from unnest(${textArray(ids)}) as asked(id) where asked.id not in (select id from found))
    and not exists (select 1 from unnest(${textArray(slugs)}) as asked(slug) where asked.slug not in (select slug from found))`;
  const write =
    change === "add"
      ? sql`insert into ${rolesPermissions} (role_id, permission_id, workspace_id, created_at_m)
          select ${roleId}, found.id, ${workspaceId}, ${now} from found where ${complete}
          on conflict do nothing returning permission_id`
      : sql`delete from ${rolesPermissions}
          where ${rolesPermissions.roleId} = ${roleId} and ${rolesPermissions.permissionId} in (select id from found) and ${complete}
          returning permission_id`;
  const targets = sql`jsonb_build_array(jsonb_build_object('type', 'role', 'id', (select id from role), 'name', (select name from role)))
    || coalesce((select jsonb_agg(jsonb_build_object('type', 'permission', 'id', found.id, 'name', found.slug) order by found.id)
      from found where found.id in (select permission_id from changed)), '[]'::jsonb)`;
  const [row] = rowsOf<{ role: string | null; changed: number | string; ids: string[]; slugs: string[] }>(
    await db.execute(sql`with role as (
        select ${roles.id}, ${roles.name} from ${roles} where ${roles.workspaceId} = ${workspaceId} and ${roles.id} = ${roleId}
          and ${rootKeyStillGrantsFor(guard)} for share),
      found as (
        select ${permissions.id}, ${permissions.slug} from ${permissions}
        where ${permissions.workspaceId} = ${workspaceId}
          and (${permissions.id} = any(${textArray(ids)}) or ${permissions.slug} = any(${textArray(slugs)}))
        order by ${permissions.id} for share),
      changed as (${write}),
      audited as (${insertAuditRows(audit, targets, sql`exists (select 1 from changed)`)})
      select (select id from role) as role, (select count(*) from changed) as changed,
        array(select id from found) as ids, array(select slug from found) as slugs`),
  );
  if (!row?.role) throw new NotFoundError("role", roleId);
  const foundIds = new Set(row.ids);
  const foundSlugs = new Set(row.slugs);
  const missingId = ids.find((id) => !foundIds.has(id));
  if (missingId !== undefined) throw new NotFoundError("permission", missingId);
  const missingSlug = slugs.find((s) => !foundSlugs.has(s));
  if (missingSlug !== undefined) {
    throw new NotFoundError("permission", missingSlug, `permission with slug "${missingSlug}" not found`);
  }
  return Number(row.changed);
}

/**
 * An `insert into audit_log … select` of `rows` for a data-modifying CTE (one parameter: the rows as JSON, as
 * insertRecordset sends them), with `targets` computed by the statement and only `when` it holds. Every column but
 * the targets comes from the rows, by schema.ts's names and types.
 */
function insertAuditRows(rows: AuditRowOf[], targets: SQL, when: SQL): SQL {
  const used = Object.entries(getTableColumns(auditLog)).filter(([field]) => field !== "targets");
  const list = sql.raw(used.map(([, column]) => `"${column.name}"`).join(", "));
  const selected = sql.raw(used.map(([field]) => `r."${field}"`).join(", "));
  const definitions = sql.raw(used.map(([field, column]) => `"${field}" ${column.getSQLType()}`).join(", "));
  return sql`insert into ${auditLog} (${list}, "${sql.raw(auditLog.targets.name)}")
    select ${selected}, ${targets} from json_to_recordset(${JSON.stringify(rows)}::json) as r(${definitions})
    where ${when} returning 1`;
}

// ---- pages by id (v2's lists), lookups by id or name/slug in one string (v2's getters) ----

/** What a page starts from and holds: ids from `fromId` (inclusive) on, at most `limit` rows, matching `search`. */
export type PageRequest = { fromId?: string | undefined; limit: number; search?: string | undefined };

/** A page of the workspace's permissions by id: `search` matches id, name, slug or description, case-insensitively. */
export async function listPermissionsPage(db: Db, workspaceId: string, page: PageRequest): Promise<PermissionRow[]> {
  const pattern = page.search ? containsLiteral(page.search) : undefined;
  return db
    .select(permissionColumns)
    .from(permissions)
    .where(
      and(
        eq(permissions.workspaceId, workspaceId),
        page.fromId !== undefined ? sql`${permissions.id} >= ${page.fromId}` : undefined,
        pattern !== undefined
          ? sql`(${permissions.id} ilike ${pattern} escape '\\' or ${permissions.name} ilike ${pattern} escape '\\'
              or ${permissions.slug} ilike ${pattern} escape '\\' or ${permissions.description} ilike ${pattern} escape '\\')`
          : undefined,
      ),
    )
    .orderBy(permissions.id)
    .limit(page.limit);
}

/** A page of the workspace's roles by id: `search` matches id, name or description, case-insensitively. */
export async function listRolesPage(db: Db, workspaceId: string, page: PageRequest): Promise<RoleRow[]> {
  const pattern = page.search ? containsLiteral(page.search) : undefined;
  return db
    .select(roleColumns)
    .from(roles)
    .where(
      and(
        eq(roles.workspaceId, workspaceId),
        page.fromId !== undefined ? sql`${roles.id} >= ${page.fromId}` : undefined,
        pattern !== undefined
          ? sql`(${roles.id} ilike ${pattern} escape '\\' or ${roles.name} ilike ${pattern} escape '\\'
              or ${roles.description} ilike ${pattern} escape '\\')`
          : undefined,
      ),
    )
    .orderBy(roles.id)
    .limit(page.limit);
}

/** The permission whose id, or else whose slug, is `ref`, in the workspace. */
export async function findPermissionByIdOrSlug(db: Db, workspaceId: string, ref: string): Promise<PermissionRow | undefined> {
  const rows = await db
    .select(permissionColumns)
    .from(permissions)
    .where(and(eq(permissions.workspaceId, workspaceId), or(eq(permissions.id, ref), eq(permissions.slug, ref))));
  return rows.find((r) => r.id === ref) ?? rows[0];
}

/** The role whose id, or else whose name, is `ref`, in the workspace. */
export async function findRoleByIdOrName(db: Db, workspaceId: string, ref: string): Promise<RoleRow | undefined> {
  const rows = await db
    .select(roleColumns)
    .from(roles)
    .where(and(eq(roles.workspaceId, workspaceId), or(eq(roles.id, ref), eq(roles.name, ref))));
  return rows.find((r) => r.id === ref) ?? rows[0];
}

/** The permissions of each role, by role id (a role without any is absent), each list by slug. */
export async function permissionsOfRoles(db: Db, roleIds: string[]): Promise<Map<string, PermissionRow[]>> {
  if (roleIds.length === 0) return new Map();
  const rows = await db
    .select({ roleId: rolesPermissions.roleId, ...permissionColumns })
    .from(rolesPermissions)
    .innerJoin(permissions, eq(permissions.id, rolesPermissions.permissionId))
    .where(sql`${rolesPermissions.roleId} = any(${textArray(roleIds)})`)
    .orderBy(permissions.slug);
  const byRole = new Map<string, PermissionRow[]>();
  for (const { roleId, ...permission } of rows) byRole.set(roleId, [...(byRole.get(roleId) ?? []), permission]);
  return byRole;
}

/** The role of the workspace with this id, locked against concurrent changes until the transaction ends. */
export async function lockRole(db: Db, workspaceId: string, roleId: string): Promise<RoleRow | undefined> {
  const [row] = await db
    .select(roleColumns)
    .from(roles)
    .where(and(eq(roles.workspaceId, workspaceId), eq(roles.id, roleId)))
    .for("update");
  return row;
}

/** The permissions of the workspace with these slugs, locked FOR SHARE (a concurrent delete waits), by slug. */
export async function lockPermissionsBySlug(db: Db, workspaceId: string, slugs: string[]): Promise<PermissionRow[]> {
  if (slugs.length === 0) return [];
  return db
    .select(permissionColumns)
    .from(permissions)
    .where(and(eq(permissions.workspaceId, workspaceId), sql`${permissions.slug} = any(${textArray(slugs)})`))
    .orderBy(permissions.id)
    .for("share");
}

/**
 * Makes `permissionIds` exactly the role's permissions: drops the others, adds the missing ones. Answers the ids of
 * the permissions it connected and disconnected (both empty when the role had exactly these).
 */
export async function replaceRolePermissions(
  db: Db,
  workspaceId: string,
  roleId: string,
  permissionIds: string[],
  now: number,
): Promise<{ connected: string[]; disconnected: string[] }> {
  const removed = await db
    .delete(rolesPermissions)
    .where(
      and(
        eq(rolesPermissions.roleId, roleId),
        permissionIds.length > 0 ? sql`${rolesPermissions.permissionId} <> all(${textArray(permissionIds)})` : undefined,
      ),
    )
    .returning({ permissionId: rolesPermissions.permissionId });
  const added = await insertRecordset<typeof rolesPermissions, { permission_id: string }>(
    db,
    rolesPermissions,
    permissionIds.map((permissionId) => ({ roleId, permissionId, workspaceId, createdAtM: now })),
    sql`on conflict do nothing returning permission_id`,
  );
  return { connected: added.map((r) => r.permission_id), disconnected: removed.map((r) => r.permissionId) };
}
