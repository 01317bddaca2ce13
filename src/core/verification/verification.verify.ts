import type { RatelimitAlerts } from "../webhooks/webhooks.alerts.js";
import { keyPermission, type PermissionQuery, PermissionQueryError, satisfies } from "../auth/permissions.query.js";
import { rootKeySatisfies } from "../auth/permissions.urn.js";
import { hashKey } from "../../crypto/hash.js";
import { InvalidInputError, WorkspaceDisabledError } from "../../errors.js";
import { ipAllowed } from "../apis/apis.ipWhitelist.js";
import type { KeyForVerification as FoundKey, StoredRatelimit } from "../../storage/keys/keys.repository.js";
import { checkLimits, type LimitCheck, type LimitOutcome, type SkipCounter } from "../../storage/ratelimits/ratelimiter.js";
import type { Clock } from "../../clock.js";
import type { Config } from "../../config.js";
import type { VerificationAnalytics } from "../../storage/analytics/analytics.recorder.js";
import type { LastUsed } from "../../storage/lastUsed/lastUsed.recorder.js";
import type { VerificationLog } from "../../storage/verificationLog/verificationLog.recorder.js";
import type { RemainingSpender, SpendAnswer } from "../../storage/keys/remaining.spender.js";
import type { Lookup, VerificationCache } from "../../storage/keys/verification.cache.js";
import type { Db } from "../../storage/client.js";
import { completeKeyMigration } from "../import/import.migrate.js";
import type { RateLimiter } from "../../storage/ratelimits/ratelimiter.js";
import type { Surface } from "../caller.js";
import type { UnkeyFallback } from "./verification.fallback.js";

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

/**
 * Rate limits one verification may name. v1 and v2 state no bound; clients name a handful (v2 keys and identities
 * hold at most 50 configured limits each). With the 30-day cap on ad-hoc windows, this bounds the work and the new
 * counters one request can cause. Both adapters' schemas enforce it.
 */
export const MAX_RATELIMITS_PER_VERIFICATION = 20;

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
  readonly metrics: SkipCounter & { recordVerification(code: VerificationCode): void };
  readonly analytics: VerificationAnalytics;
  /** The raw verification log (issue 38 §2): a row per verification the analytics count, written in the background. */
  readonly verificationLog: VerificationLog;
  /** Each found key's last verification (the key's `lastUsedAt`), kept whether or not analytics count. */
  readonly lastUsed: LastUsed;
  /** KEYHAVEN_UNKEY_FALLBACK_URL: a miss may ask hosted Unkey and adopt a pending key (verification.fallback.ts). */
  readonly unkeyFallback?: UnkeyFallback | undefined;
  /** key.ratelimited webhooks: told of each RATE_LIMITED verification (costs nothing once its window is recorded). */
  readonly ratelimitAlerts?: Pick<RatelimitAlerts, "refused"> | undefined;
};

/**
 * How a surface's keys.verifyKey differs (one verification, two wire contracts): each adapter passes its own
 * constant (V1_VERIFY_RULES in src/wire/v1, V2_VERIFY_RULES in src/wire/v2), read on every request, never built per
 * request.
 */
export type VerifyRules = {
  /**
   * Parses the request's `permissions` in the surface's query form (v1's JSON tree, v2's text), throwing
   * PermissionQueryError with the words the client is told; the verification refuses it as InvalidInputError.
   */
  readonly parsePermissions: (raw: unknown) => PermissionQuery;
  /**
   * When `permissions` is parsed: "beforeLookup" (a malformed query is refused whatever the key), or "keyInScope"
   * (only once the key is found and the caller may verify it, so that a malformed query tells nothing of a key the
   * caller may not see: it is NOT_FOUND first).
   */
  readonly parsePermissionsWhen: "beforeLookup" | "keyInScope";
  /**
   * Whether the scope's root key must hold verify_key for the key's API (`api.*.verify_key`,
   * `api.<apiId>.verify_key`, `*`, or the key's URN, contract §2 row 11), else NOT_FOUND so that a key's existence
   * does not leak. Without a scope the key is then NOT_FOUND.
   */
  readonly scopeMustMayVerify: boolean;
  /** A key of a disabled workspace: refused (WorkspaceDisabledError), or answered code FORBIDDEN. */
  readonly disabledWorkspace: "refuse" | "forbidden";
  /**
   * Whether answers report a limited key's uses as `credits` on every outcome (after the spend when VALID, the uses
   * found insufficient when USAGE_EXCEEDED, else as stored) and the identity's own rate limits in the key's facts.
   */
  readonly creditsAndIdentityLimits: boolean;
};

