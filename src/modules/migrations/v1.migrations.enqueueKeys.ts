import { z } from "zod";
import { requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { BULK_BODY_LIMIT, defineRpc } from "../../rpc.js";
import { findApi } from "../apis/apis.repository.js";
import { resolveImportNames } from "./import.names.js";
import { importPermission } from "./import.permissions.js";
import { sealKeys } from "./import.plan.js";
import { insertMigrationBatch, type QueuedKey } from "./migrations.repository.js";
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
  handler: async ({ migrationId, apiId, keys }, { deps, rootKey: auth }) => {
    const { db, keyring } = deps;
    requirePermission(
      auth,
      importPermission(
        apiId,
        keys.some((k) => k.plaintext !== undefined),
      ),
    );
    if (!(await findApi(db, auth.workspaceId, apiId))) throw new ApiError("NOT_FOUND", `api ${apiId} not found`);
    if (keys.length === 0) return {};
    await resolveImportNames(db, auth.workspaceId, keys);

    const dataKey = keys.some((k) => k.plaintext !== undefined) ? await keyring.dataKeyFor(db, auth.workspaceId) : undefined;
    const sealed = sealKeys(keys, { keyring, dataKey });
    const queued: QueuedKey[] = keys.map(({ plaintext: _, hash: __, ...settings }, i) => ({
      ...settings,
      sealed: sealed[i]!,
    }));
    await insertMigrationBatch(db, { workspaceId: auth.workspaceId, migrationId, apiId, keys: queued, dataKey });
    if (dataKey?.newRow) keyring.remember(dataKey);
    deps.migrationWorker.wake();
    return {};
  },
});
