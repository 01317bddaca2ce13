import { hasPermission, requirePermission } from "../principal.js";
import type { Config } from "../../config.js";
import type { Db } from "../../storage/client.js";
import { InvalidInputError, NotFoundError } from "../../errors.js";
import {
  ensureNamespace,
  findNamespace,
  findApplicableOverride,
  findOverride,
  type LimitLookupCache,
  listNamespacesPage,
  listOverridesPage,
  type NamespaceSelector,
  type OverrideRow,
  softDeleteOverride,
  upsertOverride,
} from "../../storage/ratelimits/ratelimits.repository.js";
import { checkLimits, type RateLimiter, type SkipCounter, windowOf } from "../../storage/ratelimits/ratelimiter.js";
import type { Principal } from "../principal.js";
import { overrideUrn, type PermissionQuery } from "../auth/permissions.query.js";

/** What the rate-limit core needs of the services. */
export type RatelimitServices = {
  db: Db;
  limitLookups: LimitLookupCache;
  ratelimiter: RateLimiter;
  config: Pick<Config, "ratelimitOnRedisFailure">;
  clock: { now(): number };
  /** Counts the checks skipped while Redis cannot answer (failing open). */
  metrics: SkipCounter;
};

/**
 * Counter names for standalone limits: the namespace id (`rlns_…`) leads the identifier, so they can never share
 * a counter with a key's or an identity's limits (counted under `key_…` / `id_…`), nor with another namespace.
 */
const COUNTER_NAME = "ratelimits.limit";

/**
 * Where v1 and v2 differ on the rate-limit routes (contract §9, §15.16); each adapter says which it follows:
 * - how a namespace is named: v1 by `namespaceId` or `namespaceName`, v2 by one string, its id or its name;
 * - `limit` on a namespace that does not exist without `ratelimit.*.create_namespace`: v1 404, v2 403;
 * - overrides: v1 checks the wildcard permission before looking the namespace up (403 first), v2 looks it up
 *   first (404 first) and also accepts `ratelimit.<namespaceId>.<action>`;
 * - getOverride: v1 matches the identifier literally; v2 resolves it as limit does (exact, else the best wildcard)
 *   and answers a caller that may not read it as if there were no override (404).
 */
export type RatelimitDialect = "v1" | "v2";

export type LimitInput = { namespace: string; identifier: string; limit: number; duration: number; cost: number };
export type LimitResult = {
  success: boolean;
  limit: number;
  remaining: number;
  reset: number;
  /** Only when true: the limiter's store did not answer and the configuration says to let calls pass. */
  ratelimitSkipped?: true;
  /** The override that replaced the given limit and duration, when one did. */
  overrideId?: string;
};

/**
 * Counts `cost` against the identifier's limit in the namespace: the override that applies to the identifier
 * replaces the given limit and duration. A namespace that does not exist is created when the caller may create
 * namespaces (else v1: not found, v2: refused for want of `ratelimit.*.create_namespace`). `epoch` is the store's epoch the lookups are answered at.
 */
export async function limit(
  services: RatelimitServices,
  caller: Principal,
  input: LimitInput,
  epoch: bigint,
  dialect: RatelimitDialect = "v1",
): Promise<LimitResult> {
  const { limits } = await limitMany(services, caller, [input], epoch, dialect);
  const { passed, ...result } = limits[0]!;
  return { success: passed, ...result };
}

export type ManyLimitResult = Omit<LimitResult, "success"> & { passed: boolean };

/**
 * limit for several (namespace, identifier) pairs at once (v2's ratelimit.multiLimit), all or nothing: when any one
 * fails, none is counted (each then reports what it would have had). Namespaces missing are created when the caller
 * may create namespaces (limit's rules), and the caller needs `ratelimit.*.limit` or the limit permission of every
 * namespace named.
 */
