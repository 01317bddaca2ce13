import { and, eq, inArray } from "drizzle-orm";
import type { Db } from "../../db/client.js";
import { permissions, roles } from "../../db/schema.js";
import { newId } from "../../ids.js";

export async function insertPermission(
  db: Db,
  input: { workspaceId: string; name: string; slug: string; description?: string | undefined },
): Promise<string> {
  const id = newId("perm");
  await db.insert(permissions).values({ id, ...input, description: input.description || null, createdAtM: Date.now() });
  return id;
}

export async function insertRole(
  db: Db,
  input: { workspaceId: string; name: string; description?: string | undefined },
): Promise<string> {
  const id = newId("role");
  await db.insert(roles).values({ id, ...input, description: input.description || null, createdAtM: Date.now() });
  return id;
}

/** Role ids by name in the workspace (names are unique per workspace). */
export async function findRoleIdsByName(db: Db, workspaceId: string, names: string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = await db
    .select({ id: roles.id, name: roles.name })
    .from(roles)
    .where(and(eq(roles.workspaceId, workspaceId), inArray(roles.name, names)));
  return new Map(rows.map((r) => [r.name, r.id]));
}

/**
 * Permission ids by name in the workspace. Names are not unique (slugs are); when several permissions share a
 * name, the one whose slug equals the name wins, else the oldest, so the choice never changes between calls.
 */
export async function findPermissionIdsByName(
  db: Db,
  workspaceId: string,
  names: string[],
): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = await db
    .select({ id: permissions.id, name: permissions.name, slug: permissions.slug, createdAtM: permissions.createdAtM })
    .from(permissions)
    .where(and(eq(permissions.workspaceId, workspaceId), inArray(permissions.name, names)))
    .orderBy(permissions.createdAtM, permissions.id);
  const byName = new Map<string, string>();
  for (const r of rows) {
    if (!byName.has(r.name) || r.slug === r.name) byName.set(r.name, r.id);
  }
  return byName;
}
