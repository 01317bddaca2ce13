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
import type { AuditTarget } from "../../storage/schema.js";
import type { Principal } from "../principal.js";
import { overrideUrn, type PermissionQuery } from "../auth/permissions.query.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";

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
 * How a surface's `limit` names and meets namespaces (contract §9, §15.16), which its adapter passes:
 * - `namespaceBy`: `namespace` is a name (v1), or an id or else a name (v2);
 * - `missingNamespace`: a namespace that does not exist, for a caller without `ratelimit.*.create_namespace`, is
 *   not found (v1, 404) or the refusal of that permission (v2, 403).
 * The override routes decide by the caller's access policy instead: `check` beforeLookup asks for the wildcard
 * permission before the namespace is looked up (403 first); afterLookup looks it up first (404 first) and also
 * accepts `ratelimit.<namespaceId>.<action>`.
 */
export type LimitRules = {
  readonly namespaceBy: "name" | "idOrName";
  readonly missingNamespace: "notFound" | "forbidden";
};

/**
 * Which override getOverride reads, which the adapter passes: the identifier's own, matched literally (`*`
 * included; v1), or the one limit applies (exact, else the best wildcard; v2).
 */
export type OverrideReadRules = { readonly match: "literal" | "applicable" };

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
 * namespaces (else, as `rules` say, not found or refused for want of `ratelimit.*.create_namespace`). `epoch` is the
 * store's epoch the lookups are answered at. Not a change (the write gate's): a namespace it creates on the way is
 * not recorded in the audit log, so that the hot path keeps its one statement.
 */
