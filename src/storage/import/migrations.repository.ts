import { and, asc, eq, gt, inArray, isNotNull, isNull, lte, or, sql } from "drizzle-orm";
import type { DataKey } from "../crypto/encryptionKeys.repository.js";
import type { Db } from "../client.js";
import { insertRecordset, recordsetInsert, textArray } from "../bulk.js";
import { indexFirst } from "../indexFirst.js";
import { auditLog, encryptedKeys, encryptionKeys, keys, migrationBatches, migrationErrors } from "../schema.js";
import { ConflictError, describeRefusal, type Refusal } from "../../errors.js";
import { upsertIdentities } from "../identities/identities.repository.js";
import { upsertKeyRatelimits, setKeyDefaultRatelimits } from "../keys/keys.ratelimit.repository.js";
import { insertKeyLinks } from "../keys/keys.rbac.repository.js";
import type { ImportPlan, QueuedKey } from "./import.rows.js";

/** A key of the import exists already (by hash, in any workspace): nothing of the import was written. */
export class ImportConflictError extends ConflictError {
  declare readonly index: number;
  constructor(index: number) {
    super("key", `the key at index ${index} already exists; no key of this request was created`, index, {
      reason: "KEY_EXISTS",
      keyIndex: index,
    });
  }
}

/**
 * The second phase of an import, in the caller's transaction `tx`: it only inserts. A key whose hash already exists
 * (in any workspace, or committed meanwhile by a concurrent import) is skipped by ON CONFLICT, detected by its
 * missing id, and turned into a CONFLICT for the caller to roll back (the whole transaction, or the savepoint of
 * one attempt). `audit`: the change's audit rows, written by the keys' insert itself (a CTE: one statement fewer
 * for the import's throughput), so they commit or roll back with the keys. Returns the key ids in request order.
 */
export async function insertImport(tx: Db, plan: ImportPlan, audit: (typeof auditLog.$inferInsert)[] = []): Promise<string[]> {
  if (plan.dataKey?.newRow) await tx.insert(encryptionKeys).values(plan.dataKey.newRow);

  if (plan.identities.size > 0) {
    // v1's migrations.createKeys stores no meta (null) on the identities it creates; v2's migrateKeys `{}`.
    const idByExternalId = await upsertIdentities(tx, plan.workspaceId, [...plan.identities], plan.identityMeta ?? null, plan.now);
    plan.keys.forEach((row, i) => {
      const externalId = plan.externalIds[i];
      if (externalId !== undefined) row.identityId = idByExternalId.get(externalId) ?? null;
    });
  }

  const inserted = await insertRecordset<typeof keys, { id: string }>(
    tx,
    keys,
    plan.keys,
    sql`on conflict (hash) do nothing returning id`,
    audit.length > 0 ? sql`with audit as (${recordsetInsert(auditLog, audit)}) ` : sql``,
  );
  if (inserted.length !== plan.keys.length) {
    const ids = new Set(inserted.map((r) => r.id));
    const index = plan.keys.findIndex((k) => !ids.has(k.id));
    throw new ImportConflictError(index);
  }

  await insertRecordset(tx, encryptedKeys, plan.encrypted);
  await insertKeyLinks(tx, "role", plan.keyRoles, plan.now);
  await insertKeyLinks(tx, "permission", plan.keyPermissions, plan.now);
  await setKeyDefaultRatelimits(tx, plan.ratelimits, plan.now);
  await upsertKeyRatelimits(tx, plan.namedRatelimits ?? [], plan.now);
  return plan.keys.map((k) => k.id);
}

// migrations.enqueueKeys: the queue of batches and what became of them

export type PendingBatch = {
  id: number;
  workspaceId: string;
  migrationId: string;
  apiId: string;
  keys: QueuedKey[];
  keyCount: number;
  /** Attempts so far that ended in a transient failure. */
  attempts: number;
};

/**
 * Stores a batch for the worker, with the workspace's new data key if its ciphertexts are the first under it, in the
 * caller's transaction `tx` (the write gate's).
 */
export async function insertMigrationBatch(
  tx: Db,
  batch: { workspaceId: string; migrationId: string; apiId: string; keys: QueuedKey[]; dataKey: DataKey | undefined },
  now: number,
): Promise<number> {
  if (batch.dataKey?.newRow) await tx.insert(encryptionKeys).values(batch.dataKey.newRow);
  const [row] = await tx
    .insert(migrationBatches)
    .values({
      workspaceId: batch.workspaceId,
      migrationId: batch.migrationId,
      apiId: batch.apiId,
      keys: batch.keys,
      keyCount: batch.keys.length,
      createdAtM: now,
    })
    .returning({ id: migrationBatches.id });
  return row!.id;
}

/**
 * The oldest pending batch due at `now` (not waiting for its next attempt), locked until the caller's transaction
 * ends; batches locked by another worker (another replica) are skipped, so no batch is ever processed twice. If
 * the process dies, the lock goes with its connection and the batch is pending again.
 */
