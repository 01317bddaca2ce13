import { requirePermission } from "../principal.js";
import type { Clock } from "../../clock.js";
import type { Keyring } from "../../keyring/keyring.js";
import type { Db } from "../../storage/client.js";
import { NotFoundError } from "../../errors.js";
import { findApi } from "../../storage/apis/apis.repository.js";
import type { QueuedKey } from "../../storage/import/import.rows.js";
import { insertMigrationBatch } from "../../storage/import/migrations.repository.js";
import type { EnqueueKey } from "./import.keys.types.js";
import { resolveImportNames } from "./import.names.js";
import { requireNamesWithinBounds } from "../rbac/rbac.bounds.js";
import { importPermission } from "./import.permissions.js";
import { sealKeys } from "./import.plan.js";
import { requireRemainingForRefill } from "../keys/keys.credits.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";

export type EnqueueInput = { migrationId: string; apiId: string; keys: EnqueueKey[] };

/**
 * Stores a batch of keys for the migration worker to import (plaintexts sealed first, never stored in clear).
 * Returns whether a batch was stored (an empty one is not). The checks, in this order: the caller's permission for
 * the API (PermissionDeniedError), the API (NotFoundError), the roles and permissions named
 * (PreconditionFailedError), a key repeated in the batch (ConflictError with `details`). The batch is stored through
 * the write gate with its import.enqueue entry (the migration, the API, how many keys).
 */
export async function enqueueKeys(
  store: { db: Db; keyring: Keyring; clock: Clock; changes: WriteGate },
  caller: Caller,
  { migrationId, apiId, keys }: EnqueueInput,
): Promise<boolean> {
  const { db, keyring } = store;
  const { workspaceId } = caller;
  requireNamesWithinBounds(keys);
  for (const key of keys) requireRemainingForRefill(key, "import");
  requirePermission(caller, importPermission(apiId));
  if (!(await findApi(db, workspaceId, apiId))) throw new NotFoundError("api", apiId);
  if (keys.length === 0) return false;
  await resolveImportNames(db, workspaceId, keys);

  const dataKey = keys.some((k) => k.plaintext !== undefined) ? await keyring.dataKeyFor(db, workspaceId) : undefined;
  const sealed = sealKeys(keys, { keyring, dataKey });
  const queued: QueuedKey[] = keys.map(({ plaintext: _, hash: __, ...settings }, i) => ({
    ...settings,
    sealed: sealed[i]!,
  }));
  await store.changes.change(caller, async (tx, record) => {
    await insertMigrationBatch(tx, { workspaceId, migrationId, apiId, keys: queued, dataKey }, store.clock.now());
    record({
      event: "import.enqueue",
      targets: [
        { type: "migration", id: migrationId },
        { type: "api", id: apiId },
      ],
      description: `enqueued ${keys.length} ${keys.length === 1 ? "key" : "keys"} of migration ${migrationId} for ${apiId}`,
      details: { count: keys.length },
    });
  });
  if (dataKey?.newRow) store.changes.afterCommit(caller, () => keyring.remember(dataKey));
  return true;
}
