import { keyPermission } from "../auth/permissions.query.js";
import type { Caller } from "../caller.js";
import { requirePermission } from "../principal.js";
import { hashKey } from "../../crypto/hash.js";
import { NotFoundError, PreconditionFailedError } from "../../errors.js";
import { newId } from "../../ids.js";
import type { Db } from "../../storage/client.js";
import { updateKeyColumns } from "../../storage/keys/keys.update.repository.js";
import { findKeyToReroll, insertRerolledKey } from "../../storage/keys/keys.writes.repository.js";
import { type CreatedKey, type CreateKeyServices, type KeyFormat, newKeyMaterial } from "./keys.create.js";

/**
 * A reroll: the key to replace, and how long (ms) it keeps verifying; 0: it expires now. `ownedBy`: only a key of
 * this identity in one of these APIs may be replaced (a portal session's end user and keyspaces), any other is not
 * found, checked again under the transaction's lock.
 */
export type RerollKeyCommand = {
  keyId: string;
  expiration: number;
  ownedBy?: { identityId: string; apiIds: readonly string[] } | undefined;
  /**
   * Spends what the reroll costs its caller (a portal session's reroll budget) in the reroll's own transaction, once
   * the key is found and locked: a refusal there (it throws) rolls the reroll back, a refused reroll spends nothing.
   */
  spend?: ((tx: Db) => Promise<void>) | undefined;
};

const MINUTE = 60_000;

/**
 * Replaces a key with a new one carrying its settings (name, meta, identity, credits and refill, enabled, roles,
 * direct permissions, rate limits, an encrypted copy when it had one), and makes the old one expire `expiration` ms
 * from now, rounded up to a whole minute (0: now; never later than it already expired). All in one transaction.
 *
 * Deliberately unlike upstream v2 (contract §16.11): the new key does not inherit the old one's expiry (a reroll
 * would otherwise hand out a key that dies with the one it replaces), and its prefix is the old key's whole prefix
 * (upstream cut it at its first `_`). As upstream, its length is the API's default (else 16 bytes).
 */
export async function rerollKey(
  services: CreateKeyServices,
  caller: Caller,
  input: RerollKeyCommand,
  format: KeyFormat,
): Promise<CreatedKey> {
  const { db, keyring } = services;
  const { workspaceId } = caller;
  // The checks first, outside the transaction (a data key may have to be unwrapped); the transaction reads it again.
  const old = await findKeyToReroll(db, workspaceId, input.keyId, false);
  if (!old || !ownedAsAsked(old, input)) throw new NotFoundError("key", input.keyId);
  requirePermission(caller, keyPermission(caller.access, workspaceId, old.apiId, null, "create_key"));
  const api = await services.apiSettings.find(workspaceId, old.apiId);
  if (!api) throw new NotFoundError("key", input.keyId);
  if (old.hasEncryptedCopy) {
    requirePermission(caller, keyPermission(caller.access, workspaceId, old.apiId, "*", "encrypt_key"));
    if (!api.storeEncryptedKeys) throw new PreconditionFailedError("api", { kind: "recoverableNotSupported", apiId: old.apiId });
    if (!keyring.available) throw new PreconditionFailedError("encryption key", { kind: "encryptionKeyUnavailable" });
  }
  const dataKey = old.hasEncryptedCopy ? await keyring.dataKeyFor(db, workspaceId) : undefined;

  const keyId = newId("key");
  const prefix = old.prefix || api.defaultPrefix || undefined;
  const { key, start } = newKeyMaterial(format, prefix, prefix, api.defaultBytes ?? 16);
  await services.changes.change(caller, async (tx, record) => {
    const locked = await findKeyToReroll(tx, workspaceId, input.keyId, true);
    if (!locked || !ownedAsAsked(locked, input)) throw new NotFoundError("key", input.keyId);
    await input.spend?.(tx);
    const now = services.clock.now();
    await insertRerolledKey(tx, {
      row: {
        id: keyId,
        workspaceId,
        apiId: locked.apiId,
        hash: hashKey(key),
        start,
        prefix: prefix ?? null,
        name: locked.name,
        ownerId: locked.ownerId,
        identityId: locked.identityId,
        meta: locked.meta,
        expires: null,
        // The credits as stored, with the refill period they are in: the new key refills when the old one would have.
        remaining: locked.remaining,
        refillDay: locked.refillDay,
        refillAmount: locked.refillAmount,
        lastRefillAt: locked.lastRefillAt,
        enabled: locked.enabled,
        environment: locked.environment,
        createdAtM: now,
      },
      fromKeyId: locked.id,
      encrypted: dataKey && { encrypted: keyring.encrypt(dataKey, keyId, key), dataKey },
    });
    // 0: a millisecond ago, so that it is refused at once (a key is expired once `expires` is in the past).
    const until = input.expiration === 0 ? now - 1 : Math.ceil((now + input.expiration) / MINUTE) * MINUTE;
    const expires = locked.expires !== null && locked.expires.getTime() < until ? locked.expires : new Date(until);
    await updateKeyColumns(tx, locked, { expires }, now);
    record({
      event: "key.reroll",
      targets: [
        { type: "key", id: locked.id },
        { type: "key", id: keyId },
      ],
      description: `rerolled key ${locked.id} as ${keyId}`,
      details: { expiration: input.expiration },
    });
  });
  // Remembered once the row that wraps it is stored (core/changes.ts afterCommit).
  if (dataKey?.newRow) services.changes.afterCommit(caller, () => keyring.remember(dataKey));
  return { keyId, key };
}

function ownedAsAsked(key: { identityId: string | null; apiId: string }, { ownedBy }: RerollKeyCommand): boolean {
  return ownedBy === undefined || (key.identityId === ownedBy.identityId && ownedBy.apiIds.includes(key.apiId));
}
