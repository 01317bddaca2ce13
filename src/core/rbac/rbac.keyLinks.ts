import { requireAccess } from "../access.js";
import type { AuditEvent } from "../audit/audit.events.js";
import type { Caller } from "../caller.js";
import { readAfterChange, type RecordChange, type WriteGate } from "../changes.js";
import { hasPermission, type Principal, requirePermission } from "../principal.js";
import { requireNamesWithinBounds } from "./rbac.bounds.js";
import { createPermissionPermission, describeQuery, keyspaceUrn, type PermissionQuery } from "../auth/permissions.query.js";
import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import { NotFoundError, type PermissionCheck, PermissionDeniedError, type Refusal } from "../../errors.js";
import {
  deleteKeyLinks,
  findKeyLinkIds,
  findKeyLinks,
  findKeyPermissionRows,
  findKeyRoleRows,
  insertKeyLinks,
  replaceKeyLinks,
} from "../../storage/keys/keys.rbac.repository.js";
import { lockKeyForUpdate } from "../../storage/keys/keys.update.repository.js";
import {
  ensurePermission,
  ensureRole,
  findPermissionsByIdOrSlug,
  findRolesByIdOrName,
  type PermissionRow,
  permissionsOfRoles,
  type RoleRow,
} from "../../storage/rbac/permissions.repository.js";

/**
 * The rules of connecting roles and permissions to a key (v1: keys.addPermissions / removePermissions /
 * setPermissions / addRoles / removeRoles / setRoles, and the `roles`/`permissions` of keys.updateKey). Permissions
 * are named by slug, roles by name; every call is one transaction, so one bad entry changes nothing. Refusals are
 * domain errors: NotFoundError (the key, or a role or permission named), PermissionDeniedError (with `check` set
 * for the two checks v1 answers differently).
 */

/** What these rules use of the process's services. */
export type RbacServices = { readonly db: Db; readonly clock: Clock };
/** What changing a key's links uses: the write gate owns the transaction and records the change. */
export type KeyLinkServices = RbacServices & { readonly changes: WriteGate };

type Key = { id: string; workspaceId: string; apiId: string };

/**
 * The rules of a surface for connecting roles and permissions to a key (contract §4.8–§4.13, §15.4), every one
 * stated by the adapter (none has a default). When a check is made (before or after the key is looked up) and how a
 * refusal is told come from the caller's access policy; which grants count (URNs) too.
 * - `permission`: "rbac" asks the route's rbac permission (or `*`); "updateKey" asks update_key on the key's API (or
 *   the key's URN) together with it (removing and setting roles: update_key alone, contract §16.3); it needs the key,
 *   so it is checked after the lookup whatever the policy;
 * - `set`: "checkEachChange" checks disconnecting (remove_x, check `disconnectWhileSetting`) and connecting (add_x)
 *   by what the set changes; "checkUpFront" asks `permission`'s query alone;
 * - `unknownNames`: "perOperation" (a name the workspace lacks is not found on add, `notFoundToSet` on set, ignored on
 *   removal) or "namedNotFound" (every operation answers it as `namedNotFound`, removal too);
 * - `creating`: "rbacCreate" needs create_x (refused on add with check `createWhileAdding`, on set as forbidden);
 *   "createGrant" needs create_x or, with URN grants, its URN (a caller who may not is told not found on add,
 *   forbidden on set).
 */
export type KeyLinkRules = {
  readonly permission: "rbac" | "updateKey";
  readonly set: "checkEachChange" | "checkUpFront";
  readonly unknownNames: "perOperation" | "namedNotFound";
  readonly creating: "rbacCreate" | "createGrant";
};

type KeyLinkOperation = "add" | "remove" | "set";

/** A requested role or permission: by id, else by name (a permission's slug), created on request. */
export type Wanted = { id?: string | undefined; name?: string | undefined; create?: boolean | undefined };
export type Connected = { id: string; name: string };

/** What a change of a key's links did: the entries created, connected and disconnected. */
export type LinkChanges = { created: Connected[]; added: Connected[]; removed: Connected[] };

export type RbacKind = {
  kind: "permission" | "role";
  /** The id, the name matched against (slug or name) and the name answered, of those found. */
  find(db: Db, workspaceId: string, ids: string[], names: string[]): Promise<{ id: string; match: string; name: string }[]>;
  /** Creates it when missing and locks it; undefined when a concurrent delete removed it meanwhile. */
  ensure(db: Db, workspaceId: string, name: string, now: number): Promise<string | undefined>;
  permissions: { add: string; remove: string; create: string };
  events: { connect: AuditEvent; disconnect: AuditEvent; create: AuditEvent };
};