export async function limit(
  services: RatelimitServices,
  caller: Principal,
  input: LimitInput,
  epoch: bigint,
  rules: LimitRules,
): Promise<LimitResult> {
  const { limits } = await limitMany(services, caller, [input], epoch, rules);
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
  rules: LimitRules,
): Promise<{ passed: boolean; limits: ManyLimitResult[] }> {
  const found = await Promise.all(
    inputs.map((input) =>
      services.limitLookups.find(
        {
          workspaceId: caller.workspaceId,
          name: input.namespace,
          identifier: input.identifier,
          idOrName: rules.namespaceBy === "idOrName",
        },
        epoch,
      ),
    ),
  );
  const namespaceIds = [...new Set(found.flatMap((f) => (f ? [f.namespaceId] : [])))];
  const missing = [...new Set(inputs.filter((_, i) => !found[i]).map((input) => input.namespace))];
  if (missing.length > 0) {
    const mayCreate: PermissionQuery = { or: ["*", "ratelimit.*.create_namespace"] };
    if (rules.missingNamespace === "forbidden") requirePermission(caller, mayCreate);
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
 * The namespace an override route acts in, with the caller allowed to `action` there, by the caller's access policy:
 * checked before the lookup, the wildcard permission; after it, the namespace's own permission too.
 */
async function namespaceToActIn(
  db: Db,
  caller: Caller,
  by: NamespaceSelector,
  action: "set_override" | "read_override" | "delete_override",
  during: "getOverride" | "other" = "other",
) {
  // The namespace's own permission first (v2's refusal lists them in this order).
  const may = (namespaceId?: string): PermissionQuery => ({
    or: ["*", ...(namespaceId !== undefined ? [`ratelimit.${namespaceId}.${action}`] : []), `ratelimit.*.${action}`],
  });
  const before = caller.access.check === "beforeLookup";
  if (before) requirePermission(caller, may());
  const namespace = await namespaceOf(db, caller, by, during);
  if (!before) requirePermission(caller, may(namespace.id));
  return namespace;
}

export type OverrideInput = { identifier: string; limit: number; duration: number; async: boolean };

/** What the override changes need of the services: every one goes through the write gate (`changes`). */
export type OverrideChangeServices = Pick<RatelimitServices, "db" | "clock"> & { readonly changes: WriteGate };

const namespaceTarget = (namespace: { id: string; name: string }): AuditTarget => ({
  type: "ratelimitNamespace",
  id: namespace.id,
  name: namespace.name,
});
const overrideTarget = (id: string, identifier: string): AuditTarget => ({ type: "ratelimitOverride", id, name: identifier });

/**
 * Creates or replaces the override of an identifier (or of a `*` pattern) in the namespace; returns its id. One
 * change: ratelimit.set_override (details: the limit, duration and async set, none of them secret).
 */
export async function setOverride(
  services: OverrideChangeServices,
  caller: Caller,
  by: NamespaceSelector,
  input: OverrideInput,
): Promise<string> {
  const namespace = await namespaceToActIn(services.db, caller, by, "set_override");
  return services.changes.change(caller, async (tx, record) => {
    const id = await upsertOverride(tx, { workspaceId: caller.workspaceId, namespaceId: namespace.id, ...input }, services.clock.now());
    record({
      event: "ratelimit.set_override",
      targets: [namespaceTarget(namespace), overrideTarget(id, input.identifier)],
      description: `set override ${id} in namespace ${namespace.id}`,
      details: { limit: input.limit, duration: input.duration, async: input.async },
    });
    return id;
  });
}

/**
 * The override of the identifier, matched as `rules` say. Looked up after the permission check when the caller's
 * policy checks first (the wildcard read_override); else first, and then readable also by the namespace's own
 * permission or the override's URN (when the policy grants by URN), a refusal answered as the policy's `denied` says
 * (v2 answers it as if there were no override).
 */
export async function getOverride(
  services: Pick<RatelimitServices, "db">,
  caller: Caller,
  by: NamespaceSelector,
  identifier: string,
  rules: OverrideReadRules,
): Promise<OverrideRow> {
  const notFound = () => new NotFoundError("override", identifier, { kind: "overrideNotFound", identifier, during: "get" });
  const before = caller.access.check === "beforeLookup";
  // v1 did not accept `*` here; keyhaven does, as a `*` key may do everything else.
  const namespace = before
    ? await namespaceToActIn(services.db, caller, by, "read_override", "getOverride")
    : await namespaceOf(services.db, caller, by, "getOverride");
  const override =
    rules.match === "literal"
      ? await findOverride(services.db, namespace.id, identifier)
      : await findApplicableOverride(services.db, namespace.id, identifier);
  if (!override) throw notFound();
  if (before) return override;
  const may: PermissionQuery = {
    or: [
      "*",
      ...(caller.access.urnGrants ? [overrideUrn(caller.workspaceId, namespace.id, override.id, "read_override")] : []),
      `ratelimit.${namespace.id}.read_override`,
      "ratelimit.*.read_override",
    ],
  };
  if (caller.access.denied === "notFound" && !hasPermission(caller, may)) throw notFound();
  requirePermission(caller, may);
  return override;
}

/**
 * Deletes the override of the identifier (matched literally); the next limit call no longer sees it. One change:
 * ratelimit.delete_override.
 */
export async function deleteOverride(
  services: OverrideChangeServices,
  caller: Caller,
  by: NamespaceSelector,
  identifier: string,
): Promise<void> {
  const namespace = await namespaceToActIn(services.db, caller, by, "delete_override");
  const deleted = await services.changes.change(caller, async (tx, record) => {
    const id = await softDeleteOverride(tx, namespace.id, identifier, services.clock.now());
    if (id !== undefined) {
      record({
        event: "ratelimit.delete_override",
        targets: [namespaceTarget(namespace), overrideTarget(id, identifier)],
        description: `deleted override ${id} in namespace ${namespace.id}`,
      });
    }
    return id !== undefined;
  });
  if (!deleted) throw new NotFoundError("override", identifier, { kind: "overrideNotFound", identifier, during: "delete" });
}

/**
 * A page of the namespace's overrides by id after `cursor` (or from `fromId` on, inclusive, as v2 pages), the cursor
 * of the next page (when one may exist), the total.
 */
export async function listOverrides(
  services: Pick<RatelimitServices, "db">,
  caller: Caller,
  by: NamespaceSelector,
  page: { limit: number; cursor?: string | undefined; fromId?: string | undefined },
): Promise<{ overrides: OverrideRow[]; cursor?: string; total: number }> {
  const namespace = await namespaceToActIn(services.db, caller, by, "read_override");
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

/**
 * A live namespace of the caller's workspace by id (NotFoundError otherwise), for a caller that may read it or its
 * overrides: `ratelimit.*.<action>` or `ratelimit.<namespaceId>.<action>`, read_namespace or read_override.
 */
export async function getNamespace(
  services: Pick<RatelimitServices, "db">,
  caller: Caller,
  namespaceId: string,
): Promise<{ id: string; name: string }> {
  const namespace = await namespaceOf(services.db, caller, { namespaceId });
  const may = (action: string) => [`ratelimit.${namespace.id}.${action}`, `ratelimit.*.${action}`];
  requirePermission(caller, { or: ["*", ...may("read_namespace"), ...may("read_override")] });
  return namespace;
}

/**
 * setOverride in the namespace of this name, which is created when the workspace has none yet (as limit creates
 * one): that needs `ratelimit.*.create_namespace` and `ratelimit.*.set_override` (a new namespace's own permission
 * cannot be held yet). One change: ratelimit.set_override, naming the namespace (new or not) and the override.
 */
export async function setOverrideInNamespaceNamed(
  services: OverrideChangeServices,
  caller: Caller,
  namespaceName: string,
  input: OverrideInput,
): Promise<{ namespaceId: string; overrideId: string }> {
  const existing = await findNamespace(services.db, caller.workspaceId, { namespaceName });
  if (existing) {
    return { namespaceId: existing.id, overrideId: await setOverride(services, caller, { namespaceId: existing.id }, input) };
  }
  requirePermission(caller, { or: ["*", { and: ["ratelimit.*.create_namespace", "ratelimit.*.set_override"] }] });
  return services.changes.change(caller, async (tx, record) => {
    const now = services.clock.now();
    const namespaceId = await ensureNamespace(tx, caller.workspaceId, namespaceName, now);
    const overrideId = await upsertOverride(tx, { workspaceId: caller.workspaceId, namespaceId, ...input }, now);
    record({
      event: "ratelimit.set_override",
      targets: [namespaceTarget({ id: namespaceId, name: namespaceName }), overrideTarget(overrideId, input.identifier)],
      description: `set override ${overrideId} in namespace ${namespaceId}`,
      details: { limit: input.limit, duration: input.duration, async: input.async },
    });
    return { namespaceId, overrideId };
  });
}
