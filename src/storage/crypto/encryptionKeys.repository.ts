import { asc, desc, eq, sql } from "drizzle-orm";
import { type Db, rowsOf } from "../client.js";
import { encryptionKeys } from "../schema.js";

/** The SQL over `encryption_keys` (workspaces' wrapped data keys), for the keyring and the master-key commands. */

export type DataKeyRow = typeof encryptionKeys.$inferSelect;

/** A workspace's data key, unwrapped (the keyring holds these). */
export type DataKey = {
  id: string;
  workspaceId: string;
  key: Buffer;
  /** Set when the data key is new: the caller inserts it in the same transaction that first uses it. */
  newRow?: typeof encryptionKeys.$inferInsert;
};

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

// What `keyhaven reset-encryption-key` forgets (keyring/masterKey.reset.ts runs these in the write gate's transaction).

/** Makes a replica that would seal under a data key wait until the transaction `tx` ends. */
export async function lockDataKeysExclusively(tx: Db): Promise<void> {
  await tx.execute(sql`lock table encryption_keys in exclusive mode`);
}

/** Clears the sealed plaintexts of enqueued, not yet imported batches (the keys stay); returns how many. */
export async function dropSealedPlaintextsOfPendingBatches(tx: Db): Promise<number> {
  const rows = rowsOf<{ n: string | number }>(
    await tx.execute(sql`
      with pending as (
        select b.id, jsonb_agg(
                 case when k->'sealed'->>'encrypted' is null then k
                      else jsonb_set(jsonb_set(k, '{sealed,encrypted}', 'null'), '{sealed,encryptionKeyId}', 'null') end
                 order by e.ord) as keys,
               count(*) filter (where k->'sealed'->>'encrypted' is not null) as dropped
        from migration_batches b, jsonb_array_elements(b.keys) with ordinality as e(k, ord)
        where b.status = 'pending'
        group by b.id
      ), updated as (
        update migration_batches m set keys = pending.keys from pending where m.id = pending.id and pending.dropped > 0
        returning pending.dropped
      )
      select coalesce(sum(dropped), 0) as n from updated`),
  );
  return Number(rows[0]!.n);
}

/** Deletes every stored plaintext (`encrypted_keys`); returns how many. */
export async function deleteAllStoredPlaintexts(tx: Db): Promise<number> {
  const rows = rowsOf<{ n: string | number }>(
    await tx.execute(sql`with d as (delete from encrypted_keys returning 1) select count(*) as n from d`),
  );
  return Number(rows[0]!.n);
}

/** Deletes every workspace data key (`encryption_keys`); returns how many. */
export async function deleteAllDataKeys(tx: Db): Promise<number> {
  const rows = rowsOf<{ n: string | number }>(
    await tx.execute(sql`with d as (delete from encryption_keys returning 1) select count(*) as n from d`),
  );
  return Number(rows[0]!.n);
}