export const permissionKind: RbacKind = {
  kind: "permission",
  find: async (db, ws, ids, names) =>
    (await findPermissionsByIdOrSlug(db, ws, ids, names)).map((p) => ({ id: p.id, match: p.slug, name: p.name })),
  ensure: ensurePermission,
  permissions: {
    add: "rbac.*.add_permission_to_key",
    remove: "rbac.*.remove_permission_from_key",
    create: "rbac.*.create_permission",
  },
  events: {
    connect: "authorization.connect_permission_and_key",
    disconnect: "authorization.disconnect_permission_and_key",
    create: "permission.create",
  },
};

export const roleKind: RbacKind = {
  kind: "role",
  find: async (db, ws, ids, names) =>
    (await findRolesByIdOrName(db, ws, ids, names)).map((r) => ({ id: r.id, match: r.name, name: r.name })),
  ensure: ensureRole,
  permissions: { add: "rbac.*.add_role_to_key", remove: "rbac.*.remove_role_from_key", create: "rbac.*.create_role" },
  events: { connect: "authorization.connect_role_and_key", disconnect: "authorization.disconnect_role_and_key", create: "role.create" },
};

const anyOf = (permission: string): PermissionQuery => ({ or: ["*", permission] });

/** The route's rbac permission for `operation` (rules.permission "rbac"). */
function rbacQuery(k: RbacKind, operation: KeyLinkOperation): PermissionQuery {
  if (operation === "set") return { or: ["*", k.permissions.add, k.permissions.remove] };
  return anyOf(operation === "add" ? k.permissions.add : k.permissions.remove);
}

/** update_key on the key's API (or its URN, when URNs grant) with the rbac permission (contract §2, rows 15–20). */
function updateKeyQuery(caller: Caller, k: RbacKind, operation: KeyLinkOperation, key: Key): PermissionQuery {
  const updateKey: PermissionQuery = { or: [`api.*.update_key`, `api.${key.apiId}.update_key`] };
  const urn = caller.access.urnGrants ? [keyspaceUrn(caller.workspaceId, key.apiId, key.id, "update_key")] : [];
  // Removing and setting roles ask for update_key alone (contract §16.3).
  if (k.kind === "role" && operation !== "add") return { or: ["*", `api.*.update_key`, `api.${key.apiId}.update_key`, ...urn] };
  const rbac =
    operation === "add" ? [k.permissions.add] : operation === "remove" ? [k.permissions.remove] : [k.permissions.add, k.permissions.remove];
  return { or: ["*", ...urn, { and: [updateKey, ...rbac] }] };
}

/** The permission to create what a request names (rules.creating "createGrant"): the tuple, or with URN grants the URN of any. */
function createGrant(caller: Caller, k: RbacKind): PermissionQuery {
  if (k.kind === "permission" && caller.access.urnGrants) return createPermissionPermission(caller.workspaceId);
  return anyOf(k.permissions.create);
}

/** The refusal of a name the workspace lacks, by the rules. */
const namedNotFound = (k: RbacKind, name: string): Refusal => ({ kind: "namedNotFound", what: k.kind, name });

function missingOf(rules: KeyLinkRules, k: RbacKind, operation: KeyLinkOperation): ((name: string) => Refusal) | undefined {
  if (rules.unknownNames === "namedNotFound") return (name) => namedNotFound(k, name);
  if (operation === "set") return (name) => ({ kind: "notFoundToSet", what: k.kind, name });
  return undefined;
}

function allowCreateOf(caller: Caller, rules: KeyLinkRules, k: RbacKind, operation: KeyLinkOperation): (name: string) => void {
  if (rules.creating === "rbacCreate") {
    const query = anyOf(k.permissions.create);
    if (operation === "add") {
      return () => {
        if (!hasPermission(caller, query)) deny("createWhileAdding", caller, query);
      };
    }
    return () => requirePermission(caller, query);
  }
  const query = createGrant(caller, k);
  return (name) => {
    if (operation === "add" && !hasPermission(caller, query)) throw new NotFoundError(k.kind, name, namedNotFound(k, name));
    requirePermission(caller, query);
  };
}

