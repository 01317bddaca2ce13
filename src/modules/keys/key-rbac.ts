import { z } from "zod";
import { ensurePermission, ensureRole, findPermissionsByIdOrSlug, findRolesByIdOrName } from "../permissions/permissions.repository.js";
import { describeQuery, type PermissionQuery } from "../../auth/permissions.js";
import { hasPermission, missingPermissions, type RootKeyAuth, requirePermission } from "../../auth/root-key.js";
import type { Db } from "../../db/client.js";
import { NotFoundError } from "../../domain-errors.js";
import { ApiError, type ErrorCode } from "../../errors.js";
import type { RpcContext } from "../../rpc.js";
import { deleteKeyLinks, findKeyLinkIds, insertKeyLinks, replaceKeyLinks } from "./keys.rbac.repository.js";
import { lockKeyForUpdate } from "./keys.update.repository.js";

/**
 * Shared logic of keys.addPermissions / removePermissions / setPermissions / addRoles / removeRoles / setRoles.
 * Permissions are named by slug, roles by name; every call is one transaction, so one bad entry changes nothing.
 */

type Key = { id: string; workspaceId: string };

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

// ---- Request schemas ----

const id = z.string().min(1).max(256);
const name = z.string().min(1).max(512);
const MAX_ENTRIES = 1000;

const named = { id: id.optional(), name: name.optional() };
const eitherIdOrName = (c: { id?: string; name?: string }) => c.id !== undefined || c.name !== undefined;

/** `{id?, name?, create?}` of addPermissions, addRoles and setRoles. */
export const connectionSchema = z
  .object({ ...named, create: z.boolean().optional() })
  .refine(eitherIdOrName, "provide either `id` or `name`");

/** `{id?, name?}` of removeRoles. */
export const disconnectionSchema = z.object(named).refine(eitherIdOrName, "provide either `id` or `name`");

const bySlug = (c: { id?: string; name?: string; slug?: string }) => c.id !== undefined || c.name !== undefined || c.slug !== undefined;

/** `{id?, name?, slug?, create?}` of setPermissions: `name` and `slug` both name the slug (`name` wins). */
export const permissionSlugSchema = z
  .object({ ...named, slug: name.optional(), create: z.boolean().optional() })
  .refine(bySlug, "provide one of `id`, `name` or `slug`")
  .transform((c): Wanted => ({ id: c.id, name: c.name ?? c.slug, create: c.create }));

/** `{id?, name?, slug?}` of removePermissions. */
export const permissionSlugRemovalSchema = z
  .object({ ...named, slug: name.optional() })
  .refine(bySlug, "provide one of `id`, `name` or `slug`")
  .transform((c): Wanted => ({ id: c.id, name: c.name ?? c.slug }));

export const entries = <T extends z.ZodType>(entry: T) => z.array(entry).min(1).max(MAX_ENTRIES);

export const connectedSchema = z.array(z.object({ id: z.string(), name: z.string() }));

// ---- Operations ----

const anyOf = (permission: string): PermissionQuery => ({ or: ["*", permission] });

function deny(code: ErrorCode, auth: RootKeyAuth, query: PermissionQuery): never {
  throw missingPermissions(auth, describeQuery(query), code);
}

/**
 * The requested entries as `{id, name}`, in request order without repeats: by id, else by name; a missing name is
 * created when the entry says `create` (after `allowCreate`), else answered 404 with `missing(name)`.
 */
async function resolve(
  db: Db,
  auth: RootKeyAuth,
  k: RbacKind,
  wanted: Wanted[],
  now: number,
  rules: { missing(name: string): string; allowCreate(): void },
): Promise<Connected[]> {
  const ids = wanted.flatMap((w) => (w.id !== undefined ? [w.id] : []));
  const names = wanted.flatMap((w) => (w.id === undefined ? [w.name!] : []));
  const found = await k.find(db, auth.workspaceId, ids, names);
  const byId = new Map(found.map((f) => [f.id, f.name]));
  const byName = new Map(found.map((f) => [f.match, { id: f.id, name: f.name }]));
  const result = new Map<string, Connected>();
  for (const w of wanted) {
    if (w.id !== undefined) {
      const foundName = byId.get(w.id);
      if (foundName === undefined) throw new ApiError("NOT_FOUND", `${k.kind} ${w.id} not found`);
      result.set(w.id, { id: w.id, name: foundName });
      continue;
    }
    const wantedName = w.name!;
    let hit = byName.get(wantedName);
    if (hit === undefined) {
      if (!w.create) throw new ApiError("NOT_FOUND", rules.missing(wantedName));
      rules.allowCreate();
      // Created roles are named by their name, created permissions get name = slug.
      const id = await k.ensure(db, auth.workspaceId, wantedName, now);
      // Deleted by a concurrent call between its creation and this lookup: it is not found (a 404 as v1 declares).
      if (id === undefined) throw new NotFoundError(k.kind, wantedName);
      hit = { id, name: wantedName };
      byName.set(wantedName, hit);
    }
    result.set(hit.id, hit);
  }
  return [...result.values()];
}

