import { and, eq, isNull, sql } from "drizzle-orm";
import { type Db, perDb } from "../db/client.js";
import { EpochCache, epochReader } from "../db/epoch.js";
import { keys, rootKeys, workspaces } from "../db/schema.js";
import { hashKey } from "../crypto/hash.js";
import { ApiError } from "../errors.js";
import { bearerToken } from "./bearer.js";
import { describeQuery, type PermissionQuery, satisfies } from "./permissions.js";

export type RootKeyAuth = {
  readonly rootKeyId: string;
  readonly workspaceId: string;
  readonly permissions: ReadonlySet<string>;
};

type CachedRootKey = { auth: RootKeyAuth; workspaceEnabled: boolean };

function rootKeyLookup(db: Db) {
  return db
    .select({
      id: rootKeys.id,
      workspaceId: rootKeys.workspaceId,
      permissions: rootKeys.permissions,
      workspaceEnabled: workspaces.enabled,
    })
    .from(rootKeys)
    .innerJoin(workspaces, eq(workspaces.id, rootKeys.workspaceId))
    .where(eq(rootKeys.hash, sql.placeholder("hash")))
    .limit(1)
    .prepare("keyhaven_root_key_lookup");
}

/** Root keys kept in memory per process (by hash), beyond which the oldest are dropped first. */
export const ROOT_KEY_CACHE_ENTRIES = 10_000;

const rootKeyCache = perDb((db) => {
  const lookup = rootKeyLookup(db);
  return new EpochCache<CachedRootKey>(async (hash) => {
    const [row] = await lookup.execute({ hash });
    if (!row) return undefined;
    const auth = { rootKeyId: row.id, workspaceId: row.workspaceId, permissions: new Set(row.permissions) };
    return { auth, workspaceEnabled: row.workspaceEnabled };
  }, ROOT_KEY_CACHE_ENTRIES);
});

/**
 * Authenticates `Authorization: Bearer <root key>` with v1's codes and messages (all 403, as v1 clients expect).
 *
 * Every request reads the store's epoch (one small query shared by the requests that arrive together; see
 * db/epoch.ts); the root key is read from the database only when it is not in memory at that epoch. Deleting a root
 * key, changing its permissions or disabling its workspace moves the epoch, so the next request on every replica
 * sees it. `epoch` may be passed by a caller that reads it for other caches of the same request.
 */
export async function authenticateRootKey(
  db: Db,
  authorization: string | undefined,
  epoch?: bigint,
): Promise<RootKeyAuth> {
  const token = bearerToken(authorization);
  if (token === "") throw new ApiError("UNAUTHORIZED", "key required");
  const hash = hashKey(token);
  const found = await rootKeyCache(db).get(hash, epoch ?? (await epochReader(db).current()));
  if (!found) {
    // Only on the failure path: tell a customer's API key used as a root key apart from an unknown one.
    const [apiKey] = await db
      .select({ id: keys.id })
      .from(keys)
      .where(and(eq(keys.hash, hash), isNull(keys.deletedAtM)))
      .limit(1);
    throw new ApiError("UNAUTHORIZED", apiKey ? "root key required" : "key not found");
  }
  if (!found.workspaceEnabled) throw new ApiError("FORBIDDEN", "workspace is disabled");
  return found.auth;
}

export function hasPermission(auth: RootKeyAuth, query: PermissionQuery): boolean {
  return satisfies(query, auth.permissions);
}

export function requirePermission(auth: RootKeyAuth, query: PermissionQuery): void {
  if (!satisfies(query, auth.permissions)) {
    throw new ApiError(
      "INSUFFICIENT_PERMISSIONS",
      `Missing permissions: need ${describeQuery(query)}, have [${[...auth.permissions].map((p) => JSON.stringify(p)).join(", ")}]`,
    );
  }
}
