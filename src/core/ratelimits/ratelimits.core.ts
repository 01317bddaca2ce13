import { hasPermission, requirePermission } from "../principal.js";
import type { Config } from "../../config.js";
import type { Db } from "../../storage/client.js";
import { InvalidInputError, NotFoundError } from "../../errors.js";
import {
  ensureNamespace,
  findNamespace,
  findOverride,
  type LimitLookupCache,
  listNamespacesPage,
  listOverridesPage,
  type NamespaceSelector,
  type OverrideRow,
  softDeleteOverride,
  upsertOverride,
} from "../../storage/ratelimits/ratelimits.repository.js";
import { checkLimits, type RateLimiter, windowOf } from "../../storage/ratelimits/ratelimiter.js";
import type { Principal } from "../principal.js";

/** What the rate-limit core needs of the services. */
export type RatelimitServices = {
  db: Db;
  limitLookups: LimitLookupCache;
  ratelimiter: RateLimiter;
  config: Pick<Config, "ratelimitOnRedisFailure">;
  clock: { now(): number };
};

/**
 * Counter names for standalone limits: the namespace id (`rlns_…`) leads the identifier, so they can never share
 * a counter with a key's or an identity's limits (counted under `key_…` / `id_…`), nor with another namespace.
 */
const COUNTER_NAME = "ratelimits.limit";

export type LimitInput = { namespace: string; identifier: string; limit: number; duration: number; cost: number };
export type LimitResult = {
  success: boolean;
  limit: number;
  remaining: number;
  reset: number;
  /** Only when true: the limiter's store did not answer and the configuration says to let calls pass. */
  ratelimitSkipped?: true;
};

/**
 * Counts `cost` against the identifier's limit in the namespace: the override that applies to the identifier
 * replaces the given limit and duration. A namespace that does not exist is created when the caller may create
 * namespaces (else it is not found). `epoch` is the store's epoch the lookups are answered at.
 */
export async function limit(services: RatelimitServices, caller: Principal, input: LimitInput, epoch: bigint): Promise<LimitResult> {
  const found = await services.limitLookups.find(
    { workspaceId: caller.workspaceId, name: input.namespace, identifier: input.identifier },
    epoch,
  );
  let namespaceId: string;
  if (found) {
    namespaceId = found.namespaceId;
    requirePermission(caller, { or: ["*", "ratelimit.*.limit", `ratelimit.${namespaceId}.limit`] });
  } else {
    if (!hasPermission(caller, { or: ["*", "ratelimit.*.create_namespace"] })) {
      throw new NotFoundError("namespace", input.namespace);
    }
    // Checked before creating, so a key that may not limit leaves nothing behind.
    requirePermission(caller, { or: ["*", "ratelimit.*.limit"] });
    namespaceId = await ensureNamespace(services.db, caller.workspaceId, input.namespace, services.clock.now());
  }
  const applied = found?.override ?? { limit: input.limit, duration: input.duration };
  const outcomes = await checkLimits(services, [
    {
      workspaceId: caller.workspaceId,
      name: COUNTER_NAME,
      identifier: `${namespaceId}\u0000${input.identifier}`,
      ...applied,
      cost: input.cost,
    },
  ]);
  if (outcomes === undefined) {
    const reset = windowOf(applied.duration, services.clock.now()).reset;
    return { success: true, limit: applied.limit, remaining: applied.limit, reset, ratelimitSkipped: true };
  }
  const [outcome] = outcomes;
  return { success: outcome!.passed, limit: applied.limit, remaining: outcome!.remaining, reset: outcome!.reset };
}

/**
 * The namespace a request names, by id or by name: one of them must be given, and an empty one counts as not
 * given (v1 tested `!namespaceId`; its own tests send `namespaceId=`). Returns the selector without the empty one.
 * Input alone, so an adapter may check it before authenticating (v1 does).
 */
export function givenNamespace(by: NamespaceSelector): NamespaceSelector {
  const given = { namespaceId: by.namespaceId || undefined, namespaceName: by.namespaceName || undefined };
  if (given.namespaceId === undefined && given.namespaceName === undefined) {
    throw new InvalidInputError({ kind: "namespaceSelectorMissing" });
  }
  return given;
}

