import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { findApi } from "./apis.repository.js";

export const getApi = defineRpc({
  method: "GET",
  path: "/v1/apis.getApi",
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
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, apiPermission(input.apiId, "read_api"));
    const api = await findApi(deps.db, auth.workspaceId, input.apiId);
    if (!api) throw new ApiError("NOT_FOUND", `api ${input.apiId} not found`);
    return {
      id: api.id,
      workspaceId: api.workspaceId,
      name: api.name,
      ...(api.ipWhitelist !== null && { ipWhitelist: api.ipWhitelist }),
    };
  },
});
