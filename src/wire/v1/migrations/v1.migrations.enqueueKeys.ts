import { z } from "zod";
import { enqueueKeys as enqueueImport } from "../../../core/import/import.enqueue.js";
import { BULK_BODY_LIMIT, defineRpc } from "../rpc.js";
import { enqueueKeysInputSchema } from "./migrations.schemas.js";

export const enqueueKeys = defineRpc({
  method: "POST",
  path: "/v1/migrations.enqueueKeys",
  auth: "rootKey",
  bodyLimit: BULK_BODY_LIMIT,
  summary:
    "Queues up to 100 existing keys for import by the background worker and answers 202 once the batch is stored (plaintexts already encrypted). Results: migrations.getMigration.",
  errors: [400, 403, 404, 409, 412, 503],
  returns: "The batch is stored (202); a worker imports it.",
  input: enqueueKeysInputSchema,
  output: z.object({}),
  status: 202,
  handler: async (input, { deps, caller }) => {
    if (await enqueueImport(deps, caller, input)) deps.migrationWorker.wake();
    return {};
  },
});
