import type { Caller } from "../caller.js";
import type { Change } from "../changes.js";
import { keyPermission } from "../auth/permissions.query.js";
import { hasPermission, requirePermission } from "../principal.js";
import type { Db } from "../../storage/client.js";
import { InvalidInputError, NotFoundError } from "../../errors.js";
import { upsertIdentities } from "../../storage/identities/identities.repository.js";
import { permissionKind, replaceOnKey, roleKind, type Wanted } from "../rbac/rbac.keyLinks.js";
import {
  deleteKeyDefaultRatelimit,
  type KeyRatelimitInput,
  replaceKeyRatelimits,
  setKeyDefaultRatelimits,
} from "../../storage/keys/keys.ratelimit.repository.js";
import { type KeyChanges, lockKeyForUpdate, updateKeyColumns } from "../../storage/keys/keys.update.repository.js";
import { rootKeyGrants } from "../../storage/rootKeys/rootKeys.auth.repository.js";
import type { Principal } from "../principal.js";
import type { KeyServices } from "./keys.services.js";
import { distinctRatelimits } from "./keys.create.js";
import { requireRemainingForRefill } from "./keys.credits.js";

/** A change to a key: an absent (undefined) field is left as it is, null clears it. */
export type UpdateKeyCommand = {
  keyId: string;
  name?: string | null | undefined;
  /** The customer's id: links the identity with it (created if needed); null unlinks. */
  externalId?: string | null | undefined;
  meta?: Record<string, unknown> | null | undefined;
  /** Unix ms; null: never expires. */
  expires?: number | null | undefined;
  /** The key's own (`default`) rate limit; null removes it. */
  ratelimit?: { limit: number; duration: number } | null | undefined;
  /** The key's named rate limits become exactly these, by name (v2's `ratelimits[]`; `[]` removes them all). */
  ratelimits?: KeyRatelimitInput[] | undefined;
  /** null: unlimited; 0: exhausted. */
  remaining?: number | null | undefined;
  refill?: { interval: "daily" | "monthly"; amount: number; refillDay?: number | null | undefined } | null | undefined;
  enabled?: boolean | undefined;
  environment?: string | null | undefined;
  /** The key's roles and permissions become exactly these (by id, else by name; created on request). */
  roles?: Wanted[] | undefined;
  permissions?: Wanted[] | undefined;
};

/** Where v1's and v2's updateKey differ, each adapter says which rules it follows (default: v1's). */
export type UpdateKeyRules = {
  /** A monthly refill without its day: on the 1st (v1), or refused (v2). */
  monthlyWithoutDay: "firstOfMonth" | "refuse";
  /**
   * `roles` and `permissions`: with keys.setRoles' and keys.setPermissions' rbac.* checks (v1), or with update_key
   * alone (v2); and what a missing role is: v1 asks each entry whether to create it, v2 refuses it as not found.
   */
  links: "rbacChecked" | "updateKeyOnly";
};

export const V1_UPDATE_KEY_RULES: UpdateKeyRules = { monthlyWithoutDay: "firstOfMonth", links: "rbacChecked" };
export const V2_UPDATE_KEY_RULES: UpdateKeyRules = { monthlyWithoutDay: "refuse", links: "updateKeyOnly" };

/**
 * Updates a key, all or nothing: the key is locked, its API's update_key permission checked, the refill rules
 * applied, then the columns, the identity link, the roles and permissions (with keys.setRoles' and
 * keys.setPermissions' permission checks) and the rate limit are written in one transaction.
 */
export async function updateKey(services: KeyServices, principal: Caller, input: UpdateKeyCommand, rules: UpdateKeyRules): Promise<void> {
  if (await updateColumnsOnly(services, principal, input)) return;
  const auth = principal;
  await services.changes.change(principal, async (tx, record) => {
    // A root key authorized from memory (Principal's writeGuard) is re-checked first: nothing is written otherwise,
    // and the refusal makes authorizeWrite authenticate again.
    if (principal.writeGuard && !(await rootKeyGrants(tx, principal.writeGuard))) throw new NotFoundError("key", input.keyId);
    const key = await lockKeyForUpdate(tx, principal.workspaceId, input.keyId);
    if (!key) throw new NotFoundError("key", input.keyId);
    requirePermission(principal, keyPermission(principal.access, principal.workspaceId, key.apiId, key.id, "update_key"));
    if (input.refill) {
      // A refill needs uses left (keys.credits.ts): refused first when this update makes them unlimited, and, after
      // the refill's own checks, when the key's are and this update leaves them so.
      if (input.remaining === null) requireRemainingForRefill(input, "update");
      if (input.refill.interval === "daily" && input.refill.refillDay != null) {
        throw new InvalidInputError({ kind: "refillDayWithDaily", during: "update" });
      }
      if (input.refill.interval === "monthly" && input.refill.refillDay == null && rules.monthlyWithoutDay === "refuse") {
        throw new InvalidInputError({ kind: "refillDayMissingForMonthly" });
      }
      requireRemainingForRefill(
        { remaining: input.remaining === undefined ? key.remaining : input.remaining, refill: input.refill },
        "update",
      );
    }
    const { keyId: _, ...fields } = input;
    if (Object.values(fields).every((v) => v === undefined)) return;

    const now = services.clock.now();
    const changes = await keyChanges(tx, principal, input, now);

    const rbacChecked = rules.links === "rbacChecked";
    const missingRole = rbacChecked ? undefined : (name: string) => ({ kind: "namedNotFound" as const, what: "role" as const, name });
    if (input.roles !== undefined) await replaceOnKey(tx, auth, roleKind, key, input.roles, now, missingRole, rbacChecked);
    if (input.permissions !== undefined) await replaceOnKey(tx, auth, permissionKind, key, input.permissions, now, undefined, rbacChecked);
    if (input.ratelimit === null) await deleteKeyDefaultRatelimit(tx, key.id);
    if (input.ratelimit) {
      const { limit, duration } = input.ratelimit;
      await setKeyDefaultRatelimits(tx, [{ keyId: key.id, workspaceId: key.workspaceId, limit, duration }], now);
    }
    if (input.ratelimits !== undefined) await replaceKeyRatelimits(tx, key, distinctRatelimits(input.ratelimits), now);
    await updateKeyColumns(tx, key, changes, now);
    record(keyUpdated(input, { id: key.id, apiId: key.apiId }));
  });
}

