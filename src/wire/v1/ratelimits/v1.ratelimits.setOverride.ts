import { z } from "zod";
import { givenNamespace, setOverride as setOverrideCore } from "../../../core/ratelimits/ratelimits.core.js";
import { defineRpc } from "../rpc.js";
import { durationSchema, limitSchema, MAX_NAME, namespaceSelectorInput } from "./ratelimits.schemas.js";

export const setOverride = defineRpc({
  method: "POST",
  path: "/v1/ratelimits.setOverride",
  auth: "rootKey",
  summary:
    "Sets the limit of an identifier (or of every identifier a `*` pattern matches) in a namespace, creating or replacing its override.",
  errors: [400, 403, 404, 503],
  returns: "The override's id.",
  input: z.object({
    ...namespaceSelectorInput,
    identifier: z.string().min(3).max(MAX_NAME),
    limit: limitSchema(0),
    duration: durationSchema,
    async: z.boolean().default(false),
  }),
  output: z.object({ overrideId: z.string() }),
  // Which namespace is checked before authentication, as before.
  beforeAuth: (input) => givenNamespace(input),
  handler: async (input, { deps, caller, checked: by }) => ({
    overrideId: await setOverrideCore(deps, caller, by, {
      identifier: input.identifier,
      limit: input.limit,
      duration: input.duration,
      async: input.async,
    }),
  }),
});