export type VerifyRequest = {
  key: string;
  apiId?: string | undefined;
  /**
   * The workspace of the principal (root key) the request carried, when it carried a valid one, resolved lazily at
   * the epoch the key was confirmed at: a key of any other workspace is NOT_FOUND, as Unkey v2 answers.
   */
  scope?: ((epoch: bigint | undefined) => Promise<{ workspaceId: string; permissions?: ReadonlySet<string> } | undefined>) | undefined;
  /**
   * Refuse (InvalidInputError) a verification with neither `apiId` nor a scope. v1: KEYHAVEN_VERIFY_REQUIRE_SCOPE;
   * a v2 adapter, whose verifyKey always needs a root key, would pass true. With it, a key of another API than
   * `apiId` is out of scope: FORBIDDEN before any other state of the key, and the answer says nothing else about it.
   */
  requireScope?: boolean | undefined;
  /** The caller's address, for the API's IP allow-list (the adapter decides which header or peer it is). */
  callerIp?: string | undefined;
  /** A permission query, unparsed, in the surface's form (VerifyRules.parsePermissions; InvalidInputError when it is not one). */
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
  /** The surface and request id an adoption by the Unkey fallback records (with `callerIp` as the client's address). */
  surface: Surface;
  requestId?: string | undefined;
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
  identity?: {
    id: string;
    externalId: string;
    meta: Record<string, unknown>;
    /** v2: the identity's rate limits a limit of the key by the same name does not shadow. */
    ratelimits?: RatelimitSetting[];
  };
};

/** A configured rate limit, as v2 shows it. */
export type RatelimitSetting = { id: string; name: string; limit: number; duration: number; autoApply: boolean };

/** One limit a verification was checked against, as v2 reports it (`id` "" for an ad-hoc limit). */
export type AppliedRatelimit = RatelimitSetting & { exceeded: boolean; remaining: number; reset: number };

/** The rate limit reported: from the first refusing limit, else the first; `limit` from the one named `default`. */
export type RatelimitFacts = { limit?: number; remaining: number; reset: number };

export type VerificationResult = {
  valid: boolean;
  code: VerificationCode;
  /** Absent when the key was not found, or was out of the request's scope (`requireScope`: only `valid` and `code`). */
  key?: KeyFacts;
  /**
   * How the rate limits went: `applied` with what they report, `unavailable` when the limiter's store could not
   * answer and KEYHAVEN_RATELIMIT_ON_REDIS_FAILURE=open let the verification through unlimited; absent when no
   * limit applied (or the verification was refused before them).
   */
  ratelimit?: { state: "applied"; report: RatelimitFacts; limits: AppliedRatelimit[] } | { state: "unavailable" };
  /** RATE_LIMITED: the first refusing limit, in the order the limits were built. */
  triggeredRatelimit?: string;
  /** Uses left after this verification, for a key with limited uses that got as far as spending. */
  remaining?: number;
  /**
   * v2, for a key with limited uses: after this verification's spend when VALID, the uses found insufficient when
   * USAGE_EXCEEDED, else the uses the key has (none spent).
   */
  credits?: number;
};

