import { NotFoundError, PortalRefusedError, PreconditionFailedError } from "../../errors.js";
import {
  findIdentityId,
  minuteVerificationsOfExternalId,
  outcomeCounters,
  queryVerifications,
} from "../../storage/analytics/analytics.repository.js";
import type { Db } from "../../storage/client.js";
import { type ApiKeysPage, type ListApiKeysRules, listApiKeys } from "../apis/apis.core.js";
import type { Caller } from "../caller.js";
import { rerollKey } from "../keys/keys.reroll.js";
import type { CreatedKey, CreateKeyServices } from "../keys/keys.create.js";
import { type PortalSession, requireScope } from "./portals.sessions.js";

/**
 * What a portal session may see and change: its end user's keys (those whose identity has the session's externalId)
 * in its portal's APIs, and that user's verifications. Every function checks the scope first, so a session without
 * it learns nothing of whether an id exists; a key of anybody else is answered as missing.
 */

/** A page of the end user's live keys in the session's APIs, by id (never decrypted); no identity: an empty page. */
export async function listPortalKeys(
  services: Parameters<typeof listApiKeys>[0],
  session: PortalSession,
  caller: Caller,
  input: { limit: number; cursor?: string | undefined },
  rules: ListApiKeysRules,
): Promise<ApiKeysPage> {
  requireScope(session, "keys:read");
  const identityId = await findIdentityId(services.db, session.workspaceId, session.externalId);
  // A portal is over one API (portals.api_id); a session lists the keys of each API it was granted, in that order.
  const [apiId] = session.apiIds;
  if (identityId === undefined || apiId === undefined) return { keys: [], plaintexts: new Map(), ratelimits: new Map() };
  return listApiKeys(services, caller, { apiId, externalId: session.externalId, limit: input.limit, cursor: input.cursor }, rules);
}

/**
 * Rerolls one of the end user's keys (the core's reroll: the new key carries its settings, the old one verifies for
 * `expiration` ms more). Any other key, and any key when the user has no identity, is not found.
 */
export async function rerollPortalKey(
  services: CreateKeyServices,
  session: PortalSession,
  caller: Caller,
  input: { keyId: string; expiration: number },
): Promise<CreatedKey> {
  requireScope(session, "keys:reroll");
  const identityId = await findIdentityId(services.db, session.workspaceId, session.externalId);
  if (identityId === undefined) throw new NotFoundError("key", input.keyId);
  return rerollKey(services, caller, { ...input, ownedBy: { identityId, apiIds: session.apiIds } }, "plain");
}

/** One bucket of a portal's verification series: its start (unix ms) and its counts by outcome. */
export type PortalDataPoint = {
  time: number;
  total: number;
  valid: number;
  rateLimited: number;
  insufficientPermissions: number;
  forbidden: number;
  disabled: number;
  expired: number;
  usageExceeded: number;
};

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
/** The longest window a portal may read (upstream: the workspace's log retention, 30 days on its tests' plan). */
export const PORTAL_MAX_WINDOW_DAYS = 30;

/** The bucket of a window (upstream's): minutes up to 3 hours, hours up to 4 days, else days. */
export function portalBucket(windowMs: number): number {
  if (windowMs <= 3 * HOUR) return MINUTE;
  if (windowMs <= 4 * DAY) return HOUR;
  return DAY;
}

const COUNTER_OF_OUTCOME: Record<string, keyof PortalDataPoint | undefined> = {
  VALID: "valid",
  RATE_LIMITED: "rateLimited",
  INSUFFICIENT_PERMISSIONS: "insufficientPermissions",
  FORBIDDEN: "forbidden",
  DISABLED: "disabled",
  EXPIRED: "expired",
  USAGE_EXCEEDED: "usageExceeded",
};

const emptyPoint = (time: number): PortalDataPoint => ({
  time,
  total: 0,
  valid: 0,
  rateLimited: 0,
  insufficientPermissions: 0,
  forbidden: 0,
  disabled: 0,
  expired: 0,
  usageExceeded: 0,
});

/**
 * The end user's verifications in [startTime, endTime), by outcome, in buckets the window decides (portalBucket),
 * from the bucket holding `startTime` to the one holding `endTime` inclusive, empty ones as zeros (upstream's fill).
 * Scoped by the session's externalId (events of the user's deleted keys still count; a `keyId` of anybody else's
 * finds none). Minute buckets come from the raw verification log; without it (KEYHAVEN_VERIFICATION_LOG_DAYS=0), or
 * for hours and days, from the hourly counts (an hour's count then sits in its first minute within the window: the
 * hour holding `startTime` began before it, and its count goes to the first bucket).
 */
export async function portalVerifications(
  services: { db: Db; config: { analytics: boolean; verificationLogDays: number; analyticsRetentionDays: number } },
  session: PortalSession,
  input: { startTime: number; endTime: number; keyId?: string | undefined },
): Promise<PortalDataPoint[]> {
  requireScope(session, "analytics:read");
  // With KEYHAVEN_ANALYTICS=off nothing is counted: refused as v2's analytics.getVerifications is, never zeros that
  // would tell the end user they had no traffic.
  if (!services.config.analytics) throw new PreconditionFailedError("analytics", { kind: "analyticsNotConfigured" });
  const { startTime, endTime } = input;
  if (endTime <= startTime)
    throw new PortalRefusedError({ kind: "portalInputRefused", problem: "`endTime` must be greater than `startTime`." });
  const days = Math.min(PORTAL_MAX_WINDOW_DAYS, services.config.analyticsRetentionDays);
  if (endTime - startTime > days * DAY) throw new PortalRefusedError({ kind: "portalWindowTooLarge", days });
  const step = portalBucket(endTime - startTime);
  const first = startTime - mod(startTime, step);
  const last = endTime - mod(endTime, step);
  const points = new Map<number, PortalDataPoint>();
  for (let t = first; t <= last; t += step) points.set(t, emptyPoint(t));
  const add = (time: number, outcome: string, count: number) => {
    const point = points.get(time - mod(time, step));
    if (!point) return;
    point.total += count;
    const counter = COUNTER_OF_OUTCOME[outcome];
    if (counter) point[counter] += count;
  };

  const keyId = input.keyId === "" ? undefined : input.keyId;
  if (step === MINUTE && services.config.verificationLogDays > 0) {
    const rows = await minuteVerificationsOfExternalId(services.db, {
      workspaceId: session.workspaceId,
      externalId: session.externalId,
      keyId,
      from: startTime,
      to: endTime,
    });
    for (const r of rows) add(r.minute, r.outcome, r.count);
    return [...points.values()];
  }
  const identityId = await findIdentityId(services.db, session.workspaceId, session.externalId);
  if (identityId === undefined) return [...points.values()];
  const rows = await queryVerifications(services.db, {
    workspaceId: session.workspaceId,
    identityId,
    keyIds: keyId === undefined ? undefined : [keyId],
    from: startTime - mod(startTime, HOUR),
    to: endTime - 1,
    time: "hour",
    byKey: false,
    byIdentity: false,
    byTags: false,
    byTag: false,
    orderBy: "time",
    order: "asc",
  });
  for (const r of rows) {
    const time = Math.max(r.time!, startTime);
    for (const [counter, outcome] of Object.entries(outcomeCounters)) add(time, outcome, r[counter as keyof typeof outcomeCounters]);
  }
  return [...points.values()];
}

function mod(a: number, b: number): number {
  return ((a % b) + b) % b;
}