/**
 * keys.updateKey's entry: key.update, targeting the key and its API, naming the fields set (never their values).
 * Without `key.apiId` the one statement that writes it adds the API as it learns it (updateLiveKeyColumns).
 */
function keyUpdated(input: UpdateKeyCommand, key: { id: string; apiId?: string }): Change {
  const { keyId: _, ...fields } = input;
  const changed = Object.keys(fields).filter((name) => (fields as Record<string, unknown>)[name] !== undefined);
  return {
    event: "key.update",
    targets:
      key.apiId === undefined
        ? [{ type: "key", id: key.id }]
        : [
            { type: "key", id: key.id },
            { type: "api", id: key.apiId },
          ],
    description: `updated ${changed.join(", ")} of key ${key.id}`,
    details: { fields: changed },
  };
}

/**
 * The common update (the key's own columns: no refill settings, identity, roles, permissions or rate limit) in one
 * statement with its audit entry, when the caller may update keys of some API: the permission check becomes part of
 * the statement's condition. True when done; false when this update is not of that kind or updated nothing, and the
 * transaction (with its checks in their order, and their answers) must run.
 */
async function updateColumnsOnly(services: KeyServices, principal: Caller, input: UpdateKeyCommand): Promise<boolean> {
  const { keyId, refill, externalId, roles, permissions, ratelimit, ratelimits, ...columns } = input;
  if (
    refill !== undefined ||
    externalId !== undefined ||
    roles !== undefined ||
    permissions !== undefined ||
    ratelimit !== undefined ||
    ratelimits !== undefined
  ) {
    return false;
  }
  if (Object.values(columns).every((v) => v === undefined)) return false;
  if (!services.changes.preparedStatementsFor(principal)) return false;
  const apiIds = apisPermitted(principal, "update_key");
  if (apiIds !== "any" && apiIds.length === 0) return false;
  const now = services.clock.now();
  const changes = await keyChanges(services.db, principal, input, now);
  return services.changes.statement(principal, [keyUpdated(input, { id: keyId })], (_db, audit) =>
    services.keyWrites.updateLiveKeyColumns(
      { workspaceId: principal.workspaceId, keyId, apiIds },
      changes,
      now,
      principal.writeGuard,
      audit,
    ),
  );
}

/** The APIs whose keys `principal` may act on with `action` (keyPermission's tuple check): "any", or their ids. */
function apisPermitted(principal: Principal, action: string): "any" | string[] {
  if (hasPermission(principal, { or: ["*", `api.*.${action}`] })) return "any";
  const ids: string[] = [];
  const suffix = `.${action}`;
  for (const permission of principal.permissions) {
    if (permission.startsWith("api.") && permission.endsWith(suffix) && permission.length > 4 + suffix.length) {
      ids.push(permission.slice(4, -suffix.length));
    }
  }
  return ids;
}

/** The key's own columns to write; an externalId links the key to that identity, created if needed. */
async function keyChanges(db: Db, principal: Principal, input: UpdateKeyCommand, now: number): Promise<KeyChanges> {
  const changes: KeyChanges = {};
  if (input.name !== undefined) changes.name = input.name;
  if (input.meta !== undefined) changes.meta = input.meta;
  if (input.expires !== undefined) changes.expires = input.expires === null ? null : new Date(input.expires);
  if (input.remaining !== undefined) changes.remaining = input.remaining;
  if (input.refill !== undefined) {
    changes.refill = input.refill && {
      amount: input.refill.amount,
      day: input.refill.interval === "monthly" ? (input.refill.refillDay ?? 1) : null,
    };
  }
  if (input.enabled !== undefined) changes.enabled = input.enabled;
  if (input.environment !== undefined) changes.environment = input.environment;
  const owner = input.externalId;
  if (owner !== undefined) {
    changes.ownerId = owner;
    // The identity a key update creates gets `meta {}`, as one created by createKey does.
    changes.identityId = owner === null ? null : (await upsertIdentities(db, principal.workspaceId, [owner], {}, now)).get(owner)!;
  }
  return changes;
}