/**
 * Verifies a key by the surface's `rules`, checked in this order (v1's, contract 4.2): NOT_FOUND (also a key outside
 * the request's scope), disabled workspace (WorkspaceDisabledError, or FORBIDDEN), DISABLED, FORBIDDEN (other API), EXPIRED, FORBIDDEN (caller not on the API's IP
 * allow-list), INSUFFICIENT_PERMISSIONS, RATE_LIMITED, USAGE_EXCEEDED, VALID. The key comes from the verification
 * cache, which never answers with data older than the verification (a change to a key is seen by the very next
 * verification on every replica); remaining uses are always spent in the database. Every outcome of a found key is
 * counted in analytics (with `tags`, the credits it spent and the ms it took) and logged in the verification log,
 * and every outcome in the process's metrics.
 */
export async function verifyKey(services: VerificationServices, req: VerifyRequest, rules: VerifyRules): Promise<VerificationResult> {
  const started = performance.now();
  const result = await decide(services, req, rules);
  services.metrics.recordVerification(result.code);
  // Synchronous and in memory only (written in the background): verifications of existing keys, as v1 counts. The
  // key's last use is the latest of them, whatever the outcome (as upstream's, from the same events).
  if (result.key !== undefined) {
    const at = services.clock.now();
    const latency = performance.now() - started;
    // Only a VALID verification of a key with limited uses spent its cost (`remaining` is then what is left).
    const spentCredits = result.code === "VALID" && result.remaining !== undefined ? req.remainingCost : 0;
    const identity = result.key.identity;
    services.analytics.record(
      { keyId: result.key.keyId, workspaceId: result.workspaceId!, apiId: result.key.apiId, identityId: identity?.id },
      result.code,
      req.tags,
      at,
      spentCredits,
      latency,
    );
    // Never the key or its hash: who verified what, when, how it went. No row is built when the log is off.
    if (services.verificationLog.enabled) {
      services.verificationLog.record({
        requestId: req.requestId ?? "",
        timeM: at,
        workspaceId: result.workspaceId!,
        keySpaceId: result.key.apiId,
        keyId: result.key.keyId,
        identityId: identity === undefined ? null : identity.id,
        externalId: identity === undefined ? null : identity.externalId,
        outcome: result.code,
        tags: req.tags,
        spentCredits,
        latency,
      });
    }
    services.lastUsed.key(result.key.keyId, at);
    // Written before the answer (nothing acknowledged is lost), the first refusal of each window only.
    if (result.code === "RATE_LIMITED" && services.ratelimitAlerts !== undefined && result.ratelimit?.state === "applied") {
      const refusing = result.ratelimit.limits.find((l) => l.exceeded);
      if (refusing !== undefined) {
        await services.ratelimitAlerts.refused(result.workspaceId!, result.key.keyId, {
          name: refusing.name,
          limit: refusing.limit,
          duration: refusing.duration,
          resetAt: refusing.reset,
        });
      }
    }
  }
  // Counted for the key's workspace above, but the caller learns nothing of a key outside its scope.
  if (result.outOfScope === true) return { valid: false, code: result.code };
  const { workspaceId: _, outOfScope: __, ...answer } = result;
  return answer;
}

/** The core's result with what only verifyKey reads: the key's workspace, and whether the key was out of scope. */
type Decided = VerificationResult & { workspaceId?: string; outOfScope?: true };

