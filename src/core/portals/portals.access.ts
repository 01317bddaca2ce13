import { NotFoundError, PortalRefusedError, PreconditionFailedError } from "../../errors.js";
import {
  findIdentityId,
  countLogEvents,
  keyIdsOfIdentity,
  minuteVerificationsOfExternalId,
  outcomeCounters,
  queryVerifications,
} from "../../storage/analytics/analytics.repository.js";
import type { Db } from "../../storage/client.js";
import { spendPortalReroll } from "../../storage/portals/portals.repository.js";
import { type ApiKeysPage, type ListApiKeysRules, listApiKeys } from "../apis/apis.core.js";
import type { Caller } from "../caller.js";
import { rerollKey } from "../keys/keys.reroll.js";
import type { CreatedKey, CreateKeyServices } from "../keys/keys.create.js";
import type { KeyServices } from "../keys/keys.services.js";
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
  if (input.expiration > MAX_PORTAL_REROLL_GRACE_MS) {
    throw new PortalRefusedError({
      kind: "portalInputRefused",
      problem: `expiration: a portal reroll keeps the old key at most ${MAX_PORTAL_REROLL_GRACE_MS} ms (30 days), got ${input.expiration}`,
    });
  }
  const identityId = await findIdentityId(services.db, session.workspaceId, session.externalId);
  if (identityId === undefined) throw new NotFoundError("key", input.keyId);
  // Counted in the reroll's transaction (a refused reroll counts nothing): an end user cannot make keys without bound.
  const spend = async (tx: Db) => {
    if (!(await spendPortalReroll(tx, session.id, MAX_REROLLS_PER_SESSION))) {
      throw new PortalRefusedError({ kind: "portalRerollsSpent", max: MAX_REROLLS_PER_SESSION });
    }
  };
  return rerollKey(services, caller, { ...input, ownedBy: { identityId, apiIds: session.apiIds }, spend }, "plain");
}

/**
 * A portal reroll's old key verifies at most 30 days more, and one session rerolls at most 20 keys: each reroll with a
 * grace leaves one more live key, and an end user must not be able to fill the store with them.
 */
export const MAX_PORTAL_REROLL_GRACE_MS = 30 * 86_400_000;
export const MAX_REROLLS_PER_SESSION = 20;

/**
 * The key a reroll names, for the portal page's confirmation (its name and start, with keys:read): one of the end user's live keys in
 * the session's APIs, else not found, as rerollPortalKey answers it (which checks again under its lock).
 */
export async function portalRerollTarget(
  services: Pick<KeyServices, "db" | "keyReads">,
  session: PortalSession,
  keyId: string,
): Promise<{ id: string; name: string | null; start: string | null }> {
  requireScope(session, "keys:reroll");
  const identityId = await findIdentityId(services.db, session.workspaceId, session.externalId);
  const row = identityId === undefined ? undefined : await services.keyReads.find({ id: keyId }, "direct-names");
  if (!row || row.workspaceId !== session.workspaceId || row.identityId !== identityId || !session.apiIds.includes(row.apiId)) {
    throw new NotFoundError("key", keyId);
  }
  // Its name and start are what keys:read shows; a session that may only reroll learns no more than the id it named.
  if (!session.scopes.includes("keys:read")) return { id: row.id, name: null, start: null };
  return { id: row.id, name: row.name, start: row.start };
}

/** The days of a key's usage sparkline (the keys table of the portal page). */
export const PORTAL_SPARK_DAYS = 7;

/**
 * Each of `keyIds`' verifications per UTC day over the last PORTAL_SPARK_DAYS days up to `now` (today last), in one
 * query over the hourly counts, narrowed to the end user's identity and the session's API: a key of anybody else
 * counts nothing. Needs analytics:read (it is the user's analytics, shown beside keys:read's list).
 */
export async function portalKeysUsage(
  services: { db: Db; clock: { now(): number } },
  session: PortalSession,
  keyIds: readonly string[],
): Promise<Map<string, number[]>> {
  requireScope(session, "analytics:read");
  const usage = new Map<string, number[]>(keyIds.map((id) => [id, new Array<number>(PORTAL_SPARK_DAYS).fill(0)]));
  const identityId = await findIdentityId(services.db, session.workspaceId, session.externalId);
  const [apiId] = session.apiIds;
  if (identityId === undefined || apiId === undefined || keyIds.length === 0) return usage;
  const now = services.clock.now();
  const firstDay = now - mod(now, DAY) - (PORTAL_SPARK_DAYS - 1) * DAY;
  const rows = await countsOfIdentity(services.db, session, identityId, {
    apiId,
    keyIds: [...keyIds],
    from: firstDay,
    to: now,
    time: "day",
    byKey: true,
  });
  for (const r of rows) {
    const days = r.keyId === undefined ? undefined : usage.get(r.keyId);
    const i = Math.floor((r.time! - firstDay) / DAY);
    if (days && i >= 0 && i < PORTAL_SPARK_DAYS) days[i]! += r.total;
  }
  return usage;
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

/** The most raw-log events one getVerifications reads for minute buckets (about 0.1 s of PostgreSQL). */
export const MAX_LOG_EVENTS_READ = 50_000;
/** An end user's keys whose counts are read by key id (beyond it, by the identity over the workspace's rows). */
const MAX_KEYS_READ_BY_ID = 1_000;

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
 * finds none). Minute buckets come from the raw verification log when its workspace verified at most MAX_LOG_EVENTS_READ
 * times in the window; else, without the log (KEYHAVEN_VERIFICATION_LOG_DAYS=0), and for hours and days, from the
 * hourly counts (an hour's count then sits in the first minute of the window in that hour).
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
  // The raw log is read event by event (about 1.8 s of PostgreSQL for a million): only where the workspace verified
  // few enough in the window that no end user's request can cost the store much; else the hourly counts answer.
  if (
    step === MINUTE &&
    services.config.verificationLogDays > 0 &&
    (await countLogEvents(services.db, session.workspaceId, startTime, endTime)) <= MAX_LOG_EVENTS_READ
  ) {
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
  // By the user's keys (the counts' primary key), unless it has more than any page would list: then by its identity.
  const ownKeys =
    keyId === undefined ? await keyIdsOfIdentity(services.db, session.workspaceId, identityId, MAX_KEYS_READ_BY_ID + 1) : [keyId];
  if (ownKeys.length === 0) return [...points.values()];
  const rows = await countsOfIdentity(services.db, session, identityId, {
    keyIds: ownKeys.length > MAX_KEYS_READ_BY_ID ? undefined : ownKeys,
    from: startTime - mod(startTime, HOUR),
    to: endTime - 1,
    time: "hour",
    byKey: false,
  });
  for (const r of rows) {
    // An hour that began before a minute window did sits in the window's first minute.
    const time = Math.max(r.time!, first);
    for (const [counter, outcome] of Object.entries(outcomeCounters)) add(time, outcome, r[counter as keyof typeof outcomeCounters]);
  }
  return [...points.values()];
}

/** The hourly counts of one end user's verifications (its identity's, in the session's workspace), in time order. */
function countsOfIdentity(
  db: Db,
  session: PortalSession,
  identityId: string,
  q: { apiId?: string; keyIds: string[] | undefined; from: number; to: number; time: "hour" | "day"; byKey: boolean },
) {
  return queryVerifications(db, {
    workspaceId: session.workspaceId,
    identityId,
    ...q,
    byIdentity: false,
    byTags: false,
    byTag: false,
    orderBy: "time",
    order: "asc",
  });
}

function mod(a: number, b: number): number {
  return ((a % b) + b) % b;
}
