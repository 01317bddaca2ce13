import { z } from "zod";
import { retryMigration as requeueFailedBatches } from "../../../core/import/import.status.js";
import { defineRpc } from "../rpc.js";
import { operatorCaller } from "../workspaces/operator.caller.js";

export const retryMigration = defineRpc({
  method: "POST",
  path: "/v1/migrations.retryMigration",
  auth: "admin",
  summary:
    "Operator route (keyhaven extension): puts a migration's batches that failed as a whole (an unexpected error, none of their keys imported) back in the queue of migrations.enqueueKeys, once the cause is fixed. Answers how many.",
  errors: [400, 403, 404, 503],
  returns: "How many failed batches were queued again.",
  input: z.object({
    workspaceId: z.string().min(1).max(256).describe("The workspace the migration belongs to."),
    migrationId: z.string().min(1).max(256).describe("The `migrationId` its batches were enqueued under."),
  }),
  output: z.object({ batches: z.number().describe("How many batches that had failed as a whole were queued again.") }),
  handler: async ({ workspaceId, migrationId }, { deps, req }) => {
    const batches = await requeueFailedBatches(deps, operatorCaller(deps, req, workspaceId), migrationId);
    if (batches > 0) deps.migrationWorker.wake();
    return { batches };
  },
});
