import { type AnyColumn, and, asc, eq, gte, isNull, sql } from "drizzle-orm";
import type { PgTable } from "drizzle-orm/pg-core";
import { insertRecordset, recordsetOf, textArray } from "../bulk.js";
import { type Db, rowsOf } from "../client.js";
import { indexFirst } from "../indexFirst.js";
import {
  apis,
  encryptedKeys,
  identities,
  keys,
  keysPermissions,
  keysRoles,
  permissions,
  ratelimitNamespaces,
  ratelimitOverrides,
  ratelimits,
  roles,
  rolesPermissions,
} from "../schema.js";

// The SQL of `keyhaven import --from-unkey`'s copy (core/import/import.fromUnkey.ts): records upserted by the ids they
// had in hosted Unkey, a few set-based statements per table and request, never one per record (issue 36 wants 1,000
// keys a second). Reads by id look in every workspace (an id taken elsewhere is refused, never shown); writes are
// bounded to the caller's workspace.

const anyOf = (column: AnyColumn, values: readonly string[]) => sql`${column} = any(${textArray(values)})`;

// APIs

export type ExistingApi = { id: string; workspaceId: string; name: string; storeEncryptedKeys: boolean; deleted: boolean };

export async function findApisById(db: Db, ids: string[]): Promise<ExistingApi[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .select({
      id: apis.id,
      workspaceId: apis.workspaceId,
      name: apis.name,
      storeEncryptedKeys: apis.storeEncryptedKeys,
      deletedAtM: apis.deletedAtM,
    })
    .from(apis)
    .where(anyOf(apis.id, ids));
  return rows.map((r) => ({
    id: r.id,
    workspaceId: r.workspaceId,
    name: r.name,
    storeEncryptedKeys: r.storeEncryptedKeys,
    deleted: r.deletedAtM !== null,
  }));
}

/** Inserts the rows whose id is free (ON CONFLICT DO NOTHING); returns the ids inserted. */
async function insertFree<T extends PgTable>(tx: Db, table: T, rows: T["$inferInsert"][]): Promise<Set<string>> {
  const inserted = await insertRecordset<T, { id: string }>(tx, table, rows, sql`on conflict do nothing returning id`);
  return new Set(inserted.map((r) => r.id));
}

export const insertApis = (tx: Db, rows: (typeof apis.$inferInsert)[]) => insertFree(tx, apis, rows);

export async function updateApis(
  tx: Db,
  workspaceId: string,
  rows: { id: string; name: string; storeEncryptedKeys: boolean }[],
  now: number,
) {
  if (rows.length === 0) return;
  await tx.execute(sql`update apis as a set name = r."name", store_encrypted_keys = r."storeEncryptedKeys", updated_at_m = ${now}
    from ${recordsetOf(apis, rows, "r")}
    where a.id = r."id" and a.workspace_id = ${workspaceId} and a.deleted_at_m is null`);
}

/** The live APIs of the workspace among `ids`, held against deletion (FOR SHARE) until the transaction ends. */
export async function findLiveApisOfWorkspace(db: Db, workspaceId: string, ids: string[]) {
  if (ids.length === 0) return [];
  return db
    .select({ id: apis.id, storeEncryptedKeys: apis.storeEncryptedKeys })
    .from(apis)
    .where(and(eq(apis.workspaceId, workspaceId), isNull(apis.deletedAtM), anyOf(apis.id, ids)))
    .for("share");
}

/** Turns on store_encrypted_keys of these live APIs of the workspace. */
export async function setApisStoreEncryptedKeys(tx: Db, workspaceId: string, ids: string[], now: number): Promise<void> {
  if (ids.length === 0) return;
  await tx.execute(sql`update apis set store_encrypted_keys = true, updated_at_m = ${now}
    where workspace_id = ${workspaceId} and deleted_at_m is null and id = any(${textArray(ids)})`);
}

// Permissions and roles

export type ExistingPermission = { id: string; workspaceId: string; name: string; slug: string; description: string | null };

