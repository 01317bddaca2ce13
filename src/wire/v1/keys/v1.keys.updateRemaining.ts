import { z } from "zod";
import { updateRemaining as updateRemainingCore } from "../../../core/keys/keys.updateRemaining.js";
import { defineRpc } from "../rpc.js";
import { MAX_INT32 } from "./keys.schemas.js";

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
  // Authenticated before the lookup (v1 looked first), so a wrong root key learns nothing about the id.
  handler: (input, { deps, caller }) => updateRemainingCore(deps, caller, input),
});
