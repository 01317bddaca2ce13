import { type SQL, sql } from "drizzle-orm";
import { jsonTextArray, textArray } from "../bulk.js";
import { type Db, preparedPerHandle, rowsOf } from "../client.js";
import { isStorableText } from "../lookupText.js";
import { verificationCounts } from "../schema.js";

/** A count as the flusher writes it: one row of `verification_counts` (its column names). */
export type VerificationCountRow = {
  key_id: string;
  workspace_id: string;
  api_id: string;
  hour_m: number;
  outcome: string;
  tags: string[];
  identity_id: string | null;
  count: number;
  /** Credits the counted verifications spent, and the sum of the ms they took (the aggregates' spent_credits, latency_avg). */
  spent_credits: number;
  latency_sum: number;
};

/**
 * The upsert of counts, prepared once per database handle: each column travels as one array parameter and
 * PostgreSQL zips them with `unnest`, tags as each row's JSON array (null when it has none, the common case). On
 * PostgreSQL this cost 6.7 µs of backend CPU per new count against 11.7 for the rows as one JSON recordset in an
 * unprepared statement (which also took a second round trip to describe its parameter): a verification of a key
 * not counted yet this hour makes a new count, so random keys among many pay it on every verification (issue 13
 * §2, docs/benchmarks.md). PGlite: the same cost either way.
 */
const countsUpsert = preparedPerHandle((db) => {
  const array = (name: string, type: "text" | "int8" | "float8") => sql`${sql.placeholder(name)}::${sql.raw(type)}[]`;
  const tags = sql`case when t is null then '{}'::text[] else ${jsonTextArray(sql`t`)} end`;
  return db
    .insert(verificationCounts)
    .select(
      // The table's columns in schema order (drizzle lists them all but the generated tags_hash): key_id, hour_m,
      // outcome, tags, workspace_id, api_id, identity_id, count, spent_credits, latency_sum.
      sql`select k, h, o, ${tags}, w, a, i, c, sc, ls
        from unnest(${array("keyIds", "text")}, ${array("hours", "int8")}, ${array("outcomes", "text")}, ${array("tags", "text")},
          ${array("workspaceIds", "text")}, ${array("apiIds", "text")}, ${array("identityIds", "text")}, ${array("counts", "int8")},
          ${array("spentCredits", "int8")}, ${array("latencySums", "float8")})
          as u(k, h, o, t, w, a, i, c, sc, ls)`,
    )
    .onConflictDoUpdate({
      // The tag set by its digest, which the database computes from the tags (schema.ts): never by its text.
      target: [verificationCounts.keyId, verificationCounts.hourM, verificationCounts.outcome, verificationCounts.tagsHash],
      set: {
        count: sql`${verificationCounts.count} + excluded.count`,
        spentCredits: sql`${verificationCounts.spentCredits} + excluded.spent_credits`,
        latencySum: sql`${verificationCounts.latencySum} + excluded.latency_sum`,
        identityId: sql`excluded.identity_id`,
      },
    })
    .prepare("keyhaven_count_verifications");
});

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** One order of counts for every writer: by hour, key, outcome, then tags. */
function inLockOrder(a: VerificationCountRow, b: VerificationCountRow): number {
  return (
    a.hour_m - b.hour_m ||
    byText(a.key_id, b.key_id) ||
    byText(a.outcome, b.outcome) ||
    (a.tags.length === 0 && b.tags.length === 0 ? 0 : byText(a.tags.join("\u0000"), b.tags.join("\u0000")))
  );
}

/**
 * Adds the counts in one statement. The statement locks the rows in the order it gets them, so it gets them in one
 * order (inLockOrder): two replicas writing counts of the same keys, each in the order it first saw them, deadlocked.
 */
export async function upsertVerificationCounts(db: Db, counted: readonly VerificationCountRow[]): Promise<void> {
  if (counted.length === 0) return;
  const rows = [...counted].sort(inLockOrder);
  const keyIds: string[] = [];
  const hours: number[] = [];
  const outcomes: string[] = [];
  const tags: (string | null)[] = [];
  const workspaceIds: string[] = [];
  const apiIds: string[] = [];
  const identityIds: (string | null)[] = [];
  const counts: number[] = [];
  const spentCredits: number[] = [];
  const latencySums: number[] = [];
  for (const r of rows) {
    keyIds.push(r.key_id);
    hours.push(r.hour_m);
    outcomes.push(r.outcome);
    tags.push(r.tags.length === 0 ? null : JSON.stringify(r.tags));
    workspaceIds.push(r.workspace_id);
    apiIds.push(r.api_id);
    identityIds.push(r.identity_id);
    counts.push(r.count);
    spentCredits.push(r.spent_credits);
    latencySums.push(r.latency_sum);
  }
  await countsUpsert(db).execute({ keyIds, hours, outcomes, tags, workspaceIds, apiIds, identityIds, counts, spentCredits, latencySums });
}