export async function findPermissionsById(db: Db, ids: string[]): Promise<ExistingPermission[]> {
  if (ids.length === 0) return [];
  return db
    .select({
      id: permissions.id,
      workspaceId: permissions.workspaceId,
      name: permissions.name,
      slug: permissions.slug,
      description: permissions.description,
    })
    .from(permissions)
    .where(anyOf(permissions.id, ids));
}

/** The workspace's permissions with these slugs: slug → id. */
export async function findPermissionIdsBySlug(db: Db, workspaceId: string, slugs: string[]): Promise<Map<string, string>> {
  if (slugs.length === 0) return new Map();
  const rows = await db
    .select({ id: permissions.id, slug: permissions.slug })
    .from(permissions)
    .where(and(eq(permissions.workspaceId, workspaceId), anyOf(permissions.slug, slugs)));
  return new Map(rows.map((r) => [r.slug, r.id]));
}

export const insertPermissions = (tx: Db, rows: (typeof permissions.$inferInsert)[]) => insertFree(tx, permissions, rows);

export async function updatePermissions(
  tx: Db,
  workspaceId: string,
  rows: { id: string; name: string; slug: string; description: string | null }[],
  now: number,
) {
  if (rows.length === 0) return;
  await tx.execute(sql`update permissions as p set name = r."name", slug = r."slug", description = r."description", updated_at_m = ${now}
    from ${recordsetOf(permissions, rows, "r")}
    where p.id = r."id" and p.workspace_id = ${workspaceId}`);
}

export type ExistingRole = { id: string; workspaceId: string; name: string; description: string | null; permissionIds: string[] };

export async function findRolesById(db: Db, ids: string[]): Promise<ExistingRole[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .select({ id: roles.id, workspaceId: roles.workspaceId, name: roles.name, description: roles.description })
    .from(roles)
    .where(anyOf(roles.id, ids));
  const links = await db
    .select({ roleId: rolesPermissions.roleId, permissionId: rolesPermissions.permissionId })
    .from(rolesPermissions)
    .where(anyOf(rolesPermissions.roleId, ids));
  const byRole = groupBy(
    links,
    (l) => l.roleId,
    (l) => l.permissionId,
  );
  return rows.map((r) => Object.assign(r, { permissionIds: byRole.get(r.id) ?? [] }));
}

/** The workspace's roles with these names: name → id. */
export async function findRoleIdsByName(db: Db, workspaceId: string, names: string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = await db
    .select({ id: roles.id, name: roles.name })
    .from(roles)
    .where(and(eq(roles.workspaceId, workspaceId), anyOf(roles.name, names)));
  return new Map(rows.map((r) => [r.name, r.id]));
}

export const insertRoles = (tx: Db, rows: (typeof roles.$inferInsert)[]) => insertFree(tx, roles, rows);

export async function updateRoles(
  tx: Db,
  workspaceId: string,
  rows: { id: string; name: string; description: string | null }[],
  now: number,
) {
  if (rows.length === 0) return;
  await tx.execute(sql`update roles as o set name = r."name", description = r."description", updated_at_m = ${now}
    from ${recordsetOf(roles, rows, "r")}
    where o.id = r."id" and o.workspace_id = ${workspaceId}`);
}

/** A set of links per owner (a key's roles, a role's permissions): what the owner must be linked to, exactly. */
export type OwnedSet = { owner: string; members: string[] };

const linkTables = {
  rolePermissions: { table: "roles_permissions", owner: "role_id", member: "permission_id" },
  keyRoles: { table: "keys_roles", owner: "key_id", member: "role_id" },
  keyPermissions: { table: "keys_permissions", owner: "key_id", member: "permission_id" },
  keyRatelimits: { table: "ratelimits", owner: "key_id", member: "name" },
  identityRatelimits: { table: "ratelimits", owner: "identity_id", member: "name" },
} as const;

/** Deletes every link of each owner to a member not in its set (one statement for every owner). */
export async function deleteLinksOutside(tx: Db, kind: keyof typeof linkTables, sets: OwnedSet[]): Promise<void> {
  if (sets.length === 0) return;
  const t = linkTables[kind];
  await tx.execute(sql`delete from ${sql.raw(t.table)} as t
    using json_to_recordset(${JSON.stringify(sets)}::json) as w(owner text, members json)
    where t.${sql.raw(t.owner)} = w.owner and t.${sql.raw(t.member)} <> all(array(select json_array_elements_text(w.members)))`);
}

