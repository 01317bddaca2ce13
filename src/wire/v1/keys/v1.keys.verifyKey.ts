import { z } from "zod";
import { callerAddress } from "../../../http/clientAddress.js";
import { MAX_ID_LENGTH } from "../inputBounds.js";
import { MAX_WINDOW_MS } from "../../../storage/ratelimits/ratelimiter.js";
import { defineRpc } from "../rpc.js";
import { maxWindowMessage } from "../ratelimits/ratelimits.schemas.js";
import { MAX_INT32, metaSchema } from "./keys.schemas.js";
import { parsePermissionQuery } from "../../../core/auth/permissions.query.js";
import {
  MAX_RATELIMITS_PER_VERIFICATION,
  type VerificationResult,
  type VerifyRules,
  verificationCodes,
  verifyKey as verify,
} from "../../../core/verification/verification.verify.js";

/**
 * v1's verification: `permissions` is v1's JSON query, parsed before the key is looked up (a malformed one is a 400
 * whatever the key); a root key only scopes the verification to its workspace; a disabled workspace is refused.
 */
export const V1_VERIFY_RULES: VerifyRules = {
  parsePermissions: parsePermissionQuery,
  parsePermissionsWhen: "beforeLookup",
  scopeMustMayVerify: false,
  disabledWorkspace: "refuse",
  creditsAndIdentityLimits: false,
};

/** Rate limits one verification may name (the core's bound, see there). */
export const MAX_RATELIMITS_PER_REQUEST = MAX_RATELIMITS_PER_VERIFICATION;

const output = z.object({
  requestId: z.string().describe("The request id, as in the `Unkey-Request-Id` header."),
  valid: z.boolean().describe("Whether the key may be accepted: true exactly when `code` is VALID."),
  code: z
    .enum(verificationCodes)
    .describe(
      "The outcome, checked in this order: NOT_FOUND, DISABLED, FORBIDDEN (another API; first after NOT_FOUND with KEYHAVEN_VERIFY_REQUIRE_SCOPE=on), EXPIRED, INSUFFICIENT_PERMISSIONS, RATE_LIMITED, USAGE_EXCEEDED, else VALID.",
    ),
  keyId: z.string().optional().describe("The key's id, when the key exists."),
  apiId: z.string().optional().describe("keyhaven extension: the API of the key, when the key exists."),
  name: z.string().optional(),
  ownerId: z.string().optional(),
  meta: metaSchema.optional(),
  expires: z.number().optional(),
  remaining: z.number().optional().describe("Uses left after this verification, for a key with limited uses."),
  ratelimit: z
    .object({ limit: z.number().optional(), remaining: z.number(), reset: z.number() })
    .optional()
    .describe("The rate limit that applied (its `default` limit when applied): what remains in the window and when it resets (unix ms)."),
  enabled: z.boolean().optional(),
  permissions: z.array(z.string()).optional().describe("The key's permissions, direct and through its roles."),
  roles: z.array(z.string()).optional().describe("The key's roles."),
  environment: z.string().optional(),
  identity: z.object({ id: z.string(), externalId: z.string(), meta: metaSchema }).optional(),
  // keyhaven extension, only when true: Redis did not answer and KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open.
  ratelimitSkipped: z.literal(true).optional(),
});

export const verifyKey = defineRpc({
  method: "POST",
  path: "/v1/keys.verifyKey",
  auth: "optionalRootKey",
  summary:
    "Verifies a key and answers 200 for every outcome of the key itself. Needs no root key; with a valid root key (`Authorization: Bearer`) the verification is scoped to its workspace (a key of another workspace is NOT_FOUND), any other Authorization header is ignored. KEYHAVEN_VERIFY_REQUIRE_SCOPE=on makes `apiId` or a valid root key mandatory (else 400), and answers a key of another API FORBIDDEN with `valid` and `code` alone, whatever its state. When the key's API has an IP allow-list, a caller whose address (the socket's peer, or from a proxy KEYHAVEN_TRUST_PROXY names the address it forwarded: True-Client-IP, else CF-Connecting-IP, else X-Forwarded-For) is not in it gets FORBIDDEN. A RATE_LIMITED answer carries the header `Unkey-Ratelimit-Triggered` naming the limit that refused.",
  errors: [400, 403, 503],
  returns: "The outcome for the key, valid or not (`valid`, `code`), with what the key carries.",
  input: z.object({
    key: z.string().min(1).max(1024).describe("The key to verify, as your customer sent it."),
    // "" is accepted (it names no API, so the answer is FORBIDDEN), as in v1.
    apiId: z
      .string()
      .max(MAX_ID_LENGTH)
      .optional()
      .describe("Accept only a key of this API (else code FORBIDDEN). Without it, a key of any API verifies."),
    tags: z.array(z.string().min(1).max(128)).max(10).optional().describe("Labels counted with this verification in analytics."),
    authorization: z
      .object({ permissions: z.unknown().optional() })
      .optional()
      .describe(
        "A permission query the key must satisfy (else INSUFFICIENT_PERMISSIONS): a permission name, or `{and: [...]}` / `{or: [...]}`, nested.",
      ),
    remaining: z
      .object({ cost: z.int().min(0).max(MAX_INT32).default(1) })
      .optional()
      .describe("How many uses this verification spends (default 1; 0 is free)."),
    // Deprecated in v1 and ignored there too; accepted so that old clients validate.
    ratelimit: z
      .object({ cost: z.int().min(0).max(MAX_INT32).optional() })
      .optional()
      .describe("Deprecated in v1 and ignored; use `ratelimits`."),
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
      .optional()
      .describe(
        "Rate limits to apply besides the key's auto-applied ones: a configured limit by `name`, or an ad-hoc one with `limit` per `duration` ms. All or nothing: a refusal charges none.",
      ),
  }),
  output,
  handler: async (input, { deps, req, reply, optionalRootKey }) => {
    const result = await verify(
      deps,
      {
        key: input.key,
        apiId: input.apiId,
        // Without an Authorization header there is no root key to resolve: no scope (what it would resolve to), which
        // lets a key with remaining uses in memory be verified in one statement (verification.verify.ts fromMemory).
        scope: req.headers.authorization === undefined ? undefined : optionalRootKey,
        requireScope: deps.config.verifyRequireScope,
        callerIp: callerAddress(req, deps.config.trustProxy),
        permissions: input.authorization?.permissions,
        remainingCost: input.remaining?.cost ?? 1,
        ratelimits: input.ratelimits,
        tags: input.tags,
        surface: "v1",
        requestId: req.id,
      },
      V1_VERIFY_RULES,
    );
    // Undocumented in v1, which set it for its own tests; v1 clients and test suites read it.
    if (result.triggeredRatelimit !== undefined) reply.header("Unkey-Ratelimit-Triggered", result.triggeredRatelimit);
    return { requestId: req.id, ...v1Answer(result) };
  },
});

/** v1's fields for the core's result: the key's facts flat beside `valid`/`code`, and the rate limit as v1 shows it. */
function v1Answer(result: VerificationResult): Omit<z.infer<typeof output>, "requestId"> {
  const { valid, code, key, ratelimit, remaining } = result;
  return {
    valid,
    code,
    ...key,
    ...(ratelimit?.state === "applied" && { ratelimit: ratelimit.report }),
    // keyhaven extension: Redis could not answer, so this verification was not rate limited (failing open).
    ...(ratelimit?.state === "unavailable" && { ratelimitSkipped: true as const }),
    ...(remaining !== undefined && { remaining }),
  };
}
