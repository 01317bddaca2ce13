import { z } from "zod";
import { deleteOverride as deleteOverrideCore, givenNamespace } from "../../../core/ratelimits/ratelimits.core.js";
import { defineRpc } from "../rpc.js";
import { MAX_NAME, namespaceSelectorInput } from "./ratelimits.schemas.js";

export const deleteOverride = defineRpc({
  method: "POST",
  path: "/v1/ratelimits.deleteOverride",
  auth: "rootKey",
  summary: "Deletes the override of an identifier (matched literally) in a namespace; the next limit call no longer sees it.",
  errors: [400, 403, 404, 503],
  returns: "The override is deleted.",
  input: z.object({
    ...namespaceSelectorInput,
    identifier: z.string().min(1).max(MAX_NAME),
  }),
  output: z.object({}),
  // Which namespace is checked before authentication, as before.
  beforeAuth: (input) => givenNamespace(input),
  handler: async (input, { deps, caller, checked: by }) => {
    await deleteOverrideCore(deps, caller, by, input.identifier);
    return {};
  },
});
