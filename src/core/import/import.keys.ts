import { hasPermission } from "../principal.js";
import type { Keyring } from "../../keyring/keyring.js";
import type { Db } from "../../storage/client.js";
import { NotFoundError, PermissionDeniedError } from "../../errors.js";
import { findLiveApiIds } from "../../storage/apis/apis.repository.js";
import type { ImportKey } from "./import.keys.types.js";
import { insertImport } from "../../storage/import/migrations.repository.js";
import type { StatisticsRefresher } from "../../storage/statistics.js";
import { resolveImportNames } from "./import.names.js";
import { requireNamesWithinBounds } from "../rbac/rbac.bounds.js";
import { describeImportPermission, importPermission } from "./import.permissions.js";
import { planImport } from "./import.plan.js";
import { requireRemainingForRefill } from "../keys/keys.credits.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";

/**
 * Imports existing keys, all or nothing, and returns their ids in the order of `items`. The checks, in this order
 * (the order a client observes): the caller's permissions for every key first (a caller that may not import learns
 * nothing about the workspace's APIs, roles or permissions; PermissionDeniedError with `details.keyIndex`), then
 * the APIs (NotFoundError), the roles and permissions named (PreconditionFailedError), a key repeated in the batch,
 * and a key that exists already (ConflictError with `details`). Before all of them, the per-request bound on the
 * names and links (InvalidInputError, rbac.bounds.ts).
 */
export async function importKeys(
  store: { db: Db; keyring: Keyring; statistics: Pick<StatisticsRefresher, "onImported">; changes: WriteGate },
  caller: Caller,
  items: ImportKey[],
  now: number,
): Promise<string[]> {
  const { db, keyring } = store;
  if (items.length === 0) return [];
  requireNamesWithinBounds(items);
  for (const item of items) requireRemainingForRefill(item, "import");
  const { workspaceId } = caller;

  items.forEach((item, index) => {
    if (!hasPermission(caller, importPermission(item.apiId))) {
      throw new PermissionDeniedError(describeImportPermission(item.apiId), [...caller.permissions], {
        refusal: { kind: "importKeyNotAllowed", index, need: describeImportPermission(item.apiId) },
        details: { keyIndex: index },
      });
    }
  });
  const apiIds = unique(items.map((k) => k.apiId));
  const liveApiIds = await findLiveApiIds(db, workspaceId, apiIds);
  const missingApi = items.find((item) => !liveApiIds.has(item.apiId));
  if (missingApi) throw new NotFoundError("api", missingApi.apiId);

  const dataKey = items.some((k) => k.plaintext !== undefined) ? await keyring.dataKeyFor(db, workspaceId) : undefined;
  // The names are resolved (and locked) in the transaction that writes the links: a role deleted meanwhile is then
  // either missing here (412, as if deleted before the request) or its delete waits for the commit. Resolved
  // before the transaction, a delete in between broke the links' foreign key (a 500).
  const keyIds = await store.changes.change(caller, async (tx) => {
    const { roleIds, permissionIds } = await resolveImportNames(tx, workspaceId, items);
    const plan = planImport(items, { workspaceId, roleIds, permissionIds, keyring, dataKey, now });
    const ids = plan.keys.map((k) => k.id);
    // One entry for the request, naming its keys (issue 35: a bulk import stays fast), written by the keys' own
    // insert (a CTE) rather than a statement of its own: the ids are made before the insert.
    const audit = store.changes.rowsOf(caller, [
      {
        event: "import.create_keys",
        targets: [...apiIds.map((id) => ({ type: "api", id })), ...ids.map((id) => ({ type: "key", id }))],
        description: `imported ${ids.length} ${ids.length === 1 ? "key" : "keys"} into ${apiIds.join(", ")}`,
        details: { count: ids.length },
      },
    ]);
    return insertImport(tx, plan, audit);
  });
  if (dataKey?.newRow) store.changes.afterCommit(caller, () => keyring.remember(dataKey));
  store.statistics.onImported(keyIds.length);
  return keyIds;
}

function unique<T>(values: T[]): T[] {
  return [...new Set(values)];
}
