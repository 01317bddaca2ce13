import { keyPermission } from "../auth/permissions.query.js";
import { requireAccess } from "../access.js";
import type { Caller } from "../caller.js";
import { requirePermission } from "../principal.js";
import { hashKey } from "../../crypto/hash.js";
import { NotFoundError, PreconditionFailedError } from "../../errors.js";
import { findApi } from "../../storage/apis/apis.repository.js";
import { identityRatelimits } from "../../storage/identities/identities.repository.js";
import type { KeyObjectRow, PermissionView } from "../../storage/keys/keyObjects.repository.js";
import { keyRatelimits, type NamedRatelimit } from "../../storage/keys/keys.ratelimit.repository.js";
import { decryptKeyRows, requireDecryptPermission } from "./keys.decrypt.js";
import type { KeyServices } from "./keys.services.js";

/**
 * Reading one key (v1: keys.getKey, keys.whoami). A key of another workspace is answered as if it did not exist,
 * so a caller never learns that an id or a secret belongs to someone else.
 */

/**
 * Where the surfaces' rules for reading a key differ, each adapter states them in full (no default). Whether
 * read_key and decrypt_key may also be granted by the key's URN (v2, contract §2 rows 7–8) and what a caller without
 * read_key is told are the caller's access policy (`urnGrants`, `denied`).
 */
export type KeyReadRules = {
  /** Which permissions the key lists: v1's getKey/whoami its direct ones by name, v2 every one by slug. */
  permissions: PermissionView;
  /**
   * `decrypt` on a key of an API that does not store encrypted keys is refused (v2's 412) rather than answered
   * without a plaintext (v1).
   */
  decryptNeedsEncryptingApi: boolean;
};

/**
 * A live key of the caller's workspace by id, with its plaintext when `decrypt` is asked (and allowed). The caller
 * is authenticated before the lookup: a wrong root key must not learn whether the id exists.
 */
export async function getKey(
  services: KeyServices,
  caller: Caller,
  input: { keyId: string; decrypt?: boolean | undefined },
  rules: KeyReadRules,
): Promise<{ row: KeyObjectRow; plaintext?: string | undefined }> {
  const row = await services.keyReads.find({ id: input.keyId }, rules.permissions);
  if (!row || row.workspaceId !== caller.workspaceId) throw new NotFoundError("key", input.keyId);
  requirePermission(caller, keyPermission(caller.access, caller.workspaceId, row.apiId, row.id, "read_key"));
  if (!input.decrypt) return { row };
  requireDecryptPermission(caller, row.apiId, row.id);
  if (rules.decryptNeedsEncryptingApi && !(await findApi(services.db, row.workspaceId, row.apiId))?.storeEncryptedKeys) {
    throw new PreconditionFailedError("api", { kind: "recoverableNotSupported", apiId: row.apiId });
  }
  const plaintexts = await decryptKeyRows(services.db, services.keyring, [row]);
  return { row, plaintext: plaintexts.get(row.id) };
}

// The request names the key by its secret, which no error may carry: the refusal names no id.
const keyBySecretNotFound = () => new NotFoundError("key", "", "Key not found");

/**
 * keys.whoami's first step, before authenticating (as v1): the live key whose secret is `key`, in any workspace.
 * An unknown key is not found whoever asks.
 */
export async function findKeyBySecret(
  services: Pick<KeyServices, "keyReads">,
  key: string,
  rules: Pick<KeyReadRules, "permissions">,
): Promise<KeyObjectRow> {
  const row = await services.keyReads.find({ hash: hashKey(key) }, rules.permissions);
  if (!row) throw keyBySecretNotFound();
  return row;
}

/**
 * keys.whoami's second step: the caller may see the key found by its secret (its workspace's, with read_key). A caller
 * whose access policy says `denied: "notFound"` and lacks read_key is told only that the key is not found (not which
 * permission).
 */
export function requireKeyVisible(caller: Caller, row: KeyObjectRow): KeyObjectRow {
  if (row.workspaceId !== caller.workspaceId) throw keyBySecretNotFound();
  requireAccess(caller, keyPermission(caller.access, caller.workspaceId, row.apiId, row.id, "read_key"), keyBySecretNotFound);
  return row;
}

/** Every rate limit a key read shows: the key's own (its `default` one included) and its identity's, by name. */
export async function readKeyRatelimits(
  services: Pick<KeyServices, "db">,
  row: Pick<KeyObjectRow, "id" | "identityId">,
): Promise<{ key: NamedRatelimit[]; identity: NamedRatelimit[] }> {
  return (await readKeysRatelimits(services, [row])).get(row.id)!;
}

/** readKeyRatelimits for many keys at once (two statements whatever their number), by key id. */
export async function readKeysRatelimits(
  services: Pick<KeyServices, "db">,
  rows: readonly Pick<KeyObjectRow, "id" | "identityId">[],
): Promise<Map<string, { key: NamedRatelimit[]; identity: NamedRatelimit[] }>> {
  const identityIds = [...new Set(rows.flatMap((r) => (r.identityId === null ? [] : [r.identityId])))];
  const [byKey, byIdentity] = await Promise.all([
    keyRatelimits(
      services.db,
      rows.map((r) => r.id),
    ),
    identityRatelimits(services.db, identityIds),
  ]);
  return new Map(
    rows.map((r) => [r.id, { key: byKey.get(r.id) ?? [], identity: (r.identityId !== null && byIdentity.get(r.identityId)) || [] }]),
  );
}
