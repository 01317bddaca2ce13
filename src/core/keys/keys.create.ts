import type { Caller } from "../caller.js";
import { type Change, readAfterChange } from "../changes.js";
import { keyPermission } from "../auth/permissions.query.js";
import { hasPermission, requirePermission } from "../principal.js";
import { hashKey } from "../../crypto/hash.js";
import { generateKey, generateKeyV2 } from "../../crypto/keyGen.js";
import { InvalidInputError, NotFoundError, PermissionDeniedError, PreconditionFailedError } from "../../errors.js";
import { newId } from "../../ids.js";
import type { ApiKeySettings, ApiSettingsCache } from "../../storage/apis/apis.repository.js";
import type { KeyRatelimitInput } from "../../storage/keys/keys.ratelimit.repository.js";
import { insertNewKey, linksNothing, type NewKey } from "../../storage/keys/keys.writes.repository.js";
import { findPermissionsByIdOrSlug, findRoleIdsByName, missingNames } from "../../storage/rbac/permissions.repository.js";
import type { KeySettings } from "../../storage/import/import.rows.js";
import type { KeyServices } from "./keys.services.js";
import { requireNamesWithinBounds } from "../rbac/rbac.bounds.js";
import { requireRemainingForRefill } from "./keys.credits.js";

/** A new key, as any protocol asks for it (the adapter resolves its own aliases and quirks first). */
export type CreateKeyCommand = KeySettings & {
  apiId: string;
  /** Random bytes; default: the API's default, else 16. (`prefix` defaults to the API's default prefix, else none.) */
  byteLength?: number | undefined;
  /** The customer's id: links the workspace's identity with it, created if needed. */
  externalId?: string | undefined;
  /** The key's own (`default`) rate limit. */
  ratelimit?: { limit: number; duration: number } | undefined;
  /** Named rate limits (v2's `ratelimits[]`); of a name given twice, the last wins. */
  ratelimits?: KeyRatelimitInput[] | undefined;
  /** Also store the key encrypted (needs the encrypt_key permission and an API that stores encrypted keys). */
  recoverable?: boolean | undefined;
};

export type CreatedKey = { keyId: string; key: string };

/**
 * How a key is generated and its `start` shown: "versioned" (`[0x01, N, bytes]`, `start` as v1 shows it) or "plain"
 * (the random bytes alone).
 */
export type KeyFormat = "versioned" | "plain";

/** Where v1's and v2's createKey differ, each adapter says which rules it follows (default: v1's). */
export type CreateKeyRules = {
  keyFormat: KeyFormat;
  /** v1 refuses `remaining: 0` (and below); v2 accepts 0, an exhausted key. */
  zeroRemaining: "refuse" | "allow";
  /**
   * Missing permissions: created only when the caller may create permissions (v1), or always (v2: without the
   * rbac.*.create_permission check).
   */
  missingPermissions: "createWhenAllowed" | "create";
  /** Missing roles: created only when the caller may create roles (v1), or refused as not found (v2). */
  missingRoles: "createWhenAllowed" | "refuse";
  /** A monthly refill without its day: on the 1st (v1), or refused (v2). */
  monthlyWithoutDay: "firstOfMonth" | "refuse";
  /** A daily refill with a day: refused (v1), or the day ignored (v2). */
  dailyWithDay: "refuse" | "ignore";
};

export const V1_CREATE_KEY_RULES: CreateKeyRules = {
  keyFormat: "versioned",
  zeroRemaining: "refuse",
  missingPermissions: "createWhenAllowed",
  missingRoles: "createWhenAllowed",
  monthlyWithoutDay: "firstOfMonth",
  dailyWithDay: "refuse",
};

export const V2_CREATE_KEY_RULES: CreateKeyRules = {
  keyFormat: "plain",
  zeroRemaining: "allow",
  missingPermissions: "create",
  missingRoles: "refuse",
  monthlyWithoutDay: "refuse",
  dailyWithDay: "ignore",
};

/** A new key in `format`, and its `start` (`requestedPrefix`: the prefix the request named, v1's `start` rule). */
export function newKeyMaterial(
  format: KeyFormat,
  prefix: string | undefined,
  requestedPrefix: string | undefined,
  byteLength: number,
): { key: string; start: string } {
  if (format === "plain") return generateKeyV2(prefix, byteLength);
  const key = generateKey(prefix, byteLength);
  // As v1: `prefix_` and four characters for a requested prefix, else the first five characters of the key, even
  // when the key carries the API's default prefix.
  return { key, start: key.slice(0, (requestedPrefix?.length ?? 0) + 5) };
}

/** Rate limits named once each: of a name given twice, the last wins (v2's createKey). */
export function distinctRatelimits(limits: readonly KeyRatelimitInput[]): KeyRatelimitInput[] {
  return [...new Map(limits.map((l) => [l.name, l])).values()];
}

