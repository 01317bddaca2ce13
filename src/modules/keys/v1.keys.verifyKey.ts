import { z } from "zod";
import { defineRpc } from "../../rpc.js";
import { MAX_INT32 } from "./keys.schemas.js";
import { verificationCodes, verifyKey as verify } from "./verification.js";

const output = z.object({
  requestId: z.string(),
  valid: z.boolean(),
  code: z.enum(verificationCodes),
  keyId: z.string().optional(),
  name: z.string().optional(),
  ownerId: z.string().optional(),
  meta: z.record(z.string(), z.unknown()).optional(),
  expires: z.number().optional(),
  remaining: z.number().optional(),
  ratelimit: z.object({ limit: z.number().optional(), remaining: z.number(), reset: z.number() }).optional(),
  enabled: z.boolean().optional(),
  permissions: z.array(z.string()).optional(),
  roles: z.array(z.string()).optional(),
  environment: z.string().optional(),
  identity: z
    .object({ id: z.string(), externalId: z.string(), meta: z.record(z.string(), z.unknown()) })
    .optional(),
  // keyhaven extension, only when true: Redis did not answer and KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open.
  ratelimitSkipped: z.literal(true).optional(),
});

export const verifyKey = defineRpc({
  method: "POST",
  path: "/v1/keys.verifyKey",
  auth: "none",
  summary:
    "Verifies a key. Needs no root key (the Authorization header is ignored) and answers 200 for every outcome of the key itself.",
  input: z.object({
    key: z.string().min(1).max(1024),
    apiId: z.string().optional(),
    tags: z.array(z.string().min(1).max(128)).max(10).optional(),
    authorization: z.object({ permissions: z.unknown().optional() }).optional(),
    remaining: z.object({ cost: z.int().min(0).max(MAX_INT32).default(1) }).optional(),
    // Deprecated in v1 and ignored there too; accepted so that old clients validate.
    ratelimit: z.object({ cost: z.int().min(0).max(MAX_INT32).optional() }).optional(),
    ratelimits: z
      .array(
        z.object({
          name: z.string().min(1).max(256),
          cost: z.int().min(0).max(MAX_INT32).optional(),
          limit: z.int().min(0).max(MAX_INT32).optional(),
          duration: z.int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
        }),
      )
      .max(100)
      .optional(),
  }),
  output,
  handler: async (input, { deps, req }) => {
    const { subject, ...result } = await verify(deps, {
      key: input.key,
      apiId: input.apiId,
      permissions: input.authorization?.permissions,
      remainingCost: input.remaining?.cost ?? 1,
      ratelimits: input.ratelimits,
    });
    deps.metrics?.recordVerification(result.code);
    // Synchronous and in memory only (written in the background): verifications of existing keys, as v1 counts.
    if (subject !== undefined) {
      deps.analytics?.record({ keyId: result.keyId!, ...subject, identityId: result.identity?.id }, result.code, input.tags, Date.now());
    }
    return { requestId: req.id, ...result };
  },
});
