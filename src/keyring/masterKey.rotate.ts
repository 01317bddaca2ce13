import type { Db } from "../storage/client.js";
import { lockAllDataKeys, rewrapDataKey } from "../storage/crypto/encryptionKeys.repository.js";
import { fingerprint, open, seal } from "../crypto/vault.js";

export type RotationResult = {
  /** Data keys now wrapped by the new master key that were wrapped by the old one. */
  rewrapped: number;
  /** Data keys that already were under the new master key (an earlier or interrupted rotation). */
  alreadyRotated: number;
};

export class RotationError extends Error {}

/**
 * Re-wraps every workspace data key (the `encryption_keys` rows) from the old master key to the new one, in the
 * caller's transaction `tx` (core/encryptionKey: the write gate's, so all or nothing). The stored ciphertexts of
 * plaintext keys are untouched, since they are sealed with the data keys, which do not change. Rows already under
 * the new key are skipped, so the rotation can run again, e.g. to catch data keys a replica still on the old key
 * created meanwhile. A row under neither key aborts it all. Answers the ids of the data keys re-wrapped too (the
 * audit entry names them; an id is no secret).
 */
export async function rewrapDataKeys(tx: Db, oldKey: Buffer, newKey: Buffer): Promise<RotationResult & { rewrappedIds: string[] }> {
  if (oldKey.length !== 32 || newKey.length !== 32) throw new RotationError("master keys are 32 bytes");
  const oldFingerprint = fingerprint(oldKey);
  const newFingerprint = fingerprint(newKey);
  if (oldFingerprint === newFingerprint) throw new RotationError("the new encryption key is the current one");
  // FOR UPDATE: a concurrent rotation waits for this one, then finds every row already rotated.
  const rows = await lockAllDataKeys(tx);
  const rewrappedIds: string[] = [];
  let alreadyRotated = 0;
  for (const row of rows) {
    if (row.masterKeyFingerprint === newFingerprint) {
      alreadyRotated++;
      continue;
    }
    if (row.masterKeyFingerprint !== oldFingerprint) {
      throw new RotationError(
        `data key ${row.id} (workspace ${row.workspaceId}) is wrapped by neither the current nor the new encryption key ` +
          `(fingerprint ${row.masterKeyFingerprint}); nothing was changed`,
      );
    }
    const aad = `${row.workspaceId}:${row.id}`;
    const dataKey = open(oldKey, row.wrapped, aad);
    await rewrapDataKey(tx, row.id, seal(newKey, dataKey, aad), newFingerprint);
    rewrappedIds.push(row.id);
  }
  return { rewrapped: rewrappedIds.length, alreadyRotated, rewrappedIds };
}
