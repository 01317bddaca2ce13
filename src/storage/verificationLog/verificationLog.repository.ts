import { type SQL, sql } from "drizzle-orm";
import { type Db, preparedPerHandle, rowsOf } from "../client.js";
import { keyVerificationChunks } from "../schema.js";

const DAY_MS = 86_400_000;

/**
 * The oldest time (unix ms) the log keeps at `now` with a retention of `days` (config.verificationLogDays): the pruning
 * deletes the rows before it, so a query of the log must refuse a range that starts before it (0 days: no log at all).
 */
export function verificationLogCutoff(now: number, days: number): number {
  return now - days * DAY_MS;
}

/** One verification as the log keeps it: a row of `key_verifications_log` but its region (the writer's, one per process). */
export type VerificationLogRow = {
  requestId: string;
  /** Unix ms of the verification. */
  timeM: number;
  workspaceId: string;
  /** The key's API (upstream's keyspace). */
  keySpaceId: string;
  keyId: string;
  identityId: string | null;
  externalId: string | null;
  /** The verification's code, as the counts of `verification_counts` name it (VALID, RATE_LIMITED…). */
  outcome: string;
  /** As the request sent them; undefined or empty when it sent none. */
  tags: readonly string[] | undefined;
  spentCredits: number;
  /** Milliseconds the verification took in keyhaven. */
  latency: number;
};

/**
 * The insert of a batch, prepared once per database handle: one JSON parameter holding one chunk per workspace (its
 * workspace, oldest and newest time, count and events), spread into rows by `jsonb_to_recordset`; the region, the
 * same for every row of a process, is one text parameter. A statement of thousands of verifications is one jsonb
 * value to parse and a few rows to write.
 */
const chunksInsert = preparedPerHandle((db) =>
  db
    .insert(keyVerificationChunks)
    .select(
      // The table's columns in schema order: workspace_id, from_m, to_m, n, region, events.
      sql`select x.w, x.f, x.t, x.n, ${sql.placeholder("region")}::text, x.e
        from jsonb_to_recordset(${sql.placeholder("chunks")}::jsonb) as x(w text, f int8, t int8, n int4, e jsonb)`,
    )
    .prepare("keyhaven_log_verifications"),
);

/** One workspace's verifications of a batch, as chunksInsert takes them. */
type Chunk = { w: string; f: number; t: number; n: number; e: unknown[][] };

/**
 * Appends the rows, all with `region`, in one statement: one chunk per workspace, each verification an event of the
 * order `key_verifications_log` reads (migration verification_log).
 */
export async function insertVerificationLogRows(db: Db, rows: readonly VerificationLogRow[], region: string): Promise<void> {
  if (rows.length === 0) return;
  const byWorkspace = new Map<string, Chunk>();
  for (const r of rows) {
    let chunk = byWorkspace.get(r.workspaceId);
    if (chunk === undefined) {
      chunk = { w: r.workspaceId, f: r.timeM, t: r.timeM, n: 0, e: [] };
      byWorkspace.set(r.workspaceId, chunk);
    }
    if (r.timeM < chunk.f) chunk.f = r.timeM;
    if (r.timeM > chunk.t) chunk.t = r.timeM;
    chunk.n++;
    chunk.e.push([
      r.requestId,
      r.timeM,
      r.keySpaceId,
      r.keyId,
      r.identityId,
      r.externalId,
      r.outcome,
      r.tags ?? [],
      r.spentCredits,
      // JSON has no NaN or Infinity (JSON.stringify would write null): a latency is a finite number of ms.
      Number.isFinite(r.latency) ? r.latency : 0,
    ]);
  }
  await chunksInsert(db).execute({ chunks: JSON.stringify([...byWorkspace.values()]), region });
}

/**
 * The first workspace (in the database's text order) with rows in the log after `after` (or from it, `inclusive`)
 * and before `below`, each bound left out when undefined: one probe of the (workspace_id, to_m) index.
 */
export async function nextLoggedWorkspace(
  db: Db,
  range: { after: string | undefined; inclusive: boolean; below: string | undefined },
): Promise<string | undefined> {
  const where: SQL[] = [sql`true`];
  if (range.after !== undefined) where.push(range.inclusive ? sql`workspace_id >= ${range.after}` : sql`workspace_id > ${range.after}`);
  if (range.below !== undefined) where.push(sql`workspace_id < ${range.below}`);
  const [row] = rowsOf<{ w: string | null }>(
    await db.execute(sql`select min(workspace_id) as w from key_verification_chunks where ${sql.join(where, sql` and `)}`),
  );
  return row?.w ?? undefined;
}

/**
 * Deletes about `maxRows` (at least, when there are as many: whole chunks) of the workspace's verifications older than
 * `before` (unix ms), oldest first; answers how many went. Whole chunks whose newest verification is older first, by
 * the (workspace_id, to_m) index; once none is left, the chunks that straddle `before` keep only their newer events
 * (by the (workspace_id, from_m) index). Short statements: at most `maxRows` chunks each.
 */
