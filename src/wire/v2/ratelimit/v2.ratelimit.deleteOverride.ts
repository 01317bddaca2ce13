import { z } from "zod";
import { deleteOverride as deleteOverrideCore } from "../../../core/ratelimits/ratelimits.core.js";
import { defineV2Rpc } from "../rpc.js";
import { identifierInput, namespaceInput } from "./ratelimit.schemas.js";

export const deleteOverride = defineV2Rpc({
  method: "POST",
  path: "/v2/ratelimit.deleteOverride",
  auth: "rootKey",
  summary:
    "Deletes the override of an identifier in a namespace, matched literally (send a pattern to delete it); the next limit call no longer applies it.",
  errors: [400, 401, 403, 404, 503],
  returns: "Nothing (`{}`).",
  input: z.object({ namespace: namespaceInput, identifier: identifierInput }).strict(),
  output: z.object({}).strict(),
  handler: async (input, { deps, caller }) => {
    await deleteOverrideCore(deps, caller, { namespaceIdOrName: input.namespace }, input.identifier);
    return { data: {} };
  },
});
