import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import { NotFoundError } from "../../errors.js";
import { deleteRootKeyById, insertRootKey } from "../../storage/rootKeys/rootKeys.repository.js";
import { workspaceExists } from "../../storage/workspaces/workspaces.repository.js";

/**
 * The operator's rules of root keys (v1 adapter: the admin routes rootKeys.createRootKey / deleteRootKey). The
 * caller is the operator (admin token), checked by the adapter.
 */
type RootKeyServices = { db: Db; clock: Clock };

/**
 * A root key of an existing workspace (NotFoundError otherwise) holding each of `permissions` once; its secret is
 * returned here only, as only its hash is stored.
 */
export async function createRootKey(
  services: RootKeyServices,
  input: { workspaceId: string; name?: string | undefined; permissions: string[] },
): Promise<{ keyId: string; key: string }> {
  if (!(await workspaceExists(services.db, input.workspaceId))) throw new NotFoundError("workspace", input.workspaceId);
  return insertRootKey(services.db, { ...input, permissions: [...new Set(input.permissions)] }, services.clock.now());
}

/** Deletes a root key (NotFoundError when there is none); the next call made with it is refused. */
export async function deleteRootKey(services: RootKeyServices, keyId: string): Promise<void> {
  if (!(await deleteRootKeyById(services.db, keyId))) throw new NotFoundError("root key", keyId);
}
