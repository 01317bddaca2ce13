import { z } from "zod";
import { KEY_BYTES_MAX, KEY_BYTES_MIN } from "../../../core/apis/apis.bounds.js";
import { type CreateKeyCommand, createKey as createKeyCore, V1_CREATE_KEY_RULES } from "../../../core/keys/keys.create.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../rpc.js";
import { expiresSchema, keyRatelimitSchema, MAX_INT32, metaSchema, refillSchema } from "./keys.schemas.js";

export const createKeyInput = z.object({
  // No minimum length, as in v1: an empty apiId is answered by authentication first, then 404.
  apiId: z.string().max(256).describe("The API the key is created in."),
  prefix: z
    .string()
    .max(16)
    .optional()
    .describe("Put in front of the key with an underscore: `<prefix>_…`. Default: the API's `defaultPrefix`, else none."),
  name: z.string().max(1024).optional().describe("A name for people; returned with the key."),
  byteLength: z
    .int()
    .min(KEY_BYTES_MIN)
    .max(KEY_BYTES_MAX)
    .optional()
    .describe("Random bytes in the key. Default: the API's `defaultBytes`, else 16."),
  ownerId: z.string().max(256).optional().describe("Deprecated in v1: your id of the key's owner, kept as given. Prefer `externalId`."),
  externalId: z
    .string()
    .min(1)
    .max(256)
    .optional()
    .describe("Your id of the customer the key belongs to: links the workspace's identity with that id, created if needed."),
  meta: metaSchema.optional().describe("Any JSON object; verifications return it."),
  roles: z
    .array(z.string().min(1).max(512))
    .max(1000)
    .optional()
    .describe("Names of the roles the key gets. Missing roles are created when the root key may (`rbac.*.create_role`), else 403."),
  permissions: z
    .array(z.string().min(1).max(512))
    .max(1000)
    .optional()
    .describe(
      "Names (slugs) of the permissions the key gets directly. Missing ones are created when the root key may (`rbac.*.create_permission`), else 403.",
    ),
  expires: expiresSchema.optional().describe("When the key stops verifying (code EXPIRED), in unix ms."),
  // 0 and negative values are refused by the core (core/keys/keys.create.ts), after the API lookup, with v1's message.
  remaining: z.int().max(MAX_INT32).optional().describe("Uses left; each verification spends its cost (default 1). Unset: unlimited."),
  refill: refillSchema
    .optional()
    .describe("Sets `remaining` back to `amount` every day (00:00 UTC) or every month on `refillDay`. Needs `remaining`."),
  ratelimit: keyRatelimitSchema.optional().describe("The key's own rate limit (named `default`): `limit` verifications per `duration` ms."),
  enabled: z.boolean().optional().describe("false: the key exists but verifies as DISABLED. Default true."),
  recoverable: z
    .boolean()
    .optional()
    .describe(
      "Also store the key encrypted, so that getKey and listKeys can show it with `decrypt=true`. Needs `encrypt_key` and an API with `storeEncryptedKeys`.",
    ),
  environment: z.string().max(256).optional().describe("A free label, such as `test` or `live`; returned with the key."),
});

export type CreateKeyInput = z.output<typeof createKeyInput>;

export const createKey = defineRpc({
  method: "POST",
  path: "/v1/keys.createKey",
  auth: "rootKeyCheckedByWrite",
  bodyLimit: LARGE_BODY_LIMIT,
  summary:
    "Creates a key in an API and returns it; the key is shown only here. Everything (roles, permissions, identity, rate limit, encrypted copy) is written in one transaction.",
  errors: [400, 403, 404, 409, 412, 503],
  returns: "The new key, shown only in this answer, and its id.",
  input: createKeyInput,
  output: z.object({
    keyId: z.string().describe("The key's id (`key_…`), for the routes that manage it."),
    key: z.string().describe("The key itself, to give to your customer. Shown only in this answer; keyhaven stores its hash."),
  }),
  handler: (input, { deps, caller }) => createKeyCore(deps, caller, createKeyCommand(input), V1_CREATE_KEY_RULES),
});

/** v1's request as the core's command: v1's aliases and quirks are resolved here. */
function createKeyCommand(input: CreateKeyInput): CreateKeyCommand {
  const { ownerId, externalId, expires, ratelimit, ...rest } = input;
  return {
    ...rest,
    // externalId wins over v1's deprecated ownerId.
    externalId: externalId ?? ownerId,
    // v1 stores `expires: 0` as "never expires".
    expires: expires || undefined,
    // v1's deprecated refillInterval stands in for duration.
    ratelimit: ratelimit && { limit: ratelimit.limit, duration: (ratelimit.duration ?? ratelimit.refillInterval)! },
  };
}
