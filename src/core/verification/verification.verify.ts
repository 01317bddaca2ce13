import { type PermissionQuery, PermissionQueryError, parsePermissionQuery, satisfies } from "../auth/permissions.query.js";
import { hashKey } from "../../crypto/hash.js";
import { InvalidInputError, WorkspaceDisabledError } from "../../errors.js";
import { ipAllowed } from "../apis/apis.ipWhitelist.js";
import type { KeyForVerification as FoundKey, StoredRatelimit } from "../../storage/keys/keys.repository.js";
import { checkLimits, type LimitCheck, type LimitOutcome } from "../../storage/ratelimits/ratelimiter.js";
import type { Clock } from "../../clock.js";
import type { Config } from "../../config.js";
import type { VerificationAnalytics } from "../../storage/analytics/analytics.recorder.js";
import type { RemainingSpender } from "../../storage/keys/remaining.spender.js";
import type { Lookup, VerificationCache } from "../../storage/keys/verification.cache.js";
import type { Db } from "../../storage/client.js";
import { completeKeyMigration } from "../import/import.migrate.js";
import type { RateLimiter } from "../../storage/ratelimits/ratelimiter.js";

/** The outcomes of a verification, in the core's words (v1 answers them as its `code` unchanged). */
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

/** What verification uses of the process's services (built in services.ts): it stores and caches nothing itself. */
export type VerificationServices = {
  /** Only for a key verified with `migrationId` that its own hash does not find (completeKeyMigration). */
  readonly db: Db;
  readonly verificationCache: VerificationCache;
  readonly remainingSpender: RemainingSpender;
  readonly ratelimiter: RateLimiter;
  readonly config: Pick<Config, "ratelimitOnRedisFailure">;
  readonly clock: Clock;
  /** Counts each outcome for the process's metrics (http/metrics.ts AppMetrics). */
  readonly metrics: { recordVerification(code: VerificationCode): void };
  readonly analytics: VerificationAnalytics;
};

export type VerifyRequest = {
  key: string;
  apiId?: string | undefined;
  /**
   * The workspace of the principal (root key) the request carried, when it carried a valid one, resolved lazily at
   * the epoch the key was confirmed at: a key of any other workspace is NOT_FOUND, as Unkey v2 answers.
   */
  scope?: ((epoch: bigint | undefined) => Promise<{ workspaceId: string } | undefined>) | undefined;
  /**
   * Refuse (InvalidInputError) a verification with neither `apiId` nor a scope. v1: KEYHAVEN_VERIFY_REQUIRE_SCOPE;
   * a v2 adapter, whose verifyKey always needs a root key, would pass true.
   */
  requireScope?: boolean | undefined;
  /** The caller's address, for the API's IP allow-list (the adapter decides which header or peer it is). */
  callerIp?: string | undefined;
  /** A permission query, unparsed (InvalidInputError when it is not one). */
  permissions?: unknown;
  /** Uses this verification spends from a key with limited uses. */
  remainingCost: number;
  /** Limits to apply besides the auto-applied ones: configured by name, or ad hoc with limit and duration. */
  ratelimits?: { name: string; cost?: number | undefined; limit?: number | undefined; duration?: number | undefined }[] | undefined;
  /** Labels analytics counts this verification under. */
  tags?: string[] | undefined;
  /**
   * v2's `migrationId`: a key its own hash does not find may be one migrated by another algorithm's hash, pending in
   * this migration of the scope's workspace; it is rehashed on the spot (completeKeyMigration), then verified.
   */
  migrationId?: string | undefined;
};

/** The key's facts a verification answers with, once the key is found. */
export type KeyFacts = {
  keyId: string;
  apiId: string;
  name?: string;
  ownerId?: string;
  meta?: Record<string, unknown>;
  expires?: number;
  enabled: boolean;
  permissions: string[];
  roles: string[];
  environment?: string;
  identity?: { id: string; externalId: string; meta: Record<string, unknown> };
};

/** The rate limit reported: from the first refusing limit, else the first; `limit` from the one named `default`. */
export type RatelimitFacts = { limit?: number; remaining: number; reset: number };

export type VerificationResult = {
  valid: boolean;
  code: VerificationCode;
  /** Absent exactly when the key was not found. */
  key?: KeyFacts;
  /**
   * How the rate limits went: `applied` with what they report, `unavailable` when the limiter's store could not
   * answer and KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open let the verification through unlimited; absent when no
   * limit applied (or the verification was refused before them).
   */
  ratelimit?: { state: "applied"; report: RatelimitFacts } | { state: "unavailable" };
  /** RATE_LIMITED: the first refusing limit, in the order the limits were built. */
  triggeredRatelimit?: string;
  /** Uses left after this verification, for a key with limited uses that got as far as spending. */
  remaining?: number;
};

/**
 * Verifies a key, checked in v1's order (contract 4.2): NOT_FOUND (also a key outside the request's scope), disabled
 * workspace (WorkspaceDisabledError), DISABLED, FORBIDDEN (other API), EXPIRED, FORBIDDEN (caller not on the API's IP
 * allow-list), INSUFFICIENT_PERMISSIONS, RATE_LIMITED, USAGE_EXCEEDED, VALID. The key comes from the verification
 * cache, which never answers with data older than the verification (a change to a key is seen by the very next
 * verification on every replica); remaining uses are always spent in the database. Every outcome of a found key is
 * counted in analytics (with `tags`), and every outcome in the process's metrics.
 */
