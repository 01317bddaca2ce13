import { hasPermission, type Principal, requirePermission } from "../principal.js";
import { requireNamesWithinBounds } from "./rbac.bounds.js";
import { createPermissionPermission, describeQuery, keyspaceUrn, type PermissionQuery } from "../auth/permissions.query.js";
import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import { NotFoundError, type PermissionCheck, PermissionDeniedError, type Refusal } from "../../errors.js";
import {
  deleteKeyLinks,
  findKeyLinkIds,
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

type Key = { id: string; workspaceId: string; apiId: string };

/**
 * Where v1 and v2 differ on connecting roles and permissions to a key (contract §4.8–§4.13, §15.4); each adapter
 * says which it follows:
 * - v1 checks its rbac permission (or `*`) before looking the key up; v2 looks the key up first (404), then asks
 *   for update_key on the key's API (tuple, or the key's URN) together with the route's rbac permission
 *   (removeRoles and setRoles: update_key alone);
 * - v2 names every permission by slug, created when missing with create_permission (tuple or URN), and every role
 *   by name, never created: an unknown role is a 404 `namedNotFound`, as is an unknown permission to remove (v1
 *   ignores those);
 * - v1's set checks add/remove per change; v2's asks for its whole query up front.
 */
export type KeyLinkDialect = "v1" | "v2";

type KeyLinkOperation = "add" | "remove" | "set";

/** A requested role or permission: by id, else by name (a permission's slug), created on request. */
export type Wanted = { id?: string | undefined; name?: string | undefined; create?: boolean | undefined };
export type Connected = { id: string; name: string };

export type RbacKind = {
  kind: "permission" | "role";
  /** The id, the name matched against (slug or name) and the name answered, of those found. */
  find(db: Db, workspaceId: string, ids: string[], names: string[]): Promise<{ id: string; match: string; name: string }[]>;
  /** Creates it when missing and locks it; undefined when a concurrent delete removed it meanwhile. */
  ensure(db: Db, workspaceId: string, name: string, now: number): Promise<string | undefined>;
  permissions: { add: string; remove: string; create: string };
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
};

export const roleKind: RbacKind = {
  kind: "role",
  find: async (db, ws, ids, names) =>
    (await findRolesByIdOrName(db, ws, ids, names)).map((r) => ({ id: r.id, match: r.name, name: r.name })),
  ensure: ensureRole,
  permissions: { add: "rbac.*.add_role_to_key", remove: "rbac.*.remove_role_from_key", create: "rbac.*.create_role" },
};

const anyOf = (permission: string): PermissionQuery => ({ or: ["*", permission] });

/** What v2 asks of a caller to change the key's roles or permissions (contract §2, rows 15–20). */
function v2KeyLinkQuery(principal: Principal, k: RbacKind, operation: KeyLinkOperation, key: Key): PermissionQuery {
  const updateKey: PermissionQuery = { or: [`api.*.update_key`, `api.${key.apiId}.update_key`] };
  const urn = keyspaceUrn(principal.workspaceId, key.apiId, key.id, "update_key");
  // v2's removeRoles and setRoles ask for update_key alone (contract §16.3).
  if (k.kind === "role" && operation !== "add") return { or: ["*", `api.*.update_key`, `api.${key.apiId}.update_key`, urn] };
  const rbac =
    operation === "add" ? [k.permissions.add] : operation === "remove" ? [k.permissions.remove] : [k.permissions.add, k.permissions.remove];
  return { or: ["*", urn, { and: [updateKey, ...rbac] }] };
}

/** v2's permission to create a permission a request names: the tuple, or the URN of any permission. */
const v2CreatePermission = (principal: Principal): PermissionQuery => createPermissionPermission(principal.workspaceId);

/** v2's refusal of a role (or a permission to remove) that the workspace lacks. */
const namedNotFound = (k: RbacKind, name: string): Refusal => ({ kind: "namedNotFound", what: k.kind, name });

/**
 * v2's rules of looking up what a request names: permissions by slug, created when allowed; roles by name. A
 * permission that keys.addPermissions may not create is not found (404 `namedNotFound`, as upstream's tests expect);
 * setPermissions refuses it (403 naming create_permission, as upstream's handler answers).
 */
function v2Rules(principal: Principal, k: RbacKind, operation: KeyLinkOperation) {
  return {
    missing: (name: string) => namedNotFound(k, name),
    allowCreate: (name: string) => {
      const query = v2CreatePermission(principal);
      if (operation === "add" && !hasPermission(principal, query)) throw new NotFoundError(k.kind, name, namedNotFound(k, name));
      requirePermission(principal, query);
    },
  };
}

function deny(check: PermissionCheck, principal: Principal, query: PermissionQuery): never {
  throw new PermissionDeniedError(describeQuery(query), [...principal.permissions], { check });
}

/**
 * The requested entries as `{id, name}`, in request order without repeats: by id, else by name; a missing name is
 * created when the entry says `create` (after `allowCreate`), else NotFoundError (`missing(name)` when given).
 */
async function resolve(
  db: Db,
  principal: Principal,
  k: RbacKind,
  wanted: Wanted[],
  now: number,
  rules: { missing?(name: string): Refusal; allowCreate(name: string): void },
): Promise<Connected[]> {
  requireNamesWithinBounds([namingOf(k, wanted)]);
  const ids = wanted.flatMap((w) => (w.id !== undefined ? [w.id] : []));
  const names = wanted.flatMap((w) => (w.id === undefined ? [w.name!] : []));
  const found = await k.find(db, principal.workspaceId, ids, names);
  const byId = new Map(found.map((f) => [f.id, f.name]));
  const byName = new Map(found.map((f) => [f.match, { id: f.id, name: f.name }]));
  const result = new Map<string, Connected>();
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
    }
    result.set(hit.id, hit);
  }
  return [...result.values()];
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

