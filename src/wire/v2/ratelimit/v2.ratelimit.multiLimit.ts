import { z } from "zod";
import { limitMany } from "../../../core/ratelimits/ratelimits.core.js";
import { defineV2Rpc } from "../rpc.js";
import { identifierInput, limitDurationInput, limitInput, namespaceInput, V2_LIMIT_RULES } from "./ratelimit.schemas.js";

export const multiLimit = defineV2Rpc({
  method: "POST",
  path: "/v2/ratelimit.multiLimit",
  auth: "rootKey",
  summary:
    "ratelimit.limit for up to 100 (namespace, identifier) pairs at once, all or nothing: when any one fails, none is counted. Unknown namespaces are created when the root key may create namespaces.",
  errors: [400, 401, 403, 404, 503],
  returns: "Whether every limit passed, and each limit's answer in request order.",
  input: z
    .array(
      z.object({
        namespace: namespaceInput,
        identifier: identifierInput,
        limit: limitInput(1).describe("Used unless an override applies."),
        duration: limitDurationInput,
        cost: limitInput(0).optional().describe("Default 1; 0 checks without counting."),
      }),
    )
    .min(1)
    .max(100),
  output: z.object({
    passed: z.boolean().describe("Whether every limit passed (and so was counted)."),
    limits: z.array(
      z.object({
        namespace: z.string().describe("The namespace as the request named it."),
        identifier: z.string(),
        limit: z.number(),
        remaining: z.number(),
        reset: z.number().describe("When the window ends, unix milliseconds."),
        passed: z.boolean(),
        overrideId: z.string().optional().describe("The override that applied, if one did."),
        // keyhaven extension, only when true: Redis did not answer and KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open.
        ratelimitSkipped: z.literal(true).optional(),
      }),
    ),
  }),
  handler: async (input, { deps, rootKey }) => {
    const epoch = await deps.epochs.current();
    const items = input.map((item) => ({
      namespace: item.namespace,
      identifier: item.identifier,
      limit: item.limit,
      duration: item.duration,
      cost: item.cost ?? 1,
    }));
    const { passed, limits } = await limitMany(deps, rootKey, items, epoch, V2_LIMIT_RULES);
    return { data: { passed, limits: limits.map((l, i) => ({ namespace: items[i]!.namespace, identifier: items[i]!.identifier, ...l })) } };
  },
});
