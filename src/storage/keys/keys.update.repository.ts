import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import type { PgUpdateSetSource } from "drizzle-orm/pg-core";
import type { Db } from "../client.js";
import { apis, keys } from "../schema.js";
import { effectiveRemaining } from "./keys.refill.js";

// keys.updateKey: the key's own columns. Its identity, default rate limit, roles and permissions are written by
// the repositories of those (identities.repository.ts, keys.ratelimit.repository.ts, keys.rbac.repository.ts).

/**
 * The key to update, locked until the transaction ends; undefined when it does not exist, is deleted, belongs to
 * another workspace or to a deleted API (all answered alike).
 */
export async function lockKeyForUpdate(db: Db, workspaceId: string, keyId: string) {
  const [row] = await db
    .select({
      id: keys.id,
      apiId: keys.apiId,
      workspaceId: keys.workspaceId,
      remaining: keys.remaining,
      refillAmount: keys.refillAmount,
    })
    .from(keys)
    .innerJoin(apis, and(eq(apis.id, keys.apiId), isNull(apis.deletedAtM)))
    .where(and(eq(keys.id, keyId), eq(keys.workspaceId, workspaceId), isNull(keys.deletedAtM)))
    .limit(1)
    .for("update", { of: keys });
  return row;
}

export type KeyChanges = {
  name?: string | null;
  ownerId?: string | null;
  identityId?: string | null;
  meta?: Record<string, unknown> | null;
  expires?: Date | null;
  /** null: unlimited. */
  remaining?: number | null;
  /** null clears the refill; `day` null is a daily refill. */
  refill?: { amount: number; day: number | null } | null;
  enabled?: boolean;
  environment?: string | null;
};

/**
 * Writes the given columns of a key locked by lockKeyForUpdate, keeping lazy refills right: a refill that fell due
 * before this write is never applied on top of a `remaining` set here, and one that is due when the refill settings
 * change is applied first (reads already report it), at the old settings.
 */
export async function updateKeyColumns(
  db: Db,
  key: { id: string; refillAmount: number | null },
  changes: KeyChanges,
  now: number,
): Promise<void> {
  const { refill, remaining, ...plain } = changes;
  const set: PgUpdateSetSource<typeof keys> = { ...plain, updatedAtM: now };
  if (refill === null) Object.assign(set, { refillAmount: null, refillDay: null, lastRefillAt: null });
  if (refill) Object.assign(set, { refillAmount: refill.amount, refillDay: refill.day, lastRefillAt: sql`now()` });
  if (remaining !== undefined) {
    set.remaining = remaining;
    if (refill === undefined && key.refillAmount !== null) set.lastRefillAt = sql`now()`;
  } else if (refill !== undefined) {
    set.remaining = effectiveRemaining;
  }
  await db.update(keys).set(set).where(eq(keys.id, key.id));
}

/**
 * keys.updateKey's common case in one statement, with no transaction: writes `changes` (no refill settings) to the
 * live key `keyId` of `workspaceId` in a live API, when that API is one of `apiIds` ("any": every API). A `remaining`
 * set here restarts a refilled key's period, as updateKeyColumns does. False when no such key was updated (gone,
 * another workspace's, a deleted API, an API not in `apiIds`): the caller then takes the transaction, which says why.
 */
export async function updateLiveKeyColumns(
  db: Db,
  target: { workspaceId: string; keyId: string; apiIds: readonly string[] | "any" },
  changes: Omit<KeyChanges, "refill">,
  now: number,
): Promise<boolean> {
  const { remaining, ...plain } = changes;
  const set: PgUpdateSetSource<typeof keys> = { ...plain, updatedAtM: now };
  if (remaining !== undefined) {
    set.remaining = remaining;
    set.lastRefillAt = sql`case when ${keys.refillAmount} is not null then now() else ${keys.lastRefillAt} end`;
  }
  const rows = await db
    .update(keys)
    .set(set)
    .from(apis)
    .where(
      and(
        eq(keys.id, target.keyId),
        eq(keys.workspaceId, target.workspaceId),
        isNull(keys.deletedAtM),
        eq(apis.id, keys.apiId),
        isNull(apis.deletedAtM),
        target.apiIds === "any" ? undefined : inArray(keys.apiId, [...target.apiIds]),
      ),
    )
    .returning({ id: keys.id });
  return rows.length > 0;
}
