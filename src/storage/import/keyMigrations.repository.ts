import { and, eq, isNull } from "drizzle-orm";
import type { Db } from "../client.js";
import { type KeyMigrationAlgorithm, keyMigrations, keys } from "../schema.js";

export type KeyMigrationRow = { id: string; workspaceId: string; algorithm: KeyMigrationAlgorithm };

/** A v2 migration of `workspaceId` by id (ids are unique per workspace: another workspace's is never found). */
export async function findKeyMigration(db: Db, workspaceId: string, id: string): Promise<KeyMigrationRow | undefined> {
  const [row] = await db
    .select({ id: keyMigrations.id, workspaceId: keyMigrations.workspaceId, algorithm: keyMigrations.algorithm })
    .from(keyMigrations)
    .where(and(eq(keyMigrations.workspaceId, workspaceId), eq(keyMigrations.id, id)));
  return row;
}

/** Creates a migration; false when its workspace has the id already (another workspace's has no bearing). */
export async function insertKeyMigration(db: Db, migration: KeyMigrationRow, now: number): Promise<boolean> {
  const rows = await db
    .insert(keyMigrations)
    .values({ ...migration, createdAtM: now })
    .onConflictDoNothing({ target: [keyMigrations.workspaceId, keyMigrations.id] })
    .returning({ id: keyMigrations.id });
  return rows.length === 1;
}

type PendingKeyRef = { workspaceId: string; migrationId: string; pendingHash: string };

const pendingKeyIs = (ref: PendingKeyRef) =>
  and(
    eq(keys.hash, ref.pendingHash),
    eq(keys.workspaceId, ref.workspaceId),
    eq(keys.pendingMigrationId, ref.migrationId),
    isNull(keys.deletedAtM),
  );

/** The key found by the hash of another algorithm, still pending in this migration, live, of this workspace. */
export async function findPendingKey(db: Db, ref: PendingKeyRef): Promise<{ id: string; apiId: string } | undefined> {
  const [row] = await db.select({ id: keys.id, apiId: keys.apiId }).from(keys).where(pendingKeyIs(ref));
  return row;
}

/**
 * The first verification of a key migrated by a hash of another algorithm: its row (`keyId`, still found as
 * findPendingKey finds it) gets the key's own hash and `start`, and leaves the migration, in one statement. False
 * when no such row exists (not migrated, another migration, or rehashed meanwhile).
 */
export async function rehashPendingKey(
  db: Db,
  change: PendingKeyRef & { keyId: string; hash: string; start: string },
  now: number,
): Promise<boolean> {
  const rows = await db
    .update(keys)
    .set({ hash: change.hash, start: change.start, pendingMigrationId: null, updatedAtM: now })
    .where(and(eq(keys.id, change.keyId), pendingKeyIs(change)))
    .returning({ id: keys.id });
  return rows.length === 1;
}
