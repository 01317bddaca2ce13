import { z } from "zod";
import { type UpdateKeyCommand, updateKey as updateKeyCore, V1_UPDATE_KEY_RULES } from "../../../core/keys/keys.update.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { idInput } from "../inputBounds.js";
import { connectionSchema } from "./keys.rbac.schemas.js";
import { expiresSchema, keyRatelimitSchema, MAX_INT32, metaSchema, refillSchema } from "./keys.schemas.js";

export const updateKeyInput = z.object({
  keyId: idInput,
  name: z.string().max(1024).nullable().optional(),
  ownerId: z.string().min(1).max(256).nullable().optional(),
  externalId: z.string().min(1).max(256).nullable().optional(),
  meta: metaSchema.nullable().optional(),
  expires: expiresSchema.nullable().optional(),
  ratelimit: keyRatelimitSchema.nullable().optional(),
  // 0 is an exhausted key (as v1), which updateRemaining or updateKey can top up later; null makes it unlimited.
  remaining: z.int().min(0).max(MAX_INT32).nullable().optional(),
  refill: refillSchema
    .extend({ refillDay: z.int().min(1).max(31).nullable().optional() })
    .nullable()
    .optional(),
  enabled: z.boolean().optional(),
  environment: z.string().max(256).nullable().optional(),
  roles: z.array(connectionSchema).max(1000).optional(),
  permissions: z.array(connectionSchema).max(1000).optional(),
});

export type UpdateKeyInput = z.output<typeof updateKeyInput>;

export const updateKey = defineRpc({
  method: "POST",
  path: "/v1/keys.updateKey",
  auth: "rootKeyCheckedByWrite",
  bodyLimit: LARGE_BODY_LIMIT,
  summary:
    "Updates a key: only the fields present are changed, null clears one; roles and permissions replace the key's sets. All or nothing.",
  errors: [400, 403, 404, 503],
  returns: "The key is updated.",
  input: updateKeyInput,
  output: z.object({}),
  handler: async (input, { deps, caller }) => {
    await updateKeyCore(deps, caller, updateKeyCommand(input), V1_UPDATE_KEY_RULES);
    return {};
  },
});

/** v1's request as the core's command: v1's aliases and quirks are resolved here. */
function updateKeyCommand(input: UpdateKeyInput): UpdateKeyCommand {
  const { ownerId, externalId, expires, ratelimit, ...rest } = input;
  return {
    ...rest,
    // externalId wins over the deprecated ownerId, a null included.
    externalId: externalId !== undefined ? externalId : ownerId,
    // v1 stores `expires: 0` as "never expires".
    expires: expires === 0 ? null : expires,
    // v1's deprecated refillRate and refillInterval stand in for limit and duration.
    ratelimit: ratelimit && {
      limit: ratelimit.limit ?? ratelimit.refillRate,
      duration: (ratelimit.duration ?? ratelimit.refillInterval)!,
    },
  };
}