/**
 * Creates a key and everything it links to (roles, permissions, identity, rate limit, encrypted copy) in one
 * transaction. The order of the checks is the order of the answers clients see: create_key, the API, recoverable,
 * remaining and refill, missing permissions and roles (created when the caller may), encrypt_key.
 */
export async function createKey(
  services: CreateKeyServices,
  principal: Caller,
  input: CreateKeyCommand,
  rules: CreateKeyRules,
): Promise<CreatedKey> {
  requireNamesWithinBounds([input]);
  requirePermission(principal, keyPermission(principal.access, principal.workspaceId, input.apiId, null, "create_key"));
  const { workspaceId } = principal;
  // From memory when this process has seen the API (a statement fewer per call). The write inserts nothing unless the
  // API is live and its key defaults are still the remembered ones as of a snapshot taken after the request arrived
  // (insertKeyInLiveApi for a key that is one row, insertNewKey's lock for one that links more).
  const remembered = services.apiSettings.remembered(workspaceId, input.apiId);
  const api = remembered ?? (await services.apiSettings.find(workspaceId, input.apiId));
  if (!api) throw new NotFoundError("api", input.apiId);
  try {
    return await createKeyInApi(services, principal, input, api, rules);
  } catch (err) {
    if (!remembered) throw err;
    // The API was not read: a deleted one is answered 404 before any other refusal, as when it is read first (the
    // statement that inserts the key refuses a deleted API itself). One whose key defaults changed since (another
    // replica's apis.updateApi) refused the key: it is made anew with the settings read now (`find` refreshes them),
    // in the request's transaction when an idempotency scope has begun one (the embedded store has one connection).
    const current = await readAfterChange(services.db, principal, (db) => services.apiSettings.find(workspaceId, input.apiId, db));
    if (!current) throw new NotFoundError("api", input.apiId);
    if (err instanceof NotFoundError && !sameKeyDefaults(current, api)) {
      return createKeyInApi(services, principal, input, current, rules);
    }
    throw err;
  }
}

const sameKeyDefaults = (a: ApiKeySettings, b: ApiKeySettings) => a.defaultPrefix === b.defaultPrefix && a.defaultBytes === b.defaultBytes;

/** What createKey uses of the services. */
export type CreateKeyServices = KeyServices & { readonly apiSettings: ApiSettingsCache };

