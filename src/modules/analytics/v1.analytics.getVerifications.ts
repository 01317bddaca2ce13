import { z } from "zod";
import { requirePermission } from "../../auth/root-key.js";
import { ApiError } from "../../errors.js";
import { queryInt, queryText } from "../../http/query.js";
import { idInput } from "../../http/input-bounds.js";
import { defineRpc } from "../../rpc.js";
import { findApi } from "../apis/apis.repository.js";
import {
  type AnalyticsRow,
  emptyCounters,
  findIdentityId,
  type OutcomeCounter,
  outcomeCounters,
  queryVerifications,
  type TimeGranularity,
} from "./analytics.repository.js";

const HOUR_MS = 3_600_000;
/** Time-only groups are answered with one row per slice of the range, empty ones included, up to this many. */
export const MAX_TIME_SLICES = 10_000;

const groupByValues = ["key", "identity", "tags", "tag", "month", "day", "hour"] as const;
const orderByValues = [
  "time",
  "valid",
  "notFound",
  "forbidden",
  "usageExceeded",
  "rateLimited",
  "unauthorized",
  "disabled",
  "insufficientPermissions",
  "expired",
  "total",
] as const satisfies readonly ("time" | "total" | OutcomeCounter)[];

/** A repeated query parameter (`?keyId=a&keyId=b`) or one value; `splitCommas` also accepts the SDK's `a,b`. */
function queryList<T extends string>(item: z.ZodType<T, string>, splitCommas: boolean) {
  return z
    .union([queryText, z.array(queryText)])
    .transform((v) => (Array.isArray(v) ? v : [v]).flatMap((s) => (splitCommas ? s.split(",") : [s])))
    .pipe(z.array(item).max(100));
}

export const getVerifications = defineRpc({
  method: "GET",
  path: "/v1/analytics.getVerifications",
  auth: "rootKey",
  summary:
    "Verification counts of an API's keys per outcome, filtered by keys, identity (externalId) and tags, optionally grouped by hour, day or month (UTC), key, identity, tag set or single tag.",
  errors: [400, 403, 404, 503],
  returns: "Rows of verification counts, one per group.",
  input: z.object({
    apiId: queryText.min(1),
    externalId: queryText.min(1).optional(),
    keyId: queryList(idInput, true).optional(),
    tag: queryList(z.string().min(1).max(128), false).optional(),
    start: queryInt(0, Number.MAX_SAFE_INTEGER),
    end: queryInt(0, Number.MAX_SAFE_INTEGER).optional(),
    groupBy: queryList(z.enum(groupByValues), true).optional(),
    limit: queryInt(1, 100_000).optional(),
    orderBy: z.enum(orderByValues).optional(),
    order: z.enum(["asc", "desc"]).default("asc"),
  }),
  output: z.array(
    z.object({
      time: z.number().optional(),
      ...Object.fromEntries(Object.keys(outcomeCounters).map((name) => [name, z.number()])),
      total: z.number(),
      keyId: z.string().optional(),
      identity: z.object({ id: z.string(), externalId: z.string() }).optional(),
      tags: z.array(z.string()).optional(),
      tag: z.string().optional(),
    }),
  ),
  // The input's own 400s come before authentication, as before.
  beforeAuth: (input, { deps }) => {
    const end = input.end ?? deps.clock.now();
    if (input.start >= end) throw new ApiError("BAD_REQUEST", "start cannot be equal or greater than end");
    const groupBy = new Set(input.groupBy ?? []);
    if (groupBy.has("tag") && groupBy.has("tags")) {
      throw new ApiError("BAD_REQUEST", "You can not group by tag and tags at the same time");
    }
    const time: TimeGranularity | undefined = groupBy.has("month")
      ? "month"
      : groupBy.has("day")
        ? "day"
        : groupBy.has("hour")
          ? "hour"
          : undefined;
    if (input.orderBy === "time" && !time) {
      throw new ApiError("BAD_REQUEST", "orderBy=time needs groupBy hour, day or month");
    }
    return { end, groupBy, time };
  },
  handler: async (input, { deps, rootKey: auth, checked: { end, groupBy, time } }) => {
    const { db } = deps;
    requirePermission(auth, { or: ["*", "api.*.read_api", `api.${input.apiId}.read_api`] });
    if (!(await findApi(db, auth.workspaceId, input.apiId))) {
      throw new ApiError("NOT_FOUND", `api ${input.apiId} not found`);
    }
    let identityId: string | undefined;
    if (input.externalId !== undefined) {
      identityId = await findIdentityId(db, auth.workspaceId, input.externalId);
      if (!identityId) throw new ApiError("NOT_FOUND", `identity with externalId ${input.externalId} not found`);
    }

    const byKey = groupBy.has("key");
    const byIdentity = groupBy.has("identity");
    const byTags = groupBy.has("tags");
    const byTag = groupBy.has("tag");
    // Grouped by time alone (and in time order): every slice before `end`'s gets a row, empty ones as zeros.
    const fill = time !== undefined && !byKey && !byIdentity && !byTags && !byTag && (input.orderBy ?? "time") === "time";
    const slices = fill ? timeSlices(time!, input.start, end) : [];

    const rows = await queryVerifications(db, {
      workspaceId: auth.workspaceId,
      apiId: input.apiId,
      from: input.start - (input.start % HOUR_MS),
      to: end,
      keyIds: input.keyId,
      identityId,
      tags: input.tag,
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

    const byTime = new Map(rows.map((r) => [r.time!, r]));
    const filled: AnalyticsRow[] = slices.map((t) => byTime.get(t) ?? { time: t, ...emptyCounters() });
    // The slice holding `end` gets no empty row (v1 filled up to, not including, it), but what was counted in it
    // up to `end`'s hour is answered, as v1 did: the fill never drops a count.
    const endSlice = byTime.get(sliceStart(time!, end));
    if (endSlice) filled.push(endSlice);
    if (input.order === "desc") filled.reverse();
    return input.limit === undefined ? filled : filled.slice(0, input.limit);
  },
});

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
      throw new ApiError(
        "BAD_REQUEST",
        `the range from start to end holds more than ${MAX_TIME_SLICES} ${granularity}s; narrow it or group by a longer period`,
      );
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
