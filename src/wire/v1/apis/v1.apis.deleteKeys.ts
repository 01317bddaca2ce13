import { z } from "zod";
import { deleteApiKeys } from "../../../core/keys/keys.delete.js";
import { defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";

export const deleteKeys = defineRpc({
  method: "POST",
  path: "/v1/apis.deleteKeys",
  auth: "rootKey",
  summary:
    "Deletes every key of an API (the API stays). With `permanent: true` every key row is removed, soft-deleted ones included, and their hashes can be imported again. Answers how many keys were deleted.",
  errors: [400, 403, 404, 503],
  returns: "How many keys were deleted.",
  input: z.object({
    apiId: idInput.describe("The API whose keys are deleted; the API stays."),
    permanent: z
      .boolean()
      .default(false)
      .describe(
        "Remove the rows, soft-deleted ones included, so that the keys can be imported again. Default false: deleted keys stop verifying but stay stored.",
      ),
  }),
  output: z.object({ deletedKeys: z.int().describe("How many keys were deleted.") }),
  handler: async (input, { deps, caller }) => ({ deletedKeys: await deleteApiKeys(deps, caller, input) }),
});
