import { and, eq, inArray, isNull, notInArray, or, sql } from "drizzle-orm";
import type { PgUpdateSetSource } from "drizzle-orm/pg-core";
import type { DataKey } from "../../crypto/keyring.js";
import { type Db, rowsOf } from "../../db/client.js";
import { epochSum } from "../../db/epoch.js";
import {
  apis,
  encryptedKeys,
  encryptionKeys,
  identities,
  keys,
  keysPermissions,
  keysRoles,
  permissions,
  ratelimits,
  roles,
  workspaces,
} from "../../db/schema.js";
import { ApiError } from "../../errors.js";
import { newId } from "../../ids.js";
import { lockLiveApi } from "../apis/apis.repository.js";
import { keyEffectivePermissionSlugs, keyRoleNames } from "./key-columns.js";
import { effectiveRemaining, lastRefillAfterWrite, refillDue } from "./refill.js";

export type StoredRatelimit = {
  name: string;
  limit: number;
  duration: number;
  autoApply: boolean;
  owner: "key" | "identity";
};

/**
 * Everything verification needs about the live keys with these hashes (`{ hashes }`), in one query, each row with
 * the verification epoch of the same snapshot. `remaining` is the stored value: only whether it is null matters
 * here, since spending reads and writes it in the database. Verification is the hot path: the verification cache
 * (verification-cache.ts) prepares it once and runs it as a prepared statement (drizzle then skips building the
 * SQL, and PostgreSQL planning it), instead of once per request.
 */
export function prepareVerificationLookup(db: Db) {
  return db
    .select({
      hash: keys.hash,
      // Read in the same snapshot as the key: see verification-cache.ts.
      epoch: epochSum,
      id: keys.id,
      workspaceId: keys.workspaceId,
      apiId: keys.apiId,
      name: keys.name,
      ownerId: keys.ownerId,
      meta: keys.meta,
      expires: keys.expires,
      remaining: keys.remaining,
      enabled: keys.enabled,
      environment: keys.environment,
      workspaceEnabled: workspaces.enabled,
      apiIpWhitelist: apis.ipWhitelist,
      identityId: identities.id,
      identityExternalId: identities.externalId,
      identityMeta: identities.meta,
      roles: keyRoleNames,
      // The key's own limits and its identity's, each tagged with where it comes from.
      ratelimits: sql<StoredRatelimit[]>`coalesce((
        select json_agg(json_build_object('name', rl.name, 'limit', rl."limit", 'duration', rl.duration,
          'autoApply', rl.auto_apply, 'owner', case when rl.key_id is not null then 'key' else 'identity' end))
        from ratelimits rl
        where rl.key_id = ${keys.id} or (${keys.identityId} is not null and rl.identity_id = ${keys.identityId})), '[]')`,
      permissions: keyEffectivePermissionSlugs,
    })
    .from(keys)
    .innerJoin(apis, and(eq(apis.id, keys.apiId), isNull(apis.deletedAtM)))
    .innerJoin(workspaces, eq(workspaces.id, keys.workspaceId))
    .leftJoin(identities, eq(identities.id, keys.identityId))
    .where(and(sql`${keys.hash} = any(${sql.placeholder("hashes")}::text[])`, isNull(keys.deletedAtM)))
    .prepare("keyhaven_verification_lookup");
}

export type VerificationLookup = ReturnType<typeof prepareVerificationLookup>;
export type KeyForVerification = Awaited<ReturnType<VerificationLookup["execute"]>>[number];

/**
 * Spends `cost` uses for each of `count` verifications of one key in one atomic statement, after applying any
 * refill that is due. The key's row is locked first and its uses before the spend returned, so the caller knows
 * exactly which of the verifications got their uses: the first `granted`, in order, as far as the uses go (all of
 * them when `cost` is 0). Concurrent statements, on any number of processes, never overdraw. Undefined when the key
 * is gone or has no usage limit.
 */