export const DAY_MS = 86_400_000;

/** Rows deleted per statement by the retention cleanup, so that no statement holds many locks for long. */
const DELETE_BATCH = 10_000;

/** Deletes the counts of hours that started before `cutoff` (unix ms), in batches; returns how many rows went. */
export async function deleteVerificationCountsBefore(db: Db, cutoff: number): Promise<number> {
  let total = 0;
  for (;;) {
    const [row] = rowsOf<{ n: unknown }>(
      await db.execute(sql`
        with gone as (
          delete from verification_counts where ctid in (
            select ctid from verification_counts where hour_m < ${cutoff}::bigint limit ${DELETE_BATCH})
          returning 1)
        select count(*)::int8 as n from gone`),
    );
    const n = Number(row?.n ?? 0);
    total += n;
    if (n < DELETE_BATCH) return total;
  }
}

/** keys.getVerifications: per UTC day, the VALID, RATE_LIMITED and USAGE_EXCEEDED counts of these keys. */
export async function dailyKeyVerifications(
  db: Db,
  workspaceId: string,
  keyIds: string[],
  from: number,
  to: number,
): Promise<{ time: number; success: number; rateLimited: number; usageExceeded: number }[]> {
  const rows = rowsOf<{ time: unknown; success: unknown; rate_limited: unknown; usage_exceeded: unknown }>(
    await db.execute(sql`
      select hour_m - mod(hour_m, ${DAY_MS}::bigint) as time,
        coalesce(sum(count) filter (where outcome = 'VALID'), 0)::int8 as success,
        coalesce(sum(count) filter (where outcome = 'RATE_LIMITED'), 0)::int8 as rate_limited,
        coalesce(sum(count) filter (where outcome = 'USAGE_EXCEEDED'), 0)::int8 as usage_exceeded
      from verification_counts
      where workspace_id = ${workspaceId} and key_id = any(${textArray(keyIds)})
        and hour_m >= ${from}::bigint and hour_m <= ${to}::bigint
      group by 1
      order by 1`),
  );
  return rows.map((r) => ({
    time: Number(r.time),
    success: Number(r.success),
    rateLimited: Number(r.rate_limited),
    usageExceeded: Number(r.usage_exceeded),
  }));
}

/** The outcome counters of analytics.getVerifications, each the sum of one verification code. */
export const outcomeCounters = {
  valid: "VALID",
  notFound: "NOT_FOUND",
  forbidden: "FORBIDDEN",
  usageExceeded: "USAGE_EXCEEDED",
  rateLimited: "RATE_LIMITED",
  unauthorized: "UNAUTHORIZED",
  disabled: "DISABLED",
  insufficientPermissions: "INSUFFICIENT_PERMISSIONS",
  expired: "EXPIRED",
} as const;
export type OutcomeCounter = keyof typeof outcomeCounters;
export type Counters = Record<OutcomeCounter | "total", number>;

export type TimeGranularity = "hour" | "day" | "month";

export type AnalyticsQuery = {
  workspaceId: string;
  /** Absent: every API of the workspace (the console's overview). */
  apiId?: string | undefined;
  /** Inclusive bounds on the start of each hour counted. */
  from: number;
  to: number;
  keyIds?: string[] | undefined;
  identityId?: string | undefined;
  /** Only verifications that carried all of these tags. */
  tags?: string[] | undefined;
  time?: TimeGranularity | undefined;
  byKey: boolean;
  byIdentity: boolean;
  byTags: boolean;
  byTag: boolean;
  orderBy?: OutcomeCounter | "total" | "time" | undefined;
  order: "asc" | "desc";
  limit?: number | undefined;
};

export type AnalyticsRow = Counters & {
  time?: number;
  keyId?: string;
  identity?: { id: string; externalId: string };
  tags?: string[];
  tag?: string;
};

