import { z } from "zod";
import { getApi as getApiCore } from "../../../core/apis/apis.core.js";
import { defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";

export const getApi = defineRpc({
  method: "GET",
  path: "/v1/apis.getApi",
  auth: "rootKey",
  summary: "Reads an API by id; `ipWhitelist` (a keyhaven addition) is present when the API has an IP allow-list.",
  errors: [400, 403, 404, 503],
  returns: "The API.",
  input: z.object({ apiId: idInput.describe("The API to read.") }),
  output: z.object({
    id: z.string().describe("The API's id."),
    workspaceId: z.string().describe("The workspace it belongs to."),
    name: z.string(),
    // keyhaven extension, only when the API has an IP allow-list.
    ipWhitelist: z.string().optional().describe("keyhaven extension: the API's IP allow-list, when it has one."),
  }),
  handler: async (input, { deps, rootKey }) => {
    const api = await getApiCore(deps, rootKey, input.apiId);
    return {
      id: api.id,
      workspaceId: api.workspaceId,
      name: api.name,
      ...(api.ipWhitelist !== null && { ipWhitelist: api.ipWhitelist }),
    };
  },
});
