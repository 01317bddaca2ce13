import { and, eq, isNull } from "drizzle-orm";
import type { Db } from "../db/client.js";
import { keys, rootKeys, workspaces } from "../db/schema.js";
import { hashKey } from "../crypto/hash.js";
import { ApiError } from "../errors.js";
import { bearerToken } from "./bearer.js";
import { describeQuery, type PermissionQuery, satisfies } from "./permissions.js";

export type RootKeyAuth = {
  rootKeyId: string;
  workspaceId: string;
  permissions: ReadonlySet<string>;
};

/** Authenticates `Authorization: Bearer <root key>` with v1's codes and messages (all 403, as v1 clients expect). */
export async function authenticateRootKey(db: Db, authorization: string | undefined): Promise<RootKeyAuth> {
  const token = bearerToken(authorization);
  if (token === "") throw new ApiError("UNAUTHORIZED", "key required");
  const hash = hashKey(token);
  const [row] = await db
    .select({
      id: rootKeys.id,
      workspaceId: rootKeys.workspaceId,
      permissions: rootKeys.permissions,
      workspaceEnabled: workspaces.enabled,
    })
    .from(rootKeys)
    .innerJoin(workspaces, eq(workspaces.id, rootKeys.workspaceId))
    .where(eq(rootKeys.hash, hash))
    .limit(1);
  if (!row) {
    // Only on the failure path: tell a customer's API key used as a root key apart from an unknown one.
    const [apiKey] = await db
      .select({ id: keys.id })
      .from(keys)
      .where(and(eq(keys.hash, hash), isNull(keys.deletedAtM)))
      .limit(1);
    throw new ApiError("UNAUTHORIZED", apiKey ? "root key required" : "key not found");
  }
  if (!row.workspaceEnabled) throw new ApiError("FORBIDDEN", "workspace is disabled");
  return { rootKeyId: row.id, workspaceId: row.workspaceId, permissions: new Set(row.permissions) };
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
