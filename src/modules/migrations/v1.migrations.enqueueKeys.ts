import { z } from "zod";
import type { PermissionQuery } from "../../auth/permissions.js";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { BULK_BODY_LIMIT, defineRpc } from "../../rpc.js";
import { findApi } from "../apis/apis.repository.js";
import { resolveImportNames } from "./import.names.js";
import { sealKeys } from "./import.plan.js";
import { insertMigrationBatch, type QueuedKey } from "./migrations.repository.js";
import { type EnqueueKey, enqueueKeysInputSchema } from "./migrations.schemas.js";

export const enqueueKeys = defineRpc({
  method: "POST",
  path: "/v1/migrations.enqueueKeys",
  bodyLimit: BULK_BODY_LIMIT,
  summary:
    "Queues up to 100 existing keys for import by the background worker and answers 202 once the batch is stored (plaintexts already encrypted). Results: migrations.getMigration.",
  input: enqueueKeysInputSchema,
  output: z.object({}),
  status: 202,
  handler: async ({ migrationId, apiId, keys }, { deps, authorization }) => {
    const { db, keyring } = deps;
    const auth = await authenticateRootKey(db, authorization);
    requirePermission(auth, enqueuePermission(apiId, keys));
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
    deps.migrationWorker?.wake();
    return {};
  },
});

/** v1's check for enqueueKeys (contract 2, row 27): create_key, and encrypt_key too when a plaintext is sent. */
function enqueuePermission(apiId: string, keys: EnqueueKey[]): PermissionQuery {
  const createKey: PermissionQuery = { or: ["api.*.create_key", `api.${apiId}.create_key`] };
  const encryptKey: PermissionQuery = { or: ["api.*.encrypt_key", `api.${apiId}.encrypt_key`] };
  return { or: ["*", { and: keys.some((k) => k.plaintext !== undefined) ? [createKey, encryptKey] : [createKey] }] };
}