async function lockKey(tx: Db, auth: RootKeyAuth, keyId: string): Promise<Key> {
  const key = await lockKeyForUpdate(tx, auth.workspaceId, keyId);
  if (!key) throw new ApiError("NOT_FOUND", `key ${keyId} not found`);
  return key;
}

/** add: or(`*`, add_x_to_key); creating needs or(`*`, create_x), else 403 UNAUTHORIZED (as v1 answered). */
export async function addToKey(
  k: RbacKind,
  input: { keyId: string; wanted: Wanted[] },
  { deps, rootKey: auth }: RpcContext<"rootKey">,
): Promise<Connected[]> {
  requirePermission(auth, anyOf(k.permissions.add));
  return deps.db.transaction(async (tx) => {
    const key = await lockKey(tx, auth, input.keyId);
    const now = Date.now();
    const connected = await resolve(tx, auth, k, input.wanted, now, {
      missing: (name) => `${k.kind} ${name} not found`,
      allowCreate: () => {
        if (!hasPermission(auth, anyOf(k.permissions.create))) deny("UNAUTHORIZED", auth, anyOf(k.permissions.create));
      },
    });
    const links = connected.map((c) => ({ keyId: key.id, id: c.id, workspaceId: key.workspaceId }));
    await insertKeyLinks(tx, k.kind, links, now);
    return connected;
  });
}

/**
 * remove: or(`*`, remove_x_from_key). Entries that name nothing in the workspace, or nothing connected to the key,
 * change nothing and are no error (as v1); the others are disconnected.
 */
export async function removeFromKey(
  k: RbacKind,
  input: { keyId: string; wanted: Wanted[] },
  { deps, rootKey: auth }: RpcContext<"rootKey">,
): Promise<Record<string, never>> {
  requirePermission(auth, anyOf(k.permissions.remove));
  await deps.db.transaction(async (tx) => {
    const key = await lockKey(tx, auth, input.keyId);
    const ids = input.wanted.flatMap((w) => (w.id !== undefined ? [w.id] : []));
    const names = input.wanted.flatMap((w) => (w.id === undefined ? [w.name!] : []));
    // Only what an entry names: `find` matches the ids, and the names (a permission's slug) of entries without one.
    const found = await k.find(tx, auth.workspaceId, ids, names);
    await deleteKeyLinks(
      tx,
      k.kind,
      key.id,
      found.map((f) => f.id),
    );
  });
  return {};
}

/**
 * set: the key's set becomes exactly the requested one. Disconnecting needs remove_x_from_key (403 UNAUTHORIZED),
 * creating needs create_x and connecting needs add_x_to_key (403 INSUFFICIENT_PERMISSIONS), as v1 answered. A root
 * key with neither add_x_to_key nor remove_x_from_key is refused before anything is looked up, so it cannot learn a
 * key's current set (or whether the key exists) by sending the set it guesses.
 */
export async function setOnKey(
  k: RbacKind,
  input: { keyId: string; wanted: Wanted[] },
  { deps, rootKey: auth }: RpcContext<"rootKey">,
): Promise<Connected[]> {
  requirePermission(auth, { or: ["*", k.permissions.add, k.permissions.remove] });
  return deps.db.transaction(async (tx) => {
    const key = await lockKey(tx, auth, input.keyId);
    return replaceOnKey(tx, auth, k, key, input.wanted, Date.now(), (name) => `${k.kind} ${name} not found and not allowed to create`);
  });
}

/**
 * Makes the locked key's set exactly `wanted`, under set's rules: disconnecting needs remove_x_from_key (403
 * UNAUTHORIZED), creating create_x and connecting add_x_to_key (403 INSUFFICIENT_PERMISSIONS). keys.setRoles,
 * keys.setPermissions and the `roles`/`permissions` of keys.updateKey (which v1 delegated to them) all go through it.
 */
export async function replaceOnKey(
  tx: Db,
  auth: RootKeyAuth,
  k: RbacKind,
  key: Key,
  wanted: Wanted[],
  now: number,
  missing: (name: string) => string,
): Promise<Connected[]> {
  const connected = await resolve(tx, auth, k, wanted, now, {
    missing,
    allowCreate: () => requirePermission(auth, anyOf(k.permissions.create)),
  });
  const current = new Set(await findKeyLinkIds(tx, k.kind, key.id));
  const next = new Set(connected.map((c) => c.id));
  if ([...current].some((c) => !next.has(c)) && !hasPermission(auth, anyOf(k.permissions.remove))) {
    deny("UNAUTHORIZED", auth, anyOf(k.permissions.remove));
  }
  if ([...next].some((n) => !current.has(n))) requirePermission(auth, anyOf(k.permissions.add));
  await replaceKeyLinks(tx, k.kind, key, [...next], now);
  return connected;
}
