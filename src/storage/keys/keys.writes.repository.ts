import { isStorableText } from "../lookupText.js";
import { direct } from "../directPrepared.js";
import { and, eq, getTableColumns, isNull, type SQL, sql } from "drizzle-orm";
import type { PgUpdateSetSource } from "drizzle-orm/pg-core";
import type { DataKey } from "../crypto/encryptionKeys.repository.js";
import { type Db, preparedPerHandle } from "../client.js";
import { apis, encryptedKeys, encryptionKeys, keys, MAX_INT32 } from "../schema.js";
import { ConflictError, NotFoundError } from "../../errors.js";
import { lockLiveApi } from "../apis/apis.repository.js";
import { guardParams, rootKeyGrants, rootKeyStillGrantsPrepared, type WriteGuard } from "../rootKeys/rootKeys.auth.repository.js";
import { upsertIdentities } from "../identities/identities.repository.js";
import {
  createMissingPermissions,
  createMissingRoles,
  findPermissionsByIdOrSlug,
  findRolesByIdOrName,
  missingNames,
} from "../rbac/permissions.repository.js";
import { copyKeyRatelimits, type KeyRatelimitInput, replaceKeyRatelimits, setKeyDefaultRatelimits } from "./keys.ratelimit.repository.js";
import { findKeyLinkIds, insertKeyLinks } from "./keys.rbac.repository.js";
import { auditParams, insertAuditRowIf, prepareLiveKeyUpdates } from "./keys.update.repository.js";
import { effectiveRemaining, lastRefillAfterWrite, refillDue } from "./keys.refill.js";

// Key writes: keys.createKey, keys.deleteKey, keys.updateRemaining.

/** The live key `keyId` in any workspace (the caller compares workspaces), for the write routes. */
export async function findLiveKeyForWrite(db: Db, keyId: string) {
  // An id PostgreSQL cannot store (a NUL) names no key.
  if (!isStorableText(keyId)) return undefined;
  const [row] = await findLiveKeyForWriteStatement(db).execute({ keyId });
  return row;
}

const findLiveKeyForWriteStatement = preparedPerHandle((db) =>
  db
    .select({ id: keys.id, workspaceId: keys.workspaceId, apiId: keys.apiId, remaining: keys.remaining })
    .from(keys)
    .where(and(eq(keys.id, sql.placeholder("keyId")), isNull(keys.deletedAtM)))
    .limit(1)
    .prepare("keyhaven_find_live_key_for_write"),
);

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

/** `clearRefill`: setting null (unlimited) also removes the key's refill (v2's updateCredits). */
export type RemainingChange = { op: "increment" | "decrement"; value: number } | { op: "set"; value: number | null; clearRefill?: boolean };

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
): Promise<{ remaining: number | null; refillAmount: number | null; refillDay: number | null } | undefined> {
  const statements = changeRemainingStatements(db);
  const statement =
    change.op !== "set"
      ? statements[change.op]
      : change.value !== null
        ? statements.set
        : change.clearRefill
          ? statements.setUnlimitedWithoutRefill
          : statements.setUnlimited;
  const [row] = await statement.execute({ keyId, value: change.value, updatedAtM: keys.updatedAtM.mapToDriverValue(now) });
  return row;
}

