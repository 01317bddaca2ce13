import { hashKey } from "../../crypto/hash.js";
import type { DataKey, Keyring } from "../../crypto/keyring.js";
import { ApiError } from "../../errors.js";
import { newId } from "../../ids.js";
import type { ImportKey } from "./migrations.schemas.js";

/** A `keys` row as it travels to `json_to_recordset` (snake_case, JSON-friendly values). */
export type KeyRow = {
  id: string;
  workspace_id: string;
  api_id: string;
  hash: string;
  start: string;
  prefix: string | null;
  name: string | null;
  owner_id: string | null;
  identity_id: string | null;
  meta: Record<string, unknown> | null;
  expires: string | null;
  remaining_requests: number | null;
  refill_day: number | null;
  refill_amount: number | null;
  enabled: boolean;
  environment: string | null;
  created_at_m: number;
};

export type ImportPlan = {
  workspaceId: string;
  keys: KeyRow[];
  /** externalId → the identity id to create if the workspace has none with that externalId yet. */
  identities: Map<string, string>;
  /** Per key index: the externalId whose identity it links to. */
  externalIds: (string | undefined)[];
  encrypted: { key_id: string; workspace_id: string; encrypted: string; encryption_key_id: string; created_at_m: number }[];
  keyRoles: { key_id: string; role_id: string; workspace_id: string; created_at_m: number }[];
  keyPermissions: { key_id: string; permission_id: string; workspace_id: string; created_at_m: number }[];
  ratelimits: {
    id: string;
    workspace_id: string;
    name: string;
    key_id: string;
    limit: number;
    duration: number;
    auto_apply: boolean;
    created_at_m: number;
  }[];
  dataKey: DataKey | undefined;
};

export type PlanContext = {
  workspaceId: string;
  roleIds: Map<string, string>;
  permissionIds: Map<string, string>;
  keyring: Keyring;
  dataKey: DataKey | undefined;
  now: number;
};

/** A key's secret part, settled before its rows are built: its id, hash, `start`, and sealed plaintext if any. */
export type SealedKey = {
  id: string;
  hash: string;
  start: string;
  /** The plaintext, AES-256-GCM under the data key `encryptionKeyId`, bound to this id and the workspace. */
  encrypted: string | null;
  encryptionKeyId: string | null;
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
      throw new ApiError("CONFLICT", `the key at index ${index} is the same key as the one at index ${earlier}`, {
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
    keys: [],
    identities: new Map(),
    externalIds: [],
    encrypted: [],
    keyRoles: [],
    keyPermissions: [],
    ratelimits: [],
    dataKey: ctx.dataKey,
  };

  items.forEach((item, index) => {
    const { id, hash, start } = sealed[index]!;
    if (item.externalId !== undefined && !plan.identities.has(item.externalId)) {
      plan.identities.set(item.externalId, newId("id"));
    }
    plan.externalIds.push(item.externalId);

    const monthly = item.refill?.interval === "monthly";
    plan.keys.push({
      id,
      workspace_id: workspaceId,
      api_id: item.apiId,
      hash,
      start,
      prefix: item.prefix ?? null,
      name: item.name ?? null,
      owner_id: item.ownerId ?? null,
      identity_id: null,
      meta: item.meta ?? null,
      // v1 stores `expires: 0` as "never expires".
      expires: item.expires ? new Date(item.expires).toISOString() : null,
      remaining_requests: item.remaining ?? null,
      refill_day: monthly ? (item.refill?.refillDay ?? 1) : null,
      refill_amount: item.refill?.amount ?? null,
      enabled: item.enabled ?? true,
      environment: item.environment ?? null,
      created_at_m: now,
    });

    const { encrypted, encryptionKeyId } = sealed[index]!;
    if (encrypted !== null && encryptionKeyId !== null) {
      plan.encrypted.push({
        key_id: id,
        workspace_id: workspaceId,
        encrypted,
        encryption_key_id: encryptionKeyId,
        created_at_m: now,
      });
    }
    for (const role of new Set(item.roles)) {
      plan.keyRoles.push({ key_id: id, role_id: ctx.roleIds.get(role)!, workspace_id: workspaceId, created_at_m: now });
    }
    for (const permissionId of new Set((item.permissions ?? []).map((p) => ctx.permissionIds.get(p)!))) {
      plan.keyPermissions.push({ key_id: id, permission_id: permissionId, workspace_id: workspaceId, created_at_m: now });
    }
    if (item.ratelimit) {
      // Kept as the key's auto-applied `default` limit, as v1 did before June 2025 (see docs/api.md).
      plan.ratelimits.push({
        id: newId("rl"),
        workspace_id: workspaceId,
        name: "default",
        key_id: id,
        limit: item.ratelimit.limit,
        duration: item.ratelimit.refillInterval,
        auto_apply: true,
        created_at_m: now,
      });
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
