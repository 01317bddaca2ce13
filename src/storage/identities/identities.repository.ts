import { and, asc, count, eq, gt, inArray, isNull, or, type SQL, sql } from "drizzle-orm";
import { isStorableText } from "../lookupText.js";
import { insertRecordset } from "../bulk.js";
import { containsLiteral } from "../search.js";
import { type Db, preparedPerHandle } from "../client.js";
import { type NamedRatelimit, ratelimitsOwnedBy } from "../ratelimits/owned.ratelimits.repository.js";
import { identities, keys, ratelimits } from "../schema.js";
import { newId } from "../../ids.js";

/** An identity's rate limit as written: `autoApply` (default false) applies it to every verification of its keys. */
export type IdentityRatelimitInput = { name: string; limit: number; duration: number; autoApply?: boolean | undefined };
/** An identity's rate limit as stored. */
export type IdentityRatelimit = NamedRatelimit;
export type IdentityRow = typeof identities.$inferSelect;

/**
 * Inserts an identity and its rate limits (auto_apply false) in `tx`, the caller's transaction (the write gate's);
 * returns the identity id.
 */
export async function insertIdentity(
  tx: Db,
  input: { workspaceId: string; externalId: string; meta?: Record<string, unknown> | undefined; ratelimits: IdentityRatelimitInput[] },
  now: number,
): Promise<string> {
  const id = newId("id");
  await tx.insert(identities).values({
    id,
    workspaceId: input.workspaceId,
    externalId: input.externalId,
    meta: input.meta ?? null,
    createdAtM: now,
  });
  await insertIdentityRatelimits(tx, { workspaceId: input.workspaceId, identityId: id }, input.ratelimits, now);
  return id;
}

/**
 * The one identity upsert: the ids of the workspace's identities with these externalIds, by externalId, each
 * created (environment `default`, `meta` as given) when the workspace has none; concurrent calls share one
 * identity. One statement for any number of identities. v1 stores `meta {}` on the identities that keys.createKey
 * and keys.updateKey create, and null on those of migrations.createKeys (v1-wire-contract.md).
 */
export async function upsertIdentities(
  db: Db,
  workspaceId: string,
  externalIds: string[],
  meta: Record<string, never> | null,
  now: number,
): Promise<Map<string, string>> {
  const rows = await insertRecordset<typeof identities, { id: string; external_id: string }>(
    db,
    identities,
    // In one fixed order, so that concurrent upserts of the same new identities cannot deadlock.
    [...new Set(externalIds)].sort().map((externalId) => ({
      id: newId("id"),
      workspaceId,
      externalId,
      environment: "default",
      meta,
      createdAtM: now,
    })),
    // DO UPDATE (a no-op) rather than DO NOTHING so that existing identities are returned too.
    sql`on conflict (workspace_id, external_id) do update set external_id = excluded.external_id
        returning id, external_id`,
  );
  return new Map(rows.map((r) => [r.external_id, r.id]));
}

/** The one writer of an identity's own rate limits (auto_apply false unless asked: v1 names the ones it applies). */
async function insertIdentityRatelimits(
  db: Db,
  identity: { workspaceId: string; identityId: string },
  limits: IdentityRatelimitInput[],
  now: number,
): Promise<void> {
  if (limits.length === 0) return;
  await db.insert(ratelimits).values(
    limits.map((r) => ({
      id: newId("rl"),
      workspaceId: identity.workspaceId,
      identityId: identity.identityId,
      name: r.name,
      limit: r.limit,
      duration: r.duration,
      autoApply: r.autoApply ?? false,
      createdAtM: now,
    })),
  );
}

/** An identity of the workspace, by id or by (environment, externalId); undefined when absent or of another workspace. */
export async function findIdentity(
  db: Db,
  workspaceId: string,
  by: { identityId: string } | { externalId: string; environment?: string },
): Promise<IdentityRow | undefined> {
  const statements = findIdentityStatements(db);
  const [row] =
    "identityId" in by
      ? await statements.byId.execute({ workspaceId, identityId: by.identityId })
      : by.environment === undefined
        ? await statements.byExternalId.execute({ workspaceId, externalId: by.externalId })
        : await statements.byExternalIdInEnvironment.execute({ workspaceId, externalId: by.externalId, environment: by.environment });
  return row;
}

const findIdentityStatements = preparedPerHandle((db) => {
  const inWorkspace = eq(identities.workspaceId, sql.placeholder("workspaceId"));
  const byExternalId = eq(identities.externalId, sql.placeholder("externalId"));
  const select = (where: SQL | undefined, name: string) => db.select().from(identities).where(where).limit(1).prepare(name);
  return {
    byId: select(and(inWorkspace, eq(identities.id, sql.placeholder("identityId"))), "keyhaven_find_identity_by_id"),
    byExternalId: select(and(inWorkspace, byExternalId), "keyhaven_find_identity_by_external_id"),
    byExternalIdInEnvironment: select(
      and(inWorkspace, byExternalId, eq(identities.environment, sql.placeholder("environment"))),
      "keyhaven_find_identity_by_external_id_in_environment",
    ),
  };
});

/** The rate limits of the given identities, by identity id, in name order. */
export const identityRatelimits = (db: Db, identityIds: string[]): Promise<Map<string, IdentityRatelimit[]>> =>
  ratelimitsOwnedBy(db, "identity", identityIds);