export async function spendRemaining(db: Db, keyId: string, cost: number, count: number) {
  const granted = sql`least(${count}::int, case when ${cost}::int = 0 then ${count}::int else cur.before / ${cost}::int end)`;
  const rows = rowsOf<{ before: number }>(
    await db.execute(sql`update ${keys} set ${sql.identifier(keys.remaining.name)} = cur.before - ${cost}::int * ${granted},
        ${sql.identifier(keys.lastRefillAt.name)} = ${lastRefillAfterWrite}
      from (select ${keys.id} as id, ${effectiveRemaining} as before from ${keys}
        where ${keys.id} = ${keyId} and ${keys.remaining} is not null for update) cur
      where ${keys.id} = cur.id
      returning cur.before`),
  );
  const before = rows[0]?.before;
  if (before === undefined || before === null) return undefined;
  return { before, granted: count === 0 ? 0 : cost === 0 ? count : Math.min(count, Math.floor(before / cost)) };
}

// keys.updateKey

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

/** The identity with this externalId in the workspace, created when there is none (concurrent calls make one). */
export async function upsertIdentityForKey(db: Db, workspaceId: string, externalId: string, now: number): Promise<string> {
  const [row] = await db
    .insert(identities)
    .values({ id: newId("id"), workspaceId, externalId, environment: "default", createdAtM: now })
    // DO UPDATE (a no-op) rather than DO NOTHING so that an existing identity's id is returned too.
    .onConflictDoUpdate({ target: [identities.workspaceId, identities.externalId], set: { externalId } })
    .returning({ id: identities.id });
  return row!.id;
}

/** Sets the key's auto-applied `default` limit: updates the row when there is one, else inserts it. */
export async function upsertKeyDefaultRatelimit(
  db: Db,
  key: { id: string; workspaceId: string },
  limit: { limit: number; duration: number },
  now: number,
): Promise<void> {
  await db
    .insert(ratelimits)
    .values({
      id: newId("rl"),
      workspaceId: key.workspaceId,
      name: "default",
      keyId: key.id,
      limit: limit.limit,
      duration: limit.duration,
      autoApply: true,
      createdAtM: now,
    })
    .onConflictDoUpdate({
      target: [ratelimits.keyId, ratelimits.name],
      set: { limit: limit.limit, duration: limit.duration, updatedAtM: now },
    });
}

export async function deleteKeyDefaultRatelimit(db: Db, keyId: string): Promise<void> {
  await db.delete(ratelimits).where(and(eq(ratelimits.keyId, keyId), eq(ratelimits.name, "default")));
}

/** Roles of the workspace with one of these ids or names. */
export async function findRolesByIdOrName(db: Db, workspaceId: string, ids: string[], names: string[]) {
  if (ids.length === 0 && names.length === 0) return [];
  return db
    .select({ id: roles.id, name: roles.name })
    .from(roles)
    .where(
      and(
        eq(roles.workspaceId, workspaceId),
        or(ids.length > 0 ? inArray(roles.id, ids) : undefined, names.length > 0 ? inArray(roles.name, names) : undefined),
      ),
    );
}

/** The role with this name, created when missing; a concurrent creation of the same name yields its id. */
export async function ensureRoleForKey(db: Db, workspaceId: string, name: string, now: number): Promise<string> {
  const [row] = await db
    .insert(roles)
    .values({ id: newId("role"), workspaceId, name, createdAtM: now })
    .onConflictDoUpdate({ target: [roles.workspaceId, roles.name], set: { name } })
    .returning({ id: roles.id });
  return row!.id;
}

/** The permission with this slug, created (name = slug) when missing. */
export async function ensurePermissionForKey(db: Db, workspaceId: string, slug: string, now: number): Promise<string> {
  const [row] = await db
    .insert(permissions)
    .values({ id: newId("perm"), workspaceId, name: slug, slug, createdAtM: now })
    .onConflictDoUpdate({ target: [permissions.workspaceId, permissions.slug], set: { slug } })
    .returning({ id: permissions.id });
  return row!.id;
}

/** Makes `roleIds` exactly the key's roles: drops the others, adds the missing ones. */
export async function replaceKeyRoles(
  db: Db,
  key: { id: string; workspaceId: string },
  roleIds: string[],
  now: number,
): Promise<void> {
  await db
    .delete(keysRoles)
    .where(and(eq(keysRoles.keyId, key.id), roleIds.length > 0 ? notInArray(keysRoles.roleId, roleIds) : undefined));
  if (roleIds.length === 0) return;
  await db
    .insert(keysRoles)
    .values(roleIds.map((roleId) => ({ keyId: key.id, roleId, workspaceId: key.workspaceId, createdAtM: now })))
    .onConflictDoNothing();
}