/** The start of the UTC hour, day or month that contains `ms`, in SQL. */
function timeBucket(granularity: TimeGranularity): SQL {
  if (granularity === "hour") return sql`vc.hour_m`;
  if (granularity === "day") return sql`(vc.hour_m - mod(vc.hour_m, ${DAY_MS}::bigint))`;
  return sql`(extract(epoch from date_trunc('month', to_timestamp(vc.hour_m / 1000.0), 'UTC')) * 1000)::int8`;
}

/** analytics.getVerifications over `verification_counts`: one row per group, counters summed per outcome. */
export async function queryVerifications(db: Db, q: AnalyticsQuery): Promise<AnalyticsRow[]> {
  const select: SQL[] = [];
  const groupBy: SQL[] = [];
  const where: SQL[] = [sql`vc.workspace_id = ${q.workspaceId}`, sql`vc.hour_m >= ${q.from}::bigint`, sql`vc.hour_m <= ${q.to}::bigint`];
  if (q.apiId !== undefined) where.push(sql`vc.api_id = ${q.apiId}`);
  if (q.time) {
    select.push(sql`${timeBucket(q.time)} as "time"`);
    groupBy.push(sql`1`);
  }
  if (q.byKey) {
    select.push(sql`vc.key_id as "keyId"`);
    groupBy.push(sql`vc.key_id`);
  }
  if (q.byIdentity) {
    select.push(sql`vc.identity_id as "identityId", coalesce(min(i.external_id), '') as "externalId"`);
    groupBy.push(sql`vc.identity_id`);
    where.push(sql`vc.identity_id is not null`);
  }
  if (q.byTags) {
    select.push(sql`vc.tags as "tags"`);
    groupBy.push(sql`vc.tags`);
  }
  if (q.byTag) {
    select.push(sql`t.tag as "tag"`);
    groupBy.push(sql`t.tag`);
  }
  if (q.keyIds && q.keyIds.length > 0) {
    // An id PostgreSQL's text cannot hold names no key (lookupText.ts): not sent; only such ids, no row.
    const keyIds = q.keyIds.filter(isStorableText);
    if (keyIds.length === 0) return [];
    where.push(sql`vc.key_id = any(${textArray(keyIds)})`);
  }
  if (q.identityId !== undefined) where.push(sql`vc.identity_id = ${q.identityId}`);
  if (q.tags && q.tags.length > 0) where.push(sql`vc.tags @> ${textArray(q.tags)}`);

  for (const [name, code] of Object.entries(outcomeCounters)) {
    select.push(sql`coalesce(sum(vc.count) filter (where vc.outcome = ${code}), 0)::int8 as ${sql.raw(`"${name}"`)}`);
  }
  select.push(sql`coalesce(sum(vc.count), 0)::int8 as "total"`);

  const from = [sql`verification_counts vc`];
  if (q.byTag) from.push(sql`cross join lateral unnest(vc.tags) as t(tag)`);
  if (q.byIdentity) from.push(sql`left join identities i on i.id = vc.identity_id`);

  const direction = sql.raw(q.order === "desc" ? "desc" : "asc");
  const orderBy: SQL[] = [];
  // Column aliases come from the whitelist of the route's schema, never from the request as such.
  if (q.orderBy) orderBy.push(sql`${sql.raw(`"${q.orderBy}"`)} ${direction}`);
  if (q.time) orderBy.push(sql`"time" asc`);
  for (const g of groupBy.slice(q.time ? 1 : 0)) orderBy.push(sql`${g} asc`);

  const rows = rowsOf<Record<string, unknown>>(
    await db.execute(sql`
      select ${sql.join(select, sql`, `)}
      from ${sql.join(from, sql` `)}
      where ${sql.join(where, sql` and `)}
      ${groupBy.length > 0 ? sql`group by ${sql.join(groupBy, sql`, `)}` : sql``}
      ${orderBy.length > 0 ? sql`order by ${sql.join(orderBy, sql`, `)}` : sql``}
      ${q.limit !== undefined ? sql`limit ${q.limit}` : sql``}`),
  );
  return rows.map((r) => {
    const row: AnalyticsRow = { ...countersOf(r) };
    if (q.time) row.time = Number(r.time);
    if (q.byKey) row.keyId = r.keyId as string;
    if (q.byIdentity) row.identity = { id: r.identityId as string, externalId: r.externalId as string };
    if (q.byTags) row.tags = r.tags as string[];
    if (q.byTag) row.tag = r.tag as string;
    return row;
  });
}

