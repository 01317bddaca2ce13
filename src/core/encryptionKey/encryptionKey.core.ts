import { type ResetResult, forgetSealedData } from "../../keyring/masterKey.reset.js";
import { type RotationResult, rewrapDataKeys } from "../../keyring/masterKey.rotate.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";

/**
 * The operator's commands on the encryption key (the CLI's `keyhaven rotate-encryption-key` and
 * `reset-encryption-key`), through the write gate: one transaction, recorded above every workspace (workspaceId
 * null). The entries hold counts and data-key ids, never a key, a fingerprint or a ciphertext. Nothing changed
 * (every data key already rotated; nothing to forget) records nothing.
 */
type EncryptionKeyServices = { readonly changes: WriteGate };

/** Re-wraps every data key under `newKey` (keyring/masterKey.rotate.ts); encryptionKey.rotate names those re-wrapped. */
export async function rotateEncryptionKey(
  services: EncryptionKeyServices,
  caller: Caller,
  oldKey: Buffer,
  newKey: Buffer,
): Promise<RotationResult> {
  return services.changes.change(caller, async (tx, record) => {
    const { rewrappedIds, ...result } = await rewrapDataKeys(tx, oldKey, newKey);
    if (result.rewrapped > 0) {
      record({
        event: "encryptionKey.rotate",
        targets: rewrappedIds.map((id) => ({ type: "dataKey", id })),
        description: `re-wrapped ${result.rewrapped} data ${result.rewrapped === 1 ? "key" : "keys"} under a new encryption key`,
        details: { rewrapped: result.rewrapped, alreadyRotated: result.alreadyRotated },
        workspaceId: null,
      });
    }
    return result;
  });
}

/** Forgets everything sealed under a lost encryption key (keyring/masterKey.reset.ts); encryptionKey.reset counts it. */
export async function resetEncryptionKey(services: EncryptionKeyServices, caller: Caller): Promise<ResetResult> {
  return services.changes.change(caller, async (tx, record) => {
    const result = await forgetSealedData(tx);
    if (result.plaintexts + result.dataKeys + result.queuedPlaintexts + result.webhookSecrets > 0) {
      record({
        event: "encryptionKey.reset",
        targets: [],
        description: `forgot ${result.dataKeys} data key(s) and ${result.plaintexts + result.queuedPlaintexts} sealed plaintext(s) of a lost encryption key`,
        details: { ...result },
        workspaceId: null,
      });
    }
    return result;
  });
}
