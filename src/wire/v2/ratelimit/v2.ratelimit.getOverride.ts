import { z } from "zod";
import { getOverride as getOverrideCore } from "../../../core/ratelimits/ratelimits.core.js";
import { defineV2Rpc } from "../rpc.js";
import { withAccess } from "../../../core/caller.js";
import { identifierInput, namespaceInput, overrideData, overrideOutput, V2_OVERRIDE_READ_RULES } from "./ratelimit.schemas.js";

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
  // A root key that may not read the override is answered as if there were none (404), as v2 does.
  handler: async (input, { deps, caller }) => ({
    data: overrideData(
      await getOverrideCore(
        deps,
        withAccess(caller, { denied: "notFound" }),
        { namespaceIdOrName: input.namespace },
        input.identifier,
        V2_OVERRIDE_READ_RULES,
      ),
    ),
  }),
});
