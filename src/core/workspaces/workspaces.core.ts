import type { Clock } from "../../clock.js";
import type { Db } from "../../storage/client.js";
import { NotFoundError } from "../../errors.js";
import { findWorkspace, insertWorkspace, listWorkspacesPage, setWorkspaceEnabled } from "../../storage/workspaces/workspaces.repository.js";
import type { Caller } from "../caller.js";
import type { WriteGate } from "../changes.js";

/**
 * The operator's rules of workspaces (the admin routes workspaces.createWorkspace / updateWorkspace). The caller is
 * the operator (admin token, a trusted caller), checked by the adapter; there is no root key to check here.
 */
type WorkspaceServices = { db: Db; clock: Clock; changes: WriteGate };

/** Creates a workspace; returns its id. Its audit entry belongs to the new workspace. */
export async function createWorkspace(services: WorkspaceServices, caller: Caller, input: { name: string }): Promise<string> {
  return services.changes.change(caller, async (tx, record) => {
    const workspaceId = await insertWorkspace(tx, input.name, services.clock.now());
    record({
      event: "workspace.create",
      targets: [{ type: "workspace", id: workspaceId, name: input.name }],
      description: `created workspace ${workspaceId}`,
      workspaceId,
    });
    return workspaceId;
  });
}

/** Enables or disables a workspace (a disabled one refuses every root key); NotFoundError when there is none. */
export async function enableWorkspace(
  services: WorkspaceServices,
  caller: Caller,
  input: { workspaceId: string; enabled: boolean },
): Promise<void> {
  await services.changes.change(caller, async (tx, record) => {
    if (!(await setWorkspaceEnabled(tx, input.workspaceId, input.enabled, services.clock.now()))) {
      throw new NotFoundError("workspace", input.workspaceId);
    }
    record({
      event: "workspace.update",
      targets: [{ type: "workspace", id: input.workspaceId }],
      description: `${input.enabled ? "enabled" : "disabled"} workspace ${input.workspaceId}`,
      details: { fields: ["enabled"] },
      workspaceId: input.workspaceId,
    });
  });
}

/** A page of a list in id order: `cursor` (the last id) when there may be more. */
export type IdPage<T> = { items: T[]; cursor?: string };

/** Takes one row more than `limit` to learn whether another page follows; the cursor is the page's last id. */
export function idPage<T extends { id: string }>(rows: T[], limit: number): IdPage<T> {
  if (rows.length <= limit) return { items: rows };
  const items = rows.slice(0, limit);
  return { items, cursor: items[items.length - 1]!.id };
}

/** The workspaces, a page at a time in id order (the operator's; the adapter checked the admin token). */
export async function listWorkspaces(services: Pick<WorkspaceServices, "db">, input: { limit: number; cursor?: string | undefined }) {
  return idPage(await listWorkspacesPage(services.db, input.limit + 1, input.cursor), input.limit);
}

/** One workspace (the operator's; the adapter checked who asks); NotFoundError when there is none. */
export async function getWorkspace(services: Pick<WorkspaceServices, "db">, workspaceId: string) {
  const workspace = await findWorkspace(services.db, workspaceId);
  if (!workspace) throw new NotFoundError("workspace", workspaceId);
  return workspace;
}
