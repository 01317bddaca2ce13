import { apiPermission } from "../auth/permissions.query.js";
import { type Principal, requirePermission } from "../principal.js";
import { hashKey } from "../../crypto/hash.js";
import { NotFoundError } from "../../errors.js";
import { findKeyObjectRow, type KeyObjectRow } from "../../storage/keys/keyObjects.repository.js";
import { decryptKeyRows, requireDecryptPermission } from "./keys.decrypt.js";
import type { KeyServices } from "./keys.services.js";

/**
 * Reading one key (v1: keys.getKey, keys.whoami). A key of another workspace is answered as if it did not exist,
 * so a caller never learns that an id or a secret belongs to someone else.
 */

/**
 * A live key of the caller's workspace by id, with its plaintext when `decrypt` is asked (and allowed). The caller
 * is authenticated before the lookup: a wrong root key must not learn whether the id exists.
 */
export async function getKey(
  services: KeyServices,
  principal: Principal,
  input: { keyId: string; decrypt?: boolean | undefined },
): Promise<{ row: KeyObjectRow; plaintext?: string | undefined }> {
  const row = await findKeyObjectRow(services.db, { id: input.keyId }, "direct-names");
  if (!row || row.workspaceId !== principal.workspaceId) throw new NotFoundError("key", input.keyId);
  requirePermission(principal, apiPermission(row.apiId, "read_key"));
  if (!input.decrypt) return { row };
  requireDecryptPermission(principal, row.apiId);
  const plaintexts = await decryptKeyRows(services.db, services.keyring, [row]);
  return { row, plaintext: plaintexts.get(row.id) };
}

// The request names the key by its secret, which no error may carry: the refusal names no id.
const keyBySecretNotFound = () => new NotFoundError("key", "", "Key not found");

/**
 * keys.whoami's first step, before authenticating (as v1): the live key whose secret is `key`, in any workspace.
 * An unknown key is not found whoever asks.
 */
export async function findKeyBySecret(services: Pick<KeyServices, "db">, key: string): Promise<KeyObjectRow> {
  const row = await findKeyObjectRow(services.db, { hash: hashKey(key) }, "direct-names");
  if (!row) throw keyBySecretNotFound();
  return row;
}

/** keys.whoami's second step: the caller may see the key found by its secret (its workspace's, with read_key). */
export function requireKeyVisible(principal: Principal, row: KeyObjectRow): KeyObjectRow {
  if (row.workspaceId !== principal.workspaceId) throw keyBySecretNotFound();
  requirePermission(principal, apiPermission(row.apiId, "read_key"));
  return row;
}