async function createKeyInApi(
  services: CreateKeyServices,
  principal: Caller,
  input: CreateKeyCommand,
  api: ApiKeySettings,
  rules: CreateKeyRules,
): Promise<CreatedKey> {
  const { db, keyring } = services;
  const { workspaceId } = principal;
  if (input.recoverable && !api.storeEncryptedKeys) {
    throw new PreconditionFailedError("api", { kind: "recoverableNotSupported", apiId: input.apiId });
  }
  // v1 refuses 0 only; keyhaven refuses negative values too (a key cannot have fewer than no uses left).
  if (input.remaining !== undefined && (input.remaining < 0 || (input.remaining === 0 && rules.zeroRemaining === "refuse"))) {
    throw new InvalidInputError({ kind: "remainingNotPositive" });
  }
  requireRemainingForRefill(input, "create");
  if (input.refill?.interval === "daily" && input.refill.refillDay !== undefined && rules.dailyWithDay === "refuse") {
    throw new InvalidInputError({ kind: "refillDayWithDaily", during: "create" });
  }
  if (input.refill?.interval === "monthly" && input.refill.refillDay === undefined && rules.monthlyWithoutDay === "refuse") {
    throw new InvalidInputError({ kind: "refillDayMissingForMonthly" });
  }

  const permissionSlugs = [...new Set(input.permissions ?? [])];
  const existingPermissions = new Set((await findPermissionsByIdOrSlug(db, workspaceId, [], permissionSlugs)).map((p) => p.slug));
  const missingPermissions = missingNames(permissionSlugs, existingPermissions);
  const createMissingPermissions =
    rules.missingPermissions === "create" || hasPermission(principal, { or: ["*", "rbac.*.create_permission"] });
  if (missingPermissions.length > 0 && !createMissingPermissions) {
    throw new PermissionDeniedError('"*" or "rbac.*.create_permission"', [...principal.permissions], {
      refusal: { kind: "createMissingPermissions", names: missingPermissions },
    });
  }
  const roleNames = [...new Set(input.roles ?? [])];
  const missingRoles = missingNames(roleNames, await findRoleIdsByName(db, workspaceId, roleNames));
  if (missingRoles.length > 0 && rules.missingRoles === "refuse") {
    throw new NotFoundError("role", missingRoles[0]!, { kind: "namedNotFound", what: "role", name: missingRoles[0]! });
  }
  const createMissingRoles = rules.missingRoles === "createWhenAllowed" && hasPermission(principal, { or: ["*", "rbac.*.create_role"] });
  if (missingRoles.length > 0 && !createMissingRoles) {
    throw new PermissionDeniedError('"*" or "rbac.*.create_role"', [...principal.permissions], {
      refusal: { kind: "createMissingRoles", names: missingRoles },
    });
  }
  if (input.recoverable && !hasPermission(principal, keyPermission(principal.access, workspaceId, input.apiId, "*", "encrypt_key"))) {
    throw new PermissionDeniedError(`"*", "api.*.encrypt_key" or "api.${input.apiId}.encrypt_key"`, [...principal.permissions], {
      refusal: { kind: "encryptNotAllowed", apiId: input.apiId },
    });
  }
  const dataKey = input.recoverable ? await keyring.dataKeyFor(db, workspaceId) : undefined;

  const now = services.clock.now();
  const keyId = newId("key");
  const prefix = input.prefix ?? api.defaultPrefix ?? undefined;
  const { key, start } = newKeyMaterial(rules.keyFormat, prefix, input.prefix, input.byteLength ?? api.defaultBytes ?? 16);
  const newKey: NewKey = {
    row: {
      id: keyId,
      workspaceId,
      apiId: api.id,
      hash: hashKey(key),
      start,
      prefix: prefix || null,
      name: input.name ?? null,
      ownerId: input.externalId ?? null,
      meta: input.meta ?? null,
      expires: input.expires !== undefined ? new Date(input.expires) : null,
      remaining: input.remaining ?? null,
      refillDay: input.refill?.interval === "monthly" ? (input.refill.refillDay ?? 1) : null,
      refillAmount: input.refill?.amount ?? null,
      lastRefillAt: input.refill ? new Date(now) : null,
      enabled: input.enabled ?? true,
      environment: input.environment ?? null,
      createdAtM: now,
    },
    externalId: input.externalId,
    roleNames,
    createMissingRoles,
    permissionSlugs,
    createMissingPermissions,
    ratelimit: input.ratelimit,
    ratelimits: input.ratelimits && distinctRatelimits(input.ratelimits),
    encrypted: dataKey && { encrypted: keyring.encrypt(dataKey, keyId, key), dataKey },
    guard: principal.writeGuard,
    apiDefaults: { defaultPrefix: api.defaultPrefix, defaultBytes: api.defaultBytes },
  };
  const created = (links: { roles: { id: string; name: string }[]; permissions: { id: string; name: string }[] }): Change => ({
    event: "key.create",
    targets: [
      { type: "key", id: keyId },
      { type: "api", id: api.id },
      ...links.roles.map((r) => ({ type: "role", id: r.id, name: r.name })),
      ...links.permissions.map((p) => ({ type: "permission", id: p.id, name: p.name })),
    ],
    description: `created key ${keyId} in ${api.id}`,
    details: { fields: Object.keys(input).filter((name) => (input as Record<string, unknown>)[name] !== undefined) },
  });
  if (linksNothing(newKey) && services.changes.preparedStatementsFor(principal)) {
    // Most keys are just a row: one statement that writes it and its audit entry, instead of BEGIN, the lock, the
    // INSERTs and COMMIT (issue 13 §3: each round trip costs the event loop a write and a read). The API row is
    // locked FOR SHARE by the statement itself.
    const inserted = await services.changes.statement(principal, [created({ roles: [], permissions: [] })], (_db, audit) =>
      services.keyWrites.insertKeyInLiveApi(Object.assign({}, newKey.row, { identityId: null }), newKey.guard, audit, api),
    );
    if (!inserted) throw new NotFoundError("api", api.id);
    return { keyId, key };
  }
  await services.changes.change(principal, async (tx, record) => {
    record(created(await insertNewKey(tx, newKey)));
  });
  // The keyring remembers a new data key once the row that wraps it is stored (in an idempotency scope, once the
  // request's transaction commits; never when it rolls back).
  if (dataKey?.newRow) services.changes.afterCommit(principal, () => keyring.remember(dataKey));
  return { keyId, key };
}

/**
 * The key settings of an API a caller is about to create a key in (a form's defaults: prefix, length, whether keys
 * may be recoverable): refused as createKey refuses, without create_key on the API, or for an API the workspace lacks.
 */
export async function apiForNewKey(
  services: Pick<CreateKeyServices, "apiSettings">,
  principal: Caller,
  apiId: string,
): Promise<ApiKeySettings> {
  requirePermission(principal, keyPermission(principal.access, principal.workspaceId, apiId, null, "create_key"));
  const api = await services.apiSettings.find(principal.workspaceId, apiId);
  if (!api) throw new NotFoundError("api", apiId);
  return api;
}