export async function limitMany(
  services: RatelimitServices,
  caller: Principal,
  inputs: LimitInput[],
  epoch: bigint,
  dialect: RatelimitDialect = "v1",
): Promise<{ passed: boolean; limits: ManyLimitResult[] }> {
  const found = await Promise.all(
    inputs.map((input) =>
      services.limitLookups.find(
        { workspaceId: caller.workspaceId, name: input.namespace, identifier: input.identifier, idOrName: dialect === "v2" },
        epoch,
      ),
    ),
  );
  const namespaceIds = [...new Set(found.flatMap((f) => (f ? [f.namespaceId] : [])))];
  const missing = [...new Set(inputs.filter((_, i) => !found[i]).map((input) => input.namespace))];
  if (missing.length > 0) {
    const mayCreate: PermissionQuery = { or: ["*", "ratelimit.*.create_namespace"] };
    if (dialect === "v2") requirePermission(caller, mayCreate);
    else if (!hasPermission(caller, mayCreate)) throw new NotFoundError("namespace", missing[0]!);
    // Checked before creating, so a key that may not limit leaves nothing behind; a new namespace's own permission
    // cannot be held yet.
    requirePermission(caller, { or: ["*", "ratelimit.*.limit"] });
  } else {
    const own = namespaceIds.map((id) => `ratelimit.${id}.limit`);
    requirePermission(caller, { or: ["*", "ratelimit.*.limit", own.length === 1 ? own[0]! : { and: own }] });
  }
  const created = new Map<string, string>();
  for (const name of missing) created.set(name, await ensureNamespace(services.db, caller.workspaceId, name, services.clock.now()));
  const items = inputs.map((input, i) => {
    const override = found[i]?.override;
    return {
      namespaceId: found[i]?.namespaceId ?? created.get(input.namespace)!,
      applied: override ? { limit: override.limit, duration: override.duration } : { limit: input.limit, duration: input.duration },
      ...(override && { overrideId: override.id }),
    };
  });
  const outcomes = await checkLimits(
    services,
    items.map((item, i) => ({
      workspaceId: caller.workspaceId,
      name: COUNTER_NAME,
      identifier: `${item.namespaceId}\u0000${inputs[i]!.identifier}`,
      ...item.applied,
      cost: inputs[i]!.cost,
    })),
    "limit",
  );
  const now = services.clock.now();
  const limits = items.map((item, i): ManyLimitResult => {
    const overrideId = item.overrideId !== undefined ? { overrideId: item.overrideId } : {};
    if (outcomes === undefined) {
      const reset = windowOf(item.applied.duration, now).reset;
      return { passed: true, limit: item.applied.limit, remaining: item.applied.limit, reset, ratelimitSkipped: true, ...overrideId };
    }
    const outcome = outcomes[i]!;
    return { passed: outcome.passed, limit: item.applied.limit, remaining: outcome.remaining, reset: outcome.reset, ...overrideId };
  });
  return { passed: limits.every((l) => l.passed), limits };
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

const namespaceLabel = (by: NamespaceSelector) => by.namespaceId ?? by.namespaceName ?? by.namespaceIdOrName ?? "";

/** The live namespace of the caller's workspace; NotFoundError (namespaceNotFound, `during` the operation) otherwise. */
async function namespaceOf(db: Db, caller: Principal, by: NamespaceSelector, during: "getOverride" | "other" = "other") {
  const namespace = await findNamespace(db, caller.workspaceId, by);
  if (!namespace) {
    const label = namespaceLabel(by);
    throw new NotFoundError("namespace", label, { kind: "namespaceNotFound", namespace: label, during });
  }
  return namespace;
}

/**
 * The namespace an override route acts in, with the caller allowed to `action` there: v1 asks for the wildcard
 * permission before looking the namespace up, v2 looks it up first and also accepts the namespace's own permission.
 */
async function namespaceToActIn(
  db: Db,
  caller: Principal,
  by: NamespaceSelector,
  action: "set_override" | "read_override" | "delete_override",
  dialect: RatelimitDialect,
  during: "getOverride" | "other" = "other",
) {
  // v2 names the namespace's own permission first (its refusal lists them in this order).
  const may = (namespaceId?: string): PermissionQuery => ({
    or: ["*", ...(namespaceId !== undefined ? [`ratelimit.${namespaceId}.${action}`] : []), `ratelimit.*.${action}`],
  });
  if (dialect === "v1") requirePermission(caller, may());
  const namespace = await namespaceOf(db, caller, by, during);
  if (dialect === "v2") requirePermission(caller, may(namespace.id));
  return namespace;
}

export type OverrideInput = { identifier: string; limit: number; duration: number; async: boolean };

/** Creates or replaces the override of an identifier (or of a `*` pattern) in the namespace; returns its id. */
export async function setOverride(
  services: Pick<RatelimitServices, "db" | "clock">,
  caller: Principal,
  by: NamespaceSelector,
  input: OverrideInput,
  dialect: RatelimitDialect = "v1",
): Promise<string> {
  const namespace = await namespaceToActIn(services.db, caller, by, "set_override", dialect);
  return upsertOverride(services.db, { workspaceId: caller.workspaceId, namespaceId: namespace.id, ...input }, services.clock.now());
}

/**
 * The override of the identifier: v1 matches it literally (`*` included); v2 as limit applies it (exact, else the
 * best wildcard), and hides it from a caller that may not read it.
 */
export async function getOverride(
  services: Pick<RatelimitServices, "db">,
  caller: Principal,
  by: NamespaceSelector,
  identifier: string,
  dialect: RatelimitDialect = "v1",
): Promise<OverrideRow> {
  const notFound = () => new NotFoundError("override", identifier, { kind: "overrideNotFound", identifier, during: "get" });
  if (dialect === "v1") {
    // v1 did not accept `*` here; keyhaven does, as a `*` key may do everything else.
    const namespace = await namespaceToActIn(services.db, caller, by, "read_override", dialect, "getOverride");
    const override = await findOverride(services.db, namespace.id, identifier);
    if (!override) throw notFound();
    return override;
  }
  const namespace = await namespaceOf(services.db, caller, by, "getOverride");
  const override = await findApplicableOverride(services.db, namespace.id, identifier);
  if (!override) throw notFound();
  const may: PermissionQuery = {
    or: [
      "*",
      overrideUrn(caller.workspaceId, namespace.id, override.id, "read_override"),
      `ratelimit.${namespace.id}.read_override`,
      "ratelimit.*.read_override",
    ],
  };
  if (!hasPermission(caller, may)) throw notFound();
  return override;
}

/** Deletes the override of the identifier (matched literally); the next limit call no longer sees it. */
export async function deleteOverride(
  services: Pick<RatelimitServices, "db" | "clock">,
  caller: Principal,
  by: NamespaceSelector,
  identifier: string,
  dialect: RatelimitDialect = "v1",
): Promise<void> {
  const namespace = await namespaceToActIn(services.db, caller, by, "delete_override", dialect);
  if (!(await softDeleteOverride(services.db, namespace.id, identifier, services.clock.now()))) {
    throw new NotFoundError("override", identifier, { kind: "overrideNotFound", identifier, during: "delete" });
  }
}

/**
 * A page of the namespace's overrides by id after `cursor` (or from `fromId` on, inclusive, as v2 pages), the cursor
 * of the next page (when one may exist), the total.
 */
export async function listOverrides(
  services: Pick<RatelimitServices, "db">,
  caller: Principal,
  by: NamespaceSelector,
  page: { limit: number; cursor?: string | undefined; fromId?: string | undefined },
  dialect: RatelimitDialect = "v1",
): Promise<{ overrides: OverrideRow[]; cursor?: string; total: number }> {
  const namespace = await namespaceToActIn(services.db, caller, by, "read_override", dialect);
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
