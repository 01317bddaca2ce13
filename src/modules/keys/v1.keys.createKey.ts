import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { hasPermission, requirePermission } from "../../auth/root-key.js";
import { hashKey } from "../../crypto/hash.js";
import { generateKey } from "../../crypto/key-gen.js";
import { ApiError } from "../../errors.js";
import { newId } from "../../ids.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../../rpc.js";
import { findApi } from "../apis/apis.repository.js";
import { expiresSchema, keyRatelimitSchema, MAX_INT32, metaSchema, refillSchema } from "./keys.schemas.js";
import { findPermissionsByIdOrSlug, findRoleIdsByName, missingNames } from "../permissions/permissions.repository.js";
import { insertNewKey, type NewKey } from "./keys.writes.repository.js";

export const createKeyInput = z.object({
  // No minimum length, as in v1: an empty apiId is answered by authentication first, then 404.
  apiId: z.string().max(256).describe("The API the key is created in."),
  prefix: z
    .string()
    .max(16)
    .optional()
    .describe("Put in front of the key with an underscore: `<prefix>_…`. Default: the API's `defaultPrefix`, else none."),
  name: z.string().max(1024).optional().describe("A name for people; returned with the key."),
  byteLength: z.int().min(16).max(255).optional().describe("Random bytes in the key. Default: the API's `defaultBytes`, else 16."),
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
  // 0 and negative values are refused by the handler, after the API lookup, with v1's message.
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
  auth: "rootKey",
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
  handler: async (input, { deps, rootKey: auth }) => {
    const { db, keyring } = deps;
    requirePermission(auth, apiPermission(input.apiId, "create_key"));
    const workspaceId = auth.workspaceId;

    const api = await findApi(db, workspaceId, input.apiId);
    if (!api) throw new ApiError("NOT_FOUND", `api ${input.apiId} not found`);
    if (input.recoverable && !api.storeEncryptedKeys) {
      throw new ApiError("PRECONDITION_FAILED", `api ${input.apiId} does not support recoverable keys`);
    }
    // v1 refuses 0 only; keyhaven refuses negative values too (a key cannot have fewer than no uses left).
    if (input.remaining !== undefined && input.remaining <= 0) {
      throw new ApiError("BAD_REQUEST", "remaining must be greater than 0.");
    }
    if (input.refill && input.remaining === undefined) {
      throw new ApiError("BAD_REQUEST", "remaining must be set if you are using refill.");
    }
    if (input.refill?.interval === "daily" && input.refill.refillDay !== undefined) {
      throw new ApiError("BAD_REQUEST", "when interval is set to 'daily', 'refillDay' must be null.");
    }

    const permissionSlugs = [...new Set(input.permissions ?? [])];
    const existingPermissions = new Set((await findPermissionsByIdOrSlug(db, workspaceId, [], permissionSlugs)).map((p) => p.slug));
    const missingPermissions = missingNames(permissionSlugs, existingPermissions);
    const createMissingPermissions = hasPermission(auth, { or: ["*", "rbac.*.create_permission"] });
    if (missingPermissions.length > 0 && !createMissingPermissions) {
      throw new ApiError(
        "INSUFFICIENT_PERMISSIONS",
        `permissions ${JSON.stringify(missingPermissions)} do not exist; creating them needs one of the permissions "*" or "rbac.*.create_permission"`,
      );
    }
    const roleNames = [...new Set(input.roles ?? [])];
    const missingRoles = missingNames(roleNames, await findRoleIdsByName(db, workspaceId, roleNames));
    const createMissingRoles = hasPermission(auth, { or: ["*", "rbac.*.create_role"] });
    if (missingRoles.length > 0 && !createMissingRoles) {
      throw new ApiError(
        "INSUFFICIENT_PERMISSIONS",
        `roles ${JSON.stringify(missingRoles)} do not exist; creating them needs one of the permissions "*" or "rbac.*.create_role"`,
      );
    }
    if (input.recoverable && !hasPermission(auth, apiPermission(input.apiId, "encrypt_key"))) {
      throw new ApiError(
        "INSUFFICIENT_PERMISSIONS",
        `insufficient permissions to encrypt keys: need one of "*", "api.*.encrypt_key" or "api.${input.apiId}.encrypt_key"`,
      );
    }
    const dataKey = input.recoverable ? await keyring.dataKeyFor(db, workspaceId) : undefined;

    const now = Date.now();
    const keyId = newId("key");
    const prefix = input.prefix ?? api.defaultPrefix ?? undefined;
    const key = generateKey(prefix, input.byteLength ?? api.defaultBytes ?? 16);
    const externalId = input.externalId ?? input.ownerId;
    const newKey: NewKey = {
      row: {
        id: keyId,
        workspaceId,
        apiId: api.id,
        hash: hashKey(key),
        // As v1: `prefix_` and four characters for a requested prefix, else the first five characters of the key,
        // even when the key carries the API's default prefix.
        start: key.slice(0, (input.prefix?.length ?? 0) + 5),
        prefix: prefix || null,
        name: input.name ?? null,
        ownerId: externalId ?? null,
        meta: input.meta ?? null,
        // v1 stores `expires: 0` as "never expires".
        expires: input.expires ? new Date(input.expires) : null,
        remaining: input.remaining ?? null,
        refillDay: input.refill?.interval === "monthly" ? (input.refill.refillDay ?? 1) : null,
        refillAmount: input.refill?.amount ?? null,
        lastRefillAt: input.refill ? new Date(now) : null,
        enabled: input.enabled ?? true,
        environment: input.environment ?? null,
        createdAtM: now,
      },
      externalId,
      roleNames,
      createMissingRoles,
      permissionSlugs,
      createMissingPermissions,
      ratelimit: input.ratelimit && {
        limit: input.ratelimit.limit,
        duration: (input.ratelimit.duration ?? input.ratelimit.refillInterval)!,
      },
      encrypted: dataKey && { encrypted: keyring.encrypt(dataKey, keyId, key), dataKey },
    };
    await insertNewKey(db, newKey);
    if (dataKey?.newRow) keyring.remember(dataKey);
    return { keyId, key };
  },
});
