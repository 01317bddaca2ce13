import { type SQL, sql } from "drizzle-orm";
import { jsonTextArray } from "../bulk.js";
import { type Db, preparedPerHandle, rowsOf } from "../client.js";
import { keyVerificationsLog } from "../schema.js";

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
 * The insert of a batch, prepared once per database handle: each column travels as one array parameter (tags as each
 * row's JSON array, null when it has none, the common case) and `unnest` zips them, so a batch of thousands of rows is
 * one statement of twelve parameters; the region, the same for every row of a process, is one text parameter.
 */
const logInsert = preparedPerHandle((db) => {
  const array = (name: string, type: "text" | "int8" | "float8") => sql`${sql.placeholder(name)}::${sql.raw(type)}[]`;
  const tags = sql`case when t is null then '{}'::text[] else ${jsonTextArray(sql`t`)} end`;
  return db
    .insert(keyVerificationsLog)
    .select(
      // The table's columns in schema order: request_id, time_m, workspace_id, key_space_id, key_id, identity_id,
      // external_id, outcome, tags, spent_credits, latency, region.
      sql`select r, tm, w, ks, k, i, e, o, ${tags}, c, l, ${sql.placeholder("region")}::text
        from unnest(${array("requestIds", "text")}, ${array("times", "int8")}, ${array("workspaceIds", "text")},
          ${array("keySpaceIds", "text")}, ${array("keyIds", "text")}, ${array("identityIds", "text")},
          ${array("externalIds", "text")}, ${array("outcomes", "text")}, ${array("tags", "text")},
          ${array("credits", "int8")}, ${array("latencies", "float8")})
          as u(r, tm, w, ks, k, i, e, o, t, c, l)`,
    )
    .prepare("keyhaven_log_verifications");
});

/** Appends the rows, all with `region`, in one statement. */
export async function insertVerificationLogRows(db: Db, rows: readonly VerificationLogRow[], region: string): Promise<void> {
  if (rows.length === 0) return;
  const n = rows.length;
  const requestIds = new Array<string>(n);
  const times = new Array<number>(n);
  const workspaceIds = new Array<string>(n);
  const keySpaceIds = new Array<string>(n);
  const keyIds = new Array<string>(n);
  const identityIds = new Array<string | null>(n);
  const externalIds = new Array<string | null>(n);
  const outcomes = new Array<string>(n);
  const tags = new Array<string | null>(n);
  const credits = new Array<number>(n);
  const latencies = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const r = rows[i]!;
    requestIds[i] = r.requestId;
    times[i] = r.timeM;
    workspaceIds[i] = r.workspaceId;
    keySpaceIds[i] = r.keySpaceId;
    keyIds[i] = r.keyId;
    identityIds[i] = r.identityId;
    externalIds[i] = r.externalId;
    outcomes[i] = r.outcome;
    tags[i] = r.tags === undefined || r.tags.length === 0 ? null : JSON.stringify(r.tags);
    credits[i] = r.spentCredits;
    latencies[i] = r.latency;
  }
  await logInsert(db).execute({
    requestIds,
    times,
    workspaceIds,
    keySpaceIds,
    keyIds,
    identityIds,
    externalIds,
    outcomes,
    tags,
    credits,
    latencies,
    region,
  });
}

/**
 * The first workspace (in the database's text order) with rows in the log after `after` (or from it, `inclusive`)
 * and before `below`, each bound left out when undefined: one probe of the (workspace_id, time_m) index.
 */
export async function nextLoggedWorkspace(
  db: Db,
  range: { after: string | undefined; inclusive: boolean; below: string | undefined },
): Promise<string | undefined> {
  const where: SQL[] = [sql`true`];
  if (range.after !== undefined) where.push(range.inclusive ? sql`workspace_id >= ${range.after}` : sql`workspace_id > ${range.after}`);
  if (range.below !== undefined) where.push(sql`workspace_id < ${range.below}`);
  const [row] = rowsOf<{ w: string | null }>(
    await db.execute(sql`select min(workspace_id) as w from key_verifications_log where ${sql.join(where, sql` and `)}`),
  );
  return row?.w ?? undefined;
}

/**
 * Deletes at most `maxRows` of the workspace's rows older than `before` (unix ms), oldest first; answers how many
 * went. One short statement: the rows are chosen by ctid in a bounded subselect on the (workspace_id, time_m) index.
 */
export async function deleteVerificationLogRowsBefore(db: Db, workspaceId: string, before: number, maxRows: number): Promise<number> {
  return countDeleted(
    await db.execute(sql`with gone as (
        delete from key_verifications_log where ctid = any(array(
          select ctid from key_verifications_log where workspace_id = ${workspaceId} and time_m < ${before}::int8
          order by time_m limit ${maxRows}))
        returning 1)
      select count(*)::int as deleted from gone`),
  );
}

/**
 * One step of a walk down the workspace's rows, newest first, from `before` (unix ms, exclusive; undefined: from the
 * newest): the time of the `chunk`-th row below it (or of the oldest, when fewer) and how many rows lie between that
 * time (inclusive) and `before` (all of the rows of that time, so the next step starts below it without missing one).
 * Undefined when no row is older than `before`. Reads about `chunk` entries of the (workspace_id, time_m) index.
 */
export async function stepDownVerificationLog(
  db: Db,
  workspaceId: string,
  before: number | undefined,
  chunk: number,
): Promise<{ from: number; rows: number } | undefined> {
  const below = before === undefined ? sql`` : sql`and time_m < ${before}::int8`;
  const [row] = rowsOf<{ t: number | string | null; n: number | string }>(
    await db.execute(sql`with edge as (
        select min(time_m) as t from (
          select time_m from key_verifications_log where workspace_id = ${workspaceId} ${below}
          order by time_m desc limit ${chunk}) s)
      select edge.t, (select count(*)::int from key_verifications_log
        where workspace_id = ${workspaceId} and time_m >= edge.t ${below}) as n
      from edge`),
  );
  if (row === undefined || row.t === null) return undefined;
  return { from: Number(row.t), rows: Number(row.n) };
}

/** How many of the workspace's rows are older than `before` (unix ms), counting no further than `most`. */
export async function countVerificationLogRowsBefore(db: Db, workspaceId: string, before: number, most: number): Promise<number> {
  const [row] = rowsOf<{ n: number | string }>(
    await db.execute(sql`select count(*)::int as n from (
        select 1 from key_verifications_log where workspace_id = ${workspaceId} and time_m < ${before}::int8 limit ${most}) older`),
  );
  return Number(row?.n ?? 0);
}

/** Deletes the workspace's `rows` oldest rows (a bounded statement, as deleteVerificationLogRowsBefore); answers how many went. */
export async function deleteOldestVerificationLogRows(db: Db, workspaceId: string, rows: number): Promise<number> {
  return countDeleted(
    await db.execute(sql`with gone as (
        delete from key_verifications_log where ctid = any(array(
          select ctid from key_verifications_log where workspace_id = ${workspaceId}
          order by time_m limit ${rows}))
        returning 1)
      select count(*)::int as deleted from gone`),
  );
}

function countDeleted(result: unknown): number {
  const [row] = rowsOf<{ deleted: number | string }>(result);
  return Number(row?.deleted ?? 0);
}

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

/** The key's `limit` newest rows, newest first, by the (workspace_id, key_id, time_m) index. */
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
    await db.execute(sql`select request_id, time_m, outcome, tags, spent_credits, latency, region
      from key_verifications_log where workspace_id = ${workspaceId} and key_id = ${keyId}
      order by time_m desc limit ${limit}`),
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
