/**
 * Upstream's public analytics tables (Unkey's `key_verifications_*_v1`, contract §10) and the keyhaven rows each is
 * read from. Every table is read as a subquery of its own, with the caller's workspace (and API, and retention)
 * filter inside it, so that nothing a query says around it (an alias, a join, an OR) can reach past the filter.
 */

/** How a value is kept in the translated query (and so how it compares and how it is answered). */
export type SqlKind = "string" | "int" | "float" | "bool" | "ms" | "datetime" | "interval" | "strings" | "array" | "null";

export type PublicTableName =
  | "key_verifications_v1"
  | "key_verifications_per_minute_v1"
  | "key_verifications_per_hour_v1"
  | "key_verifications_per_day_v1"
  | "key_verifications_per_month_v1";

export type PublicTable = {
  name: PublicTableName;
  /** The columns in upstream's order, with their kinds; `time` is unix ms in the raw table, the bucket start elsewhere. */
  columns: ReadonlyMap<string, SqlKind>;
  /** Columns upstream has that keyhaven does not keep for this table (refused by name). */
  unavailable: ReadonlySet<string>;
  /** Which retention bounds it: the verification log's or the hourly counts'. */
  retention: "log" | "aggregate";
};

const IDENTITY_COLUMNS: [string, SqlKind][] = [
  ["workspace_id", "string"],
  ["key_space_id", "string"],
  ["identity_id", "string"],
  ["external_id", "string"],
  ["key_id", "string"],
];

const RAW_COLUMNS = new Map<string, SqlKind>([
  ["request_id", "string"],
  ["time", "ms"],
  ...IDENTITY_COLUMNS,
  ["region", "string"],
  ["source", "string"],
  ["app_id", "string"],
  ["outcome", "string"],
  ["tags", "strings"],
  ["spent_credits", "int"],
  ["latency", "float"],
]);

const AGGREGATE_COLUMNS = new Map<string, SqlKind>([
  ["time", "datetime"],
  ...IDENTITY_COLUMNS,
  ["outcome", "string"],
  ["source", "string"],
  ["app_id", "string"],
  ["tags", "strings"],
  ["count", "int"],
  ["spent_credits", "int"],
  ["latency_avg", "float"],
  ["latency_p75", "float"],
  ["latency_p99", "float"],
]);

const PERCENTILES = new Set(["latency_p75", "latency_p99"]);
const NONE = new Set<string>();

export const PUBLIC_TABLES: ReadonlyMap<string, PublicTable> = new Map<string, PublicTable>(
  (
    [
      { name: "key_verifications_v1", columns: RAW_COLUMNS, unavailable: NONE, retention: "log" },
      { name: "key_verifications_per_minute_v1", columns: AGGREGATE_COLUMNS, unavailable: NONE, retention: "log" },
      { name: "key_verifications_per_hour_v1", columns: AGGREGATE_COLUMNS, unavailable: PERCENTILES, retention: "aggregate" },
      { name: "key_verifications_per_day_v1", columns: AGGREGATE_COLUMNS, unavailable: PERCENTILES, retention: "aggregate" },
      { name: "key_verifications_per_month_v1", columns: AGGREGATE_COLUMNS, unavailable: PERCENTILES, retention: "aggregate" },
    ] satisfies PublicTable[]
  ).map((t) => [t.name, t]),
);

/** Whose rows a table access may read, and from when: the filter every table subquery carries. */
export type TableScope = {
  /** Already quoted SQL literals (sqlString), never the caller's text. */
  workspaceId: string;
  /** `undefined`: every API of the workspace; else only these (quoted literals), possibly none. */
  keySpaceIds: readonly string[] | undefined;
  /** The oldest unix ms each retention lets a query read. */
  logFromMs: number;
  aggregateFromMs: number;
};

const HOUR_MS = 3_600_000;