/** Makes `permissionIds` exactly the key's direct permissions: drops the others, adds the missing ones. */
export async function replaceKeyPermissions(
  db: Db,
  key: { id: string; workspaceId: string },
  permissionIds: string[],
  now: number,
): Promise<void> {
  await db
    .delete(keysPermissions)
    .where(
      and(
        eq(keysPermissions.keyId, key.id),
        permissionIds.length > 0 ? notInArray(keysPermissions.permissionId, permissionIds) : undefined,
      ),
    );
  if (permissionIds.length === 0) return;
  await db
    .insert(keysPermissions)
    .values(
      permissionIds.map((permissionId) => ({ keyId: key.id, permissionId, workspaceId: key.workspaceId, createdAtM: now })),
    )
    .onConflictDoNothing();
}

// ---- Key writes: keys.createKey, keys.deleteKey, keys.updateRemaining ----

const MAX_REMAINING = 2_147_483_647;

/** The live key `keyId` in any workspace (the caller compares workspaces), for the write routes. */
export async function findLiveKeyForWrite(db: Db, keyId: string) {
  const [row] = await db
    .select({ id: keys.id, workspaceId: keys.workspaceId, apiId: keys.apiId, remaining: keys.remaining })
    .from(keys)
    .where(and(eq(keys.id, keyId), isNull(keys.deletedAtM)))
    .limit(1);
  return row;
}

/** Soft-deletes a live key; false when it was already gone. */
export async function softDeleteKey(db: Db, keyId: string, now: number): Promise<boolean> {
  const rows = await db
    .update(keys)
    .set({ deletedAtM: now })
    .where(and(eq(keys.id, keyId), isNull(keys.deletedAtM)))
    .returning({ id: keys.id });
  return rows.length > 0;
}

/** Removes the key row; its encrypted plaintext, roles, permissions and rate limits go with it (cascade). */
export async function hardDeleteKey(db: Db, keyId: string): Promise<boolean> {
  const rows = await db.delete(keys).where(eq(keys.id, keyId)).returning({ id: keys.id });
  return rows.length > 0;
}

export type RemainingChange =
  | { op: "increment" | "decrement"; value: number }
  | { op: "set"; value: number | null };

/**
 * Changes a live key's remaining uses in one atomic UPDATE, after applying any refill that is due, so that
 * concurrent changes and verifications never lose an update. A decrement stops at 0; an increment past the
 * int32 range, or an increment/decrement of an unlimited key, updates nothing. Returns undefined when nothing
 * was updated (the key is gone, unlimited, or the increment would overflow).
 */
export async function changeKeyRemaining(
  db: Db,
  keyId: string,
  change: RemainingChange,
  now: number,
): Promise<{ remaining: number | null } | undefined> {
  const live = and(eq(keys.id, keyId), isNull(keys.deletedAtM));
  let set: PgUpdateSetSource<typeof keys>;
  let where = live;
  if (change.op === "set") {
    set =
      change.value === null
        ? { remaining: null }
        : {
            remaining: change.value,
            // A due refill happened before this write; and a key that was unlimited starts its refill period now,
            // so the value just set is what the next read reports.
            lastRefillAt: sql`(case when ${keys.refillAmount} is not null and (${refillDue} or ${keys.remaining} is null)
              then now() else ${keys.lastRefillAt} end)`,
          };
  } else {
    const value = change.value;
    set = {
      remaining:
        change.op === "increment"
          ? sql`${effectiveRemaining} + ${value}`
          : sql`greatest(${effectiveRemaining} - ${value}, 0)`,
      lastRefillAt: lastRefillAfterWrite,
    };
    where = and(
      live,
      sql`${keys.remaining} is not null`,
      change.op === "increment" ? sql`${effectiveRemaining}::bigint + ${value} <= ${MAX_REMAINING}` : undefined,
    );
  }
  const [row] = await db
    .update(keys)
    .set({ ...set, updatedAtM: now })
    .where(where)
    .returning({ remaining: keys.remaining });
  return row;
}

