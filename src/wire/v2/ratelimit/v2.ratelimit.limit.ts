import { z } from "zod";
import { limit as limitCore } from "../../../core/ratelimits/ratelimits.core.js";
import { defineV2Rpc } from "../rpc.js";
import { identifierInput, limitDurationInput, limitInput, namespaceInput, V2_LIMIT_RULES } from "./ratelimit.schemas.js";

export const limit = defineV2Rpc({
  method: "POST",
  path: "/v2/ratelimit.limit",
  auth: "rootKey",
  summary:
    "Counts `cost` against `limit` per window of `duration` ms for an identifier of a namespace (named by name or id); the override that applies to the identifier replaces limit and duration. An unknown namespace is created when the root key may create namespaces.",
  errors: [400, 401, 403, 404, 503],
  returns: "Whether the call passes (`success`), the limit applied, what remains, when the window resets and the override applied.",
  input: z
    .object({
      namespace: namespaceInput,
      identifier: identifierInput,
      limit: limitInput(1).describe("Used unless an override applies."),
      duration: limitDurationInput,
      cost: limitInput(0).optional().describe("Default 1; 0 checks without counting."),
    })
    .strict(),
  output: z.object({
    success: z.boolean(),
    limit: z.number(),
    remaining: z.number(),
    reset: z.number().describe("When the window ends, unix milliseconds."),
    overrideId: z.string().optional().describe("The override that applied, if one did."),
    // keyhaven extension, only when true: Redis did not answer and KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open.
    ratelimitSkipped: z.literal(true).optional(),
  }),
  handler: async (input, { deps, rootKey }) => {
    const epoch = await deps.epochs.current();
    const answer = Object.assign({}, input, { cost: input.cost ?? 1 });
    return { data: await limitCore(deps, rootKey, answer, epoch, V2_LIMIT_RULES) };
  },
});
