import { and, eq, notInArray, sql } from "drizzle-orm";
import { insertRecordset } from "../bulk.js";
import type { Db } from "../client.js";
import { type NamedRatelimit, ratelimitsOwnedBy } from "../ratelimits/owned.ratelimits.repository.js";
import { ratelimits } from "../schema.js";
import { newId } from "../../ids.js";

/** The name of a key's own rate limit (v1's `ratelimit` field of a key), applied to every verification. */
export const KEY_DEFAULT_RATELIMIT = "default";

export type KeyDefaultRatelimit = { keyId: string; workspaceId: string; limit: number; duration: number };

/** A key's named rate limit, as v2 gives them (keys.migrateKeys): applied always (`autoApply`) or when named. */
export type KeyNamedRatelimit = KeyDefaultRatelimit & { name: string; autoApply: boolean };

/**
 * The one writer of keys' rate limits: a key that has a limit of that name gets it updated in place (its id kept),
 * the others get it inserted. One statement for any number of keys (names distinct per key).
 */
export async function upsertKeyRatelimits(db: Db, limits: KeyNamedRatelimit[], now: number): Promise<void> {
  if (limits.length === 0) return;
  await insertRecordset(
    db,
    ratelimits,
    limits.map((l) => ({
      id: newId("rl"),
      workspaceId: l.workspaceId,
      name: l.name,
      keyId: l.keyId,
      limit: l.limit,
      duration: l.duration,
      autoApply: l.autoApply,
      createdAtM: now,
    })),
    sql`on conflict (key_id, name) do update
      set "limit" = excluded."limit", duration = excluded.duration, auto_apply = excluded.auto_apply,
        updated_at_m = excluded.created_at_m`,
  );
}

/** Keys' auto-applied `default` rate limits (v1's `ratelimit` of a key: keys.createKey, keys.updateKey, the imports). */
export async function setKeyDefaultRatelimits(db: Db, limits: KeyDefaultRatelimit[], now: number): Promise<void> {
  await upsertKeyRatelimits(
    db,
    limits.map((l) => Object.assign({}, l, { name: KEY_DEFAULT_RATELIMIT, autoApply: true })),
    now,
  );
}

export async function deleteKeyDefaultRatelimit(db: Db, keyId: string): Promise<void> {
  await db.delete(ratelimits).where(and(eq(ratelimits.keyId, keyId), eq(ratelimits.name, KEY_DEFAULT_RATELIMIT)));
}

/** A named rate limit of a key, as v2 gives them (`ratelimits[]`). */
export type KeyRatelimitInput = { name: string; limit: number; duration: number; autoApply: boolean };

/**
 * Makes the key's own rate limits exactly `limits`, by name: names not listed are deleted, listed ones that exist are
 * updated in place (their ids kept), the others inserted (v2's keys.createKey and keys.updateKey; names are distinct).
 */
export async function replaceKeyRatelimits(
  db: Db,
  key: { id: string; workspaceId: string },
  limits: KeyRatelimitInput[],
  now: number,
): Promise<void> {
  const names = limits.map((l) => l.name);
  await db.delete(ratelimits).where(and(eq(ratelimits.keyId, key.id), names.length > 0 ? notInArray(ratelimits.name, names) : undefined));
  await upsertKeyRatelimits(
    db,
    limits.map((l) => Object.assign({}, l, { keyId: key.id, workspaceId: key.workspaceId })),
    now,
  );
}

/** Copies every rate limit of one key to another (new ids): keys.rerollKey. */
export async function copyKeyRatelimits(db: Db, from: string, to: { id: string; workspaceId: string }, now: number): Promise<void> {
  const rows = await db.select().from(ratelimits).where(eq(ratelimits.keyId, from));
  await replaceKeyRatelimits(db, to, rows, now);
}

export type { NamedRatelimit };

/** The rate limits of each of these keys, by key id, each list by name (a key without any maps to []). */
export const keyRatelimits = (db: Db, keyIds: string[]): Promise<Map<string, NamedRatelimit[]>> => ratelimitsOwnedBy(db, "key", keyIds);