/** Which of `names` are roles of the workspace. */
export async function findExistingRoleNames(db: Db, workspaceId: string, names: string[]): Promise<Set<string>> {
  if (names.length === 0) return new Set();
  const rows = await db
    .select({ name: roles.name })
    .from(roles)
    .where(and(eq(roles.workspaceId, workspaceId), inArray(roles.name, names)));
  return new Set(rows.map((r) => r.name));
}

/** Which of `slugs` are permission slugs of the workspace. */
export async function findExistingPermissionSlugs(db: Db, workspaceId: string, slugs: string[]): Promise<Set<string>> {
  if (slugs.length === 0) return new Set();
  const rows = await db
    .select({ slug: permissions.slug })
    .from(permissions)
    .where(and(eq(permissions.workspaceId, workspaceId), inArray(permissions.slug, slugs)));
  return new Set(rows.map((r) => r.slug));
}

export type NewKey = {
  /** The key row; its identity is set from `externalId` inside the transaction. */
  row: typeof keys.$inferInsert & { id: string; workspaceId: string; apiId: string; createdAtM: number };
  /** The identity to link (found or created by external id). */
  externalId: string | undefined;
  roleNames: string[];
  createMissingRoles: boolean;
  permissionSlugs: string[];
  createMissingPermissions: boolean;
  ratelimit: { limit: number; duration: number } | undefined;
  /** The plaintext sealed under `dataKey`, for a recoverable key. */
  encrypted: { encrypted: string; dataKey: DataKey } | undefined;
};

/**
 * Writes a new key and everything it links to in one transaction: the data key (when new), missing roles and
 * permissions, the identity, the key, its `default` rate limit, its encrypted plaintext and its role and
 * permission links. The API is locked against deletion meanwhile, so a key is never created in a deleted API.
 */
export async function insertNewKey(db: Db, input: NewKey): Promise<void> {
  const { row, externalId } = input;
  const { workspaceId, id: keyId, createdAtM: now } = row;
  await db.transaction(async (tx) => {
    if (!(await lockLiveApi(tx, workspaceId, row.apiId, "share"))) {
      throw new ApiError("NOT_FOUND", `api ${row.apiId} not found`);
    }
    const dataKey = input.encrypted?.dataKey;
    if (dataKey?.newRow) await tx.insert(encryptionKeys).values(dataKey.newRow);

    const roleIds = await resolveRoles(tx, workspaceId, input.roleNames, input.createMissingRoles, now);
    const permissionIds = await resolvePermissions(
      tx,
      workspaceId,
      input.permissionSlugs,
      input.createMissingPermissions,
      now,
    );

    let identityId: string | null = null;
    if (externalId !== undefined) {
      // DO UPDATE (a no-op) so that an existing identity is returned too; concurrent creates share one identity.
      const [identity] = await tx
        .insert(identities)
        .values({ id: newId("id"), workspaceId, externalId, environment: "default", meta: {}, createdAtM: now })
        .onConflictDoUpdate({
          target: [identities.workspaceId, identities.externalId],
          set: { externalId: sql`excluded.external_id` },
        })
        .returning({ id: identities.id });
      identityId = identity!.id;
    }

    await tx.insert(keys).values({ ...row, identityId });
    if (input.encrypted) {
      await tx.insert(encryptedKeys).values({
        keyId,
        workspaceId,
        encrypted: input.encrypted.encrypted,
        encryptionKeyId: input.encrypted.dataKey.id,
        createdAtM: now,
      });
    }
    if (input.ratelimit) {
      await tx.insert(ratelimits).values({
        id: newId("rl"),
        workspaceId,
        name: "default",
        keyId,
        limit: input.ratelimit.limit,
        duration: input.ratelimit.duration,
        autoApply: true,
        createdAtM: now,
      });
    }
    if (roleIds.length > 0) {
      await tx.insert(keysRoles).values(roleIds.map((roleId) => ({ keyId, roleId, workspaceId, createdAtM: now })));
    }
    if (permissionIds.length > 0) {
      await tx
        .insert(keysPermissions)
        .values(permissionIds.map((permissionId) => ({ keyId, permissionId, workspaceId, createdAtM: now })));
    }
  });
}