function deny(check: PermissionCheck, principal: Principal, query: PermissionQuery): never {
  throw new PermissionDeniedError(describeQuery(query), [...principal.permissions], { check });
}

/**
 * The requested entries as `{id, name}`, in request order without repeats, and those created: by id, else by name;
 * a missing name is created when the entry says `create` (after `allowCreate`), else NotFoundError (`missing(name)`
 * when given).
 */
async function resolve(
  db: Db,
  principal: Principal,
  k: RbacKind,
  wanted: Wanted[],
  now: number,
  rules: { missing?: ((name: string) => Refusal) | undefined; allowCreate(name: string): void },
): Promise<{ connected: Connected[]; created: Connected[] }> {
  requireNamesWithinBounds([namingOf(k, wanted)]);
  const ids = wanted.flatMap((w) => (w.id !== undefined ? [w.id] : []));
  const names = wanted.flatMap((w) => (w.id === undefined ? [w.name!] : []));
  const found = await k.find(db, principal.workspaceId, ids, names);
  const byId = new Map(found.map((f) => [f.id, f.name]));
  const byName = new Map(found.map((f) => [f.match, { id: f.id, name: f.name }]));
  const result = new Map<string, Connected>();
  const created: Connected[] = [];
  for (const w of wanted) {
    if (w.id !== undefined) {
      const foundName = byId.get(w.id);
      if (foundName === undefined) throw new NotFoundError(k.kind, w.id);
      result.set(w.id, { id: w.id, name: foundName });
      continue;
    }
    const wantedName = w.name!;
    let hit = byName.get(wantedName);
    if (hit === undefined) {
      if (!w.create) throw new NotFoundError(k.kind, wantedName, rules.missing?.(wantedName));
      rules.allowCreate(wantedName);
      // Created roles are named by their name, created permissions get name = slug.
      const id = await k.ensure(db, principal.workspaceId, wantedName, now);
      // Deleted by a concurrent call between its creation and this lookup: it is not found (a 404 as v1 declares).
      if (id === undefined) throw new NotFoundError(k.kind, wantedName);
      hit = { id, name: wantedName };
      byName.set(wantedName, hit);
      created.push(hit);
    }
    result.set(hit.id, hit);
  }
  return { connected: [...result.values()], created };
}

/** What entries name, as the per-request bound counts it: by id or name, each distinct one a link. */
function namingOf(k: RbacKind, wanted: Wanted[]) {
  const names = wanted.map((w) => w.id ?? w.name!);
  return k.kind === "role" ? { roles: names } : { permissions: names };
}

async function lockKey(tx: Db, principal: Principal, keyId: string): Promise<Key> {
  const key = await lockKeyForUpdate(tx, principal.workspaceId, keyId);
  if (!key) throw new NotFoundError("key", keyId);
  return key;
}

/**
 * Checks the caller may change the key's links: the rbac permission before the lookup when the caller's policy says
 * so (`key` undefined then), else, and for update_key (which names the key's API), after it. A refused caller is told
 * as its policy says (requireAccess).
 */
function requireLinkAccess(caller: Caller, rules: KeyLinkRules, k: RbacKind, operation: KeyLinkOperation, keyId: string, key?: Key): void {
  const notFound = () => new NotFoundError("key", keyId);
  if (rules.permission === "rbac") {
    const beforeLookup = caller.access.check === "beforeLookup";
    if (beforeLookup === (key === undefined)) requireAccess(caller, rbacQuery(k, operation), notFound);
    return;
  }
  if (key !== undefined) requireAccess(caller, updateKeyQuery(caller, k, operation, key), notFound);
}

/** Records what a change of the key's links did: one entry per kind of change that happened, none when nothing did. */
export function recordLinkChanges(record: RecordChange, k: RbacKind, keyId: string, changes: LinkChanges): void {
  const target = (c: Connected) => ({ type: k.kind, id: c.id, name: c.name });
  const plural = (n: number) => `${n} ${k.kind}${n === 1 ? "" : "s"}`;
  const listed = (cs: Connected[]) => cs.map((c) => c.name).join(", ");
  if (changes.created.length > 0) {
    record({
      event: k.events.create,
      targets: changes.created.map(target),
      description: `created ${plural(changes.created.length)} (${listed(changes.created)}) while connecting them to key ${keyId}`,
    });
  }
  if (changes.added.length > 0) {
    record({
      event: k.events.connect,
      targets: [{ type: "key", id: keyId }, ...changes.added.map(target)],
      description: `connected ${plural(changes.added.length)} (${listed(changes.added)}) to key ${keyId}`,
    });
  }
  if (changes.removed.length > 0) {
    record({
      event: k.events.disconnect,
      targets: [{ type: "key", id: keyId }, ...changes.removed.map(target)],
      description: `disconnected ${plural(changes.removed.length)} (${listed(changes.removed)}) from key ${keyId}`,
    });
  }
}