function countersOf(r: Record<string, unknown>): Counters {
  const counters = { total: Number(r.total ?? 0) } as Counters;
  for (const name of Object.keys(outcomeCounters) as OutcomeCounter[]) counters[name] = Number(r[name] ?? 0);
  return counters;
}

export function emptyCounters(): Counters {
  const counters = { total: 0 } as Counters;
  for (const name of Object.keys(outcomeCounters) as OutcomeCounter[]) counters[name] = 0;
  return counters;
}

/** A live key's workspace and API, by id (any workspace: the caller compares the workspace). */
export async function findKeyScope(db: Db, keyId: string): Promise<{ workspaceId: string; apiId: string } | undefined> {
  const [row] = rowsOf<{ workspace_id: string; api_id: string }>(
    await db.execute(sql`select workspace_id, api_id from keys where id = ${keyId} and deleted_at_m is null`),
  );
  return row && { workspaceId: row.workspace_id, apiId: row.api_id };
}

/** The workspace's live keys whose owner is `ownerId`: the deprecated `ownerId` field, or the identity's externalId. */
export async function findKeysOfOwner(db: Db, workspaceId: string, ownerId: string): Promise<{ id: string; apiId: string }[]> {
  const rows = rowsOf<{ id: string; api_id: string }>(
    await db.execute(sql`
      select k.id, k.api_id from keys k
      left join identities i on i.id = k.identity_id
      where k.workspace_id = ${workspaceId} and k.deleted_at_m is null
        and (k.owner_id = ${ownerId} or i.external_id = ${ownerId})`),
  );
  return rows.map((r) => ({ id: r.id, apiId: r.api_id }));
}

/** The workspace's identity with this externalId. */
export async function findIdentityId(db: Db, workspaceId: string, externalId: string): Promise<string | undefined> {
  const [row] = rowsOf<{ id: string }>(
    await db.execute(sql`select id from identities where workspace_id = ${workspaceId} and external_id = ${externalId}`),
  );
  return row?.id;
}

/**
 * Verification counts per outcome and UTC minute of an end user (`externalId`, as each event of the raw log carries
 * it), optionally one key's, in [from, to): a portal's minute buckets (the hourly counts are too coarse for them).
 * The chunks that end before `from` are skipped by their index.
 */
export async function minuteVerificationsOfExternalId(
  db: Db,
  q: { workspaceId: string; externalId: string; keyId?: string | undefined; from: number; to: number },
): Promise<{ minute: number; outcome: string; count: number }[]> {
  if (q.keyId !== undefined && !isStorableText(q.keyId)) return [];
  const rows = rowsOf<{ minute: string | number; outcome: string; count: string | number }>(
    await db.execute(sql`
      select (l.time_m - mod(l.time_m, 60000::int8))::int8 as minute, l.outcome, count(*)::int8 as count
      from key_verifications_log l
      where l.workspace_id = ${q.workspaceId} and l.chunk_to_m >= ${q.from}::bigint
        and l.external_id = ${q.externalId} and l.time_m >= ${q.from}::bigint and l.time_m < ${q.to}::bigint
        ${q.keyId === undefined ? sql`` : sql`and l.key_id = ${q.keyId}`}
      group by 1, 2`),
  );
  return rows.map((r) => ({ minute: Number(r.minute), outcome: r.outcome, count: Number(r.count) }));
}

/**
 * The ids of an identity's keys, deleted ones too (their counts stay its), at most `limit`: what lets a count of one
 * end user's verifications read `verification_counts` by its primary key (key, hour) instead of a workspace's rows.
 */
export async function keyIdsOfIdentity(db: Db, workspaceId: string, identityId: string, limit: number): Promise<string[]> {
  const rows = rowsOf<{ id: string }>(
    await db.execute(sql`select id from keys where identity_id = ${identityId} and workspace_id = ${workspaceId} limit ${limit}`),
  );
  return rows.map((r) => r.id);
}

/** How many verifications the raw log holds for a workspace in [from, to), by its chunks (their index; no event read). */
export async function countLogEvents(db: Db, workspaceId: string, from: number, to: number): Promise<number> {
  const [row] = rowsOf<{ n: string | number }>(
    await db.execute(sql`select coalesce(sum(n), 0)::int8 as n from key_verification_chunks
      where workspace_id = ${workspaceId} and to_m >= ${from}::bigint and from_m < ${to}::bigint`),
  );
  return Number(row?.n ?? 0);
}
