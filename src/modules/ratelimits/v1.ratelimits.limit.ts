import { z } from "zod";
import { hasPermission, requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { checkLimits, windowOf } from "../../ratelimit/ratelimiter.js";
import { defineRpc } from "../../rpc.js";
import { ensureNamespace } from "./ratelimits.repository.js";
import { metaSchema } from "../keys/keys.schemas.js";
import { durationSchema, limitSchema, MAX_NAME } from "./ratelimits.schemas.js";

/**
 * Counter names for standalone limits: the namespace id (`rlns_…`) leads the identifier, so they can never share
 * a counter with a key's or an identity's limits (counted under `key_…` / `id_…`), nor with another namespace.
 */
const COUNTER_NAME = "ratelimits.limit";
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
  handler: async (input, { deps, rootKey: auth, checked: epoch }) => {
    const found = await deps.limitLookups.find(
      { workspaceId: auth.workspaceId, name: input.namespace, identifier: input.identifier },
      epoch,
    );
    let namespaceId: string;
    if (found) {
      namespaceId = found.namespaceId;
      requirePermission(auth, { or: ["*", "ratelimit.*.limit", `ratelimit.${namespaceId}.limit`] });
    } else {
      if (!hasPermission(auth, { or: ["*", "ratelimit.*.create_namespace"] })) {
        throw new ApiError("NOT_FOUND", `namespace ${input.namespace} not found`);
      }
      // Checked before creating, so a key that may not limit leaves nothing behind.
      requirePermission(auth, { or: ["*", "ratelimit.*.limit"] });
      namespaceId = await ensureNamespace(deps.db, auth.workspaceId, input.namespace);
    }
    const applied = found?.override ?? { limit: input.limit, duration: input.duration };
    const outcomes = await checkLimits(deps, [
      {
        workspaceId: auth.workspaceId,
        name: COUNTER_NAME,
        identifier: `${namespaceId}\u0000${input.identifier}`,
        ...applied,
        cost: input.cost,
      },
    ]);
    if (outcomes === undefined) {
      const reset = windowOf(applied.duration, deps.clock.now()).reset;
      return { success: true, limit: applied.limit, remaining: applied.limit, reset, ratelimitSkipped: true as const };
    }
    const [outcome] = outcomes;
    return { success: outcome!.passed, limit: applied.limit, remaining: outcome!.remaining, reset: outcome!.reset };
  },
});
