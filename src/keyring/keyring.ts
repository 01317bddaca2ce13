import { ConfigError } from "../config.js";
import type { Db } from "../storage/client.js";
import { newId } from "../ids.js";
import {
  type DataKey,
  type DataKeyRow,
  findDataKey,
  findMasterKeyFingerprints,
  findNewestDataKey,
} from "../storage/crypto/encryptionKeys.repository.js";
import { KeyringError } from "./keyring.errors.js";
import { fingerprint, newDataKey, open, seal } from "../crypto/vault.js";

/**
 * Envelope encryption for stored plaintext keys: each workspace has data keys (32 random bytes) kept wrapped
 * by the master key (KEYHAVEN_ENCRYPTION_KEY). Data keys are immutable, so caching them never goes stale.
 */
export class Keyring {
  private readonly cache = new Map<string, DataKey>();
  private readonly currentByWorkspace = new Map<string, string>();
  private readonly masterFingerprint: string | undefined;

  constructor(private readonly masterKey: Buffer | undefined) {
    this.masterFingerprint = masterKey ? fingerprint(masterKey) : undefined;
  }

  get available(): boolean {
    return this.masterKey !== undefined;
  }

  private requireMaster(): Buffer {
    if (!this.masterKey) {
      throw new KeyringError(
        "NO_ENCRYPTION_KEY",
        "storing plaintext keys needs an encryption key: set KEYHAVEN_ENCRYPTION_KEY (32 bytes, base64) and restart keyhaven",
      );
    }
    return this.masterKey;
  }

  /** The workspace's newest data key, or a fresh one to be inserted (`newRow`) by the caller's transaction. */
  async dataKeyFor(db: Db, workspaceId: string): Promise<DataKey> {
    const master = this.requireMaster();
    const cachedId = this.currentByWorkspace.get(workspaceId);
    const cached = cachedId ? this.cache.get(cachedId) : undefined;
    if (cached) return cached;
    const row = await findNewestDataKey(db, workspaceId);
    if (row) {
      const dk = this.unwrap(master, row);
      this.cache.set(dk.id, dk);
      this.currentByWorkspace.set(workspaceId, dk.id);
      return dk;
    }
    const id = newId("dek");
    const key = newDataKey();
    return {
      id,
      workspaceId,
      key,
      newRow: {
        id,
        workspaceId,
        wrapped: seal(master, key, `${workspaceId}:${id}`),
        masterKeyFingerprint: this.masterFingerprint!,
        createdAtM: Date.now(),
      },
    };
  }

  /** Call after the transaction that inserted a new data key has committed; until then it must not be reused. */
  remember(dk: DataKey): void {
    const { newRow: _, ...stored } = dk;
    this.cache.set(dk.id, stored);
    this.currentByWorkspace.set(dk.workspaceId, dk.id);
  }

  encrypt(dk: DataKey, keyId: string, plaintext: string): string {
    return seal(dk.key, Buffer.from(plaintext, "utf8"), `${dk.workspaceId}:${keyId}`);
  }

  async decrypt(db: Db, workspaceId: string, encryptionKeyId: string, keyId: string, sealed: string): Promise<string> {
    const master = this.requireMaster();
    let dk = this.cache.get(encryptionKeyId);
    if (!dk) {
      const row = await findDataKey(db, encryptionKeyId);
      if (!row || row.workspaceId !== workspaceId) throw new Error(`data key ${encryptionKeyId} not found`);
      dk = this.unwrap(master, row);
      this.cache.set(dk.id, dk);
    }
    return open(dk.key, sealed, `${workspaceId}:${keyId}`).toString("utf8");
  }

  private unwrap(master: Buffer, row: DataKeyRow): DataKey {
    if (row.masterKeyFingerprint !== this.masterFingerprint) {
      throw new KeyringError(
        "WRONG_ENCRYPTION_KEY",
        "KEYHAVEN_ENCRYPTION_KEY is not the key this workspace's data was encrypted with; start keyhaven with the original key",
      );
    }
    return {
      id: row.id,
      workspaceId: row.workspaceId,
      key: open(master, row.wrapped, `${row.workspaceId}:${row.id}`),
    };
  }
}

/**
 * Refuses a master key other than the one that wrapped the store's data keys. Without this check a replica started
 * with the wrong KEYHAVEN_ENCRYPTION_KEY would wrap new workspaces' data keys under it, which the right key then
 * cannot open. A store with no data key yet accepts any key.
 */
export async function assertMasterKeyMatches(db: Db, masterKey: Buffer | undefined): Promise<void> {
  if (!masterKey) return;
  const stored = await findMasterKeyFingerprints(db);
  const mine = fingerprint(masterKey);
  if (stored.length === 0 || stored.includes(mine)) return;
  throw new ConfigError(
    `KEYHAVEN_ENCRYPTION_KEY (fingerprint ${mine}) is not the key that wrapped this store's data keys ` +
      `(fingerprint ${stored.join(", ")}): start with that key, ` +
      "or re-wrap the data keys under the new one with `keyhaven rotate-encryption-key`; " +
      "if that key is lost, see `keyhaven reset-encryption-key --help` (the stored plaintexts are lost, verification keeps working)",
  );
}
