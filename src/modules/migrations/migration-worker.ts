import type { Db } from "../../db/client.js";
import { findDependencyFailure } from "../../dependency.js";
import { ApiError } from "../../errors.js";
import { describeUnexpected } from "../../log.js";
import { findLiveApiIds } from "../apis/apis.repository.js";
import { findPermissionIdsByName, findRoleIdsByName } from "../permissions/permissions.repository.js";
import { planSealedImport } from "./import.plan.js";
import {
  type BatchError,
  claimPendingBatch,
  findExistingHashes,
  finishMigrationBatch,
  insertImport,
  type PendingBatch,
  recordBatchAttempt,
} from "./migrations.repository.js";
import { toImportKey } from "./migrations.schemas.js";

type Logger = { info(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };

/** How long an idle worker waits before looking for pending batches again (an enqueue in this process wakes it). */
export const MIGRATION_POLL_INTERVAL_MS = 1000;
/** Attempts that end in an unexpected error before a batch is given up. */
export const MIGRATION_MAX_ATTEMPTS = 5;
// A key committed by a concurrent import between the existence check and the insert: check again, this often.
const CONFLICT_RETRIES = 3;

/**
 * Imports the batches of `migrations.enqueueKeys` in the background, oldest first, one at a time per process.
 * Each batch is claimed and imported in one transaction (`FOR UPDATE SKIP LOCKED`), so replicas never process one
 * twice, and a batch whose process dies is pending again for the next worker, on any replica or after a restart.
 */
export class MigrationWorker {
  private loop: Promise<void> | undefined;
  private stopping = false;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private log: Logger = { info: () => {}, error: () => {} };

  constructor(
    private readonly db: Db,
    private readonly pollIntervalMs = MIGRATION_POLL_INTERVAL_MS,
  ) {}

  start(log?: Logger): void {
    if (log) this.log = log;
    if (this.loop) return;
    this.stopping = false;
    this.loop = this.run();
  }

  /** Looks for work now rather than at the next poll (called after an enqueue in this process). */
  wake(): void {
    if (!this.loop) return;
    // Woken while busy: look again right after the current batch instead of sleeping first.
    if (this.wakeUp) this.wakeUp();
    else this.woken = true;
  }

  /** Stops claiming batches and waits until the one being imported, if any, is committed. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wakeUp?.();
    await this.loop;
    this.loop = undefined;
  }

  private async run(): Promise<void> {
    while (!this.stopping) {
      let worked = false;
      try {
        worked = await this.processNext();
      } catch (err) {
        // An outage is logged once per change of state by the store (dependency.ts), not at every poll.
        if (!findDependencyFailure(err)) this.log.error({ err }, "importing an enqueued migration batch failed; it stays pending");
      }
      if (!worked && !this.stopping) await this.idle();
    }
  }

  private idle(): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.pollIntervalMs);
      timer.unref();
      this.wakeUp = done;
    });
  }

  /** Claims and imports the oldest pending batch; false when there was none. */
  async processNext(): Promise<boolean> {
    let claimed: number | undefined;
    try {
      return await this.db.transaction(async (tx) => {
        const batch = await claimPendingBatch(tx);
        if (!batch) return false;
        claimed = batch.id;
        const result = await importBatch(tx, batch);
        await finishMigrationBatch(tx, batch, result);
        this.log.info(
          { batchId: batch.id, migrationId: batch.migrationId, imported: result.imported, failed: result.errors.length },
          "imported an enqueued migration batch",
        );
        return true;
      });
    } catch (err) {
      if (claimed !== undefined) {
        // Shown by migrations.getMigration: an ApiError's message, else only what kind of failure it was.
        const message = err instanceof ApiError ? err.message : describeUnexpected(err);
        await recordBatchAttempt(this.db, claimed, message, MIGRATION_MAX_ATTEMPTS).catch(() => {});
      }
      throw err;
    }
  }
}

/**
 * Imports what can be imported of a batch with createKeys' planner and insert, inside the claiming transaction.
 * A key that cannot be (it exists already, or a role or permission it names was deleted since it was enqueued)
 * is left out and reported by its index; the API being gone fails the whole batch.
 */
async function importBatch(tx: Db, batch: PendingBatch): Promise<{ imported: number; errors: BatchError[] }> {
  const { workspaceId } = batch;
  const liveApis = await findLiveApiIds(tx, workspaceId, [batch.apiId]);
  if (!liveApis.has(batch.apiId)) {
    return { imported: 0, errors: [{ keyIndex: null, code: "NOT_FOUND", message: `api ${batch.apiId} not found` }] };
  }
  const errors: BatchError[] = [];
  const roleIds = await findRoleIdsByName(tx, workspaceId, [...new Set(batch.keys.flatMap((k) => k.roles ?? []))]);
  const permissionIds = await findPermissionIdsByName(tx, workspaceId, [
    ...new Set(batch.keys.flatMap((k) => k.permissions ?? [])),
  ]);
  let candidates = batch.keys.flatMap((key, index) => {
    const missingRoles = (key.roles ?? []).filter((r) => !roleIds.has(r));
    const missingPermissions = (key.permissions ?? []).filter((p) => !permissionIds.has(p));
    if (missingRoles.length > 0 || missingPermissions.length > 0) {
      const what = [
        missingRoles.length > 0 ? `roles ${JSON.stringify(missingRoles)}` : "",
        missingPermissions.length > 0 ? `permissions ${JSON.stringify(missingPermissions)}` : "",
      ].filter(Boolean);
      errors.push({ keyIndex: index, code: "PRECONDITION_FAILED", message: `${what.join(" and ")} no longer exist` });
      return [];
    }
    return [{ key, index }];
  });

  for (let attempt = 1; ; attempt++) {
    const existing = await findExistingHashes(tx, candidates.map((c) => c.key.sealed.hash));
    candidates = candidates.filter(({ index, key }) => {
      if (!existing.has(key.sealed.hash)) return true;
      errors.push({ keyIndex: index, code: "CONFLICT", message: `the key at index ${index} already exists` });
      return false;
    });
    if (candidates.length === 0) break;
    const plan = planSealedImport(
      candidates.map(({ key }) => toImportKey(batch.apiId, withoutSealed(key))),
      candidates.map(({ key }) => key.sealed),
      { workspaceId, roleIds, permissionIds, now: Date.now() },
    );
    try {
      // insertImport's own transaction is a savepoint here: a conflict undoes only this attempt.
      await insertImport(tx, plan);
      break;
    } catch (err) {
      if (!(err instanceof ApiError && err.code === "CONFLICT") || attempt >= CONFLICT_RETRIES) throw err;
    }
  }
  errors.sort((a, b) => (a.keyIndex ?? -1) - (b.keyIndex ?? -1));
  return { imported: candidates.length, errors };
}

function withoutSealed<T extends { sealed: unknown }>(key: T): Omit<T, "sealed"> {
  const { sealed: _, ...rest } = key;
  return rest;
}
