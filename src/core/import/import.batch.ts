import type { Db } from "../../storage/client.js";
import { DomainError, type Refusal } from "../../errors.js";
import { describeUnexpected } from "../../log.js";
import { findLiveApiIds } from "../../storage/apis/apis.repository.js";
import {
  type BatchError,
  findExistingHashes,
  ImportConflictError,
  insertImport,
  type PendingBatch,
} from "../../storage/import/migrations.repository.js";
import type { ImportPlan } from "../../storage/import/import.rows.js";
import type { EnqueueKey, ImportKey } from "./import.keys.types.js";
import { findImportNames } from "./import.names.js";
import { planSealedImport } from "./import.plan.js";

// A key committed by a concurrent import between the existence check and the insert: check again, this often.
const CONFLICT_RETRIES = 3;

/**
 * Why a batch failed as a whole, as it is stored for migrations.getMigration: a domain error's refusal (worded by
 * the adapter that shows it), or its neutral text when it has none, else only what kind of failure it was (never a
 * driver's text, which may quote a key).
 */
export function batchFailureOf(err: unknown): Refusal {
  if (!(err instanceof DomainError)) return { kind: "importBatchFailed", failure: describeUnexpected(err) };
  return err.refusal ? { kind: "importBatchFailed", cause: err.refusal } : { kind: "importBatchFailed", failure: err.message };
}

/**
 * Imports what can be imported of a batch with createKeys' planner and insert, inside the claiming transaction.
 * A key that cannot be (it exists already, or a role or permission it names was deleted since it was enqueued)
 * is left out and reported by its index; the API being gone fails the whole batch. Answers the ids of the keys
 * imported too (the audit entry names them).
 */
export async function importBatch(
  tx: Db,
  batch: PendingBatch,
  /** Business time (the worker's clock), read at each attempt as the keys' creation time. */
  now: () => number,
): Promise<{ imported: number; keyIds: string[]; errors: BatchError[] }> {
  const { workspaceId } = batch;
  const liveApis = await findLiveApiIds(tx, workspaceId, [batch.apiId]);
  if (!liveApis.has(batch.apiId)) {
    return { imported: 0, keyIds: [], errors: [{ keyIndex: null, refusal: { kind: "notFound", what: "api", id: batch.apiId } }] };
  }
  const errors: BatchError[] = [];
  const { roleIds, permissionIds } = await findImportNames(tx, workspaceId, batch.keys);
  const candidates = batch.keys.flatMap((key, index) => {
    const missingRoles = (key.roles ?? []).filter((r) => !roleIds.has(r));
    const missingPermissions = (key.permissions ?? []).filter((p) => !permissionIds.has(p));
    if (missingRoles.length > 0 || missingPermissions.length > 0) {
      errors.push({ keyIndex: index, refusal: { kind: "importNamesGone", roles: missingRoles, permissions: missingPermissions } });
      return [];
    }
    return [{ key, index }];
  });

  const { inserted, existing } = await insertLeavingOutExisting(
    tx,
    candidates,
    ({ key }) => key.sealed.hash,
    (left) =>
      planSealedImport(
        left.map(({ key }) => toImportKey(batch.apiId, withoutSealed(key))),
        left.map(({ key }) => key.sealed),
        { workspaceId, roleIds, permissionIds, now: now() },
      ),
  );
  for (const { index } of existing) errors.push({ keyIndex: index, refusal: { kind: "importKeyExists", index } });
  errors.sort((a, b) => (a.keyIndex ?? -1) - (b.keyIndex ?? -1));
  return { imported: inserted.length, keyIds: inserted.map(({ key }) => key.sealed.id), errors };
}

/**
 * The one rule of both imports that leave out keys that exist already (the migration worker, v2's keys.migrateKeys),
 * inside the caller's transaction: the candidates whose hash a key (of any workspace, deleted ones included) has are
 * left out, the plan of the others inserted; a key committed by a concurrent import meanwhile is checked for again
 * (CONFLICT_RETRIES times). Returns what was inserted and what existed, each in the candidates' order.
 */
export async function insertLeavingOutExisting<C>(
  tx: Db,
  candidates: C[],
  hashOf: (candidate: C) => string,
  planOf: (left: C[]) => ImportPlan | Promise<ImportPlan>,
): Promise<{ inserted: C[]; existing: C[] }> {
  const existingHashes = new Set<string>();
  for (let attempt = 1; ; attempt++) {
    for (const hash of await findExistingHashes(tx, candidates.filter((c) => !existingHashes.has(hashOf(c))).map(hashOf))) {
      existingHashes.add(hash);
    }
    const left = candidates.filter((c) => !existingHashes.has(hashOf(c)));
    const existing = candidates.filter((c) => existingHashes.has(hashOf(c)));
    if (left.length === 0) return { inserted: [], existing };
    const plan = await planOf(left);
    try {
      // In a savepoint of the caller's transaction (never a transaction of its own): a conflict undoes only this
      // attempt, and the next one inserts what is left.
      await tx.transaction((attemptTx) => insertImport(attemptTx as unknown as Db, plan));
      return { inserted: left, existing };
    } catch (err) {
      if (!(err instanceof ImportConflictError) || attempt >= CONFLICT_RETRIES) throw err;
    }
  }
}

function withoutSealed<T extends { sealed: unknown }>(key: T): Omit<T, "sealed"> {
  const { sealed: _, ...rest } = key;
  return rest;
}

/** An enqueued key as createKeys' planner takes it: the batch's API, and the window as the limit's interval. */
export function toImportKey(apiId: string, key: EnqueueKey): ImportKey {
  const { ratelimit, ...rest } = key;
  return {
    ...rest,
    apiId,
    ...(ratelimit && {
      ratelimit: {
        limit: ratelimit.limit,
        refillRate: ratelimit.refillRate ?? ratelimit.limit,
        refillInterval: ratelimit.duration,
      },
    }),
  };
}