/** add: the permission of `rules`; creating by `rules.creating`. Answers every entry requested. */
export async function addToKey(
  services: KeyLinkServices,
  caller: Caller,
  k: RbacKind,
  input: { keyId: string; wanted: Wanted[] },
  rules: KeyLinkRules,
): Promise<Connected[]> {
  requireNamesWithinBounds([namingOf(k, input.wanted)]);
  requireLinkAccess(caller, rules, k, "add", input.keyId);
  return services.changes.change(caller, async (tx, record) => {
    const key = await lockKey(tx, caller, input.keyId);
    requireLinkAccess(caller, rules, k, "add", input.keyId, key);
    const now = services.clock.now();
    const { connected, created } = await resolve(tx, caller, k, input.wanted, now, {
      missing: missingOf(rules, k, "add"),
      allowCreate: allowCreateOf(caller, rules, k, "add"),
    });
    // Under the key's lock: the links it has cannot change until this transaction ends.
    const current = new Set(await findKeyLinkIds(tx, k.kind, key.id));
    const added = connected.filter((c) => !current.has(c.id));
    const links = added.map((c) => ({ keyId: key.id, id: c.id, workspaceId: key.workspaceId }));
    await insertKeyLinks(tx, k.kind, links, now);
    recordLinkChanges(record, k, key.id, { created, added, removed: [] });
    return connected;
  });
}

/**
 * remove: the permission of `rules`. Entries that name nothing connected to the key change nothing and are no
 * error; entries that name nothing in the workspace are ignored or not found (`rules.unknownNames`).
 */
export async function removeFromKey(
  services: KeyLinkServices,
  caller: Caller,
  k: RbacKind,
  input: { keyId: string; wanted: Wanted[] },
  rules: KeyLinkRules,
): Promise<void> {
  requireLinkAccess(caller, rules, k, "remove", input.keyId);
  await services.changes.change(caller, async (tx, record) => {
    const key = await lockKey(tx, caller, input.keyId);
    requireLinkAccess(caller, rules, k, "remove", input.keyId, key);
    const ids = input.wanted.flatMap((w) => (w.id !== undefined ? [w.id] : []));
    const names = input.wanted.flatMap((w) => (w.id === undefined ? [w.name!] : []));
    // Only what an entry names: `find` matches the ids, and the names (a permission's slug) of entries without one.
    const found = await k.find(tx, caller.workspaceId, ids, names);
    if (rules.unknownNames === "namedNotFound") {
      const foundIds = new Set(found.map((f) => f.id));
      const foundNames = new Set(found.map((f) => f.match));
      const missing = input.wanted.find((w) => (w.id !== undefined ? !foundIds.has(w.id) : !foundNames.has(w.name!)));
      if (missing) {
        const name = missing.id ?? missing.name!;
        throw new NotFoundError(k.kind, name, namedNotFound(k, name));
      }
    }
    const current = new Set(await findKeyLinkIds(tx, k.kind, key.id));
    const removed = [...new Map(found.filter((f) => current.has(f.id)).map((f) => [f.id, { id: f.id, name: f.name }])).values()];
    await deleteKeyLinks(
      tx,
      k.kind,
      key.id,
      removed.map((f) => f.id),
    );
    recordLinkChanges(record, k, key.id, { created: [], added: [], removed });
  });
}

/**
 * set: the key's set becomes exactly the requested one. A caller refused the permission of `rules` before the lookup
 * cannot learn a key's current set (or whether the key exists) by sending the set it guesses.
 */
