import { and, eq, sql } from "drizzle-orm";
import { insertRecordset, textArray } from "../bulk.js";
import type { Db } from "../client.js";
import { keysPermissions, keysRoles, permissions, roles } from "../schema.js";

// The links of keys to roles and to permissions: keys.add/remove/setPermissions, keys.add/remove/setRoles, the
// `roles`/`permissions` of keys.createKey and keys.updateKey, and the imports all write them here.

export type LinkKind = "role" | "permission";

/** A link of a key to a role (`kind` role) or a permission (`kind` permission), by the role's or permission's id. */
export type KeyLink = { keyId: string; id: string; workspaceId: string };

const linkTables = {
  role: { table: keysRoles, column: keysRoles.roleId, key: keysRoles.keyId },
  permission: {
    table: keysPermissions,
    column: keysPermissions.permissionId,
    key: keysPermissions.keyId,
  },
} as const;

/**
 * The one writer of key links: connects each key to each role or permission; links that exist already stay as
 * they are. One parameter a statement, MAX_ROWS_PER_STATEMENT links each (insertRecordset).
 */
export async function insertKeyLinks(db: Db, kind: LinkKind, links: KeyLink[], now: number): Promise<void> {
  const tail = sql`on conflict do nothing`;
  if (kind === "role") {
    const rows = links.map((l) => ({ keyId: l.keyId, roleId: l.id, workspaceId: l.workspaceId, createdAtM: now }));
    await insertRecordset(db, keysRoles, rows, tail);
  } else {
    const rows = links.map((l) => ({ keyId: l.keyId, permissionId: l.id, workspaceId: l.workspaceId, createdAtM: now }));
    await insertRecordset(db, keysPermissions, rows, tail);
  }
}

/** The ids of the key's roles (`kind` role) or direct permissions (`kind` permission). */
export async function findKeyLinkIds(db: Db, kind: LinkKind, keyId: string): Promise<string[]> {
  const t = linkTables[kind];
  const rows = await db.select({ id: t.column }).from(t.table).where(eq(t.key, keyId));
  return rows.map((r) => r.id);
}

/** The key's roles (`kind` role) or direct permissions (`kind` permission), by id and name. */
export async function findKeyLinks(db: Db, kind: LinkKind, keyId: string): Promise<{ id: string; name: string }[]> {
  if (kind === "role") {
    return db
      .select({ id: roles.id, name: roles.name })
      .from(keysRoles)
      .innerJoin(roles, eq(roles.id, keysRoles.roleId))
      .where(eq(keysRoles.keyId, keyId));
  }
  return db
    .select({ id: permissions.id, name: permissions.name })
    .from(keysPermissions)
    .innerJoin(permissions, eq(permissions.id, keysPermissions.permissionId))
    .where(eq(keysPermissions.keyId, keyId));
}

/** Disconnects these roles or permissions from the key; ones not connected are ignored. */
export async function deleteKeyLinks(db: Db, kind: LinkKind, keyId: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  const t = linkTables[kind];
  await db.delete(t.table).where(and(eq(t.key, keyId), sql`${t.column} = any(${textArray(ids)})`));
}

/** Makes `ids` exactly the key's roles or direct permissions: drops the others, adds the missing ones. */
export async function replaceKeyLinks(
  db: Db,
  kind: LinkKind,
  key: { id: string; workspaceId: string },
  ids: string[],
  now: number,
): Promise<void> {
  const t = linkTables[kind];
  await db.delete(t.table).where(and(eq(t.key, key.id), ids.length > 0 ? sql`${t.column} <> all(${textArray(ids)})` : undefined));
  await insertKeyLinks(
    db,
    kind,
    ids.map((id) => ({ keyId: key.id, id, workspaceId: key.workspaceId })),
    now,
  );
}

/** The key's direct permissions in the workspace, by slug (v2's answer of its key RBAC routes). */
export async function findKeyPermissionRows(db: Db, workspaceId: string, keyId: string) {
  return db
    .select({ id: permissions.id, name: permissions.name, slug: permissions.slug, description: permissions.description })
    .from(keysPermissions)
    .innerJoin(permissions, eq(permissions.id, keysPermissions.permissionId))
    .where(and(eq(keysPermissions.keyId, keyId), eq(keysPermissions.workspaceId, workspaceId)))
    .orderBy(permissions.slug);
}

/** The key's roles in the workspace, by name. */
export async function findKeyRoleRows(db: Db, workspaceId: string, keyId: string) {
  return db
    .select({ id: roles.id, name: roles.name, description: roles.description })
    .from(keysRoles)
    .innerJoin(roles, eq(roles.id, keysRoles.roleId))
    .where(and(eq(keysRoles.keyId, keyId), eq(keysRoles.workspaceId, workspaceId)))
    .orderBy(roles.name);
}
