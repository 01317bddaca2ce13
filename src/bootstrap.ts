import { type Clock, systemClock } from "./clock.js";
import type { Config } from "./config.js";
import type { Db } from "./storage/client.js";
import { trustedCaller } from "./core/caller.js";
import { type Change, WriteGate } from "./core/changes.js";
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
 * services exist, so it takes the clock itself (the machine's unless a test gives one), and builds its own write
 * gate: what it creates is recorded in the audit log as the first start's (actor kind `cli`), in one transaction.
 */
export async function bootstrap(db: Db, config: Config, clock: Clock = systemClock): Promise<BootstrapResult> {
  const gate = new WriteGate(db, clock);
  return gate.change(BOOTSTRAP_CALLER, async (tx, record) => {
    const now = clock.now();
    let workspaceId = await findDefaultWorkspaceId(tx);
    const createdWorkspace = workspaceId === undefined;
    if (workspaceId === undefined) {
      workspaceId = await insertWorkspace(tx, "default", now);
      await setDefaultWorkspaceId(tx, workspaceId);
      record({
        event: "workspace.create",
        targets: [{ type: "workspace", id: workspaceId, name: "default" }],
        description: `created the default workspace ${workspaceId} on first start`,
        workspaceId,
      });
    }
    const rootKeyCreated = (keyId: string, name: string): Change => ({
      event: "rootKey.create",
      targets: [{ type: "rootKey", id: keyId, name }],
      description: `created root key ${keyId} (${name})`,
      details: { permissions: ["*"] },
      workspaceId,
    });
    if (config.rootKey) {
      const name = "KEYHAVEN_ROOT_KEY";
      const upserted = await upsertRootKey(tx, { workspaceId, name, permissions: ["*"] }, config.rootKey, now);
      for (const id of upserted.revoked) {
        record({
          event: "rootKey.delete",
          targets: [{ type: "rootKey", id, name }],
          description: `revoked root key ${id}: KEYHAVEN_ROOT_KEY changed`,
          workspaceId,
        });
      }
      if (upserted.inserted) record(rootKeyCreated(upserted.keyId, name));
      return { workspaceId, createdWorkspace };
    }
    if (createdWorkspace) {
      const name = "generated on first start";
      const { keyId, key } = await insertRootKey(tx, { workspaceId, name, permissions: ["*"] }, now);
      record(rootKeyCreated(keyId, name));
      return { workspaceId, createdWorkspace, generatedRootKey: key };
    }
    return { workspaceId, createdWorkspace };
  });
}

/** Who the audit log names for what the first start (and each start with KEYHAVEN_ROOT_KEY) creates. */
const BOOTSTRAP_CALLER = trustedCaller({ kind: "cli", id: "bootstrap", name: "keyhaven first start" }, "", { surface: "cli" });
