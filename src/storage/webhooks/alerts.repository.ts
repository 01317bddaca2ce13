import { and, eq, sql } from "drizzle-orm";
import { type Db, rowsOf } from "../client.js";
import { isStorableText } from "../lookupText.js";
import { alertThresholds, keyAlerts, keys } from "../schema.js";

// Threshold events (docs/webhooks.md): their thresholds per API or key, the expiry scan and the first refusal of a rate
// limit's window. Which alerts hold and what they send is decided once, in SQL (migration alerts: the keys' triggers
// and keyhaven_apply_key_alerts), for every path that changes a key and for the scan alike.

/** A target's thresholds as stored; each null: inherited (the key's from its API, the API's from the defaults). */
export type StoredThresholds = {
  creditsLowPercent: number | null;
  creditsLowRemaining: number | null;
  expiringWithinMs: number | null;
};

const thresholdColumns = {
  creditsLowPercent: alertThresholds.creditsLowPercent,
  creditsLowRemaining: alertThresholds.creditsLowRemaining,
  expiringWithinMs: alertThresholds.expiringWithinMs,
};

/** The thresholds set for `targetId` (an API's or a key's id) in `workspaceId`; undefined when none is. */
export async function findThresholds(db: Db, workspaceId: string, targetId: string): Promise<StoredThresholds | undefined> {
  if (!isStorableText(targetId)) return undefined;
  const [row] = await db
    .select(thresholdColumns)
    .from(alertThresholds)
    .where(and(eq(alertThresholds.targetId, targetId), eq(alertThresholds.workspaceId, workspaceId)))
    .limit(1);
  return row;
}

/** Stores a target's thresholds (all null: the row goes, everything is inherited). */
export async function saveThresholds(
  tx: Db,
  target: { workspaceId: string; apiId: string; keyId: string | null },
  thresholds: StoredThresholds,
  now: number,
): Promise<void> {
  const targetId = target.keyId ?? target.apiId;
  if (thresholds.creditsLowPercent === null && thresholds.creditsLowRemaining === null && thresholds.expiringWithinMs === null) {
    await tx.delete(alertThresholds).where(eq(alertThresholds.targetId, targetId));
    return;
  }
  await tx
    .insert(alertThresholds)
    .values({ targetId, workspaceId: target.workspaceId, apiId: target.apiId, keyId: target.keyId, ...thresholds, updatedAtM: now })
    .onConflictDoUpdate({ target: alertThresholds.targetId, set: { ...thresholds, updatedAtM: now } });
}

/** What holds for a key now: its threshold of remaining uses (null: never low), its expiring lead and its alerts. */
export async function keyAlertState(
  db: Db,
  keyId: string,
): Promise<{ creditsLowBelow: number | null; expiringWithinMs: number; alerts: string[] } | undefined> {
  const rows = rowsOf<{ below: number | null; within: string | number; alerts: string[] | null }>(
    await db.execute(sql`select keyhaven_credits_low_threshold(k) as below, keyhaven_expiring_within(k.id, k.api_id) as within,
      (select array_agg(a.kind order by a.kind) from ${keyAlerts} a where a.key_id = k.id) as alerts
      from ${keys} k where k.id = ${keyId}`),
  );
  const row = rows[0];
  if (row === undefined) return undefined;
  return { creditsLowBelow: row.below === null ? null : Number(row.below), expiringWithinMs: Number(row.within), alerts: row.alerts ?? [] };
}

/**
 * Applies the passing of time to the expiry alerts (key.expiring, key.expired) of the keys of the workspaces with an
 * endpoint subscribed to a threshold event (those whose alerts the keys' triggers keep): the keys whose expiry, less their lead, fell in (`from`, `to`] (for a lead of 0: whose
 * expiry did), or with `catchUp`, every key whose expiry is within its lead of `to` and not more than a day past (what
 * passed while no process ran, or before an endpoint was created). At most `limit` keys, the earliest crossing first,
 * each locked while its alerts are applied (a change of the key waits, or is waited for, and its trigger decides the
 * same). A lead is the key's own, else its API's, else the default (keyhaven_expiring_within of no key and no API). Answers the keys applied, the deliveries written
 * and the latest crossing applied (where a scan cut by `limit` goes on from).
 */
