import { z } from "zod";
import { changeRemaining } from "../../../core/keys/keys.updateRemaining.js";
import { MAX_INT32 } from "../../../storage/int32.js";
import { v2Id } from "../inputBounds.js";
import { defineV2Rpc } from "../rpc.js";
import { creditsData, keyCreditsOutput } from "./keys.schemas.js";

export const updateCredits = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.updateCredits",
  auth: "rootKey",
  summary:
    "Sets, increments or decrements (never below 0) a key's credits, atomically and after any due refill. `set` without a value (or with null) makes the key unlimited and removes its refill.",
  errors: [400, 401, 403, 404, 503],
  returns: "The key's credits after the change (`remaining: null`: unlimited).",
  input: z
    .object({
      keyId: v2Id.describe("The key whose credits change."),
      operation: z.enum(["set", "increment", "decrement"]),
      value: z.int().min(0).max(MAX_INT32).nullable().optional().describe("Required for increment and decrement."),
    })
    .strict(),
  output: keyCreditsOutput,
  handler: async (input, { deps, caller }) => {
    const after = await changeRemaining(
      deps,
      caller,
      { keyId: input.keyId, op: input.operation, value: input.value ?? null },
      { unlimitedClearsRefill: true },
    );
    return { data: creditsData(after) };
  },
});
