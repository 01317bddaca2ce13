import { and, asc, count, eq, gt, inArray, isNull } from "drizzle-orm";
import { isStorableText } from "../lookupText.js";
import { LRUCache } from "lru-cache";
import type { Db } from "../client.js";
import { apis } from "../schema.js";
import { newId } from "../../ids.js";
import { sql } from "drizzle-orm";
import { preparedPerHandle, rowsOf } from "../client.js";
import { keys, portals } from "../schema.js";

export type NewApi = {
  workspaceId: string;
  name: string;
  storeEncryptedKeys?: boolean | undefined;
  defaultPrefix?: string | undefined;
  defaultBytes?: number | undefined;
  deleteProtection?: boolean | undefined;
  ipWhitelist?: string | undefined;
};

export async function insertApi(db: Db, input: NewApi, now: number): Promise<string> {
  const id = newId("api");
  await db.insert(apis).values({
    id,
    workspaceId: input.workspaceId,
    name: input.name,
    storeEncryptedKeys: input.storeEncryptedKeys ?? false,
    defaultPrefix: input.defaultPrefix ?? null,
    defaultBytes: input.defaultBytes ?? null,
    deleteProtection: input.deleteProtection ?? false,
    ipWhitelist: input.ipWhitelist ?? null,
    createdAtM: now,
  });
  return id;
}

const findApiStatement = preparedPerHandle((db) =>
  db
    .select()
    .from(apis)
    .where(and(eq(apis.id, sql.placeholder("apiId")), eq(apis.workspaceId, sql.placeholder("workspaceId")), isNull(apis.deletedAtM)))
    .limit(1)
    .prepare("keyhaven_find_api"),
);

/** The API if it exists, is not deleted and belongs to the workspace; another workspace's API is simply absent. */
export async function findApi(db: Db, workspaceId: string, apiId: string) {
  if (!isStorableText(apiId)) return undefined;
  const [row] = await findApiStatement(db).execute({ apiId, workspaceId });
  return row;
}

/** What keys.createKey reads of an API. Its key defaults (defaultPrefix, defaultBytes) may change (apis.updateApi);
 * whether it stores encrypted keys is set when the API is created and never changed after. */
export type ApiKeySettings = {
  id: string;
  workspaceId: string;
  storeEncryptedKeys: boolean;
  defaultPrefix: string | null;
  defaultBytes: number | null;
};

/** APIs whose settings are kept in memory per process, beyond which the least recently used are dropped. */
export const API_SETTINGS_CACHE_ENTRIES = 10_000;

/**
 * The key settings of the APIs this process has seen (one per process, services.ts), so that keys.createKey does not
 * read the API on every call. An entry may go stale (another replica changed the API's key defaults, or deleted it):
 * keys.createKey uses a remembered entry only where its one statement confirms it, inserting nothing unless the API
 * is live and its defaults are still the ones the key was made with (keys.writes.repository.ts); else it reads the
 * API again with `find` (which refreshes the entry) and makes the key anew. Every other reader calls `find`.
 */
export class ApiSettingsCache {
  private readonly entries = new LRUCache<string, ApiKeySettings>({ max: API_SETTINGS_CACHE_ENTRIES });

  constructor(private readonly db: Db) {}

  /** The settings in memory, if any: the API may have been deleted since. */
  remembered(workspaceId: string, apiId: string): ApiKeySettings | undefined {
    return this.entries.get(`${workspaceId}/${apiId}`);
  }

  /**
   * The settings of the live API `apiId` of the workspace, read now (and remembered); undefined when there is none.
   * On `db` when given: a request's transaction that has begun (an idempotency scope's) must read in it.
   */
  async find(workspaceId: string, apiId: string, db: Db = this.db): Promise<ApiKeySettings | undefined> {
    const cacheKey = `${workspaceId}/${apiId}`;
    const row = await findApi(db, workspaceId, apiId);
    if (!row) {
      this.entries.delete(cacheKey);
      return undefined;
    }
    const { id, storeEncryptedKeys, defaultPrefix, defaultBytes } = row;
    const settings = { id, workspaceId: row.workspaceId, storeEncryptedKeys, defaultPrefix, defaultBytes };
    this.entries.set(cacheKey, settings);
    return settings;
  }
}

