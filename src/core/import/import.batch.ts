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
 * is left out and reported by its index; the API being gone fails the whole batch.
 */
export async function importBatch(
  tx: Db,
  batch: PendingBatch,
  /** Business time (the worker's clock), read at each attempt as the keys' creation time. */
  now: () => number,
): Promise<{ imported: number; errors: BatchError[] }> {
  const { workspaceId } = batch;
  const liveApis = await findLiveApiIds(tx, workspaceId, [batch.apiId]);
  if (!liveApis.has(batch.apiId)) {
    return { imported: 0, errors: [{ keyIndex: null, refusal: { kind: "notFound", what: "api", id: batch.apiId } }] };
  }
  const errors: BatchError[] = [];
  const { roleIds, permissionIds } = await findImportNames(tx, workspaceId, batch.keys);
  let candidates = batch.keys.flatMap((key, index) => {
    const missingRoles = (key.roles ?? []).filter((r) => !roleIds.has(r));
    const missingPermissions = (key.permissions ?? []).filter((p) => !permissionIds.has(p));
    if (missingRoles.length > 0 || missingPermissions.length > 0) {
      errors.push({ keyIndex: index, refusal: { kind: "importNamesGone", roles: missingRoles, permissions: missingPermissions } });
      return [];
    }
    return [{ key, index }];
  });

  for (let attempt = 1; ; attempt++) {
    const existing = await findExistingHashes(
      tx,
      candidates.map((c) => c.key.sealed.hash),
    );
    candidates = candidates.filter(({ index, key }) => {
      if (!existing.has(key.sealed.hash)) return true;
      errors.push({ keyIndex: index, refusal: { kind: "importKeyExists", index } });
      return false;
    });
    if (candidates.length === 0) break;
    const plan = planSealedImport(
      candidates.map(({ key }) => toImportKey(batch.apiId, withoutSealed(key))),
      candidates.map(({ key }) => key.sealed),
      { workspaceId, roleIds, permissionIds, now: now() },
    );
    try {
      // insertImport's own transaction is a savepoint here: a conflict undoes only this attempt.
      await insertImport(tx, plan);
      break;
    } catch (err) {
      if (!(err instanceof ImportConflictError) || attempt >= CONFLICT_RETRIES) throw err;
    }
  }
  errors.sort((a, b) => (a.keyIndex ?? -1) - (b.keyIndex ?? -1));
  return { imported: candidates.length, errors };
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
