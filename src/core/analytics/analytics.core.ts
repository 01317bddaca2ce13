import type { PermissionQuery } from "../auth/permissions.query.js";
import { requirePermission } from "../principal.js";
import type { Db } from "../../storage/client.js";
import { InvalidInputError, NotFoundError, PreconditionFailedError } from "../../errors.js";
import {
  type AnalyticsRow,
  dailyKeyVerifications,
  emptyCounters,
  findIdentityId,
  findKeyScope,
  findKeysOfOwner,
  type OutcomeCounter,
  outcomeCounters,
  queryVerifications,
  type TimeGranularity,
} from "../../storage/analytics/analytics.repository.js";
import { findApi } from "../../storage/apis/apis.repository.js";
import { PGLITE_COST_CEILING, runAnalyticsQuery } from "../../storage/analytics/analytics.sql.repository.js";
import { parseAnalyticsQuery } from "./analytics.sql.parse.js";
import { MAX_ROWS, translateAnalyticsQuery } from "./analytics.sql.translate.js";
import { apiNotFound, readAnyApiPermission } from "../apis/apis.core.js";
import type { Caller } from "../caller.js";
import type { Principal } from "../principal.js";

type AnalyticsServices = { db: Db };

const HOUR_MS = 3_600_000;
/** Time-only groups are answered with one row per slice of the range, empty ones included, up to this many. */
export const MAX_TIME_SLICES = 10_000;

/** The outcomes a verification count is split into, in the order the rows list them. */
export const OUTCOME_COUNTERS = Object.keys(outcomeCounters) as OutcomeCounter[];
export type { AnalyticsRow, OutcomeCounter };
/** The verification code each outcome counter sums (`valid`: VALID, …). */
export { outcomeCounters as OUTCOME_CODES };

export type VerificationsGroup = "key" | "identity" | "tags" | "tag" | "month" | "day" | "hour";
export type VerificationsOrderBy = "time" | "total" | OutcomeCounter;

export type VerificationsQuery = {
  apiId: string;
  externalId?: string | undefined;
  keyIds?: string[] | undefined;
  tags?: string[] | undefined;
  start: number;
  /** Default: now. */
  end?: number | undefined;
  groupBy?: VerificationsGroup[] | undefined;
  limit?: number | undefined;
  orderBy?: VerificationsOrderBy | undefined;
  order: "asc" | "desc";
};

/** What the query's input alone decides: the end of the range, the groups, the time granularity. */
export type VerificationsPlan = { end: number; groupBy: Set<VerificationsGroup>; time: TimeGranularity | undefined };

/**
 * The checks of the query's input alone (InvalidInputError), which v1 makes before authenticating: a range that
 * ends after it starts, not both tag and tags, and orderBy=time only with a time group.
 */
export function planVerifications(input: VerificationsQuery, now: number): VerificationsPlan {
  const end = input.end ?? now;
  if (input.start >= end) throw new InvalidInputError({ kind: "startNotBeforeEnd" });
  const groupBy = new Set(input.groupBy ?? []);
  if (groupBy.has("tag") && groupBy.has("tags")) {
    throw new InvalidInputError({ kind: "groupByTagAndTags" });
  }
  const time: TimeGranularity | undefined = groupBy.has("month")
    ? "month"
    : groupBy.has("day")
      ? "day"
      : groupBy.has("hour")
        ? "hour"
        : undefined;
  if (input.orderBy === "time" && !time) {
    throw new InvalidInputError({ kind: "orderByTimeWithoutTime" });
  }
  return { end, groupBy, time };
}

/**
 * Verification counts of an API's keys per outcome, filtered and grouped as the query says. Grouped by time alone
 * (in time order), every slice of the range gets a row, empty ones as zeros.
 */
export async function getVerifications(
  services: AnalyticsServices,
  caller: Principal,
  input: VerificationsQuery,
  { end, groupBy, time }: VerificationsPlan,
): Promise<AnalyticsRow[]> {
  const { db } = services;
  requirePermission(caller, { or: ["*", "api.*.read_api", `api.${input.apiId}.read_api`] });
  if (!(await findApi(db, caller.workspaceId, input.apiId))) throw apiNotFound(input.apiId);
  let identityId: string | undefined;
  if (input.externalId !== undefined) {
    identityId = await findIdentityId(db, caller.workspaceId, input.externalId);
    if (!identityId) {
      throw new NotFoundError("identity", input.externalId, { kind: "identityOfExternalIdNotFound", externalId: input.externalId });
    }
  }

  const byKey = groupBy.has("key");
  const byIdentity = groupBy.has("identity");
  const byTags = groupBy.has("tags");
  const byTag = groupBy.has("tag");
  // Grouped by time alone (and in time order): every slice before `end`'s gets a row, empty ones as zeros.
  const fill = time !== undefined && !byKey && !byIdentity && !byTags && !byTag && (input.orderBy ?? "time") === "time";
  const slices = fill ? timeSlices(time!, input.start, end) : [];

  const rows = await queryVerifications(db, {
    workspaceId: caller.workspaceId,
    apiId: input.apiId,
    from: input.start - (input.start % HOUR_MS),
    to: end,
    keyIds: input.keyIds,
    identityId,
    tags: input.tags,
    time,
    byKey,
    byIdentity,
    byTags,
    byTag,
    orderBy: input.orderBy,
    order: input.order,
    limit: fill ? undefined : input.limit,
  });
  if (!fill) return rows;

  const filled = filledSlices(rows, slices, time!, end);
  if (input.order === "desc") filled.reverse();
  return input.limit === undefined ? filled : filled.slice(0, input.limit);
}