export async function scanExpiries(
  db: Db,
  window: { from: number; to: number; limit: number; catchUp: boolean },
): Promise<{ keys: number; deliveries: number; last: number | null }> {
  const { from, to, limit, catchUp } = window;
  const lower = catchUp ? sql`${to}::bigint - 86400000` : sql`${from}::bigint + l.lead`;
  const rows = rowsOf<{ keys: string | number; deliveries: string | number | null; last: string | number | null }>(
    await db.execute(sql`with subscribed as (
        select distinct e.workspace_id from webhook_endpoints e where e.enabled and e.events && keyhaven_threshold_events()),
      leads as (
        select 0::bigint as lead
        union
        select keyhaven_expiring_within(null, null)
        union
        select t.expiring_within_ms from ${alertThresholds} t
        where t.workspace_id in (select workspace_id from subscribed) and t.expiring_within_ms > 0),
      due as (
        select k.id, floor(extract(epoch from k.expires) * 1000)::bigint - l.lead as crossed
        from leads l
        join lateral (
          select k.id, k.api_id, k.expires from ${keys} k
          where k.api_id in (select a.id from apis a where a.workspace_id in (select workspace_id from subscribed))
            and k.deleted_at_m is null and k.expires is not null
            and k.expires > to_timestamp((${lower}) / 1000.0)
            and k.expires <= to_timestamp((${to}::bigint + l.lead) / 1000.0)
          order by k.expires limit ${limit}) k on l.lead = 0 or keyhaven_expiring_within(k.id, k.api_id) = l.lead),
      firsts as (select id, min(crossed) as crossed from due group by id order by min(crossed) limit ${limit}),
      locked as (select k.id from ${keys} k where k.id in (select id from firsts) for update of k)
      select (select count(*) from firsts) as keys,
        (select keyhaven_apply_key_alerts(array_agg(id), array_agg(false), array_agg(true), ${to}::bigint)
          from locked having count(*) > 0) as deliveries,
        (select max(crossed) from firsts) as last`),
  );
  const row = rows[0]!;
  return { keys: Number(row.keys), deliveries: Number(row.deliveries ?? 0), last: row.last === null ? null : Number(row.last) };
}

/** The refusing limit of a rate-limited verification, as its key.ratelimited event tells it. */
export type RatelimitedWindow = { name: string; limit: number; duration: number; resetAt: number };

/**
 * Records the first refusal of a key by a rate limit in the limit's window: when the key's last recorded window ended
 * by `now`, it records this one and writes its key.ratelimited deliveries, in one statement (once per key and window
 * across every replica: the row's conflict decides). Answers the deliveries written (0: already sent for this window,
 * or no endpoint of the key's workspace is subscribed).
 */
export async function recordRatelimited(db: Db, keyId: string, now: number, window: RatelimitedWindow): Promise<number> {
  const data = JSON.stringify({ ratelimit: window });
  const rows = rowsOf<{ n: string | number | null }>(
    await db.execute(sql`with k as (
        select k from ${keys} k
        where k.id = ${keyId} and k.deleted_at_m is null
          and exists (select 1 from webhook_endpoints e
            where e.workspace_id = k.workspace_id and e.enabled and 'key.ratelimited' = any (e.events))),
      recorded as (
        insert into ${keyAlerts} (key_id, kind, workspace_id, since_m, until_m)
        select (k.k).id, 'ratelimited', (k.k).workspace_id, ${now}::bigint, ${window.resetAt}::bigint from k
        on conflict (key_id, kind) do update set since_m = excluded.since_m, until_m = excluded.until_m
          where ${keyAlerts}.until_m is null or ${keyAlerts}.until_m <= ${now}::bigint
        returning key_id)
      select sum(keyhaven_enqueue_event((k.k).workspace_id, 'key.ratelimited', ${now}::bigint,
        keyhaven_key_event_data(k.k, 'key.ratelimited', ${data}::jsonb))) as n
      from k join recorded r on r.key_id = (k.k).id`),
  );
  return Number(rows[0]?.n ?? 0);
}

/** Forgets the windows of rate limits that ended before `before` (the next refusal records its own), at most `limit`. */
export async function forgetEndedRatelimitWindows(db: Db, before: number, limit: number): Promise<number> {
  const rows = rowsOf<{ key_id: string }>(
    await db.execute(sql`delete from ${keyAlerts} where (key_id, kind) in (
      select key_id, kind from ${keyAlerts} where kind = 'ratelimited' and until_m < ${before}::bigint limit ${limit})
      returning key_id`),
  );
  return rows.length;
}