export async function deleteVerificationLogRowsBefore(db: Db, workspaceId: string, before: number, maxRows: number): Promise<number> {
  const whole = countDeleted(
    await db.execute(sql`with picked as (
        select ctid as id, n, sum(n) over (order by to_m, ctid) as upto from key_verification_chunks
        where workspace_id = ${workspaceId} and to_m < ${before}::int8 order by to_m, ctid limit ${maxRows}),
      gone as (
        delete from key_verification_chunks where ctid = any(array(select id from picked where upto - n < ${maxRows}))
        returning n)
      select coalesce(sum(n), 0)::int as deleted from gone`),
  );
  if (whole >= maxRows) return whole;
  return (
    whole +
    countDeleted(
      await db.execute(sql`with straddling as (
        select ctid as id, n,
          (select coalesce(jsonb_agg(e), '[]'::jsonb) from jsonb_array_elements(events) e where (e->>1)::int8 >= ${before}::int8) as kept
        from key_verification_chunks
        where workspace_id = ${workspaceId} and from_m < ${before}::int8 and to_m >= ${before}::int8
        order by from_m limit ${maxRows}),
      trimmed as (
        update key_verification_chunks c set events = s.kept, n = jsonb_array_length(s.kept),
          from_m = (select min((e->>1)::int8) from jsonb_array_elements(s.kept) e)
        from straddling s where c.ctid = s.id
        returning s.n - jsonb_array_length(s.kept) as n)
      select coalesce(sum(n), 0)::int as deleted from trimmed`),
    )
  );
}

/**
 * How many of the workspace's verifications are beyond its newest `keep`, counting no further than `most`: one sum of
 * its chunks' counts.
 */
export async function countVerificationLogRowsBeyond(db: Db, workspaceId: string, keep: number, most: number): Promise<number> {
  const [row] = rowsOf<{ n: number | string }>(
    await db.execute(sql`select greatest(0, least(coalesce(sum(n), 0) - ${keep}, ${most}))::int as n
      from key_verification_chunks where workspace_id = ${workspaceId}`),
  );
  return Number(row?.n ?? 0);
}

/**
 * Deletes the workspace's `rows` oldest verifications; answers how many went: its oldest chunks as long as they fit
 * within `rows` (at most `rows` chunks), then, if some are still to go, the oldest events of the oldest chunk left.
 */
export async function deleteOldestVerificationLogRows(db: Db, workspaceId: string, rows: number): Promise<number> {
  const whole = countDeleted(
    await db.execute(sql`with picked as (
        select ctid as id, n, sum(n) over (order by to_m, ctid) as upto from key_verification_chunks
        where workspace_id = ${workspaceId} order by to_m, ctid limit ${rows}),
      gone as (
        delete from key_verification_chunks where ctid = any(array(select id from picked where upto <= ${rows}))
        returning n)
      select coalesce(sum(n), 0)::int as deleted from gone`),
  );
  const left = rows - whole;
  if (left <= 0) return whole;
  return (
    whole +
    countDeleted(
      await db.execute(sql`with oldest as (
        select ctid as id, n, (select coalesce(jsonb_agg(y.e order by (y.e->>1)::int8, y.i), '[]'::jsonb) from (
            select x.e, x.i from jsonb_array_elements(events) with ordinality as x(e, i)
            order by (x.e->>1)::int8, x.i offset ${left}) y) as kept
        from key_verification_chunks where workspace_id = ${workspaceId} order by to_m, ctid limit 1),
      trimmed as (
        update key_verification_chunks c set events = o.kept, n = jsonb_array_length(o.kept),
          from_m = coalesce((select min((e->>1)::int8) from jsonb_array_elements(o.kept) e), c.from_m)
        from oldest o where c.ctid = o.id
        returning o.n - jsonb_array_length(o.kept) as n)
      select coalesce(sum(n), 0)::int as deleted from trimmed`),
    )
  );
}

function countDeleted(result: unknown): number {
  const [row] = rowsOf<{ deleted: number | string }>(result);
  return Number(row?.deleted ?? 0);
}

/**
 * The verifications the console looks through for a key's latest: the workspace's newest, whole chunks until at least
 * this many (a rarely used key's may be older: its page says so). Bounds the work of one page on a busy workspace.
 */
export const LATEST_OF_KEY_SCAN = 20_000;

/** A row of the log as the console shows it. */
export type LoggedVerification = {
  requestId: string;
  timeM: number;
  outcome: string;
  tags: string[];
  spentCredits: number;
  latency: number;
  region: string;
};

/** The key's `limit` newest verifications among the workspace's LATEST_OF_KEY_SCAN newest, newest first. */
export async function latestVerificationsOfKey(db: Db, workspaceId: string, keyId: string, limit: number): Promise<LoggedVerification[]> {
  const rows = rowsOf<{
    request_id: string;
    time_m: number | string;
    outcome: string;
    tags: string[];
    spent_credits: number | string;
    latency: number | string;
    region: string;
  }>(
    await db.execute(sql`with recent as (
        select events, region, n, sum(n) over (order by to_m desc, ctid desc) as upto from key_verification_chunks
        where workspace_id = ${workspaceId} order by to_m desc, ctid desc limit ${LATEST_OF_KEY_SCAN})
      select e->>0 as request_id, (e->>1)::int8 as time_m, e->>6 as outcome, array(select jsonb_array_elements_text(e->7)) as tags,
        (e->>8)::int8 as spent_credits, (e->>9)::float8 as latency, r.region
      from recent r cross join lateral jsonb_array_elements(r.events) e
      where r.upto - r.n < ${LATEST_OF_KEY_SCAN} and e->>3 = ${keyId}
      order by (e->>1)::int8 desc limit ${limit}`),
  );
  return rows.map((r) => ({
    requestId: r.request_id,
    timeM: Number(r.time_m),
    outcome: r.outcome,
    tags: r.tags,
    spentCredits: Number(r.spent_credits),
    latency: Number(r.latency),
    region: r.region,
  }));
}