/**
 * The SQL of one table access: a subquery answering the public table's columns (in `PUBLIC_TABLES` order) from
 * keyhaven's rows of the caller's workspace (and APIs) within retention. Every identifier and literal in it is ours.
 * `offset 0` keeps PostgreSQL from pushing the query's own conditions into it: pushed down, a condition that can fail
 * on a value (a cast of a string to a time) could run on another workspace's row before the workspace filter does,
 * and its error message would show that row's value.
 */
export function tableSql(table: PublicTable, scope: TableScope): string {
  const apis = (column: string) =>
    scope.keySpaceIds === undefined
      ? ""
      : scope.keySpaceIds.length === 0
        ? " and false"
        : ` and ${column} in (${scope.keySpaceIds.join(", ")})`;
  if (table.retention === "log") {
    const where = `l.workspace_id = ${scope.workspaceId}${apis("l.key_space_id")} and l.time_m >= ${Math.trunc(scope.logFromMs)}`;
    if (table.name === "key_verifications_v1") {
      return `(select l.request_id, l.time_m as "time", l.workspace_id, l.key_space_id, coalesce(l.identity_id, '') as identity_id,
        coalesce(l.external_id, '') as external_id, l.key_id, l.region, ''::text as source, ''::text as app_id, l.outcome, l.tags,
        l.spent_credits, l.latency from key_verifications_log l where ${where} offset 0)`;
    }
    return `(select to_timestamp((l.time_m / 60000) * 60) as "time", l.workspace_id, l.key_space_id, coalesce(l.identity_id, '') as identity_id,
      coalesce(l.external_id, '') as external_id, l.key_id, l.outcome, ''::text as source, ''::text as app_id, l.tags,
      count(*)::bigint as "count", sum(l.spent_credits)::bigint as spent_credits, avg(l.latency) as latency_avg,
      percentile_cont(0.75) within group (order by l.latency) as latency_p75,
      percentile_cont(0.99) within group (order by l.latency) as latency_p99
      from key_verifications_log l where ${where}
      group by 1, l.workspace_id, l.key_space_id, l.identity_id, l.external_id, l.key_id, l.outcome, l.tags offset 0)`;
  }
  const fromHour = Math.trunc(scope.aggregateFromMs) - (Math.trunc(scope.aggregateFromMs) % HOUR_MS);
  const where = `c.workspace_id = ${scope.workspaceId}${apis("c.api_id")} and c.hour_m >= ${fromHour}`;
  // external_id from the identity the count was made for, looked up within the same workspace.
  const identities = `left join identities i on i.id = c.identity_id and i.workspace_id = ${scope.workspaceId}`;
  if (table.name === "key_verifications_per_hour_v1") {
    return `(select to_timestamp(c.hour_m / 1000) as "time", c.workspace_id, c.api_id as key_space_id, coalesce(c.identity_id, '') as identity_id,
      coalesce(i.external_id, '') as external_id, c.key_id, c.outcome, ''::text as source, ''::text as app_id, c.tags,
      c.count::bigint as "count", c.spent_credits::bigint as spent_credits, c.latency_sum / nullif(c.count, 0) as latency_avg
      from verification_counts c ${identities} where ${where} offset 0)`;
  }
  const unit = table.name === "key_verifications_per_day_v1" ? "day" : "month";
  // Session time zone is UTC for the whole transaction (the repository sets it), so date_trunc buckets UTC days.
  return `(select date_trunc('${unit}', to_timestamp(c.hour_m / 1000)) as "time", c.workspace_id, c.api_id as key_space_id,
    coalesce(c.identity_id, '') as identity_id, coalesce(i.external_id, '') as external_id, c.key_id, c.outcome,
    ''::text as source, ''::text as app_id, c.tags, sum(c.count)::bigint as "count", sum(c.spent_credits)::bigint as spent_credits,
    sum(c.latency_sum) / nullif(sum(c.count), 0) as latency_avg
    from verification_counts c ${identities} where ${where}
    group by 1, c.workspace_id, c.api_id, c.identity_id, i.external_id, c.key_id, c.outcome, c.tags offset 0)`;
}
