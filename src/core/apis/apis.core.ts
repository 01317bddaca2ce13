import { apiPermission } from "../auth/permissions.query.js";
import { requirePermission } from "../principal.js";
import type { Db } from "../../storage/client.js";
import { DeleteProtectedError, NotFoundError } from "../../errors.js";
import { findApi, insertApi, type NewApi, setApiIpWhitelist, softDeleteApiWithKeys } from "../../storage/apis/apis.repository.js";
import { type ApiKeysFilter, countKeys, type KeyObjectRow, listKeyObjectRows } from "../../storage/keys/keyObjects.repository.js";
import type { Principal } from "../principal.js";

type ApiServices = { db: Db; clock: { now(): number } };

/** The refusal for an API the caller's workspace does not have (deleted, another workspace's, or none). */
export const apiNotFound = (apiId: string) => new NotFoundError("api", apiId);

/** Creates an API in the caller's workspace; returns its id. */
export async function createApi(services: ApiServices, caller: Principal, input: Omit<NewApi, "workspaceId">): Promise<string> {
  requirePermission(caller, { or: ["*", "api.*.create_api"] });
  return insertApi(services.db, { ...input, workspaceId: caller.workspaceId }, services.clock.now());
}

export type Api = { id: string; workspaceId: string; name: string; ipWhitelist: string | null };

/** A live API of the caller's workspace. */
export async function getApi(services: Pick<ApiServices, "db">, caller: Principal, apiId: string): Promise<Api> {
  requirePermission(caller, apiPermission(apiId, "read_api"));
  const api = await findApi(services.db, caller.workspaceId, apiId);
  if (!api) throw apiNotFound(apiId);
  return { id: api.id, workspaceId: api.workspaceId, name: api.name, ipWhitelist: api.ipWhitelist };
}

/** Deletes an API and all its keys; refused (DeleteProtectedError) for an API protected from deletions. */
export async function deleteApi(services: ApiServices, caller: Principal, apiId: string): Promise<void> {
  requirePermission(caller, apiPermission(apiId, "delete_api"));
  const outcome = await softDeleteApiWithKeys(services.db, caller.workspaceId, apiId, services.clock.now());
  if (outcome === "not_found") throw apiNotFound(apiId);
  if (outcome === "protected") throw new DeleteProtectedError("api", apiId);
}

/** Sets (or with null removes) an API's IP allow-list. */
export async function updateApi(
  services: ApiServices,
  caller: Principal,
  input: { apiId: string; ipWhitelist: string | null },
): Promise<void> {
  requirePermission(caller, apiPermission(input.apiId, "update_api"));
  if (!(await setApiIpWhitelist(services.db, caller.workspaceId, input.apiId, input.ipWhitelist, services.clock.now()))) {
    throw apiNotFound(input.apiId);
  }
}

/** The caller may read the API's keys (read_key and read_api on it, or `*`), and the API is a live one of its workspace. */
export async function assertCanListKeys(services: Pick<ApiServices, "db">, caller: Principal, apiId: string): Promise<void> {
  requirePermission(caller, {
    or: ["*", { and: [{ or: ["api.*.read_key", `api.${apiId}.read_key`] }, { or: ["api.*.read_api", `api.${apiId}.read_api`] }] }],
  });
  if (!(await findApi(services.db, caller.workspaceId, apiId))) throw apiNotFound(apiId);
}

/**
 * A page of the API's live keys by id after `cursor`, the cursor of the next page when there is one, and how many
 * match in all. `externalId` (the identity's) wins over `ownerId` when both are given. Call assertCanListKeys first.
 */
export async function listApiKeys(
  services: Pick<ApiServices, "db">,
  caller: Principal,
  input: { apiId: string; limit: number; cursor?: string | undefined; ownerId?: string | undefined; externalId?: string | undefined },
): Promise<{ keys: KeyObjectRow[]; cursor?: string; total: number }> {
  const filter: ApiKeysFilter = {
    workspaceId: caller.workspaceId,
    apiId: input.apiId,
    externalId: input.externalId,
    ownerId: input.externalId === undefined ? input.ownerId : undefined,
  };
  // One row more than the page tells whether another page follows, so the last page carries no cursor.
  const rows = await listKeyObjectRows(services.db, filter, { cursor: input.cursor, limit: input.limit + 1 });
  const page = rows.slice(0, input.limit);
  const total = await countKeys(services.db, filter);
  return { keys: page, ...(rows.length > input.limit && { cursor: page.at(-1)!.id }), total };
}