/** changeKeyRemaining's five statements (by its change), built once per database handle. */
const changeRemainingStatements = preparedPerHandle((db) => {
  const value = sql`${sql.placeholder("value")}`;
  const live = and(eq(keys.id, sql.placeholder("keyId")), isNull(keys.deletedAtM));
  const prepare = (name: string, set: PgUpdateSetSource<typeof keys>, where: SQL | undefined = live) =>
    db
      .update(keys)
      .set(Object.assign({}, set, { updatedAtM: sql`${sql.placeholder("updatedAtM")}` }))
      .where(where)
      .returning({ remaining: keys.remaining, refillAmount: keys.refillAmount, refillDay: keys.refillDay })
      .prepare(`keyhaven_change_remaining_${name}`);
  const limited = sql`${keys.remaining} is not null`;
  return {
    setUnlimited: prepare("set_unlimited", { remaining: null }),
    setUnlimitedWithoutRefill: prepare("set_unlimited_without_refill", { remaining: null, refillAmount: null, refillDay: null }),
    set: prepare("set", {
      remaining: value,
      // A due refill happened before this write; and a key that was unlimited starts its refill period now,
      // so the value just set is what the next read reports.
      lastRefillAt: sql`(case when ${keys.refillAmount} is not null and (${refillDue} or ${keys.remaining} is null)
        then now() else ${keys.lastRefillAt} end)`,
    }),
    increment: prepare(
      "increment",
      { remaining: sql`${effectiveRemaining} + ${value}`, lastRefillAt: lastRefillAfterWrite },
      and(live, limited, sql`${effectiveRemaining}::bigint + ${value} <= ${MAX_INT32}`),
    ),
    decrement: prepare(
      "decrement",
      { remaining: sql`greatest(${effectiveRemaining} - ${value}, 0)`, lastRefillAt: lastRefillAfterWrite },
      and(live, limited),
    ),
  };
});

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
  /** Named rate limits (v2's `ratelimits[]`), names distinct; absent: none. */
  ratelimits?: KeyRatelimitInput[] | undefined;
  /** The plaintext sealed under `dataKey`, for a recoverable key. */
  encrypted: { encrypted: string; dataKey: DataKey } | undefined;
  /**
   * The root key the caller was authorized by from memory (core Principal's writeGuard): the key is written only
   * while that root key still grants these permissions (rootKeyStillGrants), else nothing is and NotFoundError is
   * thrown (the caller then authenticates again and answers what that finds).
   */
  guard?: WriteGuard | undefined;
  /**
   * The API's key defaults the key was made with (keys.createKey may take them from memory): nothing is written, and
   * NotFoundError is thrown as when the API is gone, unless they are still the API's once it is locked, as
   * insertKeyInLiveApi checks them for a key written as one statement.
   */
  apiDefaults: { defaultPrefix: string | null; defaultBytes: number | null };
};

/**
 * Writes a new key and everything it links to in one transaction: the data key (when new), missing roles and
 * permissions, the identity, the key, its `default` rate limit, its encrypted plaintext and its role and
 * permission links. The API is locked against deletion meanwhile, so a key is never created in a deleted API.
 */
/** What insertNewKey linked the key to: the roles and permissions, by id and name (for the audit entry's targets). */
export type NewKeyLinks = { roles: { id: string; name: string }[]; permissions: { id: string; name: string }[] };

export async function insertNewKey(tx: Db, input: NewKey): Promise<NewKeyLinks> {
  const { row, externalId } = input;
  const { workspaceId, id: keyId, createdAtM: now } = row;
  {
    if (input.guard && !(await rootKeyGrants(tx, input.guard))) throw new NotFoundError("api", row.apiId);
    const api = await lockLiveApi(tx, workspaceId, row.apiId, "share");
    if (!api || api.defaultPrefix !== input.apiDefaults.defaultPrefix || api.defaultBytes !== input.apiDefaults.defaultBytes) {
      throw new NotFoundError("api", row.apiId);
    }
    const dataKey = input.encrypted?.dataKey;
    if (dataKey?.newRow) await tx.insert(encryptionKeys).values(dataKey.newRow);

    const roleRows = await resolveRoles(tx, workspaceId, input.roleNames, input.createMissingRoles, now);
    const permissionRows = await resolvePermissions(tx, workspaceId, input.permissionSlugs, input.createMissingPermissions, now);
    const roleIds = roleRows.map((r) => r.id);
    const permissionIds = permissionRows.map((p) => p.id);

    // v1's keys.createKey stores `meta {}` on the identity it creates.
    const identityId = externalId === undefined ? null : (await upsertIdentities(tx, workspaceId, [externalId], {}, now)).get(externalId)!;

    await tx.insert(keys).values(Object.assign({}, row, { identityId }));
    if (input.encrypted) {
      await tx.insert(encryptedKeys).values({
        keyId,
        workspaceId,
        encrypted: input.encrypted.encrypted,
        encryptionKeyId: input.encrypted.dataKey.id,
        createdAtM: now,
      });
    }
    if (input.ratelimit) await setKeyDefaultRatelimits(tx, [{ keyId, workspaceId, ...input.ratelimit }], now);
    if (input.ratelimits?.length) await replaceKeyRatelimits(tx, { id: keyId, workspaceId }, input.ratelimits, now);
    await insertKeyLinks(
      tx,
      "role",
      roleIds.map((id) => ({ keyId, id, workspaceId })),
      now,
    );
    await insertKeyLinks(
      tx,
      "permission",
      permissionIds.map((id) => ({ keyId, id, workspaceId })),
      now,
    );
    return { roles: roleRows, permissions: permissionRows };
  }
}

