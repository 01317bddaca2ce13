import { hashKey } from "../../crypto/hash.js";
import type { Keyring } from "../../keyring/keyring.js";
import type { DataKey } from "../../storage/crypto/encryptionKeys.repository.js";
import type { ImportPlan, SealedKey } from "../../storage/import/import.rows.js";
import { ConflictError } from "../../errors.js";
import { newId } from "../../ids.js";
import type { ImportKey } from "./import.keys.types.js";

export type PlanContext = {
  workspaceId: string;
  roleIds: Map<string, string>;
  permissionIds: Map<string, string>;
  keyring: Keyring;
  dataKey: DataKey | undefined;
  now: number;
  /** v2's keys.migrateKeys: the migration its keys are pending in (`keys.pending_migration_id`); v1's imports none. */
  pendingMigrationId?: string | undefined;
};

/**
 * The first phase of an import: checks what can be checked without writing and builds every row. Nothing is
 * written here; a duplicate hash within the batch is refused with the index of the later key.
 */
export function planImport(items: ImportKey[], ctx: PlanContext): ImportPlan {
  return planSealedImport(items, sealKeys(items, ctx), ctx);
}

/**
 * Gives each key its id and hash and seals its plaintext, refusing a key that repeats an earlier one of the batch.
 * `migrations.enqueueKeys` stores these (never the plaintext) and builds the rows later with planSealedImport.
 */
export function sealKeys(
  items: Pick<ImportKey, "plaintext" | "hash" | "start" | "prefix">[],
  ctx: Pick<PlanContext, "keyring" | "dataKey">,
): SealedKey[] {
  const indexByHash = new Map<string, number>();
  return items.map((item, index) => {
    const id = newId("key");
    const hash = item.plaintext !== undefined ? hashKey(item.plaintext) : item.hash!.value;
    const earlier = indexByHash.get(hash);
    if (earlier !== undefined) {
      throw new ConflictError("key", { kind: "duplicateInRequest", index, sameAsIndex: earlier }, index, {
        reason: "DUPLICATE_IN_REQUEST",
        keyIndex: index,
        sameAsKeyIndex: earlier,
      });
    }
    indexByHash.set(hash, index);
    if (item.plaintext === undefined) {
      return { id, hash, start: item.start ?? "", encrypted: null, encryptionKeyId: null };
    }
    const dk = ctx.dataKey;
    if (!dk) throw new Error("a plaintext key was planned without a data key");
    return {
      id,
      hash,
      start: item.start ?? defaultStart(item.plaintext, item.prefix),
      encrypted: ctx.keyring.encrypt(dk, id, item.plaintext),
      encryptionKeyId: dk.id,
    };
  });
}

/** Builds every row of an import from the keys' settings and their sealed secrets (`sealed[i]` is `items[i]`'s). */
export function planSealedImport(
  items: ImportKey[],
  sealed: SealedKey[],
  ctx: Omit<PlanContext, "keyring" | "dataKey"> & { dataKey?: DataKey | undefined },
): ImportPlan {
  const { workspaceId, now } = ctx;
  const plan: ImportPlan = {
    workspaceId,
    now,
    keys: [],
    identities: new Set(),
    externalIds: [],
    encrypted: [],
    keyRoles: [],
    keyPermissions: [],
    ratelimits: [],
    dataKey: ctx.dataKey,
  };

  items.forEach((item, index) => {
    const { id, hash, start } = sealed[index]!;
    if (item.externalId !== undefined) plan.identities.add(item.externalId);
    plan.externalIds.push(item.externalId);

    const monthly = item.refill?.interval === "monthly";
    plan.keys.push({
      id,
      workspaceId,
      apiId: item.apiId,
      hash,
      start,
      prefix: item.prefix ?? null,
      name: item.name ?? null,
      ownerId: item.ownerId ?? null,
      identityId: null,
      meta: item.meta ?? null,
      // v1 stores `expires: 0` as "never expires".
      expires: item.expires ? new Date(item.expires) : null,
      remaining: item.remaining ?? null,
      refillDay: monthly ? (item.refill?.refillDay ?? 1) : null,
      refillAmount: item.refill?.amount ?? null,
      enabled: item.enabled ?? true,
      environment: item.environment ?? null,
      pendingMigrationId: ctx.pendingMigrationId ?? null,
      createdAtM: now,
    });

    const { encrypted, encryptionKeyId } = sealed[index]!;
    if (encrypted !== null && encryptionKeyId !== null) {
      plan.encrypted.push({ keyId: id, workspaceId, encrypted, encryptionKeyId, createdAtM: now });
    }
    for (const role of new Set(item.roles)) {
      plan.keyRoles.push({ keyId: id, id: ctx.roleIds.get(role)!, workspaceId });
    }
    for (const permissionId of new Set((item.permissions ?? []).map((p) => ctx.permissionIds.get(p)!))) {
      plan.keyPermissions.push({ keyId: id, id: permissionId, workspaceId });
    }
    if (item.ratelimit) {
      // Kept as the key's auto-applied `default` limit, as v1 did before June 2025 (see docs/api.md).
      plan.ratelimits.push({ keyId: id, workspaceId, limit: item.ratelimit.limit, duration: item.ratelimit.refillInterval });
    }
  });
  return plan;
}

/** The first four characters of the plaintext, or `prefix_` and four more when the plaintext carries the prefix. */
function defaultStart(plaintext: string, prefix: string | undefined): string {
  const prefixed = prefix ? `${prefix}_` : undefined;
  if (prefixed && plaintext.startsWith(prefixed)) return plaintext.slice(0, prefixed.length + 4);
  return plaintext.slice(0, 4);
}