export async function claimPendingBatch(tx: Db, now: number): Promise<PendingBatch | undefined> {
  const [row] = await tx
    .select({
      id: migrationBatches.id,
      workspaceId: migrationBatches.workspaceId,
      migrationId: migrationBatches.migrationId,
      apiId: migrationBatches.apiId,
      keys: migrationBatches.keys,
      keyCount: migrationBatches.keyCount,
      attempts: migrationBatches.attempts,
    })
    .from(migrationBatches)
    .where(
      and(eq(migrationBatches.status, "pending"), or(isNull(migrationBatches.nextAttemptAtM), lte(migrationBatches.nextAttemptAtM, now))),
    )
    .orderBy(asc(migrationBatches.id))
    .limit(1)
    .for("update", { skipLocked: true });
  return row && { ...row, keys: (row.keys ?? []) as QueuedKey[] };
}

/** Hashes among `hashes` that a key (in any workspace, deleted ones included) already has. */
export async function findExistingHashes(db: Db, hashes: string[]): Promise<Set<string>> {
  if (hashes.length === 0) return new Set();
  const rows = await db
    // Found by its hash, so never a pending key's null (schema.ts).
    .select({ hash: sql<string>`${keys.hash}` })
    // From the hash index whatever the statistics say (indexFirst.ts): imports are when they are least fresh.
    .from(indexFirst(keys, sql`${keys.hash} = any(${textArray(hashes)})`));
  return new Set(rows.map((r) => r.hash));
}

/** Why keys of a batch were not imported: one of its keys (`keyIndex`), or the whole batch (null). */
export type BatchError = { keyIndex: number | null; refusal: Refusal };

/**
 * Marks a processed batch done (every key imported) or failed, with the reason for each key not imported, and
 * drops its sealed keys: what was imported lives in `keys` now, and what was not cannot be by retrying.
 */
export async function finishMigrationBatch(
  db: Db,
  batch: PendingBatch,
  result: { imported: number; errors: BatchError[] },
  now: number,
): Promise<void> {
  const failed = batch.keys.length - result.imported;
  if (result.errors.length > 0) {
    await db.insert(migrationErrors).values(
      result.errors.map((e) => ({
        batchId: batch.id,
        workspaceId: batch.workspaceId,
        migrationId: batch.migrationId,
        keyIndex: e.keyIndex,
        code: e.refusal.kind,
        message: describeRefusal(e.refusal),
        refusal: e.refusal,
        createdAtM: now,
      })),
    );
  }
  await db
    .update(migrationBatches)
    .set({
      status: failed === 0 ? "done" : "failed",
      imported: result.imported,
      failed,
      processedAtM: now,
      keys: null,
      nextAttemptAtM: null,
    })
    .where(eq(migrationBatches.id, batch.id));
}

/** A transient failure: the batch stays pending, not claimed again before `nextAttemptAtM`. */
export async function deferMigrationBatch(
  db: Db,
  batch: PendingBatch,
  failure: { message: string; nextAttemptAtM: number },
): Promise<void> {
  await db
    .update(migrationBatches)
    .set({ attempts: batch.attempts + 1, lastError: failure.message, nextAttemptAtM: failure.nextAttemptAtM })
    .where(and(eq(migrationBatches.id, batch.id), eq(migrationBatches.status, "pending")));
}

/**
 * A failure that retrying cannot fix ended the batch's import, so none of its keys was imported: the batch is
 * failed as a whole, with the reason, in the caller's transaction `tx`. Its sealed keys are kept, for the operator
 * to retry it once the cause is fixed (retryFailedBatches); none of them exists as a key. False when the batch was
 * no longer pending (nothing changed).
 */
export async function failMigrationBatch(tx: Db, batch: PendingBatch, refusal: Refusal, now: number): Promise<boolean> {
  const message = describeRefusal(refusal);
  const [row] = await tx
    .update(migrationBatches)
    .set({ status: "failed", imported: 0, failed: batch.keyCount, processedAtM: now, lastError: message, nextAttemptAtM: null })
    .where(and(eq(migrationBatches.id, batch.id), eq(migrationBatches.status, "pending")))
    .returning({ id: migrationBatches.id });
  if (!row) return false;
  await tx.insert(migrationErrors).values({
    batchId: batch.id,
    workspaceId: batch.workspaceId,
    migrationId: batch.migrationId,
    keyIndex: null,
    code: refusal.kind,
    message,
    refusal,
    createdAtM: now,
  });
  return true;
}

/**
 * Puts the migration's failed batches that still hold their keys (failed as a whole) back in the queue, as if
 * just enqueued, and forgets their errors, in the caller's transaction `tx`. Returns how many batches and keys;
 * undefined when the workspace has no such migration.
 */
