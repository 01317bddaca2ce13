import { z } from "zod";
import { callerAddress } from "../../../http/clientAddress.js";
import { parsePermissionQuery } from "../../../core/auth/permissions.query.js";
import { parseTextPermissionQuery } from "../../../core/auth/permissions.text.js";
import {
  MAX_RATELIMITS_PER_VERIFICATION,
  type VerificationResult,
  type VerifyRules,
  verifyKey as verify,
} from "../../../core/verification/verification.verify.js";
import { MAX_INT32 } from "../../../storage/int32.js";
import { MAX_WINDOW_MS } from "../../../storage/ratelimits/ratelimiter.js";
import { defineV2Rpc } from "../rpc.js";

/**
 * v2's verification (contract §5.2): the root key (`scope`, always resolved) must also hold verify_key for the key's
 * API (`api.*.verify_key`, `api.<apiId>.verify_key`, the key's URN or `*`), else NOT_FOUND, so that a key's
 * existence does not leak; `permissions` is v2's text query (`a AND (b OR c)`), parsed only for a key in scope; a
 * disabled workspace is code FORBIDDEN; the answer carries `credits`, and the identity's own rate limits.
 */
export const V2_VERIFY_RULES: VerifyRules = {
  // The schema admits only text; a tree (from a direct call of the core) is read as v1's JSON query.
  parsePermissions: (raw) => (typeof raw === "string" ? parseTextPermissionQuery(raw) : parsePermissionQuery(raw)),
  parsePermissionsWhen: "keyInScope",
  scopeMustMayVerify: true,
  disabledWorkspace: "forbidden",
  creditsAndIdentityLimits: true,
};

/** v2's codes (contract §5.3): v1's without UNAUTHORIZED, which the core never answers. */
const codes = [
  "VALID",
  "NOT_FOUND",
  "FORBIDDEN",
  "INSUFFICIENT_PERMISSIONS",
  "USAGE_EXCEEDED",
  "RATE_LIMITED",
  "DISABLED",
  "EXPIRED",
] as const;

const ratelimitSetting = {
  id: z.string().describe("The rate limit's id; empty for an ad-hoc limit."),
  name: z.string(),
  limit: z.number(),
  duration: z.number().describe("The window, in milliseconds."),
  autoApply: z.boolean(),
};

const output = z.object({
  valid: z.boolean().describe("Whether the key may be accepted: true exactly when `code` is VALID."),
  code: z
    .enum(codes)
    .describe(
      "The outcome, checked in this order: NOT_FOUND (also a key of another workspace, or of an API the root key may not verify for), FORBIDDEN (disabled workspace), DISABLED, EXPIRED, FORBIDDEN (IP allow-list), INSUFFICIENT_PERMISSIONS, RATE_LIMITED, USAGE_EXCEEDED, else VALID.",
    ),
  keyId: z.string().optional().describe("The key's id, unless NOT_FOUND."),
  name: z.string().optional(),
  meta: z.record(z.string(), z.unknown()).optional().describe("Absent when empty."),
  expires: z.number().optional().describe("Unix milliseconds; absent when the key does not expire."),
  credits: z
    .number()
    .optional()
    .describe("For a key with limited uses: left after this verification (VALID), found insufficient (USAGE_EXCEEDED), else as stored."),
  enabled: z.boolean().optional(),
  permissions: z.array(z.string()).optional().describe("Slugs of the key's permissions, direct and through its roles."),
  roles: z.array(z.string()).optional().describe("Names of the key's roles."),
  identity: z
    .object({
      id: z.string(),
      externalId: z.string(),
      meta: z.record(z.string(), z.unknown()).optional(),
      ratelimits: z
        .array(z.object(ratelimitSetting))
        .optional()
        .describe("The identity's rate limits no key limit of the same name shadows."),
    })
    .optional(),
  ratelimits: z
    .array(
      z.object({
        ...ratelimitSetting,
        exceeded: z.boolean(),
        remaining: z.number(),
        reset: z.number().describe("Unix milliseconds: the end of the current window."),
      }),
    )
    .optional()
    .describe("Every limit this verification was checked against (absent when none was)."),
  // keyhaven extension (v1's name), only when true: Redis did not answer and KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open.
  ratelimitSkipped: z
    .literal(true)
    .optional()
    .describe(
      "keyhaven extension, only when true: the rate-limit store (Redis) did not answer, so this verification was answered without its rate limits (`ratelimits` absent) instead of a 503 (KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open, the default).",
    ),
});

