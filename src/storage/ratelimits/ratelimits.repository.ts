import { and, asc, count, eq, gt, gte, isNull, or, type Placeholder, type SQL, sql } from "drizzle-orm";
import type { Db } from "../client.js";
import { EpochCache, type EpochReader } from "../epoch.js";
import { ratelimitNamespaces, ratelimitOverrides } from "../schema.js";
import { newId } from "../../ids.js";

/**
 * How a request names a namespace: v1 by `namespaceId` or `namespaceName` (separate fields), v2 by one string that
 * is its id or its name (`namespaceIdOrName`; the id wins when both match).
 */
export type NamespaceSelector = {
  namespaceId?: string | undefined;
  namespaceName?: string | undefined;
  namespaceIdOrName?: string | undefined;
};
export type OverrideRow = { id: string; identifier: string; limit: number; duration: number; async: boolean };

const o = ratelimitOverrides;
const n = ratelimitNamespaces;

/**
 * The override that applies to the identifier, as `{limit, duration}` or null: the exact one, else the matching
 * wildcard with the most literal (non-`*`) characters, ties broken by identifier in byte order. Two branches so
 * that each uses its own index: the exact one the unique (namespace_id, identifier) index, the wildcard one the
 * partial index over live wildcard overrides; a namespace with many exact overrides is never scanned whole.
 * A wildcard identifier becomes a LIKE pattern: LIKE's own metacharacters (\ % _) are escaped, then `*` is `%`.
 * Plain SQL: drizzle writes a column of a one-table select unqualified, which inside this subquery would mean
 * the override's own `id`.
 */
const applicableOverrideOf = (identifier: SQL | Placeholder) => sql<OverrideRow | null>`(
  select json_build_object('id', b.id, 'identifier', b.identifier, 'limit', b."limit", 'duration', b.duration, 'async', b.async) from (
    (select ov.id, ov."limit", ov.duration, ov.async, ov.identifier, true as exact from ratelimit_overrides ov
      where ov.namespace_id = ratelimit_namespaces.id and ov.identifier = ${identifier} and ov.deleted_at_m is null)
    union all
    (select ov.id, ov."limit", ov.duration, ov.async, ov.identifier, false as exact from ratelimit_overrides ov
      where ov.namespace_id = ratelimit_namespaces.id and ov.deleted_at_m is null and strpos(ov.identifier, '*') > 0
        and ${identifier} like replace(replace(replace(replace(ov.identifier, '\\', '\\\\'), '%', '\\%'), '_', '\\_'), '*', '%'))
  ) b
  order by b.exact desc, length(replace(b.identifier, '*', '')) desc, b.identifier collate "C"
  limit 1)`;
const applicableOverride = applicableOverrideOf(sql.placeholder("identifier"));

/** The live override that applies to the identifier in the namespace (as ratelimits.limit would apply it), if any. */
export async function findApplicableOverride(db: Db, namespaceId: string, identifierValue: string): Promise<OverrideRow | undefined> {
  const [row] = await db
    .select({ override: applicableOverrideOf(sql`${identifierValue}`) })
    .from(n)
    .where(eq(n.id, namespaceId))
    .limit(1);
  return row?.override ?? undefined;
}

/**
 * The live namespace by name (or, `byIdOrName`, by id or else by name), with the override that applies to the
 * identifier; no row when there is none.
 */
function limitLookup(db: Db, byIdOrName: boolean) {
  const name = sql.placeholder("name");
  const live = and(eq(n.workspaceId, sql.placeholder("workspaceId")), isNull(n.deletedAtM));
  if (!byIdOrName) {
    return db
      .select({ namespaceId: n.id, override: applicableOverride })
      .from(n)
      .where(and(live, eq(n.name, name)))
      .limit(1)
      .prepare("keyhaven_ratelimits_limit_lookup");
  }
  return db
    .select({ namespaceId: n.id, override: applicableOverride })
    .from(n)
    .where(and(live, or(eq(n.id, name), eq(n.name, name))))
    .orderBy(sql`${n.id} = ${name} desc`)
    .limit(1)
    .prepare("keyhaven_ratelimits_limit_lookup_id_or_name");
}

/** The override's id, limit and duration, when one applies. */
export type LimitLookup = { namespaceId: string; override?: { id: string; limit: number; duration: number } };

/** (namespace, identifier) pairs kept in memory per process, beyond which the oldest are dropped first. */
export const LIMIT_LOOKUP_CACHE_ENTRIES = 50_000;

/**
 * ratelimits.limit is a hot path: its lookup is one prepared statement per process (services.ts builds one of
 * these), and its answers are kept in memory only while the store's epoch is unchanged. Setting or deleting an
 * override, or anything that changes a namespace, moves the epoch (migration root_key_epoch) and drops that
 * namespace's answers (migration invalidation_log), so the next call on every replica sees it.
 */
export class LimitLookupCache {
  private readonly cache: EpochCache<LimitLookup>;

  constructor(db: Db, epochs: EpochReader) {
    const byName = limitLookup(db, false);
    const byIdOrName = limitLookup(db, true);
    this.cache = new EpochCache<LimitLookup>(
      async (key) => {
        const [workspaceId, name, identifierValue, idOrName] = JSON.parse(key) as [string, string, string, true?];
        const lookup = idOrName ? byIdOrName : byName;
        const [row] = await lookup.execute({ workspaceId, name, identifier: identifierValue });
        if (!row) return undefined;
        const found = row.override;
        return { namespaceId: row.namespaceId, ...(found && { override: { id: found.id, limit: found.limit, duration: found.duration } }) };
      },
      LIMIT_LOOKUP_CACHE_ENTRIES,
      {
        // The namespace's row and its overrides log `ns:<id>` (migration invalidation_log); its workspace `ws:<id>`.
        tracker: epochs.invalidations,
        tagsOf: (found, key) => [`ns:${found.namespaceId}`, `ws:${(JSON.parse(key) as [string])[0]}`],
      },
    );
  }

