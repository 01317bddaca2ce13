import { apiPermission, type Grants, keyspaceUrn, type PermissionQuery } from "../auth/permissions.query.js";
import { hasPermission, requirePermission } from "../principal.js";
import type { Db } from "../../storage/client.js";
import { DeleteProtectedError, NotFoundError, PreconditionFailedError } from "../../errors.js";
import type { Keyring } from "../../keyring/keyring.js";
import { decryptKeyRows, requireDecryptPermission } from "../keys/keys.decrypt.js";
import { readKeysRatelimits } from "../keys/keys.read.js";
import { findApi, insertApi, type NewApi, setApiIpWhitelist, softDeleteApiWithKeys } from "../../storage/apis/apis.repository.js";
import { type ApiKeysFilter, countKeys, type KeyObjectRow, listKeyObjectRows } from "../../storage/keys/keyObjects.repository.js";
import type { Principal } from "../principal.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";

type ApiServices = { db: Db; clock: { now(): number } };
type ApiWriteServices = ApiServices & { changes: WriteGate };

/** The refusal for an API the caller's workspace does not have (deleted, another workspace's, or none). */
export const apiNotFound = (apiId: string) => new NotFoundError("api", apiId);

/** Creates an API in the caller's workspace; returns its id. */
export async function createApi(services: ApiWriteServices, caller: Caller, input: Omit<NewApi, "workspaceId">): Promise<string> {
  requirePermission(caller, { or: ["*", "api.*.create_api"] });
  return services.changes.change(caller, async (tx, record) => {
    const apiId = await insertApi(tx, { ...input, workspaceId: caller.workspaceId }, services.clock.now());
    const settings = ["storeEncryptedKeys", "defaultPrefix", "defaultBytes", "deleteProtection", "ipWhitelist"] as const;
    record({
      event: "api.create",
      targets: [{ type: "api", id: apiId, name: input.name }],
      description: `created api ${apiId}`,
      details: { fields: settings.filter((field) => input[field] !== undefined) },
    });
    return apiId;
  });
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
export async function deleteApi(services: ApiWriteServices, caller: Caller, apiId: string): Promise<void> {
  requirePermission(caller, apiPermission(apiId, "delete_api"));
  await services.changes.change(caller, async (tx, record) => {
    const outcome = await softDeleteApiWithKeys(tx, caller.workspaceId, apiId, services.clock.now());
    if (outcome === "not_found") throw apiNotFound(apiId);
    if (outcome === "protected") throw new DeleteProtectedError("api", apiId);
    record({
      event: "api.delete",
      targets: [{ type: "api", id: apiId }],
      description: `deleted api ${apiId} and its ${outcome.deletedKeys} keys`,
      details: { deletedKeys: outcome.deletedKeys },
    });
  });
}

/** Sets (or with null removes) an API's IP allow-list. */
export async function updateApi(
  services: ApiWriteServices,
  caller: Caller,
  input: { apiId: string; ipWhitelist: string | null },
): Promise<void> {
  requirePermission(caller, apiPermission(input.apiId, "update_api"));
  await services.changes.change(caller, async (tx, record) => {
    if (!(await setApiIpWhitelist(tx, caller.workspaceId, input.apiId, input.ipWhitelist, services.clock.now()))) {
      throw apiNotFound(input.apiId);
    }
    record({
      event: "api.update",
      targets: [{ type: "api", id: input.apiId }],
      description: `${input.ipWhitelist === null ? "removed" : "set"} the IP allow-list of api ${input.apiId}`,
      details: { fields: ["ipWhitelist"] },
    });
  });
}

/**
 * What listing an API's keys needs: read_key and read_api on it (or `*`); for a caller whose access policy counts URN
 * grants (v2), also read_key on any key of the keyspace together with read_keyspace on it, as URNs (contract §2 row 4).
 */
function listKeysPermission(grants: Grants, workspaceId: string, apiId: string): PermissionQuery {
  const tuples: PermissionQuery = {
    and: [{ or: ["api.*.read_key", `api.${apiId}.read_key`] }, { or: ["api.*.read_api", `api.${apiId}.read_api`] }],
  };
  if (!grants.urnGrants) return { or: ["*", tuples] };
  const urns = { and: [keyspaceUrn(workspaceId, apiId, "*", "read_key"), keyspaceUrn(workspaceId, apiId, null, "read_keyspace")] };
  return { or: ["*", urns, tuples] };
}

/** The caller may read the API's keys (read_key and read_api on it, or `*`), and the API is a live one of its workspace. */
export async function assertCanListKeys(services: Pick<ApiServices, "db">, caller: Caller, apiId: string): Promise<void> {
  requirePermission(caller, listKeysPermission(caller.access, caller.workspaceId, apiId));
  if (!(await findApi(services.db, caller.workspaceId, apiId))) throw apiNotFound(apiId);
}

/**
 * v2's way of listing an API's keys: the API is looked up first, and a caller that may not read its keys is told it
 * is not found (it cannot tell a forbidden API from a missing one); `decrypt` needs decrypt_key (403) and an API
 * that stores keys encrypted (412). A page from `fromId` on (inclusive), the id the next page starts from, the
 * plaintexts asked for, and each key's rate limits and its identity's.
 */
export async function listApiKeysFrom(
  services: ApiServices & { keyring: Keyring },
  caller: Caller,
  input: { apiId: string; limit: number; fromId?: string | undefined; externalId?: string | undefined; decrypt?: boolean | undefined },
) {
  const api = await findApi(services.db, caller.workspaceId, input.apiId);
  if (!api || !hasPermission(caller, listKeysPermission(caller.access, caller.workspaceId, input.apiId))) throw apiNotFound(input.apiId);
  if (input.decrypt) {
    requireDecryptPermission(caller, api.id, "*");
    if (!api.storeEncryptedKeys) throw new PreconditionFailedError("api", { kind: "recoverableNotSupported", apiId: api.id });
  }
  const filter: ApiKeysFilter = { workspaceId: caller.workspaceId, apiId: api.id, externalId: input.externalId };
  const found = await listKeyObjectRows(services.db, filter, { fromId: input.fromId, limit: input.limit + 1 });
  const keys = found.slice(0, input.limit);
  const [plaintexts, ratelimits] = await Promise.all([
    input.decrypt ? decryptKeyRows(services.db, services.keyring, keys) : new Map<string, string>(),
    readKeysRatelimits(services, keys),
  ]);
  return { keys, ...(found.length > input.limit && { nextId: found[input.limit]!.id }), plaintexts, ratelimits };
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
