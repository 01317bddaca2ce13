import { z } from "zod";
import { optionalRootKey } from "../../auth/root-key.js";
import { MAX_ID_LENGTH } from "../../http/input-bounds.js";
import { MAX_WINDOW_MS } from "../../ratelimit/ratelimiter.js";
import { defineRpc } from "../../rpc.js";
import { maxWindowMessage } from "../ratelimits/ratelimits.schemas.js";
import { MAX_INT32, metaSchema } from "./keys.schemas.js";
import { verificationCodes, verifyKey as verify } from "./verification.js";

/**
 * Rate limits one verification may name. v1 and v2 state no bound; clients name a handful (v2 keys and identities
 * hold at most 50 configured limits each). With the 30-day cap on ad-hoc windows, this bounds the work and the new
 * counters one request can cause.
 */
export const MAX_RATELIMITS_PER_REQUEST = 20;

const output = z.object({
  requestId: z.string(),
  valid: z.boolean(),
  code: z.enum(verificationCodes),
  keyId: z.string().optional(),
  apiId: z.string().optional(),
  name: z.string().optional(),
  ownerId: z.string().optional(),
  meta: metaSchema.optional(),
  expires: z.number().optional(),
  remaining: z.number().optional(),
  ratelimit: z.object({ limit: z.number().optional(), remaining: z.number(), reset: z.number() }).optional(),
  enabled: z.boolean().optional(),
  permissions: z.array(z.string()).optional(),
  roles: z.array(z.string()).optional(),
  environment: z.string().optional(),
  identity: z
    .object({ id: z.string(), externalId: z.string(), meta: metaSchema })
    .optional(),
  // keyhaven extension, only when true: Redis did not answer and KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open.
  ratelimitSkipped: z.literal(true).optional(),
});

export const verifyKey = defineRpc({
  method: "POST",
  path: "/v1/keys.verifyKey",
  auth: "none",
  summary:
    "Verifies a key and answers 200 for every outcome of the key itself. Needs no root key; with a valid root key (`Authorization: Bearer`) the verification is scoped to its workspace (a key of another workspace is NOT_FOUND), any other Authorization header is ignored. KEYHAVEN_VERIFY_REQUIRE_SCOPE=on makes `apiId` or a valid root key mandatory (else 400).",
  errors: [400, 403, 503],
  returns: "The outcome for the key, valid or not (`valid`, `code`), with what the key carries.",
  input: z.object({
    key: z.string().min(1).max(1024),
    // "" is accepted (it names no API, so the answer is FORBIDDEN), as in v1.
    apiId: z.string().max(MAX_ID_LENGTH).optional(),
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
          duration: z.int().min(1).max(MAX_WINDOW_MS, { error: maxWindowMessage }).optional(),
        }),
      )
      .max(MAX_RATELIMITS_PER_REQUEST, { error: `at most ${MAX_RATELIMITS_PER_REQUEST} rate limits per request` })
      .optional(),
  }),
  output,
  handler: async (input, { deps, req, authorization }) => {
    const { subject, ...result } = await verify(deps, {
      key: input.key,
      apiId: input.apiId,
      scope: (epoch) => optionalRootKey(deps.db, authorization, Date.now(), epoch),
      requireScope: deps.config.verifyRequireScope,
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
