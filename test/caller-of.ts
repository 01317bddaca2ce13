import type { Caller } from "../src/core/caller.js";
import { V1_ACCESS } from "../src/wire/v1/caller.js";

/** A plain principal as a core test's Caller: v1's access policy, a test actor, no request. */
export const callerOf = (principal: { workspaceId: string; permissions: ReadonlySet<string> }): Caller => ({
  workspaceId: principal.workspaceId,
  permissions: principal.permissions,
  actor: { kind: "cli", id: "test", name: "test" },
  access: V1_ACCESS,
  origin: { surface: "cli" },
});