/** The columns of an API that apis.updateApi changes: each one given is set (null removes it), the others kept. */
export type ApiChanges = {
  name?: string | undefined;
  defaultPrefix?: string | null | undefined;
  defaultBytes?: number | null | undefined;
  deleteProtection?: boolean | undefined;
  ipWhitelist?: string | null | undefined;
};

/**
 * Sets the given columns of a live API (and updatedAtM); false when the workspace has no such API. The update moves
 * the verification epoch (trigger `apis_bump_epoch`, logging `api:<id>`), so every replica's next verification sees
 * a new IP allow-list; keys.createKey's statement confirms the key defaults it used (ApiSettingsCache).
 */
export async function updateApiSettings(db: Db, workspaceId: string, apiId: string, changes: ApiChanges, now: number): Promise<boolean> {
  const set: Partial<typeof apis.$inferInsert> = { updatedAtM: now };
  if (changes.name !== undefined) set.name = changes.name;
  if (changes.defaultPrefix !== undefined) set.defaultPrefix = changes.defaultPrefix;
  if (changes.defaultBytes !== undefined) set.defaultBytes = changes.defaultBytes;
  if (changes.deleteProtection !== undefined) set.deleteProtection = changes.deleteProtection;
  if (changes.ipWhitelist !== undefined) set.ipWhitelist = changes.ipWhitelist;
  const rows = await db
    .update(apis)
    .set(set)
    .where(and(eq(apis.id, apiId), eq(apis.workspaceId, workspaceId), isNull(apis.deletedAtM)))
    .returning({ id: apis.id });
  return rows.length > 0;
}

/** Ids among `apiIds` that are live APIs of the workspace. */
export async function findLiveApiIds(db: Db, workspaceId: string, apiIds: string[]): Promise<Set<string>> {
  if (apiIds.length === 0) return new Set();
  const rows = await db
    .select({ id: apis.id })
    .from(apis)
    .where(and(inArray(apis.id, apiIds), eq(apis.workspaceId, workspaceId), isNull(apis.deletedAtM)));
  return new Set(rows.map((r) => r.id));
}

// ---- API deletion (apis.deleteApi, apis.deleteKeys) and the lock keys.createKey takes ----

/**
 * Locks a live API of the workspace until the transaction ends: `share` keeps it from being deleted (creating a
 * key), `update` also waits for those (deleting the API or its keys). Undefined when there is no such API. Its key
 * defaults as of the lock, for a key made from remembered ones (keys.createKey) to confirm them.
 */
export async function lockLiveApi(
  db: Db,
  workspaceId: string,
  apiId: string,
  strength: "share" | "update",
): Promise<{ deleteProtection: boolean; defaultPrefix: string | null; defaultBytes: number | null } | undefined> {
  const [row] = await db
    .select({ deleteProtection: apis.deleteProtection, defaultPrefix: apis.defaultPrefix, defaultBytes: apis.defaultBytes })
    .from(apis)
    .where(and(eq(apis.id, apiId), eq(apis.workspaceId, workspaceId), isNull(apis.deletedAtM)))
    .for(strength);
  return row;
}

/**
 * Soft-deletes an API and all its live keys, unless it is protected from deletions; answers how many keys went with
 * it. Its customer portal is deleted (its sessions with it, by cascade): a portal lives only while its API does, so
 * none outlives it holding its slug, unseen and undeletable. Run it in the change's transaction (the lock holds until
 * it ends).
 */
