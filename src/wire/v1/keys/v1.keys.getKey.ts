import { z } from "zod";
import { getKey as getKeyCore } from "../../../core/keys/keys.read.js";
import { queryBoolean, queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { keyObjectSchema, toKeyObject } from "./keys.object.js";

export const getKey = defineRpc({
  method: "GET",
  path: "/v1/keys.getKey",
  auth: "rootKey",
  summary:
    "Reads a key by id. A key of another workspace is answered as if it did not exist. `decrypt=true` adds the plaintext of a key stored encrypted.",
  errors: [400, 403, 404, 412, 503],
  returns: "The key's settings (and its plaintext with `decrypt=true`).",
  input: z.object({
    keyId: queryText.min(1),
    decrypt: queryBoolean.optional(),
  }),
  output: keyObjectSchema,
  handler: async (input, { deps, caller }) => {
    // Authenticated before the lookup (v1 looked first): a wrong root key must not learn whether the id exists.
    const { row, plaintext } = await getKeyCore(deps, caller, input, { permissions: "direct-names", decryptNeedsEncryptingApi: false });
    return toKeyObject(row, plaintext);
  },
});