/** Links each owner to each member of its set; links that exist stay. */
export async function insertLinks(
  tx: Db,
  kind: "rolePermissions" | "keyRoles" | "keyPermissions",
  workspaceId: string,
  sets: OwnedSet[],
  now: number,
) {
  const pairs = sets.flatMap((s) => s.members.map((m) => ({ owner: s.owner, member: m })));
  if (pairs.length === 0) return;
  const tail = sql`on conflict do nothing`;
  if (kind === "rolePermissions") {
    await insertRecordset(
      tx,
      rolesPermissions,
      pairs.map((p) => ({ roleId: p.owner, permissionId: p.member, workspaceId, createdAtM: now })),
      tail,
    );
  } else if (kind === "keyRoles") {
    await insertRecordset(
      tx,
      keysRoles,
      pairs.map((p) => ({ keyId: p.owner, roleId: p.member, workspaceId, createdAtM: now })),
      tail,
    );
  } else {
    await insertRecordset(
      tx,
      keysPermissions,
      pairs.map((p) => ({ keyId: p.owner, permissionId: p.member, workspaceId, createdAtM: now })),
      tail,
    );
  }
}

// Identities

export type ExistingIdentity = { id: string; workspaceId: string; externalId: string; meta: unknown };

export async function findIdentitiesById(db: Db, ids: string[]): Promise<ExistingIdentity[]> {
  if (ids.length === 0) return [];
  return db
    .select({ id: identities.id, workspaceId: identities.workspaceId, externalId: identities.externalId, meta: identities.meta })
    .from(identities)
    .where(anyOf(identities.id, ids));
}

/** The workspace's identities with these externalIds: externalId → id. */
export async function findIdentityIdsByExternalId(db: Db, workspaceId: string, externalIds: string[]): Promise<Map<string, string>> {
  if (externalIds.length === 0) return new Map();
  const rows = await db
    .select({ id: identities.id, externalId: identities.externalId })
    .from(identities)
    .where(and(eq(identities.workspaceId, workspaceId), anyOf(identities.externalId, externalIds)));
  return new Map(rows.map((r) => [r.externalId, r.id]));
}

/** The workspace's identities among `ids`: id → externalId. */
export async function findIdentitiesOfWorkspace(db: Db, workspaceId: string, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .select({ id: identities.id, externalId: identities.externalId })
    .from(identities)
    .where(and(eq(identities.workspaceId, workspaceId), anyOf(identities.id, ids)));
  return new Map(rows.map((r) => [r.id, r.externalId]));
}

export const insertIdentities = (tx: Db, rows: (typeof identities.$inferInsert)[]) => insertFree(tx, identities, rows);

export async function updateIdentities(
  tx: Db,
  workspaceId: string,
  rows: { id: string; externalId: string; meta: unknown }[],
  now: number,
) {
  if (rows.length === 0) return;
  await tx.execute(sql`update identities as i set external_id = r."externalId", meta = r."meta", updated_at_m = ${now}
    from ${recordsetOf(identities, rows, "r")}
    where i.id = r."id" and i.workspace_id = ${workspaceId}`);
}

export type OwnedRatelimit = { owner: string; name: string; limit: number; duration: number; autoApply: boolean };

/**
 * Makes each owner's (a key's or an identity's) rate limits exactly its set, by name: limits not named are deleted,
 * named ones that exist updated in place (ids kept), the others inserted. Three statements for every owner.
 */
