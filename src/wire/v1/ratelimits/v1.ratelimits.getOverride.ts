import { z } from "zod";
import { getOverride as getOverrideCore, givenNamespace } from "../../../core/ratelimits/ratelimits.core.js";
import { queryText } from "../query.js";
import { defineRpc } from "../rpc.js";
import { MAX_NAME, namespaceSelectorInput, overrideOutput, V1_OVERRIDE_READ_RULES } from "./ratelimits.schemas.js";

export const getOverride = defineRpc({
  method: "GET",
  path: "/v1/ratelimits.getOverride",
  auth: "rootKey",
  summary: "Reads the override of an identifier (matched literally, `*` included) in a namespace.",
  errors: [400, 403, 404, 503],
  returns: "The override.",
  input: z.object({
    ...namespaceSelectorInput,
    identifier: queryText.min(1).max(MAX_NAME),
  }),
  output: overrideOutput,
  // Which namespace is checked before authentication, as before.
  beforeAuth: (input) => givenNamespace(input),
  handler: (input, { deps, caller, checked: by }) => getOverrideCore(deps, caller, by, input.identifier, V1_OVERRIDE_READ_RULES),
});