/** Role ids for `names`, created first when allowed; each locked against deletion until the transaction ends. */
async function resolveRoles(db: Db, workspaceId: string, names: string[], create: boolean, now: number) {
  if (names.length === 0) return [];
  if (create) {
    // Inserted in one fixed order, so that concurrent creates of the same new roles cannot deadlock.
    await db
      .insert(roles)
      .values([...names].sort().map((name) => ({ id: newId("role"), workspaceId, name, createdAtM: now })))
      .onConflictDoNothing({ target: [roles.workspaceId, roles.name] });
  }
  const rows = await db
    .select({ id: roles.id, name: roles.name })
    .from(roles)
    .where(and(eq(roles.workspaceId, workspaceId), inArray(roles.name, names)))
    .for("share");
  if (rows.length !== names.length) {
    const found = new Set(rows.map((r) => r.name));
    const gone = names.filter((n) => !found.has(n));
    throw new ApiError("CONFLICT", `roles ${JSON.stringify(gone)} were deleted while the key was being created`);
  }
  return rows.map((r) => r.id);
}

/** Permission ids for `slugs` (created with name = slug when allowed), locked like roles. */
async function resolvePermissions(db: Db, workspaceId: string, slugs: string[], create: boolean, now: number) {
  if (slugs.length === 0) return [];
  if (create) {
    await db
      .insert(permissions)
      .values([...slugs].sort().map((slug) => ({ id: newId("perm"), workspaceId, name: slug, slug, createdAtM: now })))
      .onConflictDoNothing({ target: [permissions.workspaceId, permissions.slug] });
  }
  const rows = await db
    .select({ id: permissions.id, slug: permissions.slug })
    .from(permissions)
    .where(and(eq(permissions.workspaceId, workspaceId), inArray(permissions.slug, slugs)))
    .for("share");
  if (rows.length !== slugs.length) {
    const found = new Set(rows.map((r) => r.slug));
    const gone = slugs.filter((s) => !found.has(s));
    throw new ApiError("CONFLICT", `permissions ${JSON.stringify(gone)} were deleted while the key was being created`);
  }
  return rows.map((r) => r.id);
}

// ---- Key RBAC: keys.add/remove/setPermissions, keys.add/remove/setRoles ----

/** The ids of the key's direct permissions. */
export async function findKeyPermissionIds(db: Db, keyId: string): Promise<string[]> {
  const rows = await db
    .select({ id: keysPermissions.permissionId })
    .from(keysPermissions)
    .where(eq(keysPermissions.keyId, keyId));
  return rows.map((r) => r.id);
}

/** The ids of the key's roles. */
export async function findKeyRoleIds(db: Db, keyId: string): Promise<string[]> {
  const rows = await db.select({ id: keysRoles.roleId }).from(keysRoles).where(eq(keysRoles.keyId, keyId));
  return rows.map((r) => r.id);
}

/** Connects these permissions to the key; ones already connected stay as they are. */
export async function addKeyPermissions(
  db: Db,
  key: { id: string; workspaceId: string },
  permissionIds: string[],
  now: number,
): Promise<void> {
  if (permissionIds.length === 0) return;
  await db
    .insert(keysPermissions)
    .values(
      permissionIds.map((permissionId) => ({ keyId: key.id, permissionId, workspaceId: key.workspaceId, createdAtM: now })),
    )
    .onConflictDoNothing();
}

/** Disconnects these permissions from the key; ones not connected are ignored. */
export async function removeKeyPermissions(db: Db, keyId: string, permissionIds: string[]): Promise<void> {
  if (permissionIds.length === 0) return;
  await db
    .delete(keysPermissions)
    .where(and(eq(keysPermissions.keyId, keyId), inArray(keysPermissions.permissionId, permissionIds)));
}

/** Connects these roles to the key; ones already connected stay as they are. */
export async function addKeyRoles(
  db: Db,
  key: { id: string; workspaceId: string },
  roleIds: string[],
  now: number,
): Promise<void> {
  if (roleIds.length === 0) return;
  await db
    .insert(keysRoles)
    .values(roleIds.map((roleId) => ({ keyId: key.id, roleId, workspaceId: key.workspaceId, createdAtM: now })))
    .onConflictDoNothing();
}

/** Disconnects these roles from the key; ones not connected are ignored. */
export async function removeKeyRoles(db: Db, keyId: string, roleIds: string[]): Promise<void> {
  if (roleIds.length === 0) return;
  await db.delete(keysRoles).where(and(eq(keysRoles.keyId, keyId), inArray(keysRoles.roleId, roleIds)));
}
