import type { Db } from "../storage/client.js";
import {
  deleteAllDataKeys,
  deleteAllStoredPlaintexts,
  dropSealedPlaintextsOfPendingBatches,
  lockDataKeysExclusively,
} from "../storage/crypto/encryptionKeys.repository.js";
import { forgetWebhookSecrets } from "../storage/webhooks/webhooks.repository.js";

export type ResetResult = {
  /** Stored plaintexts (encrypted_keys rows) deleted: keys that can no longer be shown with `decrypt=true`. */
  plaintexts: number;
  /** Workspace data keys (encryption_keys rows) deleted. */
  dataKeys: number;
  /** Keys of enqueued, not yet imported migration batches whose sealed plaintext was dropped (they import without it). */
  queuedPlaintexts: number;
  /** Webhook endpoints whose signing secret was sealed under a deleted data key: disabled, their secret forgotten. */
  webhookSecrets: number;
};

/**
 * The way out when the encryption key is lost: forgets everything sealed under it, in the caller's transaction `tx`
 * (core/encryptionKey: the write gate's, so all or nothing). Deleted: every stored plaintext and every workspace
 * data key; enqueued batches keep their keys but lose the sealed plaintexts (those keys are imported as if given by
 * hash); webhook endpoints lose their signing secrets and are disabled. Kept: every key's hash and settings, so verification is unaffected. The store then has no data key, so the
 * next start accepts any encryption key.
 */
export async function forgetSealedData(tx: Db): Promise<ResetResult> {
  // A replica still running would keep sealing under a data key deleted here; the lock makes it wait, and the
  // command tells the operator to stop every replica first.
  await lockDataKeysExclusively(tx);
  const queuedPlaintexts = await dropSealedPlaintextsOfPendingBatches(tx);
  const plaintexts = await deleteAllStoredPlaintexts(tx);
  const webhookSecrets = await forgetWebhookSecrets(tx);
  const dataKeys = await deleteAllDataKeys(tx);
  return { plaintexts, dataKeys, queuedPlaintexts, webhookSecrets };
}
