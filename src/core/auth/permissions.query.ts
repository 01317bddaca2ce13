import type { AccessPolicy } from "../caller.js";
import type { PermissionQuery } from "../../errors.js";
import { urnPermission } from "./permissions.urn.js";

export type { PermissionQuery };

/** Permissions, `and`s and `or`s a query may hold in all: far above any real check, and cheap to evaluate. */
export const MAX_QUERY_NODES = 100;
/** How deeply `and`/`or` may nest (a bare permission is depth 0). */
export const MAX_QUERY_DEPTH = 10;
/** As long as a permission a key can hold. */
export const MAX_QUERY_PERMISSION_LENGTH = 512;

/** Why a permission query was refused: `message` is what the client is told. */
export class PermissionQueryError extends Error {}

/** v1's message for a query of the wrong shape; the limits v1 did not have say which one was passed. */
const INVALID = "permission query is invalid";

/**
 * Parses a permission query by hand, refusing it at the first problem: a recursive schema union would try every
 * branch of every node and collect every error, which took seconds for a body of a few kilobytes. The walk stops
 * as soon as the query holds more than MAX_QUERY_NODES nodes or nests deeper than MAX_QUERY_DEPTH, so its cost is
 * bounded whatever the size of the input.
 */
export function parsePermissionQuery(raw: unknown): PermissionQuery {
  let nodes = 0;
  const walk = (value: unknown, depth: number): PermissionQuery => {
    if (++nodes > MAX_QUERY_NODES) {
      throw new PermissionQueryError(`${INVALID}: it holds more than ${MAX_QUERY_NODES} permissions and operators`);
    }
    if (typeof value === "string") {
      if (value.length === 0) throw new PermissionQueryError(INVALID);
      if (value.length > MAX_QUERY_PERMISSION_LENGTH) {
        throw new PermissionQueryError(`${INVALID}: a permission is longer than ${MAX_QUERY_PERMISSION_LENGTH} characters`);
      }
      return value;
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new PermissionQueryError(INVALID);
    const op = soleProperty(value);
    if (op !== "and" && op !== "or") throw new PermissionQueryError(INVALID);
    const operands = (value as Record<string, unknown>)[op];
    if (!Array.isArray(operands) || operands.length === 0) throw new PermissionQueryError(INVALID);
    if (depth >= MAX_QUERY_DEPTH) {
      throw new PermissionQueryError(`${INVALID}: "and" and "or" nest deeper than ${MAX_QUERY_DEPTH} levels`);
    }
    const parsed: PermissionQuery[] = [];
    for (const operand of operands) parsed.push(walk(operand, depth + 1));
    return op === "and" ? { and: parsed } : { or: parsed };
  };
  return walk(raw, 0);
}

/** The name of an object's only own property; undefined when it has none or several (without listing them all). */
function soleProperty(value: object): string | undefined {
  let name: string | undefined;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (name !== undefined) return undefined;
    name = key;
  }
  return name;
}

/** Literal matching, as v1 does: `*` and `api.*.create_key` are names that must be held, never globs. */
export function satisfies(query: PermissionQuery, held: ReadonlySet<string>): boolean {
  if (typeof query === "string") return held.has(query);
  if ("and" in query) return query.and.every((q) => satisfies(q, held));
  return query.or.some((q) => satisfies(q, held));
}

export function describeQuery(query: PermissionQuery): string {
  if (typeof query === "string") return JSON.stringify(query);
  // A one-part `or` (anyOfOne) reads as its part.
  if ("or" in query && query.or.length === 1) return describeQuery(query.or[0]!);
  if ("and" in query) return `all of [${query.and.map(describeQuery).join(", ")}]`;
  return `one of [${query.or.map(describeQuery).join(", ")}]`;
}

/**
 * `or("*", or(permission))`: one permission that v2 asks for as a one-part `or` (the permissions.* reads, deletes and
 * createRole, contract §2 rows 27–33), so that its 403 says `Missing one of these permissions: <permission>` where a
 * single leaf says `Missing permission: '<permission>'`. Holding and v1's text are those of `or("*", permission)`.
 */
export const anyOfOne = (permission: string): PermissionQuery => ({ or: ["*", { or: [permission] }] });

/** `or("*", "api.*.<action>", "api.<apiId>.<action>")`, the usual shape of an API-scoped check. */
export function apiPermission(apiId: string, ...actions: string[]): PermissionQuery {
  return { or: ["*", ...actions.flatMap((a) => [`api.*.${a}`, `api.${apiId}.${a}`])] };
}

/**
 * Which forms of a permission count for a caller (Issue 14, contract §1.5): the tuples (and `*`) alone, or also the
 * URN of the resource (`urnGrants`, the caller's AccessPolicy decides). A query without URNs is also what a 403 quotes.
 */
export type Grants = Pick<AccessPolicy, "urnGrants">;

/**
 * The one builder of a keyspace- or key-scoped permission: apiPermission's tuples, and for v2 the URN
 * `keyspaces/<apiId>#<action>` (keyId null), `keyspaces/<apiId>/keys/<keyId>#<action>` (keyId `*`: any key).
 */
export function keyPermission(grants: Grants, workspaceId: string, apiId: string, keyId: string | null, action: string): PermissionQuery {
  const tuples = ["*", `api.*.${action}`, `api.${apiId}.${action}`];
  if (!grants.urnGrants) return { or: tuples };
  return { or: [...tuples, keyspaceUrn(workspaceId, apiId, keyId, action)] };
}

/** The URN of a keyspace (keyId null) or of a key of it (`*`: any key), the one place its path is spelt. */
export function keyspaceUrn(workspaceId: string, apiId: string, keyId: string | null, action: string): string {
  return urnPermission(workspaceId, keyId === null ? `keyspaces/${apiId}` : `keyspaces/${apiId}/keys/${keyId}`, action);
}

/** The one builder of an identity permission: the given tuples (`*` among them), and for v2 the URN of any identity of any project. */
export function identityPermission(grants: Grants, workspaceId: string, tuples: readonly string[], action: string): PermissionQuery {
  if (!grants.urnGrants) return { or: [...tuples] };
  return { or: [...tuples, urnPermission(workspaceId, "projects/*/identities/*", action)] };
}

/** The URN of a rate-limit namespace's override (v2's getOverride, contract §2 row 38). */
export function overrideUrn(workspaceId: string, namespaceId: string, overrideId: string, action: string): string {
  return urnPermission(workspaceId, `ratelimits/namespaces/${namespaceId}/overrides/${overrideId}`, action);
}

/** v2's permission to create permissions: `*`, the URN of any permission, or the tuple (contract §2 rows 15, 17, 34). */
export function createPermissionPermission(workspaceId: string): PermissionQuery {
  return { or: ["*", urnPermission(workspaceId, "rbac/permissions/*", "create_permission"), "rbac.*.create_permission"] };
}