async function decide(services: VerificationServices, req: VerifyRequest, rules: VerifyRules): Promise<Decided> {
  const credits = rules.creditsAndIdentityLimits;
  let query = rules.parsePermissionsWhen === "beforeLookup" ? permissionQueryOf(req.permissions, rules) : undefined;
  const hash = hashKey(req.key);
  const decided = fromMemory(services, req, rules, hash, query);
  if (decided !== undefined) {
    const result = await decided;
    if (result !== undefined) return result;
  }
  let { key, epoch } = await services.verificationCache.lookupWithEpoch(hash);
  // Only a miss with a migration pays for it (contract §6.3): the normal path is unchanged.
  if (key === undefined && req.migrationId !== undefined)
    ({ key, epoch } = await lookupMigrated(services, req, rules, req.migrationId, epoch));
  // Only a miss, while the Unkey fallback is on, may ask hosted Unkey (one round trip at most).
  if (key === undefined && services.unkeyFallback?.isActive() === true)
    ({ key, epoch } = await lookupAdopted(services, services.unkeyFallback, req, rules, hash, epoch));
  // At the epoch the key was confirmed at: a root key in memory then costs no query. An unknown key is NOT_FOUND
  // whatever the scope, so it is not resolved then (unless it decides between NOT_FOUND and the refusal below).
  const scopeMatters = key !== undefined || (req.requireScope === true && req.apiId === undefined);
  const scope = scopeMatters ? await req.scope?.(epoch) : undefined;
  if (req.requireScope && req.apiId === undefined && scope === undefined) {
    throw new InvalidInputError({ kind: "verificationScopeRequired" });
  }
  if (!key || (scope !== undefined && key.workspaceId !== scope.workspaceId)) return { valid: false, code: "NOT_FOUND" };
  // A caller without verify_key for this API (or the key's URN, contract §2 row 11) is told nothing about the key
  // (NOT_FOUND, not 403).
  if (rules.scopeMustMayVerify && !scopeMayVerify(scope, key)) return { valid: false, code: "NOT_FOUND" };
  if (rules.parsePermissionsWhen === "keyInScope") query = permissionQueryOf(req.permissions, rules);

  // The answers below are written out field by field, not spread from `found` (CONTRIBUTING.md, conventions).
  const found = { key: factsOf(key, credits), workspaceId: key.workspaceId };
  const refuse = async (code: VerificationCode, extra: Partial<VerificationResult> = {}): Promise<VerificationResult> => {
    // Credits are reported on every answer; spends do not drop the cached key, so they are read.
    const had = credits && key.remaining !== null && extra.credits === undefined ? await services.remainingSpender.peek(key.id) : undefined;
    const answer: VerificationResult = Object.assign({ key: found.key, workspaceId: found.workspaceId }, extra, { valid: false, code });
    if (had !== undefined) answer.credits = had;
    return answer;
  };

  const refusal = refusalBeforeLimits(key, req, query, services.clock.now());
  if (refusal === "OUT_OF_SCOPE")
    return { key: found.key, workspaceId: found.workspaceId, outOfScope: true, valid: false, code: "FORBIDDEN" };
  if (refusal === "WORKSPACE_DISABLED") {
    if (rules.disabledWorkspace === "forbidden") return refuse("FORBIDDEN");
    throw new WorkspaceDisabledError();
  }
  if (refusal !== undefined) return refuse(refusal);

  const { checks, settings } = limitChecks(key, req.ratelimits ?? []);
  let ratelimit: VerificationResult["ratelimit"];
  if (checks.length > 0) {
    const outcomes = await checkLimits(services, checks, "verifyKey");
    if (outcomes === undefined) {
      ratelimit = { state: "unavailable" };
    } else {
      ratelimit = { state: "applied", report: reportRatelimit(outcomes), limits: appliedLimits(outcomes, settings) };
      const refusing = outcomes.find((o) => !o.passed);
      if (refusing) return refuse("RATE_LIMITED", { ratelimit, triggeredRatelimit: refusing.name });
    }
  }

  if (key.remaining !== null) {
    return spendOutcome(found, await services.remainingSpender.spendAnswering(key.id, req.remainingCost), ratelimit, credits);
  }
  return { key: found.key, workspaceId: found.workspaceId, ratelimit, valid: true, code: "VALID" };
}

