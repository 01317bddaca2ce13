import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import { InvalidInputError, NotFoundError, PermissionDeniedError } from "../../errors.js";
import { rootKeyHolds } from "../auth/permissions.urn.js";
import { requirePermission } from "../principal.js";
import { deleteRootKeyById, insertRootKey, listRootKeysPage } from "../../storage/rootKeys/rootKeys.repository.js";
import { idPage } from "../workspaces/workspaces.core.js";
import { workspaceExists } from "../../storage/workspaces/workspaces.repository.js";
import type { AuditTarget } from "../../storage/schema.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";

/**
 * The rules of root keys: the operator's (v1 adapter: the admin routes rootKeys.createRootKey / deleteRootKey, a
 * trusted caller holding `*`) and a workspace's own root key managing its workspace's root keys (the console), which
 * needs `rbac.*.create_root_key`, `rbac.*.read_root_key` or `rbac.*.delete_root_key` (or `*`), and may grant only
 * permissions it holds itself. Each change goes through the write gate and is recorded in the root key's workspace;
 * the entry names the key and its permissions, never its secret or hash.
 */
type RootKeyServices = { db: Db; clock: Clock; changes: WriteGate };

const rootKeyTarget = (rootKey: { id: string; name?: string | null | undefined }): AuditTarget =>
  rootKey.name ? { type: "rootKey", id: rootKey.id, name: rootKey.name } : { type: "rootKey", id: rootKey.id };

/** What a root key needs (besides `*`) to create, list and delete its workspace's root keys. */
export const CREATE_ROOT_KEY = "rbac.*.create_root_key";
export const READ_ROOT_KEY = "rbac.*.read_root_key";
export const DELETE_ROOT_KEY = "rbac.*.delete_root_key";

/** A root key holds at most this many permissions, each of at most this many characters (v1's admin route's bounds). */
export const MAX_ROOT_KEY_PERMISSIONS = 1000;
export const MAX_ROOT_KEY_PERMISSION_LENGTH = 512;

/**
 * Why `permission` cannot be a root key's permission, or undefined when it can: it is empty, longer than
 * MAX_ROOT_KEY_PERMISSION_LENGTH, or holds whitespace or a control character (no check ever requires such a name).
 */
export function rootKeyPermissionProblem(permission: string): string | undefined {
  if (permission === "") return "A permission cannot be empty.";
  const shown = permission.length > 60 ? `${permission.slice(0, 60)}…` : permission;
  if (permission.length > MAX_ROOT_KEY_PERMISSION_LENGTH) {
    return `The permission '${shown}' is longer than ${MAX_ROOT_KEY_PERMISSION_LENGTH} characters.`;
  }
  if (/[\s\p{Cc}]/u.test(permission)) return `The permission '${shown}' contains whitespace or a control character.`;
  return undefined;
}

/**
 * A root key of the caller's workspace (an existing one, NotFoundError otherwise) holding each of `permissions` once;
 * its secret is returned here only, as only its hash is stored. The caller needs `rbac.*.create_root_key` (or `*`),
 * and a caller without `*` may grant only permissions it holds (a root key never makes one stronger than itself).
 */
export async function createRootKey(
  services: RootKeyServices,
  caller: Caller,
  input: { workspaceId: string; name?: string | undefined; permissions: string[] },
): Promise<{ keyId: string; key: string }> {
  requirePermission(caller, { or: ["*", CREATE_ROOT_KEY] });
  if (input.workspaceId !== caller.workspaceId) throw new NotFoundError("workspace", input.workspaceId);
  const permissions = [...new Set(input.permissions)];
  if (permissions.length > MAX_ROOT_KEY_PERMISSIONS) {
    throw new InvalidInputError({
      kind: "invalidRootKeyPermission",
      problem: `A root key holds at most ${MAX_ROOT_KEY_PERMISSIONS} permissions (got ${permissions.length}).`,
    });
  }
  for (const permission of permissions) {
    const problem = rootKeyPermissionProblem(permission);
    if (problem !== undefined) throw new InvalidInputError({ kind: "invalidRootKeyPermission", problem });
  }
  if (!caller.permissions.has("*")) {
    const beyond = permissions.filter((p) => !rootKeyHolds(caller.permissions, p));
    if (beyond.length > 0) {
      throw new PermissionDeniedError(`each permission it grants (it does not hold ${beyond.join(", ")})`, [...caller.permissions]);
    }
  }
  return services.changes.change(caller, async (tx, record) => {
    if (!(await workspaceExists(tx, input.workspaceId))) throw new NotFoundError("workspace", input.workspaceId);
    const created = await insertRootKey(tx, { ...input, permissions }, services.clock.now());
    record({
      event: "rootKey.create",
      targets: [rootKeyTarget({ id: created.keyId, name: input.name })],
      description: `created root key ${created.keyId}`,
      details: { permissions },
      workspaceId: input.workspaceId,
    });
    return created;
  });
}

/** Deletes a root key (NotFoundError when there is none); the next call made with it is refused. The operator's. */
export async function deleteRootKey(services: RootKeyServices, caller: Caller, keyId: string): Promise<void> {
  await removeRootKey(services, caller, keyId, undefined);
}

/**
 * Revokes a root key of the caller's workspace (NotFoundError for none, or another workspace's): needs
 * `rbac.*.delete_root_key` (or `*`). The caller may revoke itself; its next request is then refused.
 */
export async function revokeRootKey(services: RootKeyServices, caller: Caller, keyId: string): Promise<void> {
  requirePermission(caller, { or: ["*", DELETE_ROOT_KEY] });
  await removeRootKey(services, caller, keyId, caller.workspaceId);
}

async function removeRootKey(services: RootKeyServices, caller: Caller, keyId: string, workspaceId: string | undefined): Promise<void> {
  await services.changes.change(caller, async (tx, record) => {
    const deleted = await deleteRootKeyById(tx, keyId, workspaceId);
    if (!deleted) throw new NotFoundError("root key", keyId);
    record({
      event: "rootKey.delete",
      targets: [rootKeyTarget(deleted)],
      description: `deleted root key ${keyId}`,
      details: { permissions: deleted.permissions },
      workspaceId: deleted.workspaceId,
    });
  });
}

/**
 * A workspace's root keys, a page at a time in id order: id, name, start, permissions, creation and last-use time
 * (its last authentication, up to the last-used flush behind); never a secret or a hash. NotFoundError for a workspace that does not exist.
 */
export async function listRootKeys(
  services: Pick<RootKeyServices, "db">,
  input: { workspaceId: string; limit: number; cursor?: string | undefined },
) {
  if (!(await workspaceExists(services.db, input.workspaceId))) throw new NotFoundError("workspace", input.workspaceId);
  return idPage(await listRootKeysPage(services.db, input.workspaceId, input.limit + 1, input.cursor), input.limit);
}

/** The caller's workspace's root keys, a page at a time (as listRootKeys): needs `rbac.*.read_root_key` (or `*`). */
export async function listOwnRootKeys(
  services: Pick<RootKeyServices, "db">,
  caller: Caller,
  input: { limit: number; cursor?: string | undefined },
) {
  requirePermission(caller, { or: ["*", READ_ROOT_KEY] });
  return listRootKeys(services, { workspaceId: caller.workspaceId, ...input });
}
