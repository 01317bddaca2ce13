import { type PermissionQuery, parsePermissionQuery, PermissionQueryError, satisfies } from "../../auth/permissions.js";
import { hashKey } from "../../crypto/hash.js";
import type { Deps } from "../../deps.js";
import { ApiError } from "../../errors.js";
import { ipAllowed } from "../apis/ip-whitelist.js";
import { checkLimits, type LimitCheck, type LimitOutcome } from "../../ratelimit/ratelimiter.js";
import type { KeyForVerification as FoundKey, StoredRatelimit } from "./keys.repository.js";

export const verificationCodes = [
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
export type VerificationCode = (typeof verificationCodes)[number];

export type VerifyRequest = {
  key: string;
  apiId?: string | undefined;
  /**
   * The workspace of the root key the request carried, when it carried a valid one (resolved alongside the key's
   * lookup): a key of any other workspace is NOT_FOUND, as Unkey v2 answers.
   */
  scope?: (epoch: bigint | undefined) => Promise<{ workspaceId: string } | undefined>;
  /** Refuse (400) a verification with neither `apiId` nor a valid root key (KEYHAVEN_VERIFY_REQUIRE_SCOPE). */
  requireScope?: boolean;
  /**
   * The caller's address, for the API's IP allow-list: the HTTP route takes it from True-Client-IP, else
   * CF-Connecting-IP, else the address the server sees (behind KEYHAVEN_TRUST_PROXY, the forwarded one).
   */
  callerIp?: string | undefined;
  permissions?: unknown;
  remainingCost: number;
  ratelimits?: { name: string; cost?: number | undefined; limit?: number | undefined; duration?: number | undefined }[] | undefined;
};

export type Verification = {
  valid: boolean;
  code: VerificationCode;
  keyId?: string;
  /** The key's API: present whenever keyId is (a keyhaven addition, which v1 clients ignore). */
  apiId?: string;
  name?: string;
  ownerId?: string;
  meta?: Record<string, unknown>;
  expires?: number;
  remaining?: number;
  ratelimit?: { limit?: number; remaining: number; reset: number };
  enabled?: boolean;
  permissions?: string[];
  roles?: string[];
  environment?: string;
  identity?: { id: string; externalId: string; meta: Record<string, unknown> };
  /** keyhaven extension: Redis could not answer, so this verification was not rate limited (failing open). */
  ratelimitSkipped?: true;
};

/** A verification with what analytics records about the key it found, and the limit that refused it (not part of the answer). */
export type VerificationOutcome = Verification & {
  subject?: { workspaceId: string; apiId: string };
  /** RATE_LIMITED by a limit: its name, the first refusing one in the order the limits were built (v1's `Unkey-Ratelimit-Triggered`). */
  triggeredRatelimit?: string;
};

/**
 * keys.verifyKey, checked in v1's order (contract 4.2): NOT_FOUND (also a key outside the request's scope), disabled workspace (403 envelope), DISABLED,
 * FORBIDDEN (other API), EXPIRED, FORBIDDEN (caller not on the API's IP allow-list), INSUFFICIENT_PERMISSIONS, RATE_LIMITED, USAGE_EXCEEDED, VALID. The key comes
 * from the verification cache, which never answers with data older than the verification (a change to a key is
 * seen by the very next verification on every replica); remaining uses are always spent in the database.
 */
export async function verifyKey(deps: Deps, req: VerifyRequest): Promise<VerificationOutcome> {
  const query = permissionQueryOf(req.permissions);
  const { key, epoch } = await deps.verificationCache.lookupWithEpoch(hashKey(req.key));
  // At the epoch the key was confirmed at: a root key in memory then costs no query. An unknown key is NOT_FOUND
  // whatever the scope, so it is not resolved then (unless it decides between NOT_FOUND and the 400 below).
  const scopeMatters = key !== undefined || (req.requireScope === true && req.apiId === undefined);
  const scope = scopeMatters ? await req.scope?.(epoch) : undefined;
  if (req.requireScope && req.apiId === undefined && scope === undefined) {
    throw new ApiError(
      "BAD_REQUEST",
      "apiId is required: this server verifies a key only within an API (apiId) or the workspace of a valid root key (Authorization: Bearer <root key>)",
    );
  }
  if (!key || (scope !== undefined && key.workspaceId !== scope.workspaceId)) return { valid: false, code: "NOT_FOUND" };
  if (!key.workspaceEnabled) throw new ApiError("FORBIDDEN", "workspace is disabled");

  const body: VerificationOutcome = { ...describeKey(key), subject: { workspaceId: key.workspaceId, apiId: key.apiId } };
  const refuse = (code: VerificationCode, extra: Partial<VerificationOutcome> = {}): VerificationOutcome => ({
    ...body,
    ...extra,
    valid: false,
    code,
  });

  if (!key.enabled) return refuse("DISABLED");
  if (req.apiId !== undefined && req.apiId !== key.apiId) return refuse("FORBIDDEN");
  if (key.expires !== null && key.expires.getTime() < deps.clock.now()) return refuse("EXPIRED");
  if (!ipAllowed(key.apiIpWhitelist, req.callerIp)) return refuse("FORBIDDEN");
  if (query !== undefined && !satisfies(query, new Set(key.permissions))) return refuse("INSUFFICIENT_PERMISSIONS");

  const checks = limitChecks(key, req.ratelimits ?? []);
  let withLimit: { ratelimit: NonNullable<Verification["ratelimit"]> } | { ratelimitSkipped: true } | Record<string, never> = {};
  if (checks.length > 0) {
    const outcomes = await checkLimits(deps, checks);
    if (outcomes === undefined) {
      withLimit = { ratelimitSkipped: true };
    } else {
      const ratelimit = reportRatelimit(outcomes)!;
      const refusing = outcomes.find((o) => !o.passed);
      if (refusing) return refuse("RATE_LIMITED", { ratelimit, triggeredRatelimit: refusing.name });
      withLimit = { ratelimit };
    }
  }

  if (key.remaining !== null) {
    const left = await deps.remainingSpender.spend(key.id, req.remainingCost);
    if (left === undefined) return refuse("USAGE_EXCEEDED", { remaining: 0, ...withLimit });
    return { ...body, ...withLimit, valid: true, code: "VALID", remaining: left };
  }
  return { ...body, ...withLimit, valid: true, code: "VALID" };
}

function permissionQueryOf(raw: unknown): PermissionQuery | undefined {
  if (raw === undefined) return undefined;
  try {
    return parsePermissionQuery(raw);
  } catch (err) {
    if (err instanceof PermissionQueryError) throw new ApiError("BAD_REQUEST", err.message);
    throw err;
  }
}

function describeKey(key: FoundKey): Verification {
  const ownerId = key.identityExternalId ?? key.ownerId;
  return {
    valid: false,
    code: "VALID",
    keyId: key.id,
    apiId: key.apiId,
    ...(key.name !== null && { name: key.name }),
    ...(ownerId !== null && { ownerId }),
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
}

/**
 * The limits this verification is charged against: the identity's limits overlaid by the key's (the key's wins
 * on a name), every auto-applied one at cost 1, then each requested one, ad hoc (with limit and duration) or by
 * name. Counters of identity limits are keyed by the identity, so all its keys share them; every counter belongs
 * to the key's workspace.
 */
function limitChecks(key: FoundKey, requested: NonNullable<VerifyRequest["ratelimits"]>): LimitCheck[] {
  const configured = new Map<string, StoredRatelimit>();
  for (const rl of key.ratelimits) if (rl.owner === "identity") configured.set(rl.name, rl);
  for (const rl of key.ratelimits) if (rl.owner === "key") configured.set(rl.name, rl);
  const workspaceId = key.workspaceId;
  const identifierOf = (owner: "key" | "identity") => (owner === "identity" && key.identityId ? key.identityId : key.id);

  const checks = new Map<string, LimitCheck>();
  for (const rl of configured.values()) {
    if (rl.autoApply) {
      checks.set(rl.name, {
        workspaceId,
        name: rl.name,
        identifier: identifierOf(rl.owner),
        limit: rl.limit,
        duration: Number(rl.duration),
        cost: 1,
      });
    }
  }
  for (const r of requested) {
    const cost = r.cost ?? 1;
    if (r.limit !== undefined && r.duration !== undefined) {
      checks.set(r.name, { workspaceId, name: r.name, identifier: key.identityId ?? key.id, limit: r.limit, duration: r.duration, cost });
      continue;
    }
    const rl = configured.get(r.name);
    if (!rl) {
      throw new ApiError(
        "BAD_REQUEST",
        key.identityId
          ? `ratelimit "${r.name}" was requested but does not exist for key "${key.id}" nor identity { id: ${key.identityId}, externalId: ${key.identityExternalId}}`
          : `ratelimit "${r.name}" was requested but does not exist for key "${key.id}" and there is no identity connected`,
      );
    }
    checks.set(r.name, {
      workspaceId,
      name: rl.name,
      identifier: identifierOf(rl.owner),
      limit: rl.limit,
      duration: Number(rl.duration),
      cost,
    });
  }
  return [...checks.values()];
}

/** From the first failing limit, or the first limit when all pass; `limit` from the one named `default` if any. */
function reportRatelimit(outcomes: LimitOutcome[]): Verification["ratelimit"] {
  const shown = outcomes.find((o) => !o.passed) ?? outcomes[0]!;
  const named = outcomes.find((o) => o.name === "default") ?? shown;
  return { limit: named.limit, remaining: shown.remaining, reset: shown.reset };
}
