import type { Db } from "../storage/client.js";
import type { WriteGuard } from "../storage/rootKeys/rootKeys.auth.repository.js";
import type { Principal } from "./principal.js";

/**
 * Who acts: a root key (v1, v2), the operator's admin token, the import worker, a CLI command, keyhaven itself
 * (`system`: the Unkey fallback adopting a key a verification presented); later a console or a portal session. `name` is what a person reads in the audit log (a root key's name, else its id); never a secret.
 */
export type ActorKind = "root_key" | "operator" | "worker" | "cli" | "system" | "portal_session";
export type Actor = { readonly kind: ActorKind; readonly id: string; readonly name: string };

/** The operator (KEYHAVEN_ADMIN_TOKEN) as the audit log names it: never the token. */
export const OPERATOR: Actor = { kind: "operator", id: "admin", name: "operator" };

/**
 * Where a change came from, as the audit log records it. `surface` is recorded, never branched on: no core function
 * decides anything by it.
 */
export type Surface = "v1" | "v2" | "operator" | "cli" | "worker" | "console" | "portal";
export type Origin = {
  readonly surface: Surface;
  readonly requestId?: string | undefined;
  /** By the one rule for the client address (http/clientAddress.ts), trusting proxies only as configured. */
  readonly clientAddress?: string | undefined;
  readonly userAgent?: string | undefined;
};

/**
 * How access is decided for this caller, the part of the old v1/v2 "dialects" that was never about the wire:
 * - `urnGrants`: whether a permission may also be granted by the URN of the resource (`keyspaces/<apiId>#create_key`,
 *   …, contract §1.5) besides the tuples (`*`, `api.*.create_key`, `api.<apiId>.create_key`);
 * - `check`: whether a permission is checked before the target is looked up (a wrong root key learns nothing of
 *   whether the id exists, then a 403) or after (a missing target is a 404 first);
 * - `denied`: whether a caller refused is told "forbidden" or, as if the target did not exist, "not found".
 * A route whose rule differs from its surface's says so with `withAccess`.
 */
export type AccessPolicy = {
  readonly urnGrants: boolean;
  readonly check: "beforeLookup" | "afterLookup";
  readonly denied: "forbidden" | "notFound";
};

/**
 * What every surface builds for each request and the core receives instead of a protocol name: who acts (actor),
 * where (workspaceId), with which grants (permissions, writeGuard: a Principal), how access is decided (access), where
 * the request came from (origin), and, when the client sent an Idempotency-Key, the scope that makes its change
 * apply once (core/changes.ts). Nothing in it has a default a new surface could forget.
 */
export type Caller = Principal & {
  readonly actor: Actor;
  readonly access: AccessPolicy;
  readonly origin: Origin;
  readonly idempotency?: IdempotencyScope | undefined;
};

/** Set by a surface for a request with an Idempotency-Key; core/changes.ts runs the request's changes in it. */
export interface IdempotencyScope {
  readonly key: string;
  /**
   * Runs `work` in the request's one transaction (opened on first use and held until the surface stores the answer
   * with it, or rolls it back on an error), and returns what `work` returns without committing.
   */
  within<T>(db: Db, work: (tx: Db) => Promise<T>): Promise<T>;
  /** Runs `fn` once the scope's transaction has committed; never when it rolls back. */
  afterCommit(fn: () => void): void;
  /**
   * Runs a read of the request in the scope's transaction once one is open (else on `db`): a read through the store
   * would not see the request's uncommitted writes (PostgreSQL) or would wait for the transaction (PGlite).
   */
  read?<T>(db: Db, work: (db: Db) => Promise<T>): Promise<T>;
}

/** `caller` with some of its access policy replaced, for a route whose rule differs from its surface's. */
export function withAccess(caller: Caller, access: Partial<AccessPolicy>): Caller {
  return Object.assign({}, caller, { access: Object.assign({}, caller.access, access) });
}

/** The caller of a root key's request (v1, v2): its workspace, permissions and, when authorized from memory, writeGuard. */
export function rootKeyCaller(
  rootKey: {
    readonly rootKeyId: string;
    readonly workspaceId: string;
    readonly permissions: ReadonlySet<string>;
    readonly writeGuard?: WriteGuard | undefined;
  },
  access: AccessPolicy,
  origin: Origin,
): Caller {
  return {
    workspaceId: rootKey.workspaceId,
    permissions: rootKey.permissions,
    writeGuard: rootKey.writeGuard,
    actor: { kind: "root_key", id: rootKey.rootKeyId, name: rootKey.rootKeyId },
    access,
    origin,
  };
}

/**
 * A caller that holds every permission of `workspaceId`: the operator (admin token), the import worker acting for
 * the request that enqueued, a CLI command. Its access policy is the strictest form (tuples only, checked first,
 * refused as forbidden), which a holder of `*` never meets.
 */
export function trustedCaller(actor: Actor, workspaceId: string, origin: Origin): Caller {
  return {
    workspaceId,
    permissions: ALL,
    actor,
    access: { urnGrants: false, check: "beforeLookup", denied: "forbidden" },
    origin,
  };
}

const ALL: ReadonlySet<string> = new Set(["*"]);