/** A key with no role, permission, identity, rate limit or encrypted copy: its row is all there is to write. */
export function linksNothing(input: NewKey): boolean {
  return (
    input.externalId === undefined &&
    input.roleNames.length === 0 &&
    input.permissionSlugs.length === 0 &&
    input.ratelimit === undefined &&
    !input.ratelimits?.length &&
    input.encrypted === undefined
  );
}

/** The columns a key row is inserted with: every one not generated, in the table's order. */
const insertedKeyColumns = Object.entries(getTableColumns(keys)).filter(([, column]) => column.generated === undefined);

/**
 * The key writes that run as prepared statements, once per database handle (services.ts): keys.createKey's and
 * keys.updateKey's common cases are one statement each, and building it with drizzle (and PostgreSQL planning it)
 * for each call cost more CPU than the rest of the route.
 */
export function prepareKeyWrites(db: Db) {
  // Each value a parameter cast to its column's type (in `insert … select` a parameter has no type of its own).
  const values = insertedKeyColumns.map(([field, column]) => sql`${sql.placeholder(field)}::${sql.raw(column.getSQLType())}`);
  const insertKey = db
    .insert(keys)
    .select(
      sql`select ${sql.join(values, sql`, `)} from ${apis}
        where ${apis.id} = ${sql.placeholder("apiId")} and ${apis.workspaceId} = ${sql.placeholder("workspaceId")}
          and ${apis.deletedAtM} is null
          and ${apis.defaultPrefix} is not distinct from ${sql.placeholder("apiDefaultPrefix")}::text
          and ${apis.defaultBytes} is not distinct from ${sql.placeholder("apiDefaultBytes")}::integer
          and ${rootKeyStillGrantsPrepared}
        for share of ${apis}`,
    )
    .returning({ id: keys.id });
  // The key and its audit entry in one statement (data-modifying CTEs): they commit together, and a key not
  // inserted records nothing.
  const inserted = db.$with("inserted", { id: keys.id }).as(insertKey.getSQL());
  const audited = db.$with("audited", {}).as(insertAuditRowIf(sql`inserted`));
  const insertKeyStatement = direct(
    db,
    db.with(inserted, audited).select({ id: inserted.id }).from(inserted).prepare("keyhaven_insert_key"),
  );
  return {
    db,
    ...prepareLiveKeyUpdates(db),
    /**
     * Inserts a key row and its audit rows (`audit`, core/changes.ts WriteGate.statement) in one statement,
     * `insert … select … from apis … for share`: the API row is locked against deletion until the statement
     * commits, as lockLiveApi does in a transaction, and a deletion committed first leaves no live API to select
     * (READ COMMITTED re-checks a locked row that changed), so nothing is inserted, nor recorded. False then, and
     * also when the API's key defaults are no longer `defaults`, those the key was made with (its settings were
     * remembered: ApiSettingsCache), so that a key never gets a default prefix or length changed before it arrived.
     */
    async insertKeyInLiveApi(
      row: typeof keys.$inferInsert,
      guard: NewKey["guard"],
      audit: readonly Record<string, unknown>[],
      defaults: { defaultPrefix: string | null; defaultBytes: number | null },
    ): Promise<boolean> {
      // Each value encoded by its column (dates, jsonb, bigint ms); a column the row leaves out gets its default.
      const params: Record<string, unknown> = {};
      for (const [field, column] of insertedKeyColumns) {
        const given = (row as Record<string, unknown>)[field];
        const value = given === undefined ? column.default : given;
        params[field] = value === undefined || value === null ? null : column.mapToDriverValue(value);
      }
      params.apiDefaultPrefix = defaults.defaultPrefix;
      params.apiDefaultBytes = defaults.defaultBytes;
      const inserted = await insertKeyStatement.execute(Object.assign(params, guardParams(guard), auditParams(audit)));
      return inserted.length > 0;
    },
  };
}

