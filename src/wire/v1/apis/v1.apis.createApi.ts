import { z } from "zod";
import { createApi as createApiCore } from "../../../core/apis/apis.core.js";
import { defineRpc } from "../rpc.js";
import { ipWhitelistInput } from "../../../core/apis/apis.ipWhitelist.js";
import { apiDefaultBytesInput, apiDefaultPrefixInput, apiNameInput } from "./v1.apis.inputs.js";

export const createApi = defineRpc({
  method: "POST",
  path: "/v1/apis.createApi",
  auth: "rootKey",
  summary: "Creates an API: the keyspace that keys are created in and verified against.",
  errors: [400, 403, 503],
  returns: "The new API's id and name.",
  input: z.object({
    name: apiNameInput.describe("A name for people."),
    storeEncryptedKeys: z
      .boolean()
      .optional()
      .describe("Allow keys.createKey to store keys encrypted (`recoverable: true`). Default false."),
    defaultPrefix: apiDefaultPrefixInput.optional().describe("The prefix of keys created without one."),
    defaultBytes: apiDefaultBytesInput.optional().describe("Random bytes of keys created without `byteLength` (else 16)."),
    deleteProtection: z.boolean().optional().describe("Refuse apis.deleteApi (412 DELETE_PROTECTED). Default false."),
    // keyhaven extension (v1 set it from its dashboard): comma-separated IPv4/IPv6 addresses and CIDR ranges allowed to verify keys.
    ipWhitelist: ipWhitelistInput
      .optional()
      .describe(
        "keyhaven extension: comma-separated IPv4/IPv6 addresses and CIDR ranges (`10.0.0.0/8`, `2001:db8::/32`) allowed to verify this API's keys (else FORBIDDEN). Default: any caller.",
      ),
  }),
  output: z.object({ apiId: z.string().describe("The new API's id (`api_…`)."), name: z.string() }),
  handler: async (input, { deps, caller }) => ({ apiId: await createApiCore(deps, caller, input), name: input.name }),
});
