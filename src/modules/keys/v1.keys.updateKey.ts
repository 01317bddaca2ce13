import { z } from "zod";
import { apiPermission } from "../../auth/permissions.js";
import { authenticateRootKey, type RootKeyAuth, requirePermission } from "../../auth/root-key.js";
import type { Db } from "../../db/client.js";
import { ApiError } from "../../errors.js";
import { findPermissionsByIdOrSlug } from "../permissions/permissions.repository.js";
import { defineRpc } from "../../rpc.js";
import { expiresSchema, keyRatelimitSchema, MAX_INT32, refillSchema } from "./keys.schemas.js";
import {
  deleteKeyDefaultRatelimit,
  ensurePermissionForKey,
  ensureRoleForKey,
  findRolesByIdOrName,
  type KeyChanges,
  lockKeyForUpdate,
  replaceKeyPermissions,
  replaceKeyRoles,
  updateKeyColumns,
  upsertIdentityForKey,
  upsertKeyDefaultRatelimit,
} from "./keys.repository.js";


/** A role or permission to connect: by id, or by name (roles) / slug (permissions), created on request. */
const connection = z
  .object({
    id: z.string().min(1).max(256).optional(),
    name: z.string().min(1).max(512).optional(),
    create: z.boolean().optional(),
  })
  .refine((c) => c.id !== undefined || c.name !== undefined, "provide either `id` or `name`");

export const updateKeyInput = z.object({
  keyId: z.string().min(1),
  name: z.string().max(1024).nullable().optional(),
  ownerId: z.string().min(1).max(256).nullable().optional(),
  externalId: z.string().min(1).max(256).nullable().optional(),
  meta: z.record(z.string(), z.unknown()).nullable().optional(),
  expires: expiresSchema.nullable().optional(),
  ratelimit: keyRatelimitSchema.nullable().optional(),
  remaining: z.int().min(1).max(MAX_INT32).nullable().optional(),
  refill: refillSchema.extend({ refillDay: z.int().min(1).max(31).nullable().optional() }).nullable().optional(),
  enabled: z.boolean().optional(),
  environment: z.string().max(256).nullable().optional(),
  roles: z.array(connection).max(1000).optional(),
  permissions: z.array(connection).max(1000).optional(),
});

export type UpdateKeyInput = z.output<typeof updateKeyInput>;
type Connection = z.output<typeof connection>;

export const updateKey = defineRpc({
  method: "POST",
  path: "/v1/keys.updateKey",
  summary:
    "Updates a key: only the fields present are changed, null clears one; roles and permissions replace the key's sets. All or nothing.",
  input: updateKeyInput,
  output: z.object({}),
  handler: async (input, { deps, authorization }) => {
    const auth = await authenticateRootKey(deps.db, authorization);
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

      if (input.roles !== undefined) {
        await replaceKeyRoles(tx, key, await resolveRoles(tx, auth, input.roles, now), now);
      }
      if (input.permissions !== undefined) {
        await replaceKeyPermissions(tx, key, await resolvePermissions(tx, auth, input.permissions, now), now);
      }
      if (input.ratelimit === null) await deleteKeyDefaultRatelimit(tx, key.id);
      if (input.ratelimit) {
        const { limit, refillRate, duration, refillInterval } = input.ratelimit;
        await upsertKeyDefaultRatelimit(tx, key, { limit: limit ?? refillRate, duration: (duration ?? refillInterval)! }, now);
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
    changes.identityId = owner === null ? null : await upsertIdentityForKey(db, auth.workspaceId, owner, now);
  }
  return changes;
}

/** Role ids for the requested roles, in request order: by id, else by name, creating a missing one on request. */
async function resolveRoles(db: Db, auth: RootKeyAuth, wanted: Connection[], now: number): Promise<string[]> {
  const found = await findRolesByIdOrName(db, auth.workspaceId, idsOf(wanted), namesOf(wanted));
  return resolve(wanted, {
    kind: "role",
    byId: new Set(found.map((r) => r.id)),
    byName: new Map(found.map((r) => [r.name, r.id])),
    create: (name) => {
      requirePermission(auth, { or: ["*", "rbac.*.create_role"] });
      return ensureRoleForKey(db, auth.workspaceId, name, now);
    },
  });
}

/** Permission ids for the requested permissions: by id, else by slug (the `name` field), creating on request. */
async function resolvePermissions(db: Db, auth: RootKeyAuth, wanted: Connection[], now: number): Promise<string[]> {
  const found = await findPermissionsByIdOrSlug(db, auth.workspaceId, idsOf(wanted), namesOf(wanted));
  return resolve(wanted, {
    kind: "permission",
    byId: new Set(found.map((p) => p.id)),
    byName: new Map(found.map((p) => [p.slug, p.id])),
    create: (slug) => {
      requirePermission(auth, { or: ["*", "rbac.*.create_permission"] });
      return ensurePermissionForKey(db, auth.workspaceId, slug, now);
    },
  });
}

async function resolve(
  wanted: Connection[],
  known: {
    kind: "role" | "permission";
    byId: Set<string>;
    byName: Map<string, string>;
    create(name: string): Promise<string>;
  },
): Promise<string[]> {
  const ids = new Set<string>();
  for (const w of wanted) {
    if (w.id !== undefined) {
      if (!known.byId.has(w.id)) throw new ApiError("NOT_FOUND", `${known.kind} ${w.id} not found`);
      ids.add(w.id);
      continue;
    }
    const name = w.name!;
    let id = known.byName.get(name);
    if (id === undefined) {
      if (!w.create) throw new ApiError("NOT_FOUND", `${known.kind} ${name} not found`);
      id = await known.create(name);
      known.byName.set(name, id);
    }
    ids.add(id);
  }
  return [...ids];
}

const idsOf = (wanted: Connection[]) => wanted.flatMap((w) => (w.id !== undefined ? [w.id] : []));
const namesOf = (wanted: Connection[]) => wanted.flatMap((w) => (w.id === undefined ? [w.name!] : []));