/**
 * A verification of a key with limited uses that is in memory, decided from memory in one statement, the spend,
 * instead of two (the epoch read every other verification waits for, then the spend): what bounds keys with
 * remaining uses is the statements each verification costs, on the database and on this process (bench:budgets).
 * The key in memory is exact at the epoch the process has applied; the spend is made only if its statement, which
 * starts after the verification arrived, finds no newer epoch (spendIfCurrent), so a write committed before the
 * verification arrived is still seen by it. Undefined when this does not decide: the key is not in memory, or it
 * is refused before its spend, or a rate limit would count it (each with its own statement or side effect, left to
 * the normal path), or a root key scopes the verification, or the epoch moved; the verification is then decided as
 * any other, from a statement that reads the epoch.
 */
function fromMemory(
  services: VerificationServices,
  req: VerifyRequest,
  rules: VerifyRules,
  hash: string,
  query: PermissionQuery | undefined,
): Promise<(VerificationResult & { workspaceId: string }) | undefined> | undefined {
  if (req.scope !== undefined || (req.requireScope && req.apiId === undefined)) return undefined;
  // Rules that need the scope's permissions or the uses as stored are decided on the normal path.
  if (rules.scopeMustMayVerify || rules.creditsAndIdentityLimits || rules.parsePermissionsWhen !== "beforeLookup") return undefined;
  const held = services.verificationCache.inMemory(hash);
  if (held === undefined || held.key.remaining === null) return undefined;
  const { key, epoch } = held;
  if (refusalBeforeLimits(key, req, query, services.clock.now()) !== undefined) return undefined;
  if ((req.ratelimits?.length ?? 0) > 0 || key.ratelimits.some((rl) => rl.autoApply)) return undefined;
  return services.remainingSpender.spendIfCurrent(key.id, req.remainingCost, epoch).then((answer) => {
    if (answer === undefined) return undefined;
    return spendOutcome({ key: factsOf(key, false), workspaceId: key.workspaceId }, answer, undefined, false);
  });
}

/**
 * The first refusal the key's own facts decide, before its rate limits, in v1's order (see verifyKey). With
 * `requireScope`, a key of another API than the request's is refused first (OUT_OF_SCOPE): neither its workspace's
 * state nor its own (disabled, expired...) may be learnt by naming another API.
 */
function refusalBeforeLimits(
  key: FoundKey,
  req: VerifyRequest,
  query: PermissionQuery | undefined,
  now: number,
): Exclude<VerificationCode, "VALID"> | "WORKSPACE_DISABLED" | "OUT_OF_SCOPE" | undefined {
  if (req.requireScope === true && req.apiId !== undefined && req.apiId !== key.apiId) return "OUT_OF_SCOPE";
  if (!key.workspaceEnabled) return "WORKSPACE_DISABLED";
  if (!key.enabled) return "DISABLED";
  if (req.apiId !== undefined && req.apiId !== key.apiId) return "FORBIDDEN";
  if (key.expires !== null && key.expires.getTime() < now) return "EXPIRED";
  if (!ipAllowed(key.apiIpWhitelist, req.callerIp)) return "FORBIDDEN";
  if (query !== undefined && !satisfies(query, new Set(key.permissions))) return "INSUFFICIENT_PERMISSIONS";
  return undefined;
}

/** The answer once the key's uses were spent (`left`) or found insufficient (`had`, reported as credits). */
function spendOutcome(
  found: { key: KeyFacts; workspaceId: string },
  { left, had }: SpendAnswer,
  ratelimit: VerificationResult["ratelimit"],
  credits: boolean,
): VerificationResult & { workspaceId: string } {
  const { key, workspaceId } = found;
  const answer: VerificationResult & { workspaceId: string } =
    left === undefined
      ? { key, workspaceId, remaining: 0, ratelimit, valid: false, code: "USAGE_EXCEEDED" }
      : { key, workspaceId, ratelimit, valid: true, code: "VALID", remaining: left };
  if (credits) answer.credits = left ?? had ?? 0;
  return answer;
}

