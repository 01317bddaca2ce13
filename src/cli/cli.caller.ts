import { type Caller, trustedCaller } from "../core/caller.js";

/**
 * The caller of a CLI command that writes to the store (the operator at the machine, as the audit log names it:
 * `keyhaven <command>`). It acts above every workspace: its entries name their own (Change.workspaceId; null).
 */
export function cliCaller(command: string): Caller {
  return trustedCaller({ kind: "cli", id: command, name: `keyhaven ${command}` }, "", { surface: "cli" });
}