/** add: or(`*`, add_x_to_key); creating needs or(`*`, create_x), else check `createWhileAdding`. */
export async function addToKey(
  services: RbacServices,
  principal: Principal,
  k: RbacKind,
  input: { keyId: string; wanted: Wanted[] },
  dialect: KeyLinkDialect = "v1",
): Promise<Connected[]> {
  requireNamesWithinBounds([namingOf(k, input.wanted)]);
  if (dialect === "v1") requirePermission(principal, anyOf(k.permissions.add));
  return services.db.transaction(async (tx) => {
    const key = await lockKey(tx, principal, input.keyId);
    if (dialect === "v2") requirePermission(principal, v2KeyLinkQuery(principal, k, "add", key));
    const now = services.clock.now();
    const rules =
      dialect === "v2"
        ? v2Rules(principal, k, "add")
        : {
            allowCreate: () => {
              if (!hasPermission(principal, anyOf(k.permissions.create))) deny("createWhileAdding", principal, anyOf(k.permissions.create));
            },
          };
    const connected = await resolve(tx, principal, k, input.wanted, now, rules);
    const links = connected.map((c) => ({ keyId: key.id, id: c.id, workspaceId: key.workspaceId }));
    await insertKeyLinks(tx, k.kind, links, now);
    return connected;
  });
}

/**
 * remove: or(`*`, remove_x_from_key). Entries that name nothing connected to the key change nothing and are no
 * error; v1 ignores entries that name nothing in the workspace too, v2 answers the first one not found (404).
 */
export async function removeFromKey(
  services: RbacServices,
  principal: Principal,
  k: RbacKind,
  input: { keyId: string; wanted: Wanted[] },
  dialect: KeyLinkDialect = "v1",
): Promise<void> {
  if (dialect === "v1") requirePermission(principal, anyOf(k.permissions.remove));
  await services.db.transaction(async (tx) => {
    const key = await lockKey(tx, principal, input.keyId);
    if (dialect === "v2") requirePermission(principal, v2KeyLinkQuery(principal, k, "remove", key));
    const ids = input.wanted.flatMap((w) => (w.id !== undefined ? [w.id] : []));
    const names = input.wanted.flatMap((w) => (w.id === undefined ? [w.name!] : []));
    // Only what an entry names: `find` matches the ids, and the names (a permission's slug) of entries without one.
    const found = await k.find(tx, principal.workspaceId, ids, names);
    if (dialect === "v2") {
      const foundIds = new Set(found.map((f) => f.id));
      const foundNames = new Set(found.map((f) => f.match));
      const missing = input.wanted.find((w) => (w.id !== undefined ? !foundIds.has(w.id) : !foundNames.has(w.name!)));
      if (missing) {
        const name = missing.id ?? missing.name!;
        throw new NotFoundError(k.kind, name, namedNotFound(k, name));
      }
    }
    await deleteKeyLinks(
      tx,
      k.kind,
      key.id,
      found.map((f) => f.id),
    );
  });
}

