import { z } from "zod";
import { deleteApi as deleteApiCore } from "../../../core/apis/apis.core.js";
import { v2ApiIdOfApis } from "../inputBounds.js";
import { defineV2Rpc } from "../rpc.js";

export const deleteApi = defineV2Rpc({
  method: "POST",
  path: "/v2/apis.deleteApi",
  auth: "rootKey",
  summary:
    "Deletes an API; its keys stop verifying at once. An API with delete protection is refused (412). keyhaven deletes the API's keys with it, as v1 did (v2 leaves them, unreachable).",
  errors: [400, 401, 403, 404, 412, 503],
  returns: "Nothing (an empty object).",
  input: z.object({ apiId: v2ApiIdOfApis.describe("The API to delete.") }).strict(),
  output: z.object({}).strict(),
  handler: async (input, { deps, caller }) => {
    await deleteApiCore(deps, caller, input.apiId);
    return { data: {} };
  },
});
