import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { authenticateRootKey, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { idInput } from "../../http/input-bounds.js";
import { defineRpc } from "../../rpc.js";
import { setApiIpWhitelist } from "./apis.repository.js";
import { ipWhitelistInput } from "./ip-whitelist.js";

/** keyhaven extension: v1 changed an API's IP allow-list only from its dashboard. */
export const updateApi = defineRpc({
  method: "POST",
  path: "/v1/apis.updateApi",
  summary:
    "Sets an API's IP allow-list (`ipWhitelist`: comma-separated IPv4/IPv6 addresses), or removes it with null. keys.verifyKey then answers FORBIDDEN to a caller whose address (True-Client-IP, else CF-Connecting-IP, else the address the server sees) is not listed; the next verification on every replica sees the change.",
  errors: [400, 403, 404, 503],
  returns: "The allow-list is set (or removed).",
  input: z.object({
    apiId: idInput.describe("The API whose allow-list is set."),
    ipWhitelist: ipWhitelistInput
      .nullable()
      .describe("Comma-separated IPv4/IPv6 addresses allowed to verify this API's keys; null removes the list (any caller)."),
  }),
  output: z.object({}),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps, authorization);
    requirePermission(auth, apiPermission(input.apiId, "update_api"));
    if (!(await setApiIpWhitelist(deps.db, auth.workspaceId, input.apiId, input.ipWhitelist, Date.now()))) {
      throw new ApiError("NOT_FOUND", `api ${input.apiId} not found`);
    }
    return {};
  },
});
