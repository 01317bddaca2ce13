import { type Clock, systemClock } from "./clock.js";
import type { Config } from "./config.js";
import type { Db } from "./storage/client.js";
import { insertRootKey, upsertRootKey } from "./storage/rootKeys/rootKeys.repository.js";
import { findDefaultWorkspaceId, insertWorkspace, setDefaultWorkspaceId } from "./storage/workspaces/workspaces.repository.js";

export type BootstrapResult = {
  workspaceId: string;
  createdWorkspace: boolean;
  /** A root key generated on first start; shown once, never stored in clear. */
  generatedRootKey?: string;
};

/**
 * On a store with no workspace, creates the default one. KEYHAVEN_ROOT_KEY, when set, becomes (or stays) a root
 * key with permission `*` in it; otherwise the first start generates a root key to print once. It runs before the
 * services exist, so it takes the clock itself (the machine's unless a test gives one).
 */
export async function bootstrap(db: Db, config: Config, clock: Clock = systemClock): Promise<BootstrapResult> {
  const now = clock.now();
  let workspaceId = await findDefaultWorkspaceId(db);
  const createdWorkspace = workspaceId === undefined;
  if (workspaceId === undefined) {
    workspaceId = await insertWorkspace(db, "default", now);
    await setDefaultWorkspaceId(db, workspaceId);
  }
  if (config.rootKey) {
    await upsertRootKey(db, { workspaceId, name: "KEYHAVEN_ROOT_KEY", permissions: ["*"] }, config.rootKey, now);
    return { workspaceId, createdWorkspace };
  }
  if (createdWorkspace) {
    const { key } = await insertRootKey(db, { workspaceId, name: "generated on first start", permissions: ["*"] }, now);
    return { workspaceId, createdWorkspace, generatedRootKey: key };
  }
  return { workspaceId, createdWorkspace };
}
