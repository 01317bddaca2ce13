import { PermissionDeniedError } from "../errors.js";
import { describeQuery, type PermissionQuery } from "./auth/permissions.query.js";
import { rootKeySatisfies } from "./auth/permissions.urn.js";
import type { AccessPolicy } from "./caller.js";

/** What an access decision reads of the caller. */
type AccessHolder = { readonly permissions: ReadonlySet<string>; readonly access: Pick<AccessPolicy, "denied"> };

/**
 * The one rule for refusing a caller access to a target it named: unless `caller` satisfies `query`, a caller whose
 * policy says `denied: "notFound"` is told only that the target does not exist (`notFound()`, the same error a
 * missing target gets, so a wrong root key learns nothing of which ids exist), any other is refused as forbidden
 * with the permission it lacks.
 */
export function requireAccess(caller: AccessHolder, query: PermissionQuery, notFound: () => Error): void {
  if (rootKeySatisfies(query, caller.permissions)) return;
  if (caller.access.denied === "notFound") throw notFound();
  throw new PermissionDeniedError(describeQuery(query), [...caller.permissions], { query });
}
