import { z } from "zod";
import { getOverride as getOverrideCore } from "../../../core/ratelimits/ratelimits.core.js";
import { defineV2Rpc } from "../rpc.js";
import { identifierInput, namespaceInput, overrideData, overrideOutput } from "./ratelimit.schemas.js";

export const getOverride = defineV2Rpc({
  method: "POST",
  path: "/v2/ratelimit.getOverride",
  auth: "rootKey",
  summary:
    "Reads the override that applies to an identifier in a namespace: its own, else the best matching `*` pattern. One the root key may not read is not found.",
  errors: [400, 401, 404, 503],
  returns: "The override, with the identifier or pattern it was set for.",
  input: z.object({ namespace: namespaceInput, identifier: identifierInput }).strict(),
  output: overrideOutput,
  handler: async (input, { deps, rootKey }) => ({
    data: overrideData(await getOverrideCore(deps, rootKey, { namespaceIdOrName: input.namespace }, input.identifier, "v2")),
  }),
});