/** A row per slice (empty ones as zeros), then the slice holding `end` if anything was counted in it. */
function filledSlices(rows: AnalyticsRow[], slices: number[], time: TimeGranularity, end: number): AnalyticsRow[] {
  const byTime = new Map(rows.map((r) => [r.time!, r]));
  const filled: AnalyticsRow[] = slices.map((t) => byTime.get(t) ?? { time: t, ...emptyCounters() });
  // The slice holding `end` gets no empty row (v1 filled up to, not including, it), but what was counted in it
  // up to `end`'s hour is answered, as v1 did: the fill never drops a count.
  const endSlice = byTime.get(sliceStart(time, end));
  if (endSlice) filled.push(endSlice);
  return filled;
}

/**
 * Verification counts of every API of the caller's workspace per outcome, per UTC hour or day from `start` to `end`
 * (every slice a row, empty ones as zeros, in time order): the console's overview. Needs read_api on every API
 * (`*`, `api.*.read_api`, or where URNs count `keyspaces/*#read_api`).
 */
export async function getWorkspaceVerifications(
  services: AnalyticsServices,
  caller: Caller,
  input: { start: number; end: number; granularity: "hour" | "day" },
): Promise<AnalyticsRow[]> {
  requirePermission(caller, readAnyApiPermission(caller));
  if (input.start >= input.end) throw new InvalidInputError({ kind: "startNotBeforeEnd" });
  const slices = timeSlices(input.granularity, input.start, input.end);
  const rows = await queryVerifications(services.db, {
    workspaceId: caller.workspaceId,
    from: input.start - (input.start % HOUR_MS),
    to: input.end,
    time: input.granularity,
    byKey: false,
    byIdentity: false,
    byTags: false,
    byTag: false,
    orderBy: "time",
    order: "asc",
  });
  return filledSlices(rows, slices, input.granularity, input.end);
}

/**
 * The start of every UTC hour, day or month from the one containing `start` up to, not including, the one
 * containing `end`, as v1 filled them (ClickHouse `WITH FILL FROM … TO …`, whose TO is exclusive): 30 hours
 * from 09:00 to 15:00 the next day are 30 rows, 09:00 to 14:00.
 */
function timeSlices(granularity: TimeGranularity, start: number, end: number): number[] {
  const first = sliceStart(granularity, start);
  const last = sliceStart(granularity, end);
  const slices: number[] = [];
  for (let t = first; t < last; t = nextSlice(granularity, t)) {
    if (slices.length === MAX_TIME_SLICES) {
      throw new InvalidInputError({ kind: "tooManyTimeSlices", max: MAX_TIME_SLICES, granularity });
    }
    slices.push(t);
  }
  return slices;
}

