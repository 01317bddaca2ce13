import { sql } from "drizzle-orm";
import { type Db, rowsOf } from "../db/client.js";

export type ResetResult = {
  /** Stored plaintexts (encrypted_keys rows) deleted: keys that can no longer be shown with `decrypt=true`. */
  plaintexts: number;
  /** Workspace data keys (encryption_keys rows) deleted. */
  dataKeys: number;
  /** Keys of enqueued, not yet imported migration batches whose sealed plaintext was dropped (they import without it). */
  queuedPlaintexts: number;
};

/**
 * The way out when the encryption key is lost: forgets everything sealed under it, in one transaction. Deleted:
 * every stored plaintext and every workspace data key; enqueued batches keep their keys but lose the sealed
 * plaintexts (those keys are imported as if given by hash). Kept: every key's hash and settings, so verification
 * is unaffected. The store then has no data key, so the next start accepts any encryption key.
 */
export async function resetMasterKey(db: Db): Promise<ResetResult> {
  return db.transaction(async (tx) => {
    // A replica still running would keep sealing under a data key deleted here; the lock makes it wait, and the
    // command tells the operator to stop every replica first.
    await tx.execute(sql`lock table encryption_keys in exclusive mode`);
    const queued = rowsOf<{ n: string | number }>(
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
    const plaintexts = rowsOf<{ n: string | number }>(
      await tx.execute(sql`with d as (delete from encrypted_keys returning 1) select count(*) as n from d`),
    );
    const dataKeys = rowsOf<{ n: string | number }>(
      await tx.execute(sql`with d as (delete from encryption_keys returning 1) select count(*) as n from d`),
    );
    return {
      plaintexts: Number(plaintexts[0]!.n),
      dataKeys: Number(dataKeys[0]!.n),
      queuedPlaintexts: Number(queued[0]!.n),
    };
  });
}
