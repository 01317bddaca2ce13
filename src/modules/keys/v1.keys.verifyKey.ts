import { z } from "zod";
import { permissionQuerySchema, satisfies } from "../../auth/permissions.js";
import { hashKey } from "../../crypto/hash.js";
import { ApiError } from "../../errors.js";
import { defineRpc } from "../../rpc.js";
import { findKeyForVerification, spendRemaining } from "./keys.repository.js";

const verificationCodes = [
  "VALID",
  "NOT_FOUND",
  "FORBIDDEN",
  "USAGE_EXCEEDED",
  "RATE_LIMITED",
  "UNAUTHORIZED",
  "DISABLED",
  "INSUFFICIENT_PERMISSIONS",
  "EXPIRED",
] as const;

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
  enabled: z.boolean().optional(),
  permissions: z.array(z.string()).optional(),
  roles: z.array(z.string()).optional(),
  environment: z.string().optional(),
  identity: z
    .object({ id: z.string(), externalId: z.string(), meta: z.record(z.string(), z.unknown()) })
    .optional(),
});

export const verifyKey = defineRpc({
  method: "POST",
  path: "/v1/keys.verifyKey",
  summary:
    "Verifies a key. Needs no root key (the Authorization header is ignored) and answers 200 for every outcome of the key itself.",
  input: z.object({
    key: z.string().min(1).max(1024),
    apiId: z.string().optional(),
    authorization: z.object({ permissions: z.unknown().optional() }).optional(),
    remaining: z.object({ cost: z.int().min(0).max(2_147_483_647).default(1) }).optional(),
  }),
  output,
  handler: async (input, { deps, req }) => {
    const requestId = req.id;
    const key = await findKeyForVerification(deps.db, hashKey(input.key));
    if (!key) return { requestId, valid: false, code: "NOT_FOUND" as const };
    if (!key.workspaceEnabled) throw new ApiError("FORBIDDEN", "workspace is disabled");

    let query: z.infer<typeof permissionQuerySchema> | undefined;
    if (input.authorization?.permissions !== undefined) {
      const parsed = permissionQuerySchema.safeParse(input.authorization.permissions);
      if (!parsed.success) throw new ApiError("BAD_REQUEST", "permission query is invalid");
      query = parsed.data;
    }

    const body: z.input<typeof output> = {
      requestId,
      valid: false,
      code: "VALID",
      keyId: key.id,
      ...(key.name !== null && { name: key.name }),
      ...((key.identityExternalId ?? key.ownerId) !== null && { ownerId: (key.identityExternalId ?? key.ownerId)! }),
      ...(key.meta !== null && { meta: key.meta as Record<string, unknown> }),
      ...(key.expires !== null && { expires: key.expires.getTime() }),
      enabled: key.enabled,
      permissions: key.permissions,
      roles: key.roles,
      ...(key.environment !== null && { environment: key.environment }),
      ...(key.identityId !== null && {
        identity: {
          id: key.identityId,
          externalId: key.identityExternalId!,
          meta: (key.identityMeta as Record<string, unknown> | null) ?? {},
        },
      }),
    };
    const refuse = (code: (typeof verificationCodes)[number]) => ({ ...body, valid: false, code });

    if (!key.enabled) return refuse("DISABLED");
    if (input.apiId !== undefined && input.apiId !== key.apiId) return refuse("FORBIDDEN");
    if (key.expires !== null && key.expires.getTime() < Date.now()) return refuse("EXPIRED");
    if (query !== undefined && !satisfies(query, new Set(key.permissions))) return refuse("INSUFFICIENT_PERMISSIONS");
    if (key.remaining !== null) {
      const left = await spendRemaining(deps.db, key.id, input.remaining?.cost ?? 1);
      if (left === undefined) return { ...refuse("USAGE_EXCEEDED"), remaining: 0 };
      return { ...body, valid: true, code: "VALID" as const, remaining: left };
    }
    return { ...body, valid: true, code: "VALID" as const };
  },
});
