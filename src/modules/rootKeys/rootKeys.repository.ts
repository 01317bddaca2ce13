import { and, eq, isNull, ne, sql } from "drizzle-orm";
import type { Db } from "../../db/client.js";
import { keys, rootKeys, workspaces } from "../../db/schema.js";
import { hashKey } from "../../crypto/hash.js";
import { generateKey } from "../../crypto/key-gen.js";
import { newId } from "../../ids.js";

export const ROOT_KEY_PREFIX = "khroot";

export type NewRootKey = { workspaceId: string; name?: string | undefined; permissions: string[] };

/** Creates a root key with a generated secret, or with `secret` when given; only its hash is stored. */
export async function insertRootKey(db: Db, input: NewRootKey, secret?: string): Promise<{ keyId: string; key: string }> {
  const key = secret ?? generateKey(ROOT_KEY_PREFIX, 32);
  const keyId = newId("rk");
  await db.insert(rootKeys).values({
    id: keyId,
    workspaceId: input.workspaceId,
    hash: hashKey(key),
    start: key.slice(0, ROOT_KEY_PREFIX.length + 5),
    name: input.name ?? null,
    permissions: input.permissions,
    createdAtM: Date.now(),
  });
  return { keyId, key };
}

/**
 * Makes `secret` a root key of the workspace with these permissions, whatever it was before, and revokes every
 * other root key of that workspace with the same name: the value the name held before (KEYHAVEN_ROOT_KEY changed).
 */
export async function upsertRootKey(db: Db, input: NewRootKey & { name: string }, secret: string): Promise<void> {
  await db.transaction(async (tx) => {
    await tx
      .delete(rootKeys)
      .where(and(eq(rootKeys.workspaceId, input.workspaceId), eq(rootKeys.name, input.name), ne(rootKeys.hash, hashKey(secret))));
    await upsertByHash(tx, input, secret);
  });
}

async function upsertByHash(db: Db, input: NewRootKey, secret: string): Promise<void> {
  await db
    .insert(rootKeys)
    .values({
      id: newId("rk"),
      workspaceId: input.workspaceId,
      hash: hashKey(secret),
      start: secret.slice(0, 4),
      name: input.name ?? null,
      permissions: input.permissions,
      createdAtM: Date.now(),
    })
    .onConflictDoUpdate({
      target: rootKeys.hash,
      set: { workspaceId: input.workspaceId, permissions: input.permissions },
    });
}

export async function deleteRootKeyById(db: Db, id: string): Promise<boolean> {
  const rows = await db.delete(rootKeys).where(eq(rootKeys.id, id)).returning({ id: rootKeys.id });
  return rows.length > 0;
}

/**
 * The root key with a hash (`{ hash }`), with its workspace's `enabled`: a prepared statement, made once per
 * authenticator (services.ts) and run for every root key not in memory.
 */
export function prepareRootKeyLookup(db: Db) {
  return db
    .select({
      id: rootKeys.id,
      workspaceId: rootKeys.workspaceId,
      permissions: rootKeys.permissions,
      workspaceEnabled: workspaces.enabled,
    })
    .from(rootKeys)
    .innerJoin(workspaces, eq(workspaces.id, rootKeys.workspaceId))
    .where(eq(rootKeys.hash, sql.placeholder("hash")))
    .limit(1)
    .prepare("keyhaven_root_key_lookup");
}

/** Whether a live key (a customer's API key, not a root key) has this hash. */
export async function liveKeyHashExists(db: Db, hash: string): Promise<boolean> {
  const [row] = await db
    .select({ id: keys.id })
    .from(keys)
    .where(and(eq(keys.hash, hash), isNull(keys.deletedAtM)))
    .limit(1);
  return row !== undefined;
}
