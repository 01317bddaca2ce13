import { hasPermission, requirePermission } from "../principal.js";
import type { Db } from "../../storage/client.js";
import { NotFoundError, PermissionDeniedError } from "../../errors.js";
import {
  listMigrationErrors,
  listMigrationIdsPage,
  listRetryingBatches,
  retryFailedBatches,
  summarizeMigration,
} from "../../storage/import/migrations.repository.js";
import type { Principal } from "../principal.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";
import { idPage } from "../workspaces/workspaces.core.js";

/** At most this many errors are listed; `keys.failed` counts them all. */
export const MAX_LISTED_ERRORS = 1000;
/** At most this many batches waiting to be tried again are listed; `batches.pending` counts them all. */
export const MAX_LISTED_RETRYING = 100;

const READ_NEED = `one of ["*", "api.*.read_api"], or "api.<apiId>.read_api" for every API of the migration`;

/**
 * The progress of a migration's enqueued batches: counts, the batches waiting to be retried, and why keys were not
 * imported. The caller needs read_api on every API of the migration (PermissionDeniedError, never naming them);
 * decided before the lookup where its permissions alone decide. NotFoundError when no batch has this migrationId.
 */
export async function readMigration(db: Db, caller: Principal, migrationId: string) {
  const everyApi = hasPermission(caller, { or: ["*", "api.*.read_api"] });
  const someApi = everyApi || [...caller.permissions].some((p) => /^api\.[^.]+\.read_api$/.test(p));
  if (!someApi) throw new PermissionDeniedError(READ_NEED, [...caller.permissions]);
  const summary = await summarizeMigration(db, caller.workspaceId, migrationId);
  if (!summary) throw new NotFoundError("migration", migrationId);
  if (!everyApi && !summary.apiIds.every((id) => caller.permissions.has(`api.${id}.read_api`))) {
    throw new PermissionDeniedError(READ_NEED, [...caller.permissions]);
  }
  const retrying = await listRetryingBatches(db, caller.workspaceId, migrationId, MAX_LISTED_RETRYING);
  const errors = await listMigrationErrors(db, caller.workspaceId, migrationId, MAX_LISTED_ERRORS);
  return { migrationId, batches: summary.batches, keys: summary.keys, retrying, errors };
}

/** What a root key needs (the operator holds `*`) to queue a migration's failed batches again: what importing into any API needs. */
export const RETRY_MIGRATION_NEED = { or: ["*", "api.*.create_key"] };

/**
 * Queues again a migration's batches that failed as a whole (an operator's act, once the cause is fixed; a root key
 * needs RETRY_MIGRATION_NEED) and returns how many; NotFoundError when the caller's workspace has no such migration.
 * One change, import.retry (the migration, how many batches and keys), when a batch was queued again; none when
 * there was none to retry.
 */
export async function retryMigration(services: { changes: WriteGate }, caller: Caller, migrationId: string): Promise<number> {
  requirePermission(caller, RETRY_MIGRATION_NEED);
  return services.changes.change(caller, async (tx, record) => {
    const retried = await retryFailedBatches(tx, caller.workspaceId, migrationId);
    if (retried === undefined) throw new NotFoundError("migration", migrationId);
    if (retried.batches > 0) {
      record({
        event: "import.retry",
        targets: [{ type: "migration", id: migrationId }],
        description: `queued again ${retried.batches} failed ${retried.batches === 1 ? "batch" : "batches"} of migration ${migrationId}`,
        details: { batches: retried.batches, count: retried.keys },
      });
    }
    return retried.batches;
  });
}

/**
 * The workspace's migrations of enqueued batches, a page at a time in migration id order, each with its counts (as
 * readMigration's). Needs read_api on every API (`*` or `api.*.read_api`): a list cannot leave out, unsaid, the
 * migrations of APIs the caller may not read.
 */
export async function listMigrations(db: Db, caller: Principal, input: { limit: number; cursor?: string | undefined }) {
  if (!hasPermission(caller, { or: ["*", "api.*.read_api"] })) {
    throw new PermissionDeniedError(`one of ["*", "api.*.read_api"]`, [...caller.permissions]);
  }
  const ids = await listMigrationIdsPage(db, caller.workspaceId, input.limit + 1, input.cursor);
  const page = idPage(
    ids.map((id) => ({ id })),
    input.limit,
  );
  const items = [];
  for (const { id } of page.items) {
    const summary = await summarizeMigration(db, caller.workspaceId, id);
    if (summary) items.push({ migrationId: id, batches: summary.batches, keys: summary.keys, apiIds: summary.apiIds });
  }
  return { items, ...(page.cursor !== undefined && { cursor: page.cursor }) };
}
