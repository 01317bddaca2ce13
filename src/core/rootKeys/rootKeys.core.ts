import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import { NotFoundError } from "../../errors.js";
import { deleteRootKeyById, insertRootKey, listRootKeysPage } from "../../storage/rootKeys/rootKeys.repository.js";
import { idPage } from "../workspaces/workspaces.core.js";
import { workspaceExists } from "../../storage/workspaces/workspaces.repository.js";
import type { AuditTarget } from "../../storage/schema.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";

/**
 * The operator's rules of root keys (v1 adapter: the admin routes rootKeys.createRootKey / deleteRootKey). The
 * caller is the operator (admin token, a trusted caller), checked by the adapter. Each change goes through the write
 * gate and is recorded in the root key's workspace; the entry names the key and its permissions, never its secret
 * or hash.
 */
type RootKeyServices = { db: Db; clock: Clock; changes: WriteGate };

const rootKeyTarget = (rootKey: { id: string; name?: string | null | undefined }): AuditTarget =>
  rootKey.name ? { type: "rootKey", id: rootKey.id, name: rootKey.name } : { type: "rootKey", id: rootKey.id };

/**
 * A root key of an existing workspace (NotFoundError otherwise) holding each of `permissions` once; its secret is
 * returned here only, as only its hash is stored.
 */
export async function createRootKey(
  services: RootKeyServices,
  caller: Caller,
  input: { workspaceId: string; name?: string | undefined; permissions: string[] },
): Promise<{ keyId: string; key: string }> {
  const permissions = [...new Set(input.permissions)];
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

/** Deletes a root key (NotFoundError when there is none); the next call made with it is refused. */
export async function deleteRootKey(services: RootKeyServices, caller: Caller, keyId: string): Promise<void> {
  await services.changes.change(caller, async (tx, record) => {
    const deleted = await deleteRootKeyById(tx, keyId);
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
 * A workspace's root keys, a page at a time in id order: id, name, start, permissions, creation time; never a secret
 * or a hash. NotFoundError for a workspace that does not exist.
 */
export async function listRootKeys(
  services: Pick<RootKeyServices, "db">,
  input: { workspaceId: string; limit: number; cursor?: string | undefined },
) {
  if (!(await workspaceExists(services.db, input.workspaceId))) throw new NotFoundError("workspace", input.workspaceId);
  return idPage(await listRootKeysPage(services.db, input.workspaceId, input.limit + 1, input.cursor), input.limit);
}
