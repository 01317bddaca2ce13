import { apiPermission, type Grants, keyPermission, keyspaceUrn, type PermissionQuery } from "../auth/permissions.query.js";
import { hasPermission, requirePermission } from "../principal.js";
import { requireAccess } from "../access.js";
import type { Db } from "../../storage/client.js";
import { DeleteProtectedError, InvalidInputError, NotFoundError, PreconditionFailedError } from "../../errors.js";
import { requireApiSettingsWithinBounds } from "./apis.bounds.js";
import type { Keyring } from "../../keyring/keyring.js";
import { decryptKeyRows, requireDecryptPermission } from "../keys/keys.decrypt.js";
import { readKeysRatelimits } from "../keys/keys.read.js";
import type { NamedRatelimit } from "../../storage/keys/keys.ratelimit.repository.js";
import {
  type ApiListRow,
  countLiveKeysByApi,
  findApi,
  insertApi,
  listApisPage,
  type NewApi,
  type ApiChanges,
  updateApiSettings,
  softDeleteApiWithKeys,
} from "../../storage/apis/apis.repository.js";
import { KEY_LIST_FILTERS, type KeyListFilter, type KeyListRow, searchApiKeysPage } from "../../storage/keys/keys.search.repository.js";
import { isStorableText } from "../../storage/lookupText.js";
import { parseUrn } from "../auth/permissions.urn.js";
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
  requireApiSettingsWithinBounds(input);
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

/** The settings apis.updateApi changes, in the order an audit entry names them. */
export const API_UPDATE_FIELDS = ["name", "defaultPrefix", "defaultBytes", "deleteProtection", "ipWhitelist"] as const;

/** What apis.updateApi is given: the API, and each setting to change (null removes one that may be absent). */
export type UpdateApiInput = { apiId: string } & ApiChanges;

/**
 * Changes the given settings of an API (update_api on it): its name, its key defaults (prefix, byte length; null
 * removes them), its delete protection and its IP allow-list (null removes it). Only the settings given change; at
 * least one must be (else InvalidInputError), each within its bounds (apis.bounds.ts). One `api.update` audit entry
 * names the fields changed, never their values. The next verification and the next keys.createKey on every replica
 * see the change (updateApiSettings, ApiSettingsCache).
 */
