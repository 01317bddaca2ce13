import { and, eq, isNull, sql } from "drizzle-orm";
import type { PgUpdateSetSource } from "drizzle-orm/pg-core";
import type { Db } from "../client.js";
import { apis, keys } from "../schema.js";

/** Live pending keys (no hash yet) per workspace: keys_pending_idx serves it. */
export async function countPendingKeysByWorkspace(db: Db): Promise<Map<string, number>> {
  const rows = await db
    .select({ workspaceId: keys.workspaceId, n: sql<number>`count(*)::int` })
    .from(keys)
    .where(and(isNull(keys.hash), isNull(keys.deletedAtM)))
    .groupBy(keys.workspaceId);
  return new Map(rows.map((r) => [r.workspaceId, Number(r.n)]));
}

/** The workspace of the API `apiId` (deleted or not: only to know where its pending keys would be). */
export async function findApiWorkspace(db: Db, apiId: string): Promise<string | undefined> {
  const [row] = await db.select({ workspaceId: apis.workspaceId }).from(apis).where(eq(apis.id, apiId)).limit(1);
  return row?.workspaceId;
}

/** The live pending key `keyId`: what an adoption checks before it writes. */
export async function findPendingKeyById(db: Db, keyId: string): Promise<{ id: string; workspaceId: string; apiId: string } | undefined> {
  const [row] = await db
    .select({ id: keys.id, workspaceId: keys.workspaceId, apiId: keys.apiId })
    .from(keys)
    .where(and(eq(keys.id, keyId), isNull(keys.hash), isNull(keys.deletedAtM)))
    .limit(1);
  return row;
}

/** What an adoption stores of the state Unkey's verifyKey answered (absent in the answer: none). */
export type AdoptedState = {
  name: string | null;
  meta: Record<string, unknown> | null;
  expires: Date | null;
  enabled: boolean;
  /** Uses left; null: unlimited. */
  remaining: number | null;
};

/**
 * Gives the pending key `keyId` its hash, once: only while it has none (`where hash is null`), is not deleted and,
 * when `workspaceId` is given, is of that workspace, so that two adoptions at once apply one and a key that already
 * verifies is never overwritten. A key made unlimited loses its refill. The adopted key, or undefined when none was.
 */
export async function adoptPendingKey(
  tx: Db,
  adoption: { keyId: string; workspaceId: string | undefined; hash: string; now: number; state: AdoptedState },
): Promise<{ id: string; workspaceId: string; apiId: string } | undefined> {
  const { keyId, workspaceId, hash, now, state } = adoption;
  const set: PgUpdateSetSource<typeof keys> = {
    hash,
    adoptedAtM: now,
    updatedAtM: now,
    name: state.name,
    meta: state.meta,
    expires: state.expires,
    enabled: state.enabled,
    remaining: state.remaining,
    // Unkey's count has every refill until now in it.
    lastRefillAt: new Date(now),
  };
  if (state.remaining === null) Object.assign(set, { refillAmount: null, refillDay: null, lastRefillAt: null });
  const [row] = await tx
    .update(keys)
    .set(set)
    .where(
      and(
        eq(keys.id, keyId),
        isNull(keys.hash),
        isNull(keys.deletedAtM),
        ...(workspaceId === undefined ? [] : [eq(keys.workspaceId, workspaceId)]),
      ),
    )
    .returning({ id: keys.id, workspaceId: keys.workspaceId, apiId: keys.apiId });
  return row;
}

/** The uses and refill of the live key `keyId` while it has `hash` (what the refresh after an adoption compares). */
export async function findKeyRefill(
  db: Db,
  keyId: string,
  hash: string,
): Promise<{ refillAmount: number | null; refillDay: number | null; remaining: number | null } | undefined> {
  const [row] = await db
    .select({ refillAmount: keys.refillAmount, refillDay: keys.refillDay, remaining: keys.remaining })
    .from(keys)
    .where(and(eq(keys.id, keyId), eq(keys.hash, hash), isNull(keys.deletedAtM)))
    .limit(1);
  return row;
}