export async function verifyKey(services: VerificationServices, req: VerifyRequest): Promise<VerificationResult> {
  const result = await decide(services, req);
  services.metrics.recordVerification(result.code);
  // Synchronous and in memory only (written in the background): verifications of existing keys, as v1 counts.
  if (result.key !== undefined) {
    services.analytics.record(
      { keyId: result.key.keyId, workspaceId: result.workspaceId!, apiId: result.key.apiId, identityId: result.key.identity?.id },
      result.code,
      req.tags,
      services.clock.now(),
    );
  }
  const { workspaceId: _, ...answer } = result;
  return answer;
}

async function decide(services: VerificationServices, req: VerifyRequest): Promise<VerificationResult & { workspaceId?: string }> {
  const query = permissionQueryOf(req.permissions);
  let { key, epoch } = await services.verificationCache.lookupWithEpoch(hashKey(req.key));
  // Only a miss with a migration pays for it: the normal path is unchanged.
  if (key === undefined && req.migrationId !== undefined) ({ key, epoch } = await lookupMigrated(services, req, req.migrationId, epoch));
  // At the epoch the key was confirmed at: a root key in memory then costs no query. An unknown key is NOT_FOUND
  // whatever the scope, so it is not resolved then (unless it decides between NOT_FOUND and the refusal below).
  const scopeMatters = key !== undefined || (req.requireScope === true && req.apiId === undefined);
  const scope = scopeMatters ? await req.scope?.(epoch) : undefined;
  if (req.requireScope && req.apiId === undefined && scope === undefined) {
    throw new InvalidInputError({ kind: "verificationScopeRequired" });
  }
  if (!key || (scope !== undefined && key.workspaceId !== scope.workspaceId)) return { valid: false, code: "NOT_FOUND" };
  if (!key.workspaceEnabled) throw new WorkspaceDisabledError();

  const found = { key: factsOf(key), workspaceId: key.workspaceId };
  const refuse = (code: VerificationCode, extra: Partial<VerificationResult> = {}) => ({ ...found, ...extra, valid: false, code });

  if (!key.enabled) return refuse("DISABLED");
  if (req.apiId !== undefined && req.apiId !== key.apiId) return refuse("FORBIDDEN");
  if (key.expires !== null && key.expires.getTime() < services.clock.now()) return refuse("EXPIRED");
  if (!ipAllowed(key.apiIpWhitelist, req.callerIp)) return refuse("FORBIDDEN");
  if (query !== undefined && !satisfies(query, new Set(key.permissions))) return refuse("INSUFFICIENT_PERMISSIONS");

  const checks = limitChecks(key, req.ratelimits ?? []);
  let ratelimit: VerificationResult["ratelimit"];
  if (checks.length > 0) {
    const outcomes = await checkLimits(services, checks);
    if (outcomes === undefined) {
      ratelimit = { state: "unavailable" };
    } else {
      ratelimit = { state: "applied", report: reportRatelimit(outcomes) };
      const refusing = outcomes.find((o) => !o.passed);
      if (refusing) return refuse("RATE_LIMITED", { ratelimit, triggeredRatelimit: refusing.name });
    }
  }

  if (key.remaining !== null) {
    const left = await services.remainingSpender.spend(key.id, req.remainingCost);
    if (left === undefined) return refuse("USAGE_EXCEEDED", { remaining: 0, ratelimit });
    return { ...found, ratelimit, valid: true, code: "VALID", remaining: left };
  }
  return { ...found, ratelimit, valid: true, code: "VALID" };
}

/** A key not found by its own hash, after completing its migration if it is pending in `migrationId` (§6.3). */
async function lookupMigrated(
  services: VerificationServices,
  req: VerifyRequest,
  migrationId: string,
  epoch: bigint | undefined,
): Promise<Lookup> {
  // The migration is the caller's workspace's: without a scope there is none to look in.
  const scope = await req.scope?.(epoch);
  if (scope === undefined) return { key: undefined, epoch };
  const request = { key: req.key, migrationId, workspaceId: scope.workspaceId };
  if (!(await completeKeyMigration(services.db, request, services.clock.now()))) return { key: undefined, epoch };
  return services.verificationCache.lookupWithEpoch(hashKey(req.key));
}

function permissionQueryOf(raw: unknown): PermissionQuery | undefined {
  if (raw === undefined) return undefined;
  try {
    return parsePermissionQuery(raw);
  } catch (err) {
    if (err instanceof PermissionQueryError) throw new InvalidInputError({ kind: "invalidPermissionQuery", problem: err.message });
    throw err;
  }
}

function factsOf(key: FoundKey): KeyFacts {
  const ownerId = key.identityExternalId ?? key.ownerId;
  return {
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
      throw new InvalidInputError({
        kind: "ratelimitNotConfigured",
        name: r.name,
        keyId: key.id,
        ...(key.identityId && { identity: { id: key.identityId, externalId: key.identityExternalId } }),
      });
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
function reportRatelimit(outcomes: LimitOutcome[]): RatelimitFacts {
  const shown = outcomes.find((o) => !o.passed) ?? outcomes[0]!;
  const named = outcomes.find((o) => o.name === "default") ?? shown;
  return { limit: named.limit, remaining: shown.remaining, reset: shown.reset };
}
