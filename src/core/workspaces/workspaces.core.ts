import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import { NotFoundError } from "../../errors.js";
import { insertWorkspace, setWorkspaceEnabled } from "../../storage/workspaces/workspaces.repository.js";

/**
 * The operator's rules of workspaces (v1 adapter: the admin routes workspaces.createWorkspace / updateWorkspace).
 * The caller is the operator (admin token), checked by the adapter; there is no root key to check here.
 */
type WorkspaceServices = { db: Db; clock: Clock };

/** Creates a workspace; returns its id. */
export async function createWorkspace(services: WorkspaceServices, input: { name: string }): Promise<string> {
  return insertWorkspace(services.db, input.name, services.clock.now());
}

/** Enables or disables a workspace (a disabled one refuses every root key); NotFoundError when there is none. */
export async function enableWorkspace(services: WorkspaceServices, input: { workspaceId: string; enabled: boolean }): Promise<void> {
  if (!(await setWorkspaceEnabled(services.db, input.workspaceId, input.enabled, services.clock.now()))) {
    throw new NotFoundError("workspace", input.workspaceId);
  }
}