/** A key not found by its own hash, after completing its migration if it is pending in `migrationId` (§6.3). */
async function lookupMigrated(
  services: VerificationServices,
  req: VerifyRequest,
  rules: VerifyRules,
  migrationId: string,
  epoch: bigint | undefined,
): Promise<Lookup> {
  // The migration is the caller's workspace's: without a scope there is none to look in.
  const scope = await req.scope?.(epoch);
  if (scope === undefined) return { key: undefined, epoch };
  const request = { key: req.key, migrationId, workspaceId: scope.workspaceId };
  // A root key that may not verify the pending key (decide's verify_key check, made before the key changes) leaves
  // it pending; the verification then answers NOT_FOUND, as that check would.
  const mayVerify = (key: { id: string; apiId: string }) =>
    !rules.scopeMustMayVerify || scopeMayVerify(scope, { id: key.id, apiId: key.apiId, workspaceId: scope.workspaceId });
  if (!(await completeKeyMigration(services.db, request, services.clock.now(), mayVerify))) return { key: undefined, epoch };
  return services.verificationCache.lookupWithEpoch(hashKey(req.key));
}

/**
 * A key not found by its hash, after the Unkey fallback asked hosted Unkey about it and adopted the pending key
 * Unkey named (issue 36 §2), looked up again by its hash, so that keyhaven's own rules answer it. Where the key may
 * be pending: the scope's workspace (a root key's), else `apiId`'s, else any workspace with pending keys. A root key
 * that may not verify the pending key (the verify_key check decide makes) leaves it pending.
 */
async function lookupAdopted(
  services: VerificationServices,
  fallback: UnkeyFallback,
  req: VerifyRequest,
  rules: VerifyRules,
  hash: string,
  epoch: bigint | undefined,
): Promise<Lookup> {
  const missed: Lookup = { key: undefined, epoch };
  if (!fallback.hasPending(undefined)) return missed;
  const scope = await req.scope?.(epoch);
  // Refused below whatever the key (verificationScopeRequired): nothing to ask.
  if (scope === undefined && req.requireScope === true && req.apiId === undefined) return missed;
  let workspaceId = scope?.workspaceId;
  if (workspaceId === undefined && req.apiId !== undefined) {
    workspaceId = await fallback.workspaceOfApi(req.apiId);
    if (workspaceId === undefined) return missed;
  }
  const adopted = await fallback.adopt({
    key: req.key,
    hash,
    workspaceId,
    origin: { surface: req.surface, requestId: req.requestId, clientAddress: req.callerIp },
    mayAdopt: (key) => !rules.scopeMustMayVerify || scopeMayVerify(scope, key),
  });
  return adopted ? services.verificationCache.lookupWithEpoch(hash) : missed;
}

/** Whether the scope's root key holds verify_key for the key (its API's tuple, or the key's URN, contract §2 row 11). */
function scopeMayVerify(
  scope: { permissions?: ReadonlySet<string> } | undefined,
  key: { id: string; apiId: string; workspaceId: string },
): boolean {
  if (scope?.permissions === undefined) return false;
  return rootKeySatisfies(keyPermission({ urnGrants: true }, key.workspaceId, key.apiId, key.id, "verify_key"), scope.permissions);
}

function permissionQueryOf(raw: unknown, rules: VerifyRules): PermissionQuery | undefined {
  if (raw === undefined) return undefined;
  try {
    return rules.parsePermissions(raw);
  } catch (err) {
    if (err instanceof PermissionQueryError) throw new InvalidInputError({ kind: "invalidPermissionQuery", problem: err.message });
    throw err;
  }
}