export async function softDeleteApiWithKeys(
  tx: Db,
  workspaceId: string,
  apiId: string,
  now: number,
): Promise<{ deletedKeys: number } | "not_found" | "protected"> {
  const api = await lockLiveApi(tx, workspaceId, apiId, "update");
  if (!api) return "not_found";
  if (api.deleteProtection) return "protected";
  await tx.update(apis).set({ deletedAtM: now }).where(eq(apis.id, apiId));
  await tx.delete(portals).where(eq(portals.apiId, apiId));
  // Counted in the database rather than by returning every id: an API may hold very many keys.
  const result = await tx.execute(sql`with affected as (update ${keys} set ${sql.identifier(keys.deletedAtM.name)} = ${now}
    where ${keys.apiId} = ${apiId} and ${keys.deletedAtM} is null returning 1) select count(*)::int as n from affected`);
  const [row] = rowsOf<{ n: number }>(result);
  return { deletedKeys: row!.n };
}

/**
 * Soft-deletes every live key of a live API, or with `permanent` removes every key row of it, soft-deleted ones
 * included, so that their hashes can be imported again (as v1), in the caller's transaction `tx`. Answers the ids
 * of those keys (the audit entry names them), or undefined without the API. Removed keys take their roles,
 * permissions, rate limits and encrypted copies with them (cascade); their verification counts stay, as for
 * keys.deleteKey, being the API's history. The delete and update triggers move the verification cache's epoch, so no
 * replica answers from a removed key.
 */
export async function deleteKeysOfApi(
  tx: Db,
  workspaceId: string,
  apiId: string,
  permanent: boolean,
  now: number,
): Promise<string[] | undefined> {
  if (!(await lockLiveApi(tx, workspaceId, apiId, "update"))) return undefined;
  const rows = permanent
    ? await tx.delete(keys).where(eq(keys.apiId, apiId)).returning({ id: keys.id })
    : await tx
        .update(keys)
        .set({ deletedAtM: now })
        .where(and(eq(keys.apiId, apiId), isNull(keys.deletedAtM)))
        .returning({ id: keys.id });
  return rows.map((r) => r.id);
}

// ---- The console's list of a workspace's APIs ----

export type ApiListRow = {
  id: string;
  name: string;
  storeEncryptedKeys: boolean;
  defaultPrefix: string | null;
  defaultBytes: number | null;
  deleteProtection: boolean;
  createdAtM: number;
};

/**
 * Up to `limit` live APIs of the workspace by id, after `after` (exclusive); with `ids`, only those among them (a
 * caller who may read some APIs only).
 */
export async function listApisPage(
  db: Db,
  workspaceId: string,
  page: { after?: string | undefined; limit: number; ids?: readonly string[] | undefined },
): Promise<ApiListRow[]> {
  return db
    .select({
      id: apis.id,
      name: apis.name,
      storeEncryptedKeys: apis.storeEncryptedKeys,
      defaultPrefix: apis.defaultPrefix,
      defaultBytes: apis.defaultBytes,
      deleteProtection: apis.deleteProtection,
      createdAtM: apis.createdAtM,
    })
    .from(apis)
    .where(
      and(
        eq(apis.workspaceId, workspaceId),
        isNull(apis.deletedAtM),
        page.ids !== undefined ? inArray(apis.id, [...page.ids]) : undefined,
        page.after !== undefined ? gt(apis.id, page.after) : undefined,
      ),
    )
    .orderBy(asc(apis.id))
    .limit(page.limit);
}

/**
 * The live keys of each of `apiIds`, counted in one grouped statement over keys_live_by_api_idx (api_id, id where
 * deleted_at_m is null): the index alone answers it (an index-only scan once the table is vacuumed), no key row is
 * read into the process. An API without keys is absent from the map.
 */
export async function countLiveKeysByApi(db: Db, apiIds: readonly string[]): Promise<Map<string, number>> {
  if (apiIds.length === 0) return new Map();
  const rows = await db
    .select({ apiId: keys.apiId, n: count() })
    .from(keys)
    .where(and(inArray(keys.apiId, [...apiIds]), isNull(keys.deletedAtM)))
    .groupBy(keys.apiId);
  return new Map(rows.map((r) => [r.apiId, Number(r.n)]));
}