export async function replaceOwnedRatelimits(
  tx: Db,
  owner: "key" | "identity",
  workspaceId: string,
  sets: { owner: string; limits: OwnedRatelimit[] }[],
  now: number,
  newId: () => string,
): Promise<void> {
  if (sets.length === 0) return;
  await deleteLinksOutside(
    tx,
    owner === "key" ? "keyRatelimits" : "identityRatelimits",
    sets.map((s) => ({ owner: s.owner, members: s.limits.map((l) => l.name) })),
  );
  const rows = sets.flatMap((s) =>
    s.limits.map((l) => ({
      id: newId(),
      workspaceId,
      name: l.name,
      ...(owner === "key" ? { keyId: s.owner } : { identityId: s.owner }),
      limit: l.limit,
      duration: l.duration,
      autoApply: l.autoApply,
      createdAtM: now,
    })),
  );
  if (rows.length === 0) return;
  await insertRecordset(
    tx,
    ratelimits,
    rows,
    sql`on conflict (${sql.raw(owner === "key" ? "key_id" : "identity_id")}, name) do update
      set "limit" = excluded."limit", duration = excluded.duration, auto_apply = excluded.auto_apply, updated_at_m = excluded.created_at_m`,
  );
}

// Keys

/** A key as the copy compares it; `hash` is read to tell pending from verifiable and never leaves the core. */
export type ExistingKey = {
  id: string;
  workspaceId: string;
  apiId: string;
  hash: string | null;
  deleted: boolean;
  start: string;
  name: string | null;
  meta: unknown;
  expires: Date | null;
  remaining: number | null;
  refillDay: number | null;
  refillAmount: number | null;
  lastRefillAt: Date | null;
  enabled: boolean;
  identityId: string | null;
  ownerId: string | null;
  createdAtM: number;
  encrypted: boolean;
  roleIds: string[];
  permissionIds: string[];
};

export async function findKeysById(db: Db, ids: string[]): Promise<ExistingKey[]> {
  if (ids.length === 0) return [];
  const [rows, roleLinks, permissionLinks, sealed] = await Promise.all([
    db
      .select({
        id: keys.id,
        workspaceId: keys.workspaceId,
        apiId: keys.apiId,
        hash: keys.hash,
        deletedAtM: keys.deletedAtM,
        start: keys.start,
        name: keys.name,
        meta: keys.meta,
        expires: keys.expires,
        remaining: keys.remaining,
        refillDay: keys.refillDay,
        refillAmount: keys.refillAmount,
        lastRefillAt: keys.lastRefillAt,
        enabled: keys.enabled,
        identityId: keys.identityId,
        ownerId: keys.ownerId,
        createdAtM: keys.createdAtM,
      })
      .from(indexFirst(keys, anyOf(keys.id, ids))),
    db.select({ keyId: keysRoles.keyId, id: keysRoles.roleId }).from(keysRoles).where(anyOf(keysRoles.keyId, ids)),
    db
      .select({ keyId: keysPermissions.keyId, id: keysPermissions.permissionId })
      .from(keysPermissions)
      .where(anyOf(keysPermissions.keyId, ids)),
    db.select({ keyId: encryptedKeys.keyId }).from(encryptedKeys).where(anyOf(encryptedKeys.keyId, ids)),
  ]);
  const rolesOf = groupBy(
    roleLinks,
    (l) => l.keyId,
    (l) => l.id,
  );
  const permissionsOf = groupBy(
    permissionLinks,
    (l) => l.keyId,
    (l) => l.id,
  );
  const encrypted = new Set(sealed.map((s) => s.keyId));
  return rows.map(({ deletedAtM, ...r }) =>
    Object.assign(r, {
      deleted: deletedAtM !== null,
      encrypted: encrypted.has(r.id),
      roleIds: rolesOf.get(r.id) ?? [],
      permissionIds: permissionsOf.get(r.id) ?? [],
    }),
  );
}

/** Which key (of any workspace) holds each of these hashes: hash → key id. */
export async function findKeyIdsByHash(db: Db, hashes: string[]): Promise<Map<string, string>> {
  if (hashes.length === 0) return new Map();
  const rows = await db.select({ id: keys.id, hash: keys.hash }).from(indexFirst(keys, anyOf(keys.hash, hashes)));
  return new Map(rows.map((r) => [r.hash as string, r.id]));
}

