import { z } from "zod";
import { requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { queryInt, queryText } from "../../http/query.js";
import { defineRpc } from "../../rpc.js";
import type { PermissionQuery } from "../../auth/permissions.js";
import { dailyKeyVerifications, findKeyScope, findKeysOfOwner } from "../analytics/analytics.repository.js";

const HOUR_MS = 3_600_000;

export const getVerifications = defineRpc({
  method: "GET",
  path: "/v1/keys.getVerifications",
  auth: "rootKey",
  summary:
    "Daily verification counts (UTC days) of a key, or of every key of an owner (`ownerId`: the key's ownerId or its identity's externalId). The window defaults to the last 24 hours.",
  errors: [400, 403, 404, 503],
  returns: "Verification counts per UTC day.",
  input: z.object({
    keyId: queryText.min(1).optional(),
    ownerId: queryText.min(1).optional(),
    start: queryInt(0, Number.MAX_SAFE_INTEGER).optional(),
    end: queryInt(0, Number.MAX_SAFE_INTEGER).optional(),
    granularity: z.enum(["day"]).default("day"),
  }),
  output: z.object({
    verifications: z.array(z.object({ time: z.number(), success: z.number(), rateLimited: z.number(), usageExceeded: z.number() })),
  }),
  // The input's own 400s come before authentication, as before.
  beforeAuth: (input, { deps }) => {
    if (input.keyId === undefined && input.ownerId === undefined) {
      throw new ApiError("BAD_REQUEST", "keyId or ownerId must be provided");
    }
    const end = input.end ?? deps.clock.now();
    const start = input.start ?? end - 24 * HOUR_MS;
    if (start > end) throw new ApiError("BAD_REQUEST", "start must not be after end");
    return { start, end };
  },
  handler: async (input, { deps, rootKey: auth, checked: { start, end } }) => {
    const { db } = deps;
    // Authenticated before the lookup (v1 looked a keyId up first), so a wrong root key learns nothing about it; a
    // key of another workspace is answered as a missing one.
    let keys: { id: string; apiId: string }[];
    if (input.keyId !== undefined) {
      const key = await findKeyScope(db, input.keyId);
      if (!key || key.workspaceId !== auth.workspaceId) throw new ApiError("NOT_FOUND", `key ${input.keyId} not found`);
      keys = [{ id: input.keyId, apiId: key.apiId }];
    } else {
      keys = await findKeysOfOwner(db, auth.workspaceId, input.ownerId!);
      if (keys.length === 0) throw new ApiError("NOT_FOUND", "No keys were found to match your query");
    }
    requirePermission(auth, readKeyPermission([...new Set(keys.map((k) => k.apiId))]));
    const from = start - (start % HOUR_MS);
    const verifications = await dailyKeyVerifications(
      db,
      auth.workspaceId,
      keys.map((k) => k.id),
      from,
      end,
    );
    return { verifications };
  },
});

/** v1's check: `*`, `api.*.read_key`, or `read_key` on every API the keys belong to. */
function readKeyPermission(apiIds: string[]): PermissionQuery {
  return { or: ["*", "api.*.read_key", { and: apiIds.map((id) => `api.${id}.read_key`) }] };
}