function sliceStart(granularity: TimeGranularity, ms: number): number {
  if (granularity === "hour") return ms - (ms % HOUR_MS);
  if (granularity === "day") return ms - (ms % (24 * HOUR_MS));
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

function nextSlice(granularity: TimeGranularity, ms: number): number {
  if (granularity === "hour") return ms + HOUR_MS;
  if (granularity === "day") return ms + 24 * HOUR_MS;
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

export type KeyVerificationsQuery = {
  keyId?: string | undefined;
  ownerId?: string | undefined;
  start?: number | undefined;
  end?: number | undefined;
};

/**
 * The checks of a key's verification query's input alone (InvalidInputError), which v1 makes before
 * authenticating: a key or an owner, and a window (default: the last 24 hours before `end`, default now) that does
 * not end before it starts.
 */
export function keyVerificationsWindow(input: KeyVerificationsQuery, now: number): { start: number; end: number } {
  if (input.keyId === undefined && input.ownerId === undefined) {
    throw new InvalidInputError({ kind: "keyOrOwnerRequired" });
  }
  const end = input.end ?? now;
  const start = input.start ?? end - 24 * HOUR_MS;
  if (start > end) throw new InvalidInputError({ kind: "startAfterEnd" });
  return { start, end };
}

/**
 * Daily verification counts (UTC days) of a key, or of every key of an owner (the key's ownerId or its identity's
 * externalId), in the window.
 */
export async function getKeyVerifications(
  services: AnalyticsServices,
  caller: Principal,
  input: KeyVerificationsQuery,
  { start, end }: { start: number; end: number },
): Promise<{ time: number; success: number; rateLimited: number; usageExceeded: number }[]> {
  const { db } = services;
  // The caller is authenticated before the lookup (v1 looked a keyId up first), so a wrong root key learns nothing
  // about it; a key of another workspace is answered as a missing one.
  let keys: { id: string; apiId: string }[];
  if (input.keyId !== undefined) {
    const key = await findKeyScope(db, input.keyId);
    if (!key || key.workspaceId !== caller.workspaceId) throw new NotFoundError("key", input.keyId);
    keys = [{ id: input.keyId, apiId: key.apiId }];
  } else {
    keys = await findKeysOfOwner(db, caller.workspaceId, input.ownerId!);
    if (keys.length === 0) throw new NotFoundError("key", input.ownerId!, { kind: "noKeysOfOwner", ownerId: input.ownerId! });
  }
  requirePermission(caller, readKeyPermission([...new Set(keys.map((k) => k.apiId))]));
  const from = start - (start % HOUR_MS);
  return dailyKeyVerifications(
    db,
    caller.workspaceId,
    keys.map((k) => k.id),
    from,
    end,
  );
}

/** v1's check: `*`, `api.*.read_key`, or `read_key` on every API the keys belong to. */
function readKeyPermission(apiIds: string[]): PermissionQuery {
  return { or: ["*", "api.*.read_key", { and: apiIds.map((id) => `api.${id}.read_key`) }] };
}

/** What the SQL analytics need of the services. */
export type SqlAnalyticsServices = {
  db: Db;
  store: { kind: "postgres" | "pglite" };
  clock: { now(): number };
  config: {
    analytics: boolean;
    analyticsRetentionDays: number;
    databaseStatementTimeoutMs: number;
    verificationLogDays: number;
  };
};

/** Upstream's bound on the answer, in bytes of JSON. */
export const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/**
 * v2's analytics.getVerifications (contract §10): the caller's ClickHouse SQL, parsed (analytics.sql.parse.ts),
 * checked and translated to PostgreSQL over keyhaven's verification log and hourly counts
 * (analytics.sql.translate.ts), run read-only with a deadline (storage/analytics/analytics.sql.repository.ts), and
 * answered as one object per row. The permission check comes first: `api.*.read_analytics` (every API of the
 * workspace), or `api.<apiId>.read_analytics` for some APIs (only their rows). With KEYHAVEN_ANALYTICS=off there is
 * nothing to query: refused as not configured, as upstream does without an analytics backend.
 */
export async function queryVerificationsSql(
  services: SqlAnalyticsServices,
  principal: Principal,
  query: string,
): Promise<Record<string, unknown>[]> {
  const perApi = [...principal.permissions].flatMap((p) => /^api\.([^.]+)\.read_analytics$/.exec(p)?.[1] ?? []);
  const everyApi = principal.permissions.has("*") || principal.permissions.has("api.*.read_analytics");
  if (!everyApi && perApi.length === 0) requirePermission(principal, { or: ["*", "api.*.read_analytics"] });
  if (!services.config.analytics) throw new PreconditionFailedError("analytics", { kind: "analyticsNotConfigured" });

  const statement = await parseAnalyticsQuery(query);
  const translated = translateAnalyticsQuery(statement, {
    workspaceId: principal.workspaceId,
    keySpaceIds: everyApi ? undefined : perApi.filter((id) => id !== "*"),
    nowMs: services.clock.now(),
    logRetentionDays: services.config.verificationLogDays,
    aggregateRetentionDays: services.config.analyticsRetentionDays,
    maxRows: MAX_ROWS,
  });
  const rows = await runAnalyticsQuery(services.db, translated.sql, {
    // Within the request's deadline on the store (DATABASE_STATEMENT_TIMEOUT_MS + 0.5 s, storage/deadline.ts),
    // which also covers the root key's lookup: a second less, and never more than upstream's 10 s.
    timeoutMs: Math.min(10_000, Math.max(500, services.config.databaseStatementTimeoutMs - 1000)),
    costCeiling: services.store.kind === "pglite" ? PGLITE_COST_CEILING : undefined,
  });
  const answer = rows.map((row) => {
    const out: Record<string, unknown> = {};
    translated.columns.forEach((column, i) => {
      out[column.name] = answerValue(row[`c${i + 1}`]);
    });
    return out;
  });
  if (Buffer.byteLength(JSON.stringify(answer), "utf8") > MAX_RESPONSE_BYTES) {
    throw new InvalidInputError({ kind: "analyticsResultTooLarge", max: MAX_RESPONSE_BYTES });
  }
  return answer;
}

/** NaN and ±Infinity (avg of nothing, a float division) are null in JSON, as upstream answers them; bigints numbers. */
function answerValue(value: unknown): unknown {
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "string" && (value === "NaN" || value === "Infinity" || value === "-Infinity")) return null;
  if (Array.isArray(value)) return value.map(answerValue);
  return value;
}