function factsOf(key: FoundKey, identityLimits: boolean): KeyFacts {
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
        ...(identityLimits && { ratelimits: identityRatelimits(key.ratelimits) }),
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
function limitChecks(
  key: FoundKey,
  requested: NonNullable<VerifyRequest["ratelimits"]>,
): { checks: LimitCheck[]; settings: Map<string, RatelimitSetting> } {
  const configured = new Map<string, StoredRatelimit>();
  for (const rl of key.ratelimits) if (rl.owner === "identity") configured.set(rl.name, rl);
  for (const rl of key.ratelimits) if (rl.owner === "key") configured.set(rl.name, rl);
  const workspaceId = key.workspaceId;
  const identifierOf = (owner: "key" | "identity") => (owner === "identity" && key.identityId ? key.identityId : key.id);

  const checks = new Map<string, LimitCheck>();
  // What each check's limit is, as v2 reports it beside its outcome (an ad-hoc limit has no id).
  const settings = new Map<string, RatelimitSetting>();
  const settingOf = (rl: StoredRatelimit): RatelimitSetting => ({
    id: rl.id,
    name: rl.name,
    limit: rl.limit,
    duration: Number(rl.duration),
    autoApply: rl.autoApply,
  });
  for (const rl of configured.values()) {
    if (rl.autoApply) {
      settings.set(rl.name, settingOf(rl));
      checks.set(rl.name, {
        workspaceId,
        name: rl.name,
        identifier: identifierOf(rl.owner),
        limit: rl.limit,
        duration: Number(rl.duration),
        cost: 1,
        adHoc: false,
      });
    }
  }
  for (const r of requested) {
    const cost = r.cost ?? 1;
    if (r.limit !== undefined && r.duration !== undefined) {
      const identifier = key.identityId ?? key.id;
      // Ad hoc, so counted in the workspace's ad-hoc budget: anyone holding a key may name such limits, and they must
      // never evict a configured limit's counter. Unless it is a configured limit's own counter (the same name,
      // window and identifier, as upstream counts it), which is one counter per configured limit anyway.
      const same = configured.get(r.name);
      const adHoc = same === undefined || Number(same.duration) !== r.duration || identifierOf(same.owner) !== identifier;
      checks.set(r.name, { workspaceId, name: r.name, identifier, limit: r.limit, duration: r.duration, cost, adHoc });
      settings.set(r.name, { id: "", name: r.name, limit: r.limit, duration: r.duration, autoApply: false });
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
      adHoc: false,
    });
    settings.set(r.name, settingOf(rl));
  }
  return { checks: [...checks.values()], settings };
}

/** Each limit's outcome beside its setting (v2's `ratelimits[]`). */
function appliedLimits(outcomes: LimitOutcome[], settings: Map<string, RatelimitSetting>): AppliedRatelimit[] {
  return outcomes.map((o) => {
    const setting = settings.get(o.name) ?? { id: "", name: o.name, limit: o.limit, duration: 0, autoApply: false };
    const { id, name, limit, duration, autoApply } = setting;
    return { id, name, limit, duration, autoApply, exceeded: !o.passed, remaining: Math.max(0, o.remaining), reset: o.reset };
  });
}

/** The identity's limits that no limit of the key by the same name shadows. */
function identityRatelimits(ratelimits: StoredRatelimit[]): RatelimitSetting[] {
  const keyNames = new Set(ratelimits.filter((rl) => rl.owner === "key").map((rl) => rl.name));
  return ratelimits
    .filter((rl) => rl.owner === "identity" && !keyNames.has(rl.name))
    .map((rl) => ({ id: rl.id, name: rl.name, limit: rl.limit, duration: Number(rl.duration), autoApply: rl.autoApply }));
}

/** From the first failing limit, or the first limit when all pass; `limit` from the one named `default` if any. */
function reportRatelimit(outcomes: LimitOutcome[]): RatelimitFacts {
  const shown = outcomes.find((o) => !o.passed) ?? outcomes[0]!;
  const named = outcomes.find((o) => o.name === "default") ?? shown;
  return { limit: named.limit, remaining: shown.remaining, reset: shown.reset };
}