/** Inserts the keys whose id and hash are free, in live APIs of their workspace; returns the ids inserted. */
export const insertKeys = (tx: Db, rows: (typeof keys.$inferInsert)[]) => insertFree(tx, keys, rows);

export type KeyUpdate = Pick<
  typeof keys.$inferInsert,
  | "start"
  | "name"
  | "meta"
  | "expires"
  | "remaining"
  | "refillDay"
  | "refillAmount"
  | "lastRefillAt"
  | "enabled"
  | "identityId"
  | "ownerId"
  | "createdAtM"
> & { id: string; hash: string | null };

/**
 * Updates the live keys of the workspace to these rows. A hash is only ever set on a pending key (hash null): a key
 * that has one keeps it. Returns the ids updated.
 */
export async function updateKeys(tx: Db, workspaceId: string, rows: KeyUpdate[], now: number): Promise<Set<string>> {
  if (rows.length === 0) return new Set();
  const updated = rowsOf<{ id: string }>(
    await tx.execute(sql`update keys as k set
        hash = coalesce(k.hash, r."hash"), start = r."start", name = r."name", meta = r."meta", expires = r."expires",
        remaining_requests = r."remaining", refill_day = r."refillDay", refill_amount = r."refillAmount",
        last_refill_at = r."lastRefillAt", enabled = r."enabled", identity_id = r."identityId",
        owner_id = r."ownerId", created_at_m = r."createdAtM", updated_at_m = ${now}
      from ${recordsetOf(keys, rows, "r")}
      where k.id = r."id" and k.workspace_id = ${workspaceId} and k.deleted_at_m is null
      returning k.id`),
  );
  return new Set(updated.map((r) => r.id));
}

export async function insertEncryptedCopies(tx: Db, rows: (typeof encryptedKeys.$inferInsert)[]): Promise<void> {
  await insertRecordset(tx, encryptedKeys, rows, sql`on conflict do nothing`);
}

/** Of these keys of the workspace, how many are verifiable (have a hash) and how many pending. */
export async function countKeyStates(db: Db, workspaceId: string, ids: string[]): Promise<{ verifiable: number; pending: number }> {
  if (ids.length === 0) return { verifiable: 0, pending: 0 };
  const [row] = await db
    .select({
      verifiable: sql<number>`count(*) filter (where ${keys.hash} is not null)::int`,
      pending: sql<number>`count(*) filter (where ${keys.hash} is null)::int`,
    })
    // By id first (indexFirst): right after a bulk copy, before anything analysed the table, the planner would read
    // the workspace's every key through another index and filter them by id (287 ms for 30,000 keys).
    .from(indexFirst(keys, anyOf(keys.id, ids)))
    .where(and(eq(keys.workspaceId, workspaceId), isNull(keys.deletedAtM)));
  return { verifiable: Number(row?.verifiable ?? 0), pending: Number(row?.pending ?? 0) };
}

// Rate-limit overrides

/** The workspace's live namespaces with these names: name → id. */
export async function findNamespaceIdsByName(db: Db, workspaceId: string, names: string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const n = ratelimitNamespaces;
  const rows = await db
    .select({ id: n.id, name: n.name })
    .from(n)
    .where(and(eq(n.workspaceId, workspaceId), isNull(n.deletedAtM), anyOf(n.name, names)));
  return new Map(rows.map((r) => [r.name, r.id]));
}

export async function insertNamespaces(tx: Db, rows: (typeof ratelimitNamespaces.$inferInsert)[]): Promise<void> {
  await insertRecordset(tx, ratelimitNamespaces, rows, sql`on conflict do nothing`);
}

export type ExistingOverride = { id: string; namespaceId: string; identifier: string; limit: number; duration: number; deleted: boolean };

