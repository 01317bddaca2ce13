import { and, asc, eq, gt, ne, sql } from "drizzle-orm";
import type { Db } from "../client.js";
import { rootKeyLastUsed, rootKeys } from "../schema.js";
import { hashKey } from "../../crypto/hash.js";
import { generateKey } from "../../crypto/keyGen.js";
import { newId } from "../../ids.js";

export const ROOT_KEY_PREFIX = "khroot";

export type NewRootKey = { workspaceId: string; name?: string | undefined; permissions: string[] };

/** Creates a root key with a generated secret, or with `secret` when given; only its hash is stored. */
export async function insertRootKey(db: Db, input: NewRootKey, now: number, secret?: string): Promise<{ keyId: string; key: string }> {
  const key = secret ?? generateKey(ROOT_KEY_PREFIX, 32);
  const keyId = newId("rk");
  await db.insert(rootKeys).values({
    id: keyId,
    workspaceId: input.workspaceId,
    hash: hashKey(key),
    start: key.slice(0, ROOT_KEY_PREFIX.length + 5),
    name: input.name ?? null,
    permissions: input.permissions,
    createdAtM: now,
  });
  return { keyId, key };
}

/**
 * Makes `secret` a root key of the workspace with these permissions, whatever it was before, and revokes every
 * other root key of that workspace with the same name: the value the name held before (KEYHAVEN_ROOT_KEY changed).
 * In `tx`, the caller's transaction (the write gate's). Answers the root key's id, whether it was inserted (not
 * there before), and the ids revoked.
 */
export async function upsertRootKey(
  tx: Db,
  input: NewRootKey & { name: string },
  secret: string,
  now: number,
): Promise<{ keyId: string; inserted: boolean; revoked: string[] }> {
  const revoked = await tx
    .delete(rootKeys)
    .where(and(eq(rootKeys.workspaceId, input.workspaceId), eq(rootKeys.name, input.name), ne(rootKeys.hash, hashKey(secret))))
    .returning({ id: rootKeys.id });
  const [row] = await tx
    .insert(rootKeys)
    .values({
      id: newId("rk"),
      workspaceId: input.workspaceId,
      hash: hashKey(secret),
      start: secret.slice(0, 4),
      name: input.name ?? null,
      permissions: input.permissions,
      createdAtM: now,
    })
    .onConflictDoUpdate({
      target: rootKeys.hash,
      set: { workspaceId: input.workspaceId, permissions: input.permissions },
    })
    // xmax is 0 on a row this statement inserted, not on one it updated.
    .returning({ id: rootKeys.id, inserted: sql<boolean>`(xmax = 0)` });
  return { keyId: row!.id, inserted: row!.inserted === true, revoked: revoked.map((r) => r.id) };
}

/** Deletes the root key `id` (of `workspaceId` only, when given); its row as it was, or undefined when none was. */
export async function deleteRootKeyById(
  db: Db,
  id: string,
  workspaceId?: string,
): Promise<{ id: string; workspaceId: string; name: string | null; permissions: string[] } | undefined> {
  const [row] = await db
    .delete(rootKeys)
    .where(and(eq(rootKeys.id, id), workspaceId === undefined ? undefined : eq(rootKeys.workspaceId, workspaceId)))
    .returning({ id: rootKeys.id, workspaceId: rootKeys.workspaceId, name: rootKeys.name, permissions: rootKeys.permissions });
  return row;
}

/**
 * Up to `limit` root keys of a workspace in id order, after the id `after`: never their hash. `lastUsedAtM`: its last
 * authentication as last written (about once a second: storage/lastUsed), null when it never authenticated.
 */
export async function listRootKeysPage(db: Db, workspaceId: string, limit: number, after: string | undefined) {
  return db
    .select({
      id: rootKeys.id,
      name: rootKeys.name,
      start: rootKeys.start,
      permissions: rootKeys.permissions,
      createdAtM: rootKeys.createdAtM,
      lastUsedAtM: rootKeyLastUsed.lastUsedAtM,
    })
    .from(rootKeys)
    .leftJoin(rootKeyLastUsed, eq(rootKeyLastUsed.rootKeyId, rootKeys.id))
    .where(and(eq(rootKeys.workspaceId, workspaceId), after === undefined ? undefined : gt(rootKeys.id, after)))
    .orderBy(asc(rootKeys.id))
    .limit(limit);
}
