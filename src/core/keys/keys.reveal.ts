import type { Caller } from "../caller.js";
import { PreconditionFailedError } from "../../errors.js";
import { decryptKeyRows, requireDecryptPermission } from "./keys.decrypt.js";
import { getKey } from "./keys.read.js";
import type { KeyServices } from "./keys.services.js";

/** A revealed key: its id, its API and its plaintext (for the one answer that asked for it). */
export type RevealedKey = { keyId: string; apiId: string; plaintext: string };

/**
 * Reveals a recoverable key's plaintext (the console's explicit "Reveal" action): the key must be visible to the
 * caller (read_key), the caller must hold decrypt_key of its API (or its URN), and the key must have an encrypted
 * copy. Each reveal is recorded (`key.reveal`, targeting the key and its API, never the plaintext) through the write
 * gate before the plaintext is answered: a reveal the audit log could not record is not made.
 */
export async function revealKey(services: KeyServices, caller: Caller, keyId: string): Promise<RevealedKey> {
  const { row } = await getKey(services, caller, { keyId }, { permissions: "direct-names", decryptNeedsEncryptingApi: false });
  requireDecryptPermission(caller, row.apiId, row.id);
  const plaintext = (await decryptKeyRows(services.db, services.keyring, [row])).get(row.id);
  if (plaintext === undefined) throw new PreconditionFailedError("key", { kind: "recoverableNotSupported", apiId: row.apiId });
  await services.changes.change(caller, async (_tx, record) => {
    record({
      event: "key.reveal",
      targets: [
        { type: "key", id: row.id },
        { type: "api", id: row.apiId },
      ],
      description: `revealed key ${row.id} of ${row.apiId}`,
    });
  });
  return { keyId: row.id, apiId: row.apiId, plaintext };
}
