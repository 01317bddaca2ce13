import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { type RootKeyAuth, requirePermission } from "../../auth/root-key.js";
import type { Db } from "../../db/client.js";
import { ApiError } from "../../errors.js";
import { LARGE_BODY_LIMIT, defineRpc } from "../../rpc.js";
import { idInput } from "../../http/input-bounds.js";
import { connectionSchema, permissionKind, replaceOnKey, roleKind } from "./key-rbac.js";
import { expiresSchema, keyRatelimitSchema, MAX_INT32, metaSchema, refillSchema } from "./keys.schemas.js";
import { upsertIdentities } from "../identities/identities.repository.js";
import { deleteKeyDefaultRatelimit, setKeyDefaultRatelimits } from "./keys.ratelimit.repository.js";
import { type KeyChanges, lockKeyForUpdate, updateKeyColumns } from "./keys.update.repository.js";

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
  auth: "rootKey",
  bodyLimit: LARGE_BODY_LIMIT,
  summary:
    "Updates a key: only the fields present are changed, null clears one; roles and permissions replace the key's sets. All or nothing.",
  errors: [400, 403, 404, 503],
  returns: "The key is updated.",
  input: updateKeyInput,
  output: z.object({}),
  handler: async (input, { deps, rootKey: auth }) => {
    await deps.db.transaction(async (tx) => {
      const key = await lockKeyForUpdate(tx, auth.workspaceId, input.keyId);
      if (!key) throw new ApiError("NOT_FOUND", `key ${input.keyId} not found`);
      requirePermission(auth, apiPermission(key.apiId, "update_key"));
      if (input.refill) {
        if (input.remaining === null) throw new ApiError("BAD_REQUEST", "Cannot set refill on a key with unlimited requests");
        if (input.refill.interval === "daily" && input.refill.refillDay != null) {
          throw new ApiError("BAD_REQUEST", "Cannot set 'refillDay' if 'interval' is 'daily'");
        }
        if (input.remaining === undefined && key.remaining === null) {
          throw new ApiError("BAD_REQUEST", "Cannot set refill on a key with unlimited requests");
        }
      }
      const { keyId: _, ...fields } = input;
      if (Object.values(fields).every((v) => v === undefined)) return;

      const now = Date.now();
      const changes = await keyChanges(tx, auth, input, now);

      // As keys.setRoles / keys.setPermissions would, with their permission checks (v1 delegated to them).
      const missing = (kind: string) => (name: string) => `${kind} ${name} not found`;
      if (input.roles !== undefined) await replaceOnKey(tx, auth, roleKind, key, input.roles, now, missing("role"));
      if (input.permissions !== undefined) {
        await replaceOnKey(tx, auth, permissionKind, key, input.permissions, now, missing("permission"));
      }
      if (input.ratelimit === null) await deleteKeyDefaultRatelimit(tx, key.id);
      if (input.ratelimit) {
        const { limit, refillRate, duration, refillInterval } = input.ratelimit;
        const limits = { keyId: key.id, workspaceId: key.workspaceId, limit: limit ?? refillRate, duration: (duration ?? refillInterval)! };
        await setKeyDefaultRatelimits(tx, [limits], now);
      }
      await updateKeyColumns(tx, key, changes, now);
    });
    return {};
  },
});

/** The key's own columns to write; an externalId (or ownerId) links the key to that identity, created if needed. */
async function keyChanges(db: Db, auth: RootKeyAuth, input: UpdateKeyInput, now: number): Promise<KeyChanges> {
  const changes: KeyChanges = {};
  if (input.name !== undefined) changes.name = input.name;
  if (input.meta !== undefined) changes.meta = input.meta;
  // v1 stores `expires: 0` as "never expires".
  if (input.expires !== undefined) changes.expires = input.expires ? new Date(input.expires) : null;
  if (input.remaining !== undefined) changes.remaining = input.remaining;
  if (input.refill !== undefined) {
    changes.refill = input.refill && {
      amount: input.refill.amount,
      day: input.refill.interval === "monthly" ? (input.refill.refillDay ?? 1) : null,
    };
  }
  if (input.enabled !== undefined) changes.enabled = input.enabled;
  if (input.environment !== undefined) changes.environment = input.environment;
  // externalId wins over the deprecated ownerId, a null included.
  const owner = input.externalId !== undefined ? input.externalId : input.ownerId;
  if (owner !== undefined) {
    changes.ownerId = owner;
    // v1's keys.updateKey stores `meta {}` on the identity it creates, as keys.createKey does.
    changes.identityId = owner === null ? null : (await upsertIdentities(db, auth.workspaceId, [owner], {}, now)).get(owner)!;
  }
  return changes;
}
