import { eq, isNull, type SQL, sql } from "drizzle-orm";
import { jsonTextArray } from "../bulk.js";
import { type Db, rowsOf } from "../client.js";
import { indexFirst } from "../indexFirst.js";
import { keys, rootKeys, workspaces } from "../schema.js";

// The reads that authenticating a root key makes. Beside the authenticator (core/auth/rootKeys.authenticator.ts), below the routes that
// create and delete root keys (storage/rootKeys/rootKeys.repository.ts holds those writes).

/**
 * The root key with a hash (`{ hash }`), with its workspace's `enabled`: a prepared statement, made once per
 * authenticator (services.ts) and run for every root key not in memory.
 */
export function prepareRootKeyLookup(db: Db) {
  return (
    db
      .select({
        id: rootKeys.id,
        workspaceId: rootKeys.workspaceId,
        permissions: rootKeys.permissions,
        workspaceEnabled: workspaces.enabled,
      })
      // From the hash index whatever the statistics say (indexFirst.ts).
      .from(indexFirst(rootKeys, eq(rootKeys.hash, sql.placeholder("hash"))))
      .innerJoin(workspaces, eq(workspaces.id, rootKeys.workspaceId))
      .limit(1)
      .prepare("keyhaven_root_key_lookup")
  );
}

/** The root key a write re-checks, with the permissions the caller was authorized with (core Principal's writeGuard). */
export type WriteGuard = { readonly rootKeyId: string; readonly permissions: readonly string[] };

/**
 * A write's own check that a root key authorized from memory still does (core/auth/rootKeys.authenticator.ts,
 * `authorizeWrite`): true when `rootKeyId` is null (the root key was authenticated at the request's epoch), else only
 * while the root key exists, its workspace is enabled and its permissions are exactly `permissions` (a JSON array of
 * strings), at the snapshot of the statement it is part of: what authenticating it at a fresh epoch reads
 * (prepareRootKeyLookup), without the round trip of reading the epoch first.
 */
function rootKeyStillGrants(rootKeyId: SQL, permissions: SQL): SQL {
  const granted = jsonTextArray(permissions);
  return sql`(${rootKeyId}::text is null or exists (select 1 from ${rootKeys}
    inner join ${workspaces} on ${workspaces.id} = ${rootKeys.workspaceId}
    where ${rootKeys.id} = ${rootKeyId}::text and ${workspaces.enabled}
      and ${rootKeys.permissions} @> ${granted} and ${rootKeys.permissions} <@ ${granted}))`;
}

/**
 * rootKeyStillGrants in a prepared statement's condition, on the placeholders `guardRootKeyId` and
 * `guardPermissions`, which guardParams fills (null for a root key authenticated at the request's epoch).
 */
export const rootKeyStillGrantsPrepared = rootKeyStillGrants(
  sql`${sql.placeholder("guardRootKeyId")}`,
  sql`${sql.placeholder("guardPermissions")}`,
);

/** The parameters of rootKeyStillGrantsPrepared for `guard` (none: the check passes). */
export function guardParams(guard: WriteGuard | undefined): { guardRootKeyId: string | null; guardPermissions: string | null } {
  return { guardRootKeyId: guard?.rootKeyId ?? null, guardPermissions: guard ? JSON.stringify(guard.permissions) : null };
}

/**
 * rootKeyStillGrants as a statement of its own, for a write made of several (a transaction's first statement): whether
 * the root key still grants what the caller was authorized with, at `db`'s snapshot.
 */
export async function rootKeyGrants(db: Db, guard: WriteGuard): Promise<boolean> {
  const [row] = rowsOf<{ grants: boolean }>(await db.execute(sql`select ${rootKeyStillGrantsFor(guard)} as grants`));
  return row?.grants === true;
}

/** rootKeyStillGrants for `guard` as a condition of a statement built per call (none: true). */
export function rootKeyStillGrantsFor(guard: WriteGuard | undefined): SQL {
  const { guardRootKeyId, guardPermissions } = guardParams(guard);
  return rootKeyStillGrants(sql`${guardRootKeyId}`, sql`${guardPermissions}`);
}

/** Whether a live key (a customer's API key, not a root key) has this hash. */
export async function liveKeyHashExists(db: Db, hash: string): Promise<boolean> {
  const [row] = await db
    .select({ id: keys.id })
    .from(indexFirst(keys, eq(keys.hash, hash)))
    .where(isNull(keys.deletedAtM))
    .limit(1);
  return row !== undefined;
}