/** The identity of the workspace whose id, or else whose externalId, is `ref`. */
export async function findIdentityByRef(db: Db, workspaceId: string, ref: string): Promise<IdentityRow | undefined> {
  if (!isStorableText(ref)) return undefined;
  const rows = await db
    .select()
    .from(identities)
    .where(and(eq(identities.workspaceId, workspaceId), or(eq(identities.id, ref), eq(identities.externalId, ref))));
  return rows.find((r) => r.id === ref) ?? rows[0];
}

/** A page of the workspace's identities by id from `fromId` (inclusive): `search` matches id or externalId, literally. */
export async function listIdentitiesFrom(
  db: Db,
  workspaceId: string,
  page: { fromId?: string | undefined; limit: number; search?: string | undefined },
): Promise<IdentityRow[]> {
  const pattern = page.search ? containsLiteral(page.search) : undefined;
  return db
    .select()
    .from(identities)
    .where(
      and(
        eq(identities.workspaceId, workspaceId),
        page.fromId !== undefined ? sql`${identities.id} >= ${page.fromId}` : undefined,
        pattern !== undefined
          ? sql`(${identities.id} ilike ${pattern} escape '\\' or ${identities.externalId} ilike ${pattern} escape '\\')`
          : undefined,
      ),
    )
    .orderBy(asc(identities.id))
    .limit(page.limit);
}

/** A key of an identity, as a list of them shows it. */
export type IdentityKeyRow = { id: string; apiId: string; name: string | null; start: string; enabled: boolean; createdAtM: number };

/**
 * A page of the identity's live keys by id from `fromId` (inclusive), read through keys_identity_idx (an identity
 * holds few keys; the page is bounded by `limit` whatever their number).
 */
export async function listKeysOfIdentityFrom(
  db: Db,
  workspaceId: string,
  identityId: string,
  page: { fromId?: string | undefined; limit: number },
): Promise<IdentityKeyRow[]> {
  return db
    .select({ id: keys.id, apiId: keys.apiId, name: keys.name, start: keys.start, enabled: keys.enabled, createdAtM: keys.createdAtM })
    .from(keys)
    .where(
      and(
        eq(keys.identityId, identityId),
        eq(keys.workspaceId, workspaceId),
        isNull(keys.deletedAtM),
        page.fromId !== undefined ? sql`${keys.id} >= ${page.fromId}` : undefined,
      ),
    )
    .orderBy(asc(keys.id))
    .limit(page.limit);
}

/** A page of the workspace's identities in one environment, by id, after `cursor`; plus the environment's total. */
export async function listIdentitiesPage(
  db: Db,
  input: { workspaceId: string; environment: string; limit: number; cursor?: string | undefined },
): Promise<{ rows: IdentityRow[]; total: number }> {
  const scope = and(eq(identities.workspaceId, input.workspaceId), eq(identities.environment, input.environment));
  const rows = await db
    .select()
    .from(identities)
    .where(input.cursor !== undefined ? and(scope, gt(identities.id, input.cursor)) : scope)
    .orderBy(asc(identities.id))
    .limit(input.limit);
  const [totalRow] = await db.select({ n: count() }).from(identities).where(scope);
  return { rows, total: Number(totalRow?.n ?? 0) };
}

/**
 * Updates meta (when given) and reconciles the identity's rate limits by name (when given): existing names are
 * updated, new ones inserted, missing ones deleted. In `tx`, the caller's transaction (the write gate's). False, and
 * nothing written, when the identity is gone (deleted since the caller looked it up).
 */
export async function updateIdentity(
  tx: Db,
  input: {
    workspaceId: string;
    identityId: string;
    meta?: Record<string, unknown> | undefined;
    ratelimits?: IdentityRatelimitInput[] | undefined;
  },
  now: number,
): Promise<boolean> {
  const updated = await tx
    .update(identities)
    .set({ updatedAtM: now, ...(input.meta !== undefined && { meta: input.meta }) })
    .where(and(eq(identities.workspaceId, input.workspaceId), eq(identities.id, input.identityId)))
    .returning({ id: identities.id });
  if (updated.length === 0) return false;
  if (input.ratelimits === undefined) return true;
  const existing = await tx
    .select({ id: ratelimits.id, name: ratelimits.name })
    .from(ratelimits)
    .where(eq(ratelimits.identityId, input.identityId));
  const wanted = new Map(input.ratelimits.map((r) => [r.name, r]));
  const stale = existing.filter((r) => !wanted.has(r.name)).map((r) => r.id);
  if (stale.length > 0) await tx.delete(ratelimits).where(inArray(ratelimits.id, stale));
  const byName = new Map(existing.map((r) => [r.name, r.id]));
  for (const r of input.ratelimits) {
    const id = byName.get(r.name);
    if (id !== undefined) {
      await tx
        .update(ratelimits)
        .set({ limit: r.limit, duration: r.duration, updatedAtM: now, ...(r.autoApply !== undefined && { autoApply: r.autoApply }) })
        .where(eq(ratelimits.id, id));
    } else {
      await insertIdentityRatelimits(tx, input, [r], now);
    }
  }
  return true;
}

/**
 * Hard-deletes an identity of the workspace (its rate limits cascade; keys' identity_id is set null); returns it,
 * undefined when there was none.
 */
export async function deleteIdentity(
  tx: Db,
  workspaceId: string,
  identityId: string,
): Promise<{ id: string; externalId: string } | undefined> {
  const [row] = await tx
    .delete(identities)
    .where(and(eq(identities.workspaceId, workspaceId), eq(identities.id, identityId)))
    .returning({ id: identities.id, externalId: identities.externalId });
  return row;
}
