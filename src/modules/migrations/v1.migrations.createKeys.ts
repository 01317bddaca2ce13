import { z } from "zod";
import { hasPermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { BULK_BODY_LIMIT, defineRpc } from "../../rpc.js";
import { findLiveApiIds } from "../apis/apis.repository.js";
import { resolveImportNames } from "./import.names.js";
import { describeImportPermission, importPermission } from "./import.permissions.js";
import { planImport } from "./import.plan.js";
import { createKeysInputSchema } from "./migrations.schemas.js";
import { insertImport } from "./migrations.repository.js";

export const createKeys = defineRpc({
  method: "POST",
  path: "/v1/migrations.createKeys",
  auth: "rootKey",
  bodyLimit: BULK_BODY_LIMIT,
  summary:
    "Imports up to 100 existing keys, by SHA-256 hash or by plaintext, all or nothing. The body is a JSON array; keyIds come back in request order.",
  errors: [400, 403, 404, 409, 412, 503],
  returns: "The ids of the imported keys, in request order.",
  input: createKeysInputSchema,
  output: z.object({ keyIds: z.array(z.string()).describe("The new keys' ids, in the order of the request.") }),
  handler: async (items, { deps, rootKey: auth }) => {
    const { db, keyring } = deps;
    if (items.length === 0) return { keyIds: [] };
    const workspaceId = auth.workspaceId;

    // The root key's permissions first: a key that may not import learns nothing about the workspace's roles,
    // permissions or APIs.
    items.forEach((item, index) => {
      const withPlaintext = item.plaintext !== undefined;
      if (!hasPermission(auth, importPermission(item.apiId, withPlaintext))) {
        throw new ApiError(
          "INSUFFICIENT_PERMISSIONS",
          `the key at index ${index} needs ${describeImportPermission(item.apiId, withPlaintext)}`,
          { keyIndex: index },
        );
      }
    });
    const liveApiIds = await findLiveApiIds(db, workspaceId, unique(items.map((k) => k.apiId)));
    const missingApi = items.find((item) => !liveApiIds.has(item.apiId));
    if (missingApi) throw new ApiError("NOT_FOUND", `api ${missingApi.apiId} not found`);
    const { roleIds, permissionIds } = await resolveImportNames(db, workspaceId, items);

    const dataKey = items.some((k) => k.plaintext !== undefined) ? await keyring.dataKeyFor(db, workspaceId) : undefined;
    const plan = planImport(items, { workspaceId, roleIds, permissionIds, keyring, dataKey, now: Date.now() });
    const keyIds = await insertImport(db, plan);
    if (dataKey?.newRow) keyring.remember(dataKey);
    return { keyIds };
  },
});

function unique<T>(values: T[]): T[] {
  return [...new Set(values)];
}