export async function setOnKey(
  services: KeyLinkServices,
  caller: Caller,
  k: RbacKind,
  input: { keyId: string; wanted: Wanted[] },
  rules: KeyLinkRules,
): Promise<Connected[]> {
  requireNamesWithinBounds([namingOf(k, input.wanted)]);
  requireLinkAccess(caller, rules, k, "set", input.keyId);
  return services.changes.change(caller, async (tx, record) => {
    const key = await lockKey(tx, caller, input.keyId);
    requireLinkAccess(caller, rules, k, "set", input.keyId, key);
    const changes = await replaceLinks(tx, caller, k, key, input.wanted, services.clock.now(), {
      missing: missingOf(rules, k, "set"),
      allowCreate: allowCreateOf(caller, rules, k, "set"),
      checkEachChange: rules.set === "checkEachChange",
    });
    recordLinkChanges(record, k, key.id, changes);
    return changes.connected;
  });
}

/**
 * Makes the locked key's set exactly `wanted` and says what changed. `checkEachChange`: disconnecting needs
 * remove_x_from_key (check `disconnectWhileSetting`) and connecting add_x_to_key.
 */
export async function replaceLinks(
  tx: Db,
  principal: Principal,
  k: RbacKind,
  key: Omit<Key, "apiId">,
  wanted: Wanted[],
  now: number,
  rules: { missing: ((name: string) => Refusal) | undefined; allowCreate(name: string): void; checkEachChange: boolean },
): Promise<LinkChanges & { connected: Connected[] }> {
  const { connected, created } = await resolve(tx, principal, k, wanted, now, rules);
  const current = await findKeyLinks(tx, k.kind, key.id);
  const currentIds = new Set(current.map((c) => c.id));
  const next = new Set(connected.map((c) => c.id));
  const removed = current.filter((c) => !next.has(c.id));
  const added = connected.filter((c) => !currentIds.has(c.id));
  if (rules.checkEachChange && removed.length > 0 && !hasPermission(principal, anyOf(k.permissions.remove))) {
    deny("disconnectWhileSetting", principal, anyOf(k.permissions.remove));
  }
  if (rules.checkEachChange && added.length > 0) requirePermission(principal, anyOf(k.permissions.add));
  await replaceKeyLinks(tx, k.kind, key, [...next], now);
  return { connected, created, added, removed };
}

/**
 * replaceLinks for keys.updateKey's `roles`/`permissions` (which v1 delegated to keys.setRoles/setPermissions):
 * creating needs create_x and every change is checked when `rbacChecks` is true (v1's keys.updateKey), not when it is
 * false (v2's, which needs update_key alone, checked by its caller). Both are stated at every call: no default.
 * `missing`: how a name that does not exist is refused (undefined: created when allowed).
 */
export async function replaceOnKey(
  tx: Db,
  principal: Principal,
  k: RbacKind,
  key: Omit<Key, "apiId">,
  wanted: Wanted[],
  now: number,
  missing: ((name: string) => Refusal) | undefined,
  rbacChecks: boolean,
): Promise<Connected[]> {
  const changes = await replaceLinks(tx, principal, k, key, wanted, now, {
    missing,
    allowCreate: () => {
      if (rbacChecks) requirePermission(principal, anyOf(k.permissions.create));
    },
    checkEachChange: rbacChecks,
  });
  return changes.connected;
}

export type KeyRoleRow = RoleRow & { permissions: PermissionRow[] };

/**
 * What v2's key RBAC routes answer: the key's direct permissions (by slug) or its roles (by name, each with its
 * permissions) as they are now. The key is looked up in the caller's workspace (another's is not found).
 */
export async function keyPermissionsOf(services: RbacServices, principal: Principal, keyId: string): Promise<PermissionRow[]> {
  // After keys.addPermissions' / removePermissions' / setPermissions' change: read where it is visible (an
  // Idempotency-Key holds it uncommitted; on the embedded store a read outside it would wait for it).
  return readAfterChange(services.db, principal, (db) => findKeyPermissionRows(db, principal.workspaceId, keyId));
}

export async function keyRolesOf(services: RbacServices, principal: Principal, keyId: string): Promise<KeyRoleRow[]> {
  // After keys.setRoles' change: read where that change is visible (an Idempotency-Key holds it uncommitted).
  return readAfterChange(services.db, principal, async (db) => {
    const roles = await findKeyRoleRows(db, principal.workspaceId, keyId);
    const permissions = await permissionsOfRoles(
      db,
      roles.map((r) => r.id),
    );
    return roles.map((r) => ({ ...r, permissions: permissions.get(r.id) ?? [] }));
  });
}
