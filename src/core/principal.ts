import { PermissionDeniedError } from "../errors.js";
import type { WriteGuard } from "../storage/rootKeys/rootKeys.auth.repository.js";
import { describeQuery, type PermissionQuery } from "./auth/permissions.query.js";
import { rootKeySatisfies } from "./auth/permissions.urn.js";

/**
 * Who calls the core: the workspace it acts in and the permissions it holds, whatever the wire protocol
 * authenticated (v1's RootKeyAuth is this shape).
 */
export type Principal = {
  readonly workspaceId: string;
  readonly permissions: ReadonlySet<string>;
  /**
   * Present when the permissions were read from memory and not confirmed at the request's epoch, which only the
   * routes that ask for it get (RootKeyAuthenticator.authorizeWrite): every write made for this principal re-checks
   * them in its own statement, and a refusal is answered only after authenticating again.
   */
  readonly writeGuard?: WriteGuard | undefined;
};

/** What a permission check reads of the caller: a Principal, or anything holding permissions as one does. */
type PermissionHolder = { readonly permissions: ReadonlySet<string> };

export function hasPermission(auth: PermissionHolder, query: PermissionQuery): boolean {
  return rootKeySatisfies(query, auth.permissions);
}

/** Throws the core's PermissionDeniedError (v1: 403 INSUFFICIENT_PERMISSIONS) unless `auth` satisfies `query`. */
export function requirePermission(auth: PermissionHolder, query: PermissionQuery): void {
  if (!rootKeySatisfies(query, auth.permissions)) throw new PermissionDeniedError(describeQuery(query), [...auth.permissions], { query });
}