  /**
   * The live namespace by name (`idOrName`: by id, else by name) with the override that applies to the identifier,
   * as of `epoch` or later. The two ways are cached apart: a string may be one namespace's id and another's name.
   */
  find(
    input: { workspaceId: string; name: string; identifier: string; idOrName?: boolean },
    epoch: bigint,
  ): Promise<LimitLookup | undefined> {
    const key = [input.workspaceId, input.name, input.identifier, ...(input.idOrName ? [true] : [])];
    return this.cache.get(JSON.stringify(key), epoch);
  }
}

/** Creates the namespace, or finds the live one another request created first; returns its id. */
export async function ensureNamespace(db: Db, workspaceId: string, name: string, now: number): Promise<string> {
  const [created] = await db
    .insert(n)
    .values({ id: newId("rlns"), workspaceId, name, createdAtM: now })
    .onConflictDoNothing({ target: [n.workspaceId, n.name], where: isNull(n.deletedAtM) })
    .returning({ id: n.id });
  if (created) return created.id;
  const existing = await findNamespace(db, workspaceId, { namespaceName: name });
  if (!existing) throw new Error("ratelimit namespace vanished between insert and select");
  return existing.id;
}

/** A live namespace of the workspace, by id when given, else by name, else by id-or-name (the id first). */
export async function findNamespace(db: Db, workspaceId: string, by: NamespaceSelector) {
  const ref = by.namespaceIdOrName;
  const match =
    by.namespaceId !== undefined
      ? eq(n.id, by.namespaceId)
      : by.namespaceName !== undefined || ref === undefined
        ? eq(n.name, by.namespaceName ?? "")
        : or(eq(n.id, ref), eq(n.name, ref));
  const query = db
    .select({ id: n.id, name: n.name })
    .from(n)
    .where(and(eq(n.workspaceId, workspaceId), match, isNull(n.deletedAtM)))
    .limit(1)
    .$dynamic();
  if (ref !== undefined) query.orderBy(sql`${n.id} = ${ref} desc`);
  const [row] = await query;
  return row;
}

/**
 * A page of the workspace's live namespaces in name order, after the name `cursor`; plus how many it has in all.
 * By name so that the page is read from the unique (workspace_id, name) index over live namespaces, however
 * many namespaces limit calls created.
 */
export async function listNamespacesPage(
  db: Db,
  input: { workspaceId: string; limit: number; cursor?: string | undefined },
): Promise<{ rows: { id: string; name: string }[]; total: number }> {
  const live = and(eq(n.workspaceId, input.workspaceId), isNull(n.deletedAtM));
  const rows = await db
    .select({ id: n.id, name: n.name })
    .from(n)
    .where(input.cursor !== undefined ? and(live, gt(n.name, input.cursor)) : live)
    .orderBy(asc(n.name))
    .limit(input.limit);
  const [counted] = await db.select({ total: count() }).from(n).where(live);
  return { rows, total: Number(counted?.total ?? 0) };
}

const overrideColumns = { id: o.id, identifier: o.identifier, limit: o.limit, duration: o.duration, async: o.async };

/** Creates the override, or updates (and revives, when deleted) the one of this namespace and identifier. */
export async function upsertOverride(
  db: Db,
  input: { workspaceId: string; namespaceId: string; identifier: string; limit: number; duration: number; async: boolean },
  now: number,
): Promise<string> {
  const [row] = await db
    .insert(o)
    .values({ id: newId("rlor"), ...input, createdAtM: now })
    .onConflictDoUpdate({
      target: [o.namespaceId, o.identifier],
      set: { limit: input.limit, duration: input.duration, async: input.async, updatedAtM: now, deletedAtM: null },
    })
    .returning({ id: o.id });
  return row!.id;
}

export async function findOverride(db: Db, namespaceId: string, identifierValue: string): Promise<OverrideRow | undefined> {
  const [row] = await db
    .select(overrideColumns)
    .from(o)
    .where(and(eq(o.namespaceId, namespaceId), eq(o.identifier, identifierValue), isNull(o.deletedAtM)))
    .limit(1);
  return row;
}

/**
 * A page of the namespace's live overrides by id, after `cursor` (v1) or from `fromId` on (v2, inclusive); plus
 * how many it has in all.
 */
export async function listOverridesPage(
  db: Db,
  input: { namespaceId: string; limit: number; cursor?: string | undefined; fromId?: string | undefined },
): Promise<{ rows: OverrideRow[]; total: number }> {
  const live = and(eq(o.namespaceId, input.namespaceId), isNull(o.deletedAtM));
  const from = input.fromId !== undefined ? gte(o.id, input.fromId) : input.cursor !== undefined ? gt(o.id, input.cursor) : undefined;
  const rows = await db
    .select(overrideColumns)
    .from(o)
    .where(from ? and(live, from) : live)
    .orderBy(asc(o.id))
    .limit(input.limit);
  const [counted] = await db.select({ total: count() }).from(o).where(live);
  return { rows, total: Number(counted?.total ?? 0) };
}

/** Soft-deletes the live override; returns its id, undefined when there is none. */
export async function softDeleteOverride(db: Db, namespaceId: string, identifierValue: string, now: number): Promise<string | undefined> {
  const [row] = await db
    .update(o)
    .set({ deletedAtM: now })
    .where(and(eq(o.namespaceId, namespaceId), eq(o.identifier, identifierValue), isNull(o.deletedAtM)))
    .returning({ id: o.id });
  return row?.id;
}
