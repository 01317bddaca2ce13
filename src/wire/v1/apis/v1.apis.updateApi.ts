import { z } from "zod";
import { idInput } from "../inputBounds.js";
import { updateApi as updateApiCore } from "../../../core/apis/apis.core.js";
import { defineRpc } from "../rpc.js";
import { ipWhitelistInput } from "../../../core/apis/apis.ipWhitelist.js";

/** keyhaven extension: v1 changed an API's IP allow-list only from its dashboard. */
export const updateApi = defineRpc({
  method: "POST",
  path: "/v1/apis.updateApi",
  auth: "rootKey",
  summary:
    "Sets an API's IP allow-list (`ipWhitelist`: comma-separated IPv4/IPv6 addresses and CIDR ranges), or removes it with null. keys.verifyKey then answers FORBIDDEN to a caller whose address (the socket's peer, or with KEYHAVEN_TRUST_PROXY the address trusted proxies forwarded) is not in it; the next verification on every replica sees the change.",
  errors: [400, 403, 404, 503],
  returns: "The allow-list is set (or removed).",
  input: z.object({
    apiId: idInput.describe("The API whose allow-list is set."),
    ipWhitelist: ipWhitelistInput
      .nullable()
      .describe("Comma-separated IPv4/IPv6 addresses allowed to verify this API's keys; null removes the list (any caller)."),
  }),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await updateApiCore(deps, caller, { apiId: input.apiId, ipWhitelist: input.ipWhitelist });
    return {};
  },
});
