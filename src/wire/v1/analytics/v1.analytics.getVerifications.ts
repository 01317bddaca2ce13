import { z } from "zod";
import {
  getVerifications as getVerificationsCore,
  OUTCOME_COUNTERS,
  type OutcomeCounter,
  planVerifications,
  type VerificationsQuery,
} from "../../../core/analytics/analytics.core.js";
import { queryInt, queryText } from "../query.js";
import { idInput } from "../inputBounds.js";
import { defineRpc } from "../rpc.js";

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

/** The v1 query's fields (`keyId`, `tag`) as the core's. */
const verificationsQuery = (input: {
  apiId: string;
  externalId?: string | undefined;
  keyId?: string[] | undefined;
  tag?: string[] | undefined;
  start: number;
  end?: number | undefined;
  groupBy?: VerificationsQuery["groupBy"];
  limit?: number | undefined;
  orderBy?: VerificationsQuery["orderBy"];
  order: "asc" | "desc";
}): VerificationsQuery => ({
  apiId: input.apiId,
  externalId: input.externalId,
  keyIds: input.keyId,
  tags: input.tag,
  start: input.start,
  end: input.end,
  groupBy: input.groupBy,
  limit: input.limit,
  orderBy: input.orderBy,
  order: input.order,
});

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
      ...Object.fromEntries(OUTCOME_COUNTERS.map((name) => [name, z.number()])),
      total: z.number(),
      keyId: z.string().optional(),
      identity: z.object({ id: z.string(), externalId: z.string() }).optional(),
      tags: z.array(z.string()).optional(),
      tag: z.string().optional(),
    }),
  ),
  // The input's own 400s come before authentication, as before.
  beforeAuth: (input, { deps }) => planVerifications(verificationsQuery(input), deps.clock.now()),
  handler: (input, { deps, rootKey, checked }) => getVerificationsCore(deps, rootKey, verificationsQuery(input), checked),
});