/** The overrides (deleted ones included) of these namespaces and identifiers. */
export async function findOverrides(db: Db, pairs: { namespaceId: string; identifier: string }[]): Promise<ExistingOverride[]> {
  if (pairs.length === 0) return [];
  const o = ratelimitOverrides;
  const rows = rowsOf<{ id: string; namespace_id: string; identifier: string; limit: number; duration: string | number; deleted: boolean }>(
    await db.execute(sql`select o.id, o.namespace_id, o.identifier, o."limit", o.duration, o.deleted_at_m is not null as deleted
      from ${o} as o join json_to_recordset(${JSON.stringify(pairs)}::json) as w("namespaceId" text, identifier text)
        on o.namespace_id = w."namespaceId" and o.identifier = w.identifier`),
  );
  return rows.map((r) => ({
    id: r.id,
    namespaceId: r.namespace_id,
    identifier: r.identifier,
    limit: Number(r.limit),
    duration: Number(r.duration),
    deleted: r.deleted,
  }));
}

/** Creates each override, or updates (and revives) the one of its namespace and identifier. */
export async function upsertOverrides(tx: Db, rows: (typeof ratelimitOverrides.$inferInsert)[]): Promise<void> {
  await insertRecordset(
    tx,
    ratelimitOverrides,
    rows,
    sql`on conflict (namespace_id, identifier) do update
      set "limit" = excluded."limit", duration = excluded.duration, updated_at_m = excluded.created_at_m, deleted_at_m = null`,
  );
}

// Reads of the copy's progress (keyhaven.getCopyStatus, keyhaven.listPendingKeys)

export type CopyStatusRow = { apiId: string; keys: number; pending: number; adopted: number };

/** Per live API of the workspace among `apiIds`: its live keys, pending ones (no hash) and adopted ones. */
export async function countCopyStatus(db: Db, workspaceId: string, apiIds: string[]): Promise<Map<string, CopyStatusRow>> {
  const rows = rowsOf<{ api_id: string; keys: number | string; pending: number | string; adopted: number | string }>(
    await db.execute(sql`select a.id as api_id,
        count(k.id) as keys,
        count(k.id) filter (where k.hash is null) as pending,
        count(k.id) filter (where k.adopted_at_m is not null) as adopted
      from apis a left join keys k on k.api_id = a.id and k.deleted_at_m is null
      where a.workspace_id = ${workspaceId} and a.deleted_at_m is null and a.id = any(${textArray(apiIds)})
      group by a.id`),
  );
  return new Map(
    rows.map((r) => [r.api_id, { apiId: r.api_id, keys: Number(r.keys), pending: Number(r.pending), adopted: Number(r.adopted) }]),
  );
}

export type PendingKeyRow = { id: string; start: string; name: string | null; externalId: string | null; createdAtM: number };

/** A page of the API's pending keys in id order, from `fromId` on, at most `limit` rows. */
export async function listPendingKeysPage(
  db: Db,
  input: { workspaceId: string; apiId: string; fromId?: string | undefined; limit: number },
): Promise<PendingKeyRow[]> {
  const where = [eq(keys.workspaceId, input.workspaceId), eq(keys.apiId, input.apiId), isNull(keys.hash), isNull(keys.deletedAtM)];
  if (input.fromId !== undefined) where.push(gte(keys.id, input.fromId));
  return db
    .select({ id: keys.id, start: keys.start, name: keys.name, externalId: identities.externalId, createdAtM: keys.createdAtM })
    .from(keys)
    .leftJoin(identities, eq(identities.id, keys.identityId))
    .where(and(...where))
    .orderBy(asc(keys.id))
    .limit(input.limit);
}

function groupBy<T>(rows: T[], keyOf: (row: T) => string, valueFor: (row: T) => string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const row of rows) {
    const key = keyOf(row);
    const list = out.get(key);
    if (list) list.push(valueFor(row));
    else out.set(key, [valueFor(row)]);
  }
  return out;
}

/** Up to `limit` of the workspace's live APIs (id, name) in id order, after the id `after` (apis_workspace_idx). */
export async function listLiveApisPage(db: Db, workspaceId: string, limit: number, after: string | undefined) {
  const where = [eq(apis.workspaceId, workspaceId), isNull(apis.deletedAtM)];
  if (after !== undefined) where.push(sql`${apis.id} > ${after}`);
  return db
    .select({ id: apis.id, name: apis.name })
    .from(apis)
    .where(and(...where))
    .orderBy(asc(apis.id))
    .limit(limit);
}
