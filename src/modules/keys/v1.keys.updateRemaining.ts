import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { MAX_INT32 } from "./keys.schemas.js";
import { changeKeyRemaining, findLiveKeyForWrite, type RemainingChange } from "./keys.writes.repository.js";

export const updateRemaining = defineRpc({
  method: "POST",
  path: "/v1/keys.updateRemaining",
  auth: "rootKey",
  summary:
    "Increments, decrements (never below 0) or sets a key's remaining uses, atomically and after any due refill; `set` with null makes the key unlimited.",
  errors: [400, 403, 404, 503],
  returns: "The key's remaining uses after the change (null: unlimited).",
  input: z.object({
    keyId: z.string(),
    op: z.enum(["increment", "decrement", "set"]),
    // keyhaven refuses negative values: remaining uses are never negative, and a negative increment is a decrement.
    value: z.int().min(0).max(MAX_INT32).nullable(),
  }),
  output: z.object({ remaining: z.int().nullable() }),
  handler: async (input, { deps, rootKey: auth }) => {
    const { db } = deps;
    const { op, value } = input;
    const notFound = new ApiError("NOT_FOUND", `key ${input.keyId} not found`);
    // Authenticated before the lookup (v1 looked first), so a wrong root key learns nothing about the id; another
    // workspace's key is answered as a missing one.
    const key = await findLiveKeyForWrite(db, input.keyId);
    if (!key || key.workspaceId !== auth.workspaceId) throw notFound;
    requirePermission(auth, apiPermission(key.apiId, "update_key"));

    const unlimited = () =>
      new ApiError("BAD_REQUEST", `cannot ${op} a key with unlimited remaining requests, please 'set' a value instead.`);
    let change: RemainingChange;
    if (op === "set") {
      change = { op, value };
    } else {
      if (key.remaining === null) throw unlimited();
      if (value === null) throw new ApiError("BAD_REQUEST", `cannot ${op} a key by null.`);
      change = { op, value };
    }
    const result = await changeKeyRemaining(db, key.id, change, Date.now());
    if (result) return result;

    // Nothing was updated: tell why from the key as it is now (a concurrent request may have changed it).
    const current = await findLiveKeyForWrite(db, key.id);
    if (!current) throw notFound;
    if (current.remaining === null) throw unlimited();
    throw new ApiError("BAD_REQUEST", `cannot increment a key beyond ${MAX_INT32} remaining requests.`);
  },
});