export async function retryFailedBatches(
  tx: Db,
  workspaceId: string,
  migrationId: string,
): Promise<{ batches: number; keys: number } | undefined> {
  const ofMigration = and(eq(migrationBatches.workspaceId, workspaceId), eq(migrationBatches.migrationId, migrationId));
  const [any] = await tx.select({ id: migrationBatches.id }).from(migrationBatches).where(ofMigration).limit(1);
  if (!any) return undefined;
  const retried = await tx
    .update(migrationBatches)
    .set({ status: "pending", imported: 0, failed: 0, attempts: 0, lastError: null, nextAttemptAtM: null, processedAtM: null })
    .where(and(ofMigration, eq(migrationBatches.status, "failed"), isNotNull(migrationBatches.keys)))
    .returning({ id: migrationBatches.id, keyCount: migrationBatches.keyCount });
  const ids = retried.map((r) => r.id);
  if (ids.length > 0) await tx.delete(migrationErrors).where(inArray(migrationErrors.batchId, ids));
  return { batches: ids.length, keys: retried.reduce((n, r) => n + r.keyCount, 0) };
}

export type MigrationSummary = {
  apiIds: string[];
  batches: { pending: number; done: number; failed: number };
  keys: { enqueued: number; imported: number; failed: number };
};

/** What the workspace's batches of `migrationId` add up to; undefined when it has none. */
export async function summarizeMigration(db: Db, workspaceId: string, migrationId: string): Promise<MigrationSummary | undefined> {
  const rows = await db
    .select({
      apiId: migrationBatches.apiId,
      status: migrationBatches.status,
      batches: sql<string>`count(*)::int8`,
      enqueued: sql<string>`sum(${migrationBatches.keyCount})::int8`,
      imported: sql<string>`sum(${migrationBatches.imported})::int8`,
      failed: sql<string>`sum(${migrationBatches.failed})::int8`,
    })
    .from(migrationBatches)
    .where(and(eq(migrationBatches.workspaceId, workspaceId), eq(migrationBatches.migrationId, migrationId)))
    .groupBy(migrationBatches.apiId, migrationBatches.status);
  if (rows.length === 0) return undefined;
  const summary: MigrationSummary = {
    apiIds: [...new Set(rows.map((r) => r.apiId))],
    batches: { pending: 0, done: 0, failed: 0 },
    keys: { enqueued: 0, imported: 0, failed: 0 },
  };
  for (const r of rows) {
    const status = r.status as keyof MigrationSummary["batches"];
    summary.batches[status] += Number(r.batches);
    summary.keys.enqueued += Number(r.enqueued);
    summary.keys.imported += Number(r.imported);
    summary.keys.failed += Number(r.failed);
  }
  return summary;
}

/** The migration's pending batches whose last attempt failed (transiently): they will be tried again. */
export async function listRetryingBatches(db: Db, workspaceId: string, migrationId: string, limit: number) {
  return db
    .select({
      batchId: migrationBatches.id,
      enqueuedAt: migrationBatches.createdAtM,
      attempts: migrationBatches.attempts,
      lastError: migrationBatches.lastError,
      nextAttemptAt: migrationBatches.nextAttemptAtM,
    })
    .from(migrationBatches)
    .where(
      and(
        eq(migrationBatches.workspaceId, workspaceId),
        eq(migrationBatches.migrationId, migrationId),
        eq(migrationBatches.status, "pending"),
        gt(migrationBatches.attempts, 0),
      ),
    )
    .orderBy(asc(migrationBatches.id))
    .limit(limit);
}

/** The first `limit` errors of a migration, in the order the batches were enqueued and the keys were in them. */
export async function listMigrationErrors(db: Db, workspaceId: string, migrationId: string, limit: number) {
  return db
    .select({
      batchId: migrationErrors.batchId,
      enqueuedAt: migrationBatches.createdAtM,
      index: migrationErrors.keyIndex,
      code: migrationErrors.code,
      message: migrationErrors.message,
      refusal: migrationErrors.refusal,
    })
    .from(migrationErrors)
    .innerJoin(migrationBatches, eq(migrationBatches.id, migrationErrors.batchId))
    .where(and(eq(migrationErrors.workspaceId, workspaceId), eq(migrationErrors.migrationId, migrationId)))
    .orderBy(asc(migrationErrors.batchId), sql`${migrationErrors.keyIndex} asc nulls first`, asc(migrationErrors.id))
    .limit(limit);
}

/**
 * Up to `limit` of the workspace's migration ids (of enqueued batches) in id order, after `after`: a scan of
 * migration_batches_migration_idx (workspace_id, migration_id), which yields them in this order.
 */
export async function listMigrationIdsPage(db: Db, workspaceId: string, limit: number, after: string | undefined): Promise<string[]> {
  const rows = await db
    .selectDistinct({ migrationId: migrationBatches.migrationId })
    .from(migrationBatches)
    .where(and(eq(migrationBatches.workspaceId, workspaceId), after === undefined ? undefined : gt(migrationBatches.migrationId, after)))
    .orderBy(asc(migrationBatches.migrationId))
    .limit(limit);
  return rows.map((r) => r.migrationId);
}