export const verifyKey = defineV2Rpc({
  method: "POST",
  path: "/v2/keys.verifyKey",
  auth: "rootKeyAtEpoch",
  summary:
    "Verifies a key and answers 200 for every outcome of the key itself. The root key must hold `verify_key` for the key's API (`api.*.verify_key` or `api.<apiId>.verify_key`); a key of another workspace or API, or a caller without that permission, is NOT_FOUND. `permissions` is a query such as `a AND (b OR c)` (400 when it does not parse); a named rate limit that is not configured is a 412. When the key's API has an IP allow-list, the caller's address is the socket's peer, or from a proxy KEYHAVEN_TRUST_PROXY names the address it forwarded: `True-Client-IP`, else `CF-Connecting-IP`, else `X-Forwarded-For` (as on v1).",
  errors: [400, 401, 403, 404, 412, 503],
  returns: "The outcome for the key, valid or not (`valid`, `code`), with what the key carries.",
  input: z
    .object({
      key: z.string().min(1).max(512).describe("The key to verify, as your customer sent it."),
      tags: z.array(z.string().min(1).max(512)).max(20).optional().describe("Labels counted with this verification in analytics."),
      permissions: z
        .string()
        .min(1)
        .max(1000)
        .optional()
        .describe(
          "A permission query the key must satisfy (else INSUFFICIENT_PERMISSIONS), e.g. `documents.read AND (documents.write OR admin)`.",
        ),
      credits: z
        .object({ cost: z.int().min(0).max(MAX_INT32).describe("Uses this verification spends (0 is free).") })
        .strict()
        .optional()
        .describe("Default: a cost of 1."),
      ratelimits: z
        .array(
          z.object({
            name: z.string().min(3).max(255),
            cost: z.int().min(0).max(MAX_INT32).optional().describe("Default 1."),
            limit: z.int().min(0).max(MAX_INT32).optional(),
            duration: z.int().min(1000).max(MAX_WINDOW_MS).optional().describe("Milliseconds."),
          }),
        )
        .max(MAX_RATELIMITS_PER_VERIFICATION)
        .optional()
        .describe(
          "Rate limits to apply besides the key's auto-applied ones: a configured limit by `name` (412 when there is none), or an ad-hoc one with `limit` per `duration` ms. All or nothing: a refusal charges none.",
        ),
      migrationId: z.string().max(256).optional().describe("The migration to look the key up in when it is not found (keys.migrateKeys)."),
    })
    .strict(),
  output,
  handler: async (input, { deps, req, rootKeyAt }) => {
    const result = await verify(
      deps,
      {
        key: input.key,
        ...(input.migrationId !== undefined && { migrationId: input.migrationId }),
        scope: rootKeyAt,
        requireScope: true,
        callerIp: callerAddress(req, deps.config.trustProxy),
        permissions: input.permissions,
        remainingCost: input.credits?.cost ?? 1,
        ratelimits: input.ratelimits,
        tags: input.tags,
        surface: "v2",
        requestId: req.id,
      },
      V2_VERIFY_RULES,
    );
    return { data: v2Answer(result) };
  },
});

type Meta = Record<string, unknown>;
const nonEmpty = (value: Meta | undefined): value is Meta => value !== undefined && value !== null && Object.keys(value).length > 0;

/** v2's `data` for the core's result (contract §5.3): empty fields left out. */
function v2Answer(result: VerificationResult): z.input<typeof output> {
  const { valid, key, ratelimit, credits } = result;
  const code = result.code as (typeof codes)[number];
  if (key === undefined) return { valid, code };
  return {
    valid,
    code,
    keyId: key.keyId,
    ...(key.name !== undefined && key.name !== "" && { name: key.name }),
    ...(nonEmpty(key.meta) && { meta: key.meta }),
    ...(key.expires !== undefined && { expires: key.expires }),
    ...(credits !== undefined && { credits }),
    enabled: key.enabled,
    ...(key.permissions.length > 0 && { permissions: key.permissions }),
    ...(key.roles.length > 0 && { roles: key.roles }),
    ...(key.identity !== undefined && {
      identity: {
        id: key.identity.id,
        externalId: key.identity.externalId,
        ...(nonEmpty(key.identity.meta) && { meta: key.identity.meta }),
        ...(key.identity.ratelimits !== undefined && key.identity.ratelimits.length > 0 && { ratelimits: key.identity.ratelimits }),
      },
    }),
    ...(ratelimit?.state === "applied" && ratelimit.limits.length > 0 && { ratelimits: ratelimit.limits }),
    ...(ratelimit?.state === "unavailable" && { ratelimitSkipped: true as const }),
  };
}
