import { z } from "zod";
import { limit as limitCore } from "../../../core/ratelimits/ratelimits.core.js";
import { defineRpc } from "../rpc.js";
import { metaSchema } from "../keys/keys.schemas.js";
import { durationSchema, limitSchema, MAX_NAME, V1_LIMIT_RULES } from "./ratelimits.schemas.js";

/** v1 set no bound on the (ignored) resources; a hundred is far more than an audit entry names. */
const MAX_RESOURCES = 100;

export const limit = defineRpc({
  method: "POST",
  path: "/v1/ratelimits.limit",
  auth: "rootKey",
  summary:
    "Counts `cost` against `limit` per fixed window of `duration` ms for an identifier of a namespace; an override of the identifier replaces limit and duration.",
  errors: [400, 403, 404, 503],
  returns: "Whether the call passes (`success`), with the limit, what remains and when the window resets.",
  input: z.object({
    namespace: z.string().min(1).max(MAX_NAME).default("default"),
    identifier: z.string().min(1).max(MAX_NAME),
    limit: limitSchema(1),
    duration: durationSchema,
    cost: limitSchema(0).default(1),
    // Accepted for v1 clients. Every answer is exact, so async changes nothing here (see docs/api.md).
    async: z.boolean().default(false),
    // v1 used these only for its analytics and audit logs; keyhaven has neither and ignores them.
    meta: metaSchema.optional(),
    resources: z
      .array(
        z.object({
          type: z.string().max(MAX_NAME),
          id: z.string().max(MAX_NAME),
          name: z.string().max(MAX_NAME).optional(),
          meta: metaSchema.optional(),
        }),
      )
      .max(MAX_RESOURCES)
      .optional(),
  }),
  output: z.object({
    success: z.boolean(),
    limit: z.number(),
    remaining: z.number(),
    reset: z.number(),
    // keyhaven extension, only when true: Redis did not answer and KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open.
    ratelimitSkipped: z.literal(true).optional(),
  }),
  // One epoch for both lookups (the root key's and the namespace's), read first as before: each is answered from
  // memory unless something it depends on changed since.
  beforeAuth: (_input, { epoch }) => epoch(),
  handler: (input, { deps, rootKey, checked: epoch }) =>
    limitCore(
      deps,
      rootKey,
      {
        namespace: input.namespace,
        identifier: input.identifier,
        limit: input.limit,
        duration: input.duration,
        cost: input.cost,
      },
      epoch,
      V1_LIMIT_RULES,
    ),
});
