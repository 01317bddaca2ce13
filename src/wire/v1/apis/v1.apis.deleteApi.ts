import { z } from "zod";
import { deleteApi as deleteApiCore } from "../../../core/apis/apis.core.js";
import { defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";

export const deleteApi = defineRpc({
  method: "POST",
  path: "/v1/apis.deleteApi",
  auth: "rootKey",
  summary: "Deletes an API and all its keys, which stop verifying at once; refused for an API protected from deletions.",
  errors: [400, 403, 404, 412, 503],
  returns: "The API and its keys are deleted.",
  input: z.object({ apiId: idInput.describe("The API to delete, with all its keys.") }),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await deleteApiCore(deps, caller, input.apiId);
    return {};
  },
});
