import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { authenticateRootKey, hasPermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { BULK_BODY_LIMIT, defineRpc } from "../../rpc.js";
import { findLiveApiIds } from "../apis/apis.repository.js";
import { resolveImportNames } from "./import.names.js";
import { planImport } from "./import.plan.js";
import { createKeysInputSchema, type ImportKey } from "./migrations.schemas.js";
import { insertImport } from "./migrations.repository.js";

export const createKeys = defineRpc({
  method: "POST",
  path: "/v1/migrations.createKeys",
  bodyLimit: BULK_BODY_LIMIT,
  summary:
    "Imports up to 100 existing keys, by SHA-256 hash or by plaintext, all or nothing. The body is a JSON array; keyIds come back in request order.",
  input: createKeysInputSchema,
  output: z.object({ keyIds: z.array(z.string()) }),
  handler: async (items, { deps, authorization }) => {
    const { db, keyring } = deps;
    const auth = await authenticateRootKey(db, authorization);
    if (items.length === 0) return { keyIds: [] };
    const workspaceId = auth.workspaceId;

    const { roleIds, permissionIds } = await resolveImportNames(db, workspaceId, items);

    const liveApiIds = await findLiveApiIds(db, workspaceId, unique(items.map((k) => k.apiId)));
    items.forEach((item, index) => {
      if (!hasPermission(auth, importPermission(item))) {
        throw new ApiError(
          "INSUFFICIENT_PERMISSIONS",
          `the key at index ${index} needs one of the permissions "*", "api.*.create_key" or "api.${item.apiId}.create_key"`,
        );
      }
      if (!liveApiIds.has(item.apiId)) throw new ApiError("NOT_FOUND", `api ${item.apiId} not found`);
    });

    const dataKey = items.some((k) => k.plaintext !== undefined) ? await keyring.dataKeyFor(db, workspaceId) : undefined;
    const plan = planImport(items, { workspaceId, roleIds, permissionIds, keyring, dataKey, now: Date.now() });
    const keyIds = await insertImport(db, plan);
    if (dataKey?.newRow) keyring.remember(dataKey);
    return { keyIds };
  },
});

/** v1's per-key check: creating keys in the API, or (for plaintext) encrypting them, either one suffices. */
function importPermission(item: ImportKey) {
  return item.plaintext === undefined
    ? apiPermission(item.apiId, "create_key")
    : apiPermission(item.apiId, "create_key", "encrypt_key");
}

function unique<T>(values: T[]): T[] {
  return [...new Set(values)];
}
