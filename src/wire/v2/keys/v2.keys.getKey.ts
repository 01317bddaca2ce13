import { z } from "zod";
import { getKey as getKeyCore, readKeyRatelimits } from "../../../core/keys/keys.read.js";
import { v2Id } from "../inputBounds.js";
import { defineV2Rpc } from "../rpc.js";
import { keyResponseData, keyResponseOutput } from "./keys.schemas.js";

export const getKey = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.getKey",
  auth: "rootKey",
  summary:
    "Reads a key by id: its settings, credits, identity, rate limits, roles and permissions (slugs, direct and through roles). `decrypt: true` adds the plaintext of a key stored encrypted.",
  errors: [400, 401, 403, 404, 412, 503],
  returns: "The key (KeyResponseData).",
  input: z
    .object({
      keyId: v2Id.describe("The key to read."),
      decrypt: z.boolean().optional().describe("Add the key's plaintext (needs decrypt_key)."),
    })
    .strict(),
  output: keyResponseOutput,
  handler: async (input, { deps, caller }) => {
    const { row, plaintext } = await getKeyCore(deps, caller, input, { permissions: "effective-slugs", decryptNeedsEncryptingApi: true });
    return { data: keyResponseData(row, await readKeyRatelimits(deps, row), plaintext) };
  },
});