export async function updateApi(services: ApiWriteServices, caller: Caller, input: UpdateApiInput): Promise<void> {
  requirePermission(caller, apiPermission(input.apiId, "update_api"));
  const fields = API_UPDATE_FIELDS.filter((field) => input[field] !== undefined);
  if (fields.length === 0) {
    throw new InvalidInputError(`Nothing to change: give at least one of ${API_UPDATE_FIELDS.join(", ")}.`);
  }
  requireApiSettingsWithinBounds(input);
  const changes: ApiChanges = {};
  for (const field of fields) Object.assign(changes, { [field]: input[field] });
  await services.changes.change(caller, async (tx, record) => {
    if (!(await updateApiSettings(tx, caller.workspaceId, input.apiId, changes, services.clock.now()))) {
      throw apiNotFound(input.apiId);
    }
    record({
      event: "api.update",
      targets: [{ type: "api", id: input.apiId }],
      description: `changed the ${fields.join(", ")} of api ${input.apiId}`,
      details: { fields },
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

/**
 * Where the surfaces' listings of an API's keys differ, each adapter states them in full (no default). Who may list,
 * in which order it is checked and how a refusal is told are the caller's access policy.
 */
export type ListApiKeysRules = {
  /** `decrypt` on an API that does not store encrypted keys: refused (v2's 412), or answered without plaintexts (v1). */
  readonly decryptNeedsEncryptingApi: boolean;
  /**
   * What a page's cursor names: "after" (the page starts after it; the next cursor is this page's last id, v1), or
   * "from" (the page starts at it; the next cursor is the next page's first id, v2).
   */
  readonly cursor: "after" | "from";
  /** Whether the answer counts every key matching the filters (`total`, one more statement). */
  readonly total: boolean;
  /** Whether each key's rate limits and its identity's are read with the page (two more statements). */
  readonly ratelimits: boolean;
};

export type ApiKeysPage = {
  keys: KeyObjectRow[];
  /** The cursor of the next page, absent on the last one. */
  cursor?: string;
  total?: number;
  /** The plaintexts asked for (`decrypt`), of the keys stored encrypted. */
  plaintexts: Map<string, string>;
  ratelimits?: Map<string, { key: NamedRatelimit[]; identity: NamedRatelimit[] }>;
};

/**
 * The live API `apiId` of the caller's workspace, if the caller may list its keys (read_key and read_api, as
 * listKeysPermission says), checked before or after the lookup and refused as forbidden or as not found as its access
 * policy says. Every list of an API's keys asks it (apis.listKeys, keyhaven.listPendingKeys).
 */
export async function findListableApi(db: Db, caller: Caller, apiId: string) {
  const mayList = listKeysPermission(caller.access, caller.workspaceId, apiId);
  const notFound = () => apiNotFound(apiId);
  if (caller.access.check === "beforeLookup") requireAccess(caller, mayList, notFound);
  const api = await findApi(db, caller.workspaceId, apiId);
  if (!api) throw notFound();
  if (caller.access.check === "afterLookup") requireAccess(caller, mayList, notFound);
  return api;
}

/**
 * A page of a live API's keys by id: the caller must hold read_key and read_api on it (or `*`, or the URNs where its
 * access policy counts them), checked before or after the API is looked up and refused as forbidden or as not found
 * as the policy says; `decrypt` needs decrypt_key (403). `externalId` (the identity's) wins over `ownerId`.
 */
export async function listApiKeys(
  services: ApiServices & { keyring: Keyring },
  caller: Caller,
  input: {
    apiId: string;
    limit: number;
    cursor?: string | undefined;
    ownerId?: string | undefined;
    externalId?: string | undefined;
    decrypt?: boolean | undefined;
  },
  rules: ListApiKeysRules,
): Promise<ApiKeysPage> {
  const api = await findListableApi(services.db, caller, input.apiId);
  if (input.decrypt) {
    requireDecryptPermission(caller, api.id, "*");
    if (rules.decryptNeedsEncryptingApi && !api.storeEncryptedKeys) {
      throw new PreconditionFailedError("api", { kind: "recoverableNotSupported", apiId: api.id });
    }
  }
  const filter: ApiKeysFilter = {
    workspaceId: caller.workspaceId,
    apiId: api.id,
    externalId: input.externalId,
    ownerId: input.externalId === undefined ? input.ownerId : undefined,
  };
  const from = rules.cursor === "after" ? { cursor: input.cursor } : { fromId: input.cursor };
  // One row more than the page tells whether another page follows, so the last page carries no cursor.
  const rows = await listKeyObjectRows(services.db, filter, { ...from, limit: input.limit + 1 });
  const keys = rows.slice(0, input.limit);
  const more = rows.length > input.limit;
  const [plaintexts, ratelimits, total] = await Promise.all([
    input.decrypt ? decryptKeyRows(services.db, services.keyring, keys) : new Map<string, string>(),
    rules.ratelimits ? readKeysRatelimits(services, keys) : undefined,
    rules.total ? countKeys(services.db, filter) : undefined,
  ]);
  const page: ApiKeysPage = { keys, plaintexts };
  if (more) page.cursor = rules.cursor === "after" ? keys.at(-1)!.id : rows[input.limit]!.id;
  if (total !== undefined) page.total = total;
  if (ratelimits !== undefined) page.ratelimits = ratelimits;
  return page;
}

/** What reading every API of the workspace takes: `*`, `api.*.read_api`, or (where URNs count) `keyspaces/*#read_api`. */
export function readAnyApiPermission(caller: Caller): PermissionQuery {
  const tuples = ["*", "api.*.read_api"];
  return caller.access.urnGrants ? { or: [...tuples, keyspaceUrn(caller.workspaceId, "*", null, "read_api")] } : { or: tuples };
}

/**
 * The APIs whose read_api the caller holds one by one (`api.<apiId>.read_api`, or the URN of that keyspace where
 * URNs count): a caller without readAnyApiPermission sees only these. Bounded by the permissions it holds.
 */
function singlyReadableApiIds(caller: Caller): string[] {
  const ids = new Set<string>();
  for (const permission of caller.permissions) {
    const tuple = /^api\.([^.]+)\.read_api$/.exec(permission);
    if (tuple && tuple[1] !== "*") ids.add(tuple[1]!);
    const urn = caller.access.urnGrants ? parseUrn(permission) : undefined;
    if (urn && urn.path.length === 2 && urn.path[0] === "keyspaces" && !urn.path[1]!.includes("*")) ids.add(urn.path[1]!);
  }
  return [...ids].filter((apiId) => hasPermission(caller, keyPermission(caller.access, caller.workspaceId, apiId, null, "read_api")));
}

export type ApiSummary = ApiListRow & { keys: number };
export type ApisPage = { apis: ApiSummary[]; cursor?: string };

/**
 * A page of the workspace's live APIs the caller may read (all of them with readAnyApiPermission, else those it
 * holds read_api on one by one), in id order after `cursor`, each with its number of live keys: one grouped count
 * for the page (countLiveKeysByApi), never the keys themselves.
 */
export async function listApis(
  services: Pick<ApiServices, "db">,
  caller: Caller,
  input: { limit: number; cursor?: string | undefined },
): Promise<ApisPage> {
  const ids = hasPermission(caller, readAnyApiPermission(caller)) ? undefined : singlyReadableApiIds(caller);
  if (ids !== undefined && ids.length === 0) return { apis: [] };
  const cursor = input.cursor !== undefined && isStorableText(input.cursor) ? input.cursor : undefined;
  const rows = await listApisPage(services.db, caller.workspaceId, { after: cursor, limit: input.limit + 1, ids });
  const apis = rows.slice(0, input.limit);
  const counts = await countLiveKeysByApi(
    services.db,
    apis.map((a) => a.id),
  );
  const page: ApisPage = { apis: apis.map((a) => ({ ...a, keys: counts.get(a.id) ?? 0 })) };
  if (rows.length > input.limit) page.cursor = apis.at(-1)!.id;
  return page;
}

/** An API's settings as the console shows them: every column a person set (getApi's, and the key defaults). */
export type ApiSettings = Api & {
  storeEncryptedKeys: boolean;
  defaultPrefix: string | null;
  defaultBytes: number | null;
  deleteProtection: boolean;
  createdAtM: number;
};

/** A live API of the caller's workspace with all its settings (read_api, as getApi). */
export async function getApiSettings(services: Pick<ApiServices, "db">, caller: Principal, apiId: string): Promise<ApiSettings> {
  requirePermission(caller, apiPermission(apiId, "read_api"));
  const api = await findApi(services.db, caller.workspaceId, apiId);
  if (!api) throw apiNotFound(apiId);
  return {
    id: api.id,
    workspaceId: api.workspaceId,
    name: api.name,
    ipWhitelist: api.ipWhitelist,
    storeEncryptedKeys: api.storeEncryptedKeys,
    defaultPrefix: api.defaultPrefix,
    defaultBytes: api.defaultBytes,
    deleteProtection: api.deleteProtection,
    createdAtM: api.createdAtM,
  };
}

export type { KeyListFilter, KeyListRow };
export { KEY_LIST_FILTERS };
export type ApiKeyListPage = { keys: KeyListRow[]; cursor?: string };

/**
 * A page of a live API's keys for people (the console's table): light rows in id order after `cursor`, matching
 * `search` (a prefix of the name in any case or of the start, or exactly the owner id or the identity's externalId)
 * and `filter`, or with `ids` only those. Who may read it is as for listApiKeys (findListableApi). One statement,
 * served by an index of the API's keys whatever its size (keys.search.repository.ts).
 */
export async function searchApiKeys(
  services: ApiServices,
  caller: Caller,
  input: {
    apiId: string;
    search?: string | undefined;
    filter: KeyListFilter;
    ids?: readonly string[] | undefined;
    cursor?: string | undefined;
    limit: number;
  },
): Promise<ApiKeyListPage> {
  const api = await findListableApi(services.db, caller, input.apiId);
  const texts = [input.search, input.cursor, ...(input.ids ?? [])];
  if (texts.some((t) => t !== undefined && !isStorableText(t))) return { keys: [] };
  const rows = await searchApiKeysPage(services.db, {
    workspaceId: caller.workspaceId,
    apiId: api.id,
    search: input.search,
    filter: input.filter,
    ids: input.ids,
    now: services.clock.now(),
    after: input.cursor,
    limit: input.limit + 1,
  });
  const keys = rows.slice(0, input.limit);
  const page: ApiKeyListPage = { keys };
  if (rows.length > input.limit) page.cursor = keys.at(-1)!.id;
  return page;
}