/**
 * set: the key's set becomes exactly the requested one (replaceOnKey's rules). A principal with neither
 * add_x_to_key nor remove_x_from_key is refused before anything is looked up, so it cannot learn a key's current
 * set (or whether the key exists) by sending the set it guesses.
 */
export async function setOnKey(
  services: RbacServices,
  principal: Principal,
  k: RbacKind,
  input: { keyId: string; wanted: Wanted[] },
  dialect: KeyLinkDialect = "v1",
): Promise<Connected[]> {
  requireNamesWithinBounds([namingOf(k, input.wanted)]);
  if (dialect === "v1") requirePermission(principal, { or: ["*", k.permissions.add, k.permissions.remove] });
  return services.db.transaction(async (tx) => {
    const key = await lockKey(tx, principal, input.keyId);
    if (dialect === "v2") {
      requirePermission(principal, v2KeyLinkQuery(principal, k, "set", key));
      const now = services.clock.now();
      const connected = await resolve(tx, principal, k, input.wanted, now, v2Rules(principal, k, "set"));
      await replaceKeyLinks(
        tx,
        k.kind,
        key,
        connected.map((c) => c.id),
        now,
      );
      return connected;
    }
    return replaceOnKey(tx, principal, k, key, input.wanted, services.clock.now(), (name) => ({
      kind: "notFoundToSet",
      what: k.kind,
      name,
    }));
  });
}

/**
 * Makes the locked key's set exactly `wanted`: disconnecting needs remove_x_from_key (check
 * `disconnectWhileSetting`), creating create_x and connecting add_x_to_key. keys.setRoles, keys.setPermissions and
 * the `roles`/`permissions` of keys.updateKey (which v1 delegated to them) all go through it. `rbacChecks` false
 * skips those three checks (v2's keys.updateKey needs update_key alone, checked by its caller).
 */
export async function replaceOnKey(
  tx: Db,
  principal: Principal,
  k: RbacKind,
  key: Omit<Key, "apiId">,
  wanted: Wanted[],
  now: number,
  missing?: (name: string) => Refusal,
  rbacChecks = true,
): Promise<Connected[]> {
  const connected = await resolve(tx, principal, k, wanted, now, {
    ...(missing && { missing }),
    allowCreate: () => {
      if (rbacChecks) requirePermission(principal, anyOf(k.permissions.create));
    },
  });
  const current = new Set(await findKeyLinkIds(tx, k.kind, key.id));
  const next = new Set(connected.map((c) => c.id));
  if (rbacChecks && [...current].some((c) => !next.has(c)) && !hasPermission(principal, anyOf(k.permissions.remove))) {
    deny("disconnectWhileSetting", principal, anyOf(k.permissions.remove));
  }
  if (rbacChecks && [...next].some((n) => !current.has(n))) requirePermission(principal, anyOf(k.permissions.add));
  await replaceKeyLinks(tx, k.kind, key, [...next], now);
  return connected;
}

export type KeyRoleRow = RoleRow & { permissions: PermissionRow[] };

/**
 * What v2's key RBAC routes answer: the key's direct permissions (by slug) or its roles (by name, each with its
 * permissions) as they are now. The key is looked up in the caller's workspace (another's is not found).
 */
export async function keyPermissionsOf(services: RbacServices, principal: Principal, keyId: string): Promise<PermissionRow[]> {
  return findKeyPermissionRows(services.db, principal.workspaceId, keyId);
}

export async function keyRolesOf(services: RbacServices, principal: Principal, keyId: string): Promise<KeyRoleRow[]> {
  const roles = await findKeyRoleRows(services.db, principal.workspaceId, keyId);
  const permissions = await permissionsOfRoles(
    services.db,
    roles.map((r) => r.id),
  );
  return roles.map((r) => ({ ...r, permissions: permissions.get(r.id) ?? [] }));
}