export type KeyWrites = ReturnType<typeof prepareKeyWrites>;

/** Role ids for `names`, created first when allowed; each locked against deletion until the transaction ends. */
async function resolveRoles(db: Db, workspaceId: string, names: string[], create: boolean, now: number) {
  if (names.length === 0) return [];
  if (create) await createMissingRoles(db, workspaceId, names, now);
  const rows = await findRolesByIdOrName(db, workspaceId, [], names, { lockForShare: true });
  const gone = missingNames(names, new Set(rows.map((r) => r.name)));
  if (gone.length > 0) {
    throw new ConflictError("role", `roles ${JSON.stringify(gone)} were deleted while the key was being created`);
  }
  return rows.map((r) => ({ id: r.id, name: r.name }));
}

/** Permission ids for `slugs` (created with name = slug when allowed), locked like roles. */
async function resolvePermissions(db: Db, workspaceId: string, slugs: string[], create: boolean, now: number) {
  if (slugs.length === 0) return [];
  if (create) await createMissingPermissions(db, workspaceId, slugs, now);
  const rows = await findPermissionsByIdOrSlug(db, workspaceId, [], slugs, { lockForShare: true });
  const gone = missingNames(slugs, new Set(rows.map((r) => r.slug)));
  if (gone.length > 0) {
    throw new ConflictError("permission", `permissions ${JSON.stringify(gone)} were deleted while the key was being created`);
  }
  return rows.map((r) => ({ id: r.id, name: r.slug }));
}

/**
 * The live key `keyId` of `workspaceId` in a live API, with every column a reroll copies and whether it has an
 * encrypted copy; locked until the transaction ends when `lock` (undefined: gone, another workspace's, deleted API).
 */
export async function findKeyToReroll(db: Db, workspaceId: string, keyId: string, lock: boolean) {
  const query = db
    .select({
      key: getTableColumns(keys),
      encrypted: sql<boolean>`exists (select 1 from ${encryptedKeys} where ${encryptedKeys.keyId} = ${keys.id})`,
    })
    .from(keys)
    .innerJoin(apis, and(eq(apis.id, keys.apiId), isNull(apis.deletedAtM)))
    .where(and(eq(keys.id, keyId), eq(keys.workspaceId, workspaceId), isNull(keys.deletedAtM)))
    .limit(1);
  const [row] = lock ? await query.for("update", { of: keys }) : await query;
  return row && Object.assign({}, row.key, { hasEncryptedCopy: row.encrypted });
}

/**
 * keys.rerollKey's writes, in the caller's transaction: the new key row, its encrypted copy, and copies of the old
 * key's rate limits (new ids), roles and direct permissions. The API is locked against deletion meanwhile.
 */
export async function insertRerolledKey(
  db: Db,
  input: { row: NewKey["row"]; fromKeyId: string; encrypted: NewKey["encrypted"] },
): Promise<void> {
  const { row, fromKeyId } = input;
  const { workspaceId, id: keyId, createdAtM: now } = row;
  if (!(await lockLiveApi(db, workspaceId, row.apiId, "share"))) throw new NotFoundError("api", row.apiId);
  const dataKey = input.encrypted?.dataKey;
  if (dataKey?.newRow) await db.insert(encryptionKeys).values(dataKey.newRow);
  await db.insert(keys).values(row);
  if (input.encrypted) {
    await db.insert(encryptedKeys).values({
      keyId,
      workspaceId,
      encrypted: input.encrypted.encrypted,
      encryptionKeyId: input.encrypted.dataKey.id,
      createdAtM: now,
    });
  }
  await copyKeyRatelimits(db, fromKeyId, { id: keyId, workspaceId }, now);
  for (const kind of ["role", "permission"] as const) {
    const ids = await findKeyLinkIds(db, kind, fromKeyId);
    await insertKeyLinks(
      db,
      kind,
      ids.map((id) => ({ keyId, id, workspaceId })),
      now,
    );
  }
}
