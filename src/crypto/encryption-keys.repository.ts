import { asc, desc, eq } from "drizzle-orm";
import type { Db } from "../db/client.js";
import { encryptionKeys } from "../db/schema.js";

/** The SQL over `encryption_keys` (workspaces' wrapped data keys), for the keyring and the master-key commands. */

export type DataKeyRow = typeof encryptionKeys.$inferSelect;

/** The workspace's newest data key, if it has one. */
export async function findNewestDataKey(db: Db, workspaceId: string): Promise<DataKeyRow | undefined> {
  const [row] = await db
    .select()
    .from(encryptionKeys)
    .where(eq(encryptionKeys.workspaceId, workspaceId))
    .orderBy(desc(encryptionKeys.createdAtM), desc(encryptionKeys.id))
    .limit(1);
  return row;
}

export async function findDataKey(db: Db, id: string): Promise<DataKeyRow | undefined> {
  const [row] = await db.select().from(encryptionKeys).where(eq(encryptionKeys.id, id)).limit(1);
  return row;
}

/** The fingerprints of the master keys that wrapped the store's data keys, each once. */
export async function findMasterKeyFingerprints(db: Db): Promise<string[]> {
  const rows = await db.selectDistinct({ fingerprint: encryptionKeys.masterKeyFingerprint }).from(encryptionKeys);
  return rows.map((row) => row.fingerprint);
}

/** Every data key, by id, locked FOR UPDATE until the transaction `tx` ends. */
export async function lockAllDataKeys(tx: Db): Promise<DataKeyRow[]> {
  return tx.select().from(encryptionKeys).orderBy(asc(encryptionKeys.id)).for("update");
}

export async function rewrapDataKey(tx: Db, id: string, wrapped: string, masterKeyFingerprint: string): Promise<void> {
  await tx.update(encryptionKeys).set({ wrapped, masterKeyFingerprint }).where(eq(encryptionKeys.id, id));
}