const namespaceLabel = (by: NamespaceSelector) => by.namespaceId ?? by.namespaceName ?? "";

/** The live namespace of the caller's workspace; NotFoundError (namespaceNotFound, `during` the operation) otherwise. */
async function namespaceOf(db: Db, caller: Principal, by: NamespaceSelector, during: "getOverride" | "other" = "other") {
  const namespace = await findNamespace(db, caller.workspaceId, by);
  if (!namespace) {
    const label = namespaceLabel(by);
    throw new NotFoundError("namespace", label, { kind: "namespaceNotFound", namespace: label, during });
  }
  return namespace;
}

export type OverrideInput = { identifier: string; limit: number; duration: number; async: boolean };

/** Creates or replaces the override of an identifier (or of a `*` pattern) in the namespace; returns its id. */
export async function setOverride(
  services: Pick<RatelimitServices, "db" | "clock">,
  caller: Principal,
  by: NamespaceSelector,
  input: OverrideInput,
): Promise<string> {
  requirePermission(caller, { or: ["*", "ratelimit.*.set_override"] });
  const namespace = await namespaceOf(services.db, caller, by);
  return upsertOverride(services.db, { workspaceId: caller.workspaceId, namespaceId: namespace.id, ...input }, services.clock.now());
}

/** The override of the identifier, matched literally (`*` included). */
export async function getOverride(
  services: Pick<RatelimitServices, "db">,
  caller: Principal,
  by: NamespaceSelector,
  identifier: string,
): Promise<OverrideRow> {
  // v1 did not accept `*` here; keyhaven does, as a `*` key may do everything else.
  requirePermission(caller, { or: ["*", "ratelimit.*.read_override"] });
  const namespace = await namespaceOf(services.db, caller, by, "getOverride");
  const override = await findOverride(services.db, namespace.id, identifier);
  if (!override) throw new NotFoundError("override", identifier, { kind: "overrideNotFound", identifier, during: "get" });
  return override;
}

/** Deletes the override of the identifier (matched literally); the next limit call no longer sees it. */
export async function deleteOverride(
  services: Pick<RatelimitServices, "db" | "clock">,
  caller: Principal,
  by: NamespaceSelector,
  identifier: string,
): Promise<void> {
  requirePermission(caller, { or: ["*", "ratelimit.*.delete_override"] });
  const namespace = await namespaceOf(services.db, caller, by);
  if (!(await softDeleteOverride(services.db, namespace.id, identifier, services.clock.now()))) {
    throw new NotFoundError("override", identifier, { kind: "overrideNotFound", identifier, during: "delete" });
  }
}

/** A page of the namespace's overrides by id after `cursor`, the cursor of the next page (when one may exist), the total. */
export async function listOverrides(
  services: Pick<RatelimitServices, "db">,
  caller: Principal,
  by: NamespaceSelector,
  page: { limit: number; cursor?: string | undefined },
): Promise<{ overrides: OverrideRow[]; cursor?: string; total: number }> {
  requirePermission(caller, { or: ["*", "ratelimit.*.read_override"] });
  const namespace = await namespaceOf(services.db, caller, by);
  const { rows, total } = await listOverridesPage(services.db, { namespaceId: namespace.id, ...page });
  // Only when another page may exist: a short page is the last one.
  return { overrides: rows, ...(rows.length === page.limit && { cursor: rows[rows.length - 1]!.id }), total };
}

/** A page of the workspace's namespaces by name after `cursor` (a name), the cursor of the next page, the total. */
export async function listNamespaces(
  services: Pick<RatelimitServices, "db">,
  caller: Principal,
  page: { limit: number; cursor?: string | undefined },
): Promise<{ namespaces: { id: string; name: string }[]; cursor?: string; total: number }> {
  // A key holding `ratelimit.<namespaceId>.read_namespace` already knows that id; listing needs the wildcard.
  requirePermission(caller, { or: ["*", "ratelimit.*.read_namespace"] });
  const { rows, total } = await listNamespacesPage(services.db, { workspaceId: caller.workspaceId, ...page });
  // Only when another page may exist: a short page is the last one.
  return { namespaces: rows, ...(rows.length === page.limit && { cursor: rows[rows.length - 1]!.name }), total };
}
