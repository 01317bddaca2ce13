import { eq, isNull, type SQL, sql } from "drizzle-orm";
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

/**
 * A write's own check that a root key authorized from memory still does (core/auth/rootKeys.authenticator.ts,
 * `authorizeWrite`): true when `rootKeyId` is null (the root key was authenticated at the request's epoch), else only
 * while the root key exists, its workspace is enabled and its permissions are exactly `permissions` (a JSON array of
 * strings), at the snapshot of the statement it is part of: what authenticating it at a fresh epoch reads
 * (prepareRootKeyLookup), without the round trip of reading the epoch first.
 */
export function rootKeyStillGrants(rootKeyId: SQL, permissions: SQL): SQL {
  const granted = sql`array(select json_array_elements_text(${permissions}::json))`;
  return sql`(${rootKeyId}::text is null or exists (select 1 from ${rootKeys}
    inner join ${workspaces} on ${workspaces.id} = ${rootKeys.workspaceId}
    where ${rootKeys.id} = ${rootKeyId}::text and ${workspaces.enabled}
      and ${rootKeys.permissions} @> ${granted} and ${rootKeys.permissions} <@ ${granted}))`;
}

/** The root key a write re-checks, with the permissions the caller was authorized with (core Principal's writeGuard). */
export type WriteGuardRow = { readonly rootKeyId: string; readonly permissions: readonly string[] };

/**
 * rootKeyStillGrants as a statement of its own, for a write made of several (a transaction's first statement): whether
 * the root key still grants what the caller was authorized with, at `db`'s snapshot.
 */
export async function rootKeyGrants(db: Db, guard: WriteGuardRow): Promise<boolean> {
  const [row] = rowsOf<{ grants: boolean }>(
    await db.execute(sql`select ${rootKeyStillGrants(sql`${guard.rootKeyId}`, sql`${JSON.stringify(guard.permissions)}`)} as grants`),
  );
  return row?.grants === true;
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
