import { z } from "zod";
import { rerollKey as rerollKeyCore } from "../../../core/keys/keys.reroll.js";
import { v2Id } from "../inputBounds.js";
import { defineV2Rpc } from "../rpc.js";
import { createdKeyOutput, V2_MAX_EXPIRES } from "./keys.schemas.js";

export const rerollKey = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.rerollKey",
  auth: "rootKey",
  summary:
    "Replaces a key with a new one (v2's format) that carries its settings: name, meta, identity, credits and refill, enabled, rate limits, roles, direct permissions and, for a recoverable key, an encrypted copy. The old key keeps verifying for `expiration` ms (rounded up to a whole minute; 0: it expires at once). The new key does not inherit the old one's expiry, and keeps its whole prefix.",
  errors: [400, 401, 403, 404, 412, 503],
  returns: "The new key, shown only in this answer, and its id.",
  // v2 declares no additionalProperties restriction on this body: unknown fields are ignored.
  input: z.object({
    keyId: v2Id.describe("The key to replace."),
    expiration: z.int().min(0).max(V2_MAX_EXPIRES).describe("How long (ms) the old key keeps verifying; 0: it expires now."),
  }),
  output: createdKeyOutput,
  handler: async (input, { deps, caller }) => ({
    data: await rerollKeyCore(deps, caller, { keyId: input.keyId, expiration: input.expiration }, "plain"),
  }),
});
