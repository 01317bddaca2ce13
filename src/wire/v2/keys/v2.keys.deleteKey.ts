import { z } from "zod";
import { deleteKey as deleteKeyCore } from "../../../core/keys/keys.delete.js";
import { v2Id } from "../inputBounds.js";
import { defineV2Rpc } from "../rpc.js";

export const deleteKey = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.deleteKey",
  auth: "rootKey",
  summary:
    "Deletes a key: it stops verifying at once. With `permanent: true` the row goes with its roles, permissions, rate limits and encrypted copy, so the same key can be imported again.",
  errors: [400, 401, 403, 404, 503],
  returns: "Nothing (an empty object).",
  input: z
    .object({
      keyId: v2Id.describe("The key to delete."),
      permanent: z.boolean().optional().describe("Remove the row instead of marking it deleted (default false)."),
    })
    .strict(),
  output: z.object({}).strict(),
  handler: async (input, { deps, caller }) => {
    await deleteKeyCore(deps, caller, { keyId: input.keyId, permanent: input.permanent ?? false });
    return { data: {} };
  },
});
