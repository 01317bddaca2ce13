import { type Grants, keyPermission } from "../auth/permissions.query.js";
import { hasPermission } from "../principal.js";
import type { Keyring } from "../../keyring/keyring.js";
import type { Db } from "../../storage/client.js";
import { DecryptNotAllowedError, PreconditionFailedError } from "../../errors.js";
import type { Principal } from "../principal.js";

/**
 * Reading a key's plaintext needs the decrypt_key permission of its API (v1: 403 UNAUTHORIZED otherwise); for a
 * caller whose access policy counts URN grants (v2), also granted by the URN of the key (`keyId`), or of any key of
 * the keyspace (`*`, any key of the API).
 */
export function requireDecryptPermission(principal: Principal & { readonly access: Grants }, apiId: string, keyId = "*"): void {
  const query = keyPermission(principal.access, principal.workspaceId, apiId, keyId, "decrypt_key");
  if (!hasPermission(principal, query)) throw new DecryptNotAllowedError(apiId, { query, have: [...principal.permissions] });
}

/** What decryption reads of a key row: its encrypted copy, if it has one. */
export type SealedKeyRow = { id: string; workspaceId: string; encrypted: string | null; encryptionKeyId: string | null };

/** Plaintexts of the rows that have an encrypted copy, by key id. Call only after requireDecryptPermission. */
export async function decryptKeyRows(db: Db, keyring: Keyring, rows: readonly SealedKeyRow[]): Promise<Map<string, string>> {
  const plaintexts = new Map<string, string>();
  const sealed = rows.filter((r) => r.encrypted !== null && r.encryptionKeyId !== null);
  if (sealed.length > 0 && !keyring.available) {
    throw new PreconditionFailedError("encryption key", { kind: "encryptionKeyUnavailable" });
  }
  // One after another: the first decryption caches the workspace's data key for the rest of the page.
  for (const row of sealed) {
    plaintexts.set(row.id, await keyring.decrypt(db, row.workspaceId, row.encryptionKeyId!, row.id, row.encrypted!));
  }
  return plaintexts;
}
