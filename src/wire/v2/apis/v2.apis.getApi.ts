import { z } from "zod";
import { getApi as getApiCore } from "../../../core/apis/apis.core.js";
import { v2ApiIdOfApis } from "../inputBounds.js";
import { defineV2Rpc } from "../rpc.js";

export const getApi = defineV2Rpc({
  method: "POST",
  path: "/v2/apis.getApi",
  auth: "rootKey",
  summary: "Reads an API by id.",
  errors: [400, 401, 403, 404, 503],
  returns: "The API's id and name.",
  input: z.object({ apiId: v2ApiIdOfApis.describe("The API to read.") }).strict(),
  output: z.object({ id: z.string().describe("The API's id."), name: z.string().describe("Its name.") }),
  handler: async (input, { deps, rootKey }) => {
    const api = await getApiCore(deps, rootKey, input.apiId);
    return { data: { id: api.id, name: api.name } };
  },
});
