import { z } from "zod";
import { idInput } from "../inputBounds.js";
import { updateApi as updateApiCore } from "../../../core/apis/apis.core.js";
import { defineRpc } from "../rpc.js";
import { ipWhitelistInput } from "../../../core/apis/apis.ipWhitelist.js";
import { apiDefaultBytesInput, apiDefaultPrefixInput, apiNameInput } from "./v1.apis.inputs.js";

/** keyhaven extension: v1 changed an API's settings only from its dashboard. */
export const updateApi = defineRpc({
  method: "POST",
  path: "/v1/apis.updateApi",
  auth: "rootKey",
  summary:
    "Changes an API's settings: its `name`, the `defaultPrefix` and `defaultBytes` of keys created without their own (null removes them), its `deleteProtection`, and its IP allow-list (`ipWhitelist`: comma-separated IPv4/IPv6 addresses and CIDR ranges, or null to remove it). Only the fields sent change; at least one must be. With an allow-list, keys.verifyKey answers FORBIDDEN to a caller whose address (the socket's peer, or with KEYHAVEN_TRUST_PROXY the address trusted proxies forwarded) is not in it. The next verification and the next keys.createKey on every replica see the change.",
  errors: [400, 403, 404, 503],
  returns: "The settings sent are changed.",
  input: z.object({
    apiId: idInput.describe("The API whose settings change."),
    name: apiNameInput.optional().describe("A new name for people."),
    defaultPrefix: apiDefaultPrefixInput
      .nullable()
      .optional()
      .describe("The prefix of keys created without one; null removes it (no prefix)."),
    defaultBytes: apiDefaultBytesInput
      .nullable()
      .optional()
      .describe("Random bytes of keys created without `byteLength`; null removes it (16)."),
    deleteProtection: z.boolean().optional().describe("Refuse apis.deleteApi (412 DELETE_PROTECTED) while true."),
    ipWhitelist: ipWhitelistInput
      .nullable()
      .optional()
      .describe("Comma-separated IPv4/IPv6 addresses allowed to verify this API's keys; null removes the list (any caller)."),
  }),
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await updateApiCore(deps, caller, input);
    return {};
  },
});
