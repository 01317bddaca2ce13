import { z } from "zod";
import { setOverride as setOverrideCore } from "../../../core/ratelimits/ratelimits.core.js";
import { defineV2Rpc } from "../rpc.js";
import { identifierInput, limitInput, namespaceInput, overrideDurationInput } from "./ratelimit.schemas.js";

export const setOverride = defineV2Rpc({
  method: "POST",
  path: "/v2/ratelimit.setOverride",
  auth: "rootKey",
  summary:
    "Creates or replaces the override of an identifier (or of a `*` pattern) in a namespace (named by name or id); limit 0 rejects every call.",
  errors: [400, 401, 403, 404, 503],
  returns: "The override's id.",
  input: z
    .object({
      namespace: namespaceInput,
      identifier: identifierInput.describe("An identifier, or a pattern where `*` stands for any run of characters."),
      limit: limitInput(0),
      duration: overrideDurationInput,
    })
    .strict(),
  output: z.object({ overrideId: z.string() }),
  handler: async (input, { deps, caller }) => {
    const overrideId = await setOverrideCore(
      deps,
      caller,
      { namespaceIdOrName: input.namespace },
      // v2 has no async: every answer is exact here anyway.
      { identifier: input.identifier, limit: input.limit, duration: input.duration, async: false },
    );
    return { data: { overrideId } };
  },
});
