import type { Db } from "../../storage/client.js";
import { countCopyStatus, listLiveApisPage, listPendingKeysPage, type PendingKeyRow } from "../../storage/import/fromUnkey.repository.js";
import { findListableApi } from "../apis/apis.core.js";
import { keyPermission } from "../auth/permissions.query.js";
import type { Caller } from "../caller.js";
import { requirePermission } from "../principal.js";
import { idPage } from "../workspaces/workspaces.core.js";

// The reads of a copy from hosted Unkey's progress (issue 36: `keyhaven import --from-unkey --check` and the list of
// keys that are still pending at the end of a parallel run).

export type CopyStatus =
  | { apiId: string; found: false }
  | { apiId: string; found: true; keys: number; verifiable: number; pending: number; adopted: number };

/**
 * Per API of `apiIds`, in their order: its live keys, how many are verifiable (have a hash), pending (none yet) and
 * adopted (pending until a verification adopted them). An API the caller's workspace does not have (deleted, another
 * workspace's, none) is `found: false`. Needs read_api on every API named, checked before anything is read.
 */
export async function getCopyStatus(services: { db: Db }, caller: Caller, apiIds: string[]): Promise<CopyStatus[]> {
  for (const apiId of new Set(apiIds)) requirePermission(caller, keyPermission(caller.access, caller.workspaceId, apiId, null, "read_api"));
  const rows = await countCopyStatus(services.db, caller.workspaceId, [...new Set(apiIds)]);
  return apiIds.map((apiId): CopyStatus => {
    const row = rows.get(apiId);
    if (!row) return { apiId, found: false };
    return { apiId, found: true, keys: row.keys, verifiable: row.keys - row.pending, pending: row.pending, adopted: row.adopted };
  });
}

export type PendingKeysPage = { keys: PendingKeyRow[]; cursor?: string };

/**
 * A page of an API's pending keys (copied without their secret, not adopted yet) in id order, from `cursor` (the
 * first id of the page) on. Who may read it and how a refusal is told are as for the listing of the API's keys.
 */
export async function listPendingKeys(
  services: { db: Db },
  caller: Caller,
  input: { apiId: string; limit: number; cursor?: string | undefined },
): Promise<PendingKeysPage> {
  const api = await findListableApi(services.db, caller, input.apiId);
  // One row more than the page tells whether another follows.
  const rows = await listPendingKeysPage(services.db, {
    workspaceId: caller.workspaceId,
    apiId: api.id,
    fromId: input.cursor,
    limit: input.limit + 1,
  });
  const page: PendingKeysPage = { keys: rows.slice(0, input.limit) };
  if (rows.length > input.limit) page.cursor = rows[input.limit]!.id;
  return page;
}

/**
 * getCopyStatus for the workspace's APIs, a page at a time in API id order (each with its name): needs read_api on
 * every API (`*` or `api.*.read_api`), checked before anything is read.
 */
export async function listCopyStatus(services: { db: Db }, caller: Caller, input: { limit: number; cursor?: string | undefined }) {
  requirePermission(caller, { or: ["*", "api.*.read_api"] });
  const page = idPage(await listLiveApisPage(services.db, caller.workspaceId, input.limit + 1, input.cursor), input.limit);
  const statuses = await getCopyStatus(
    services,
    caller,
    page.items.map((a) => a.id),
  );
  const items = page.items.map((api, i) => ({ name: api.name, status: statuses[i]! }));
  return { items, ...(page.cursor !== undefined && { cursor: page.cursor }) };
}
