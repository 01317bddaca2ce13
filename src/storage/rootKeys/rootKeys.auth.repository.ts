import { eq, isNull, sql } from "drizzle-orm";
import type { Db } from "../client.js";
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

/** Whether a live key (a customer's API key, not a root key) has this hash. */
export async function liveKeyHashExists(db: Db, hash: string): Promise<boolean> {
  const [row] = await db
    .select({ id: keys.id })
    .from(indexFirst(keys, eq(keys.hash, hash)))
    .where(isNull(keys.deletedAtM))
    .limit(1);
  return row !== undefined;
}
