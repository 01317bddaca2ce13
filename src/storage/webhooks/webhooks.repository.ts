import { and, asc, desc, eq, inArray, isNotNull, or, type SQL, sql } from "drizzle-orm";
import { type Db, rowsOf } from "../client.js";
import { isStorableText } from "../lookupText.js";
import { encryptionKeys, webhookAttempts, webhookDeliveries, webhookEndpoints } from "../schema.js";

/** A webhook endpoint as stored (its sealed secret included: never answered, serialization strips it). */
export type WebhookEndpointRow = typeof webhookEndpoints.$inferSelect;
export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;
export type WebhookAttemptRow = typeof webhookAttempts.$inferSelect;
export type DeliveryStatus = "pending" | "delivered" | "failed";

/** An endpoint's columns but its sealed secret: what every read but the delivery worker's gets. */
const endpointColumns = {
  id: webhookEndpoints.id,
  workspaceId: webhookEndpoints.workspaceId,
  url: webhookEndpoints.url,
  events: webhookEndpoints.events,
  description: webhookEndpoints.description,
  enabled: webhookEndpoints.enabled,
  hasSecret: sql<boolean>`(${webhookEndpoints.secretEncrypted} is not null)`.mapWith(Boolean),
  createdAtM: webhookEndpoints.createdAtM,
  updatedAtM: webhookEndpoints.updatedAtM,
};
export type WebhookEndpoint = {
  id: string;
  workspaceId: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  hasSecret: boolean;
  createdAtM: number;
  updatedAtM: number | null;
};

/** Inserts an endpoint, and first the workspace's new data key its secret is sealed under when it is new. */
export async function insertWebhookEndpoint(
  tx: Db,
  row: typeof webhookEndpoints.$inferInsert,
  newDataKey: typeof encryptionKeys.$inferInsert | undefined,
): Promise<void> {
  if (newDataKey) await tx.insert(encryptionKeys).values(newDataKey);
  await tx.insert(webhookEndpoints).values(row);
}

/** The workspace's endpoints, oldest first (a workspace has few: the list is bounded by MAX_WEBHOOKS_PER_WORKSPACE). */
export async function listWebhookEndpoints(db: Db, workspaceId: string): Promise<WebhookEndpoint[]> {
  return db
    .select(endpointColumns)
    .from(webhookEndpoints)
    .where(eq(webhookEndpoints.workspaceId, workspaceId))
    .orderBy(asc(webhookEndpoints.createdAtM), asc(webhookEndpoints.id));
}

export async function countWebhookEndpoints(db: Db, workspaceId: string): Promise<number> {
  const [row] = await db
    .select({ n: sql<number>`count(*)`.mapWith(Number) })
    .from(webhookEndpoints)
    .where(eq(webhookEndpoints.workspaceId, workspaceId));
  return row?.n ?? 0;
}

/** The endpoint `id` of `workspaceId` (undefined: none, or another workspace's), locked when `lock`. */
export async function findWebhookEndpoint(db: Db, workspaceId: string, id: string, lock = false): Promise<WebhookEndpoint | undefined> {
  if (!isStorableText(id)) return undefined;
  const query = db
    .select(endpointColumns)
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.workspaceId, workspaceId)))
    .limit(1);
  const [row] = lock ? await query.for("update") : await query;
  return row;
}

export type WebhookEndpointChanges = {
  url?: string;
  events?: string[];
  description?: string | null;
  enabled?: boolean;
};

/** Applies `changes` to the endpoint; undefined when it does not exist in `workspaceId`. */
export async function updateWebhookEndpoint(
  tx: Db,
  workspaceId: string,
  id: string,
  changes: WebhookEndpointChanges,
  now: number,
): Promise<WebhookEndpoint | undefined> {
  if (!isStorableText(id)) return undefined;
  const [row] = await tx
    .update(webhookEndpoints)
    .set(Object.assign({}, changes, { updatedAtM: now }))
    .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.workspaceId, workspaceId)))
    .returning(endpointColumns);
  return row;
}

/** Deletes the endpoint (its deliveries and attempts cascade); false when it did not exist in `workspaceId`. */
export async function deleteWebhookEndpoint(tx: Db, workspaceId: string, id: string): Promise<boolean> {
  if (!isStorableText(id)) return false;
  const rows = await tx
    .delete(webhookEndpoints)
    .where(and(eq(webhookEndpoints.id, id), eq(webhookEndpoints.workspaceId, workspaceId)))
    .returning({ id: webhookEndpoints.id });
  return rows.length > 0;
}

/** Where a page of deliveries starts: strictly past this one, newest first by (created_at_m, id). */
export type DeliveryPosition = { readonly createdAtM: number; readonly id: string };

export type DeliveryListing = Omit<WebhookDeliveryRow, "payload" | "lease" | "scheduleFrom">;

/** Up to `limit` deliveries of the endpoint, newest first, past `after`; with `status`, only those. */
export async function listWebhookDeliveries(
  db: Db,
  workspaceId: string,
  endpointId: string,
  page: { after?: DeliveryPosition | undefined; limit: number; status?: DeliveryStatus | undefined },
): Promise<DeliveryListing[]> {
  const d = webhookDeliveries;
  const conditions: (SQL | undefined)[] = [eq(d.workspaceId, workspaceId), eq(d.endpointId, endpointId)];
  if (page.status !== undefined) conditions.push(eq(d.status, page.status));
  if (page.after !== undefined) {
    conditions.push(sql`(${d.createdAtM}, ${d.id}) < (${page.after.createdAtM}, ${page.after.id})`);
  }
  return db
    .select({
      id: d.id,
      workspaceId: d.workspaceId,
      endpointId: d.endpointId,
      event: d.event,
      status: d.status,
      attempts: d.attempts,
      nextAttemptAtM: d.nextAttemptAtM,
      lastStatus: d.lastStatus,
      lastError: d.lastError,
      createdAtM: d.createdAtM,
      updatedAtM: d.updatedAtM,
    })
    .from(d)
    .where(and(...conditions))
    .orderBy(desc(d.createdAtM), desc(d.id))
    .limit(page.limit);
}

/** The attempts of `deliveryIds`, newest first per delivery, at most `perDelivery` each. */
export async function listWebhookAttempts(db: Db, deliveryIds: readonly string[], perDelivery: number): Promise<WebhookAttemptRow[]> {
  if (deliveryIds.length === 0) return [];
  const a = webhookAttempts;
  const rows = await db
    .select()
    .from(a)
    .where(inArray(a.deliveryId, [...deliveryIds]))
    .orderBy(asc(a.deliveryId), desc(a.attempt));
  const kept: WebhookAttemptRow[] = [];
  const seen = new Map<string, number>();
  for (const row of rows) {
    const n = seen.get(row.deliveryId) ?? 0;
    if (n < perDelivery) kept.push(row);
    seen.set(row.deliveryId, n + 1);
  }
  return kept;
}

/**
 * Makes the delivery pending and due `now` again, its retry schedule restarted (it keeps its id, the `webhook-id`,
 * so a receiver that already has it can tell). Answers the delivery's endpoint and event; undefined when there is
 * no such delivery in `workspaceId`.
 */
export async function replayWebhookDelivery(
  tx: Db,
  workspaceId: string,
  deliveryId: string,
  now: number,
): Promise<{ endpointId: string; event: string } | undefined> {
  if (!isStorableText(deliveryId)) return undefined;
  const d = webhookDeliveries;
  const [row] = await tx
    .update(d)
    .set({ status: "pending", nextAttemptAtM: now, scheduleFrom: sql`${d.attempts}`, lease: null, updatedAtM: now })
    .where(and(eq(d.id, deliveryId), eq(d.workspaceId, workspaceId)))
    .returning({ endpointId: d.endpointId, event: d.event });
  return row;
}

/** A delivery the worker claimed, with what sending it needs: the endpoint's URL and sealed secret. */
export type ClaimedDelivery = {
  id: string;
  workspaceId: string;
  endpointId: string;
  event: string;
  /** The payload's JSON text exactly as signed and sent. */
  body: string;
  /** The attempt this is (1 for the first). */
  attempt: number;
  scheduleFrom: number;
  url: string;
  secretEncrypted: string;
  encryptionKeyId: string;
  /** The claim's lease, which recording its outcome needs. */
  lease: string;
};

/** Due rows one claim looks at to find its endpoints (the earliest; the endpoints past them wait for the next claim). */
const DUE_ROWS_PER_CLAIM = 1000;

/**
 * Claims up to `limit` due pending deliveries of enabled endpoints that still have their secret, oldest due first,
 * skipping rows another worker holds (FOR UPDATE SKIP LOCKED: replicas never claim the same row) and those of
 * `busyEndpoints`, and at most `perEndpoint` of one endpoint held at once across every worker on the database. A
 * claimed row gets `lease` and is not due again before `leaseUntil`: a worker killed while sending leaves it to be
 * claimed again then (at least once); its attempt is counted now.
 *
 * `tx` is a transaction (the write gate's: core/webhooks webhooks.worker.ts), which the two statements below need; on
 * a handle outside one, the first statement's locks would be gone before the second.
 *
 * A delivery is held while it is claimed and its lease has not run out: `lease` is set (recordWebhookAttempt and a
 * replay clear it) and `next_attempt_at_m`, the lease's end, is still ahead of `now`. A lease that ran out (its worker
 * died) does not count: its row is due, and claimable, again. The bound holds under concurrent claimers because
 * claiming is one short transaction of two statements:
 * 1. lock the endpoints to claim for (FOR NO KEY UPDATE SKIP LOCKED: an endpoint another claimer holds is left to it
 *    for this poll, so a claimer never waits; the lock does not conflict with the FOR KEY SHARE that inserting a
 *    delivery takes on its endpoint, so the outbox trigger never waits for a claim);
 * 2. count what each holds and claim up to what is left. Under READ COMMITTED this statement's snapshot is taken
 *    after the locks were granted, so it sees every claim of an earlier holder of the lock (committed before it let
 *    go); counting in the locking statement itself would read a snapshot from before the lock was waited for.
 * The count in the first statement only keeps endpoints already full from taking the places of others (it may be
 * stale); the second's is the one the bound rests on. Both read pending rows near `now` only (webhook_deliveries_due_idx). On
 * the embedded store (one connection) transactions run one at a time, which is all the bound needs there.
 */
export async function claimDueWebhookDeliveries(
  tx: Db,
  claim: { now: number; leaseUntil: number; lease: string; limit: number; perEndpoint: number; busyEndpoints: readonly string[] },
): Promise<ClaimedDelivery[]> {
  if (claim.limit <= 0 || claim.perEndpoint <= 0) return [];
  const d = webhookDeliveries;
  const e = webhookEndpoints;
  const now = sql`${claim.now}::bigint`;
  const perEndpoint = sql`${claim.perEndpoint}::int`;
  const busy = claim.busyEndpoints.length > 0 ? sql`and e.id not in ${[...claim.busyEndpoints]}` : sql``;
  // Both scans read the due index's range near `now` only, never the whole backlog of pending retries (a dead endpoint
  // may hold a day of them): the held rows (a live lease ends within a lease or two of now, the second for clocks that
  // disagree), then the earliest due rows of endpoints not full, at most DUE_ROWS_PER_CLAIM of them.
  const heldUntil = sql`${claim.leaseUntil + (claim.leaseUntil - claim.now)}::bigint`;
  const locked = rowsOf<{ id: string }>(
    await tx.execute(sql`with held as materialized (
        select endpoint_id from ${d}
        where status = 'pending' and next_attempt_at_m > ${now} and next_attempt_at_m <= ${heldUntil} and lease is not null
        group by endpoint_id having count(*) >= ${perEndpoint}),
      due as (
        select endpoint_id, min(next_attempt_at_m) as due_at from (
          select endpoint_id, next_attempt_at_m from ${d}
          where status = 'pending' and next_attempt_at_m <= ${now} and endpoint_id not in (select endpoint_id from held)
            and endpoint_id in (select id from ${e} where enabled and secret_encrypted is not null)
          order by next_attempt_at_m limit ${DUE_ROWS_PER_CLAIM}::int) r
        group by endpoint_id)
      select e.id from ${e} e join due p on p.endpoint_id = e.id
      where e.enabled and e.secret_encrypted is not null ${busy}
      order by p.due_at, e.id
      limit ${claim.limit}::int
      for no key update of e skip locked`),
  ).map((r) => r.id);
  if (locked.length === 0) return [];
  return rowsOf<ClaimedDelivery>(
    await tx.execute(sql`with held as materialized (
        select endpoint_id, count(*) as n from ${d}
        where endpoint_id in ${locked} and status = 'pending' and lease is not null
          and next_attempt_at_m > ${now} and next_attempt_at_m <= ${heldUntil}
        group by endpoint_id),
      picked as (
        select x.id from ${e} le
        left join held h on h.endpoint_id = le.id
        cross join lateral (
          select c.id, c.next_attempt_at_m from ${d} c
          where c.endpoint_id = le.id and c.status = 'pending' and c.next_attempt_at_m <= ${now}
          order by c.next_attempt_at_m
          limit greatest(${perEndpoint} - coalesce(h.n, 0), 0)
          for update of c skip locked) x
        where le.id in ${locked}
        order by x.next_attempt_at_m
        limit ${claim.limit}::int)
      update ${d} d set lease = ${claim.lease}::text, next_attempt_at_m = ${claim.leaseUntil}::bigint,
        attempts = d.attempts + 1, updated_at_m = ${now}
      from ${e} e
      where d.id in (select id from picked) and e.id = d.endpoint_id
      returning d.id, d.workspace_id as "workspaceId", d.endpoint_id as "endpointId", d.event, d.payload::text as body,
        d.attempts as attempt, d.schedule_from as "scheduleFrom", e.url, e.secret_encrypted as "secretEncrypted",
        e.encryption_key_id as "encryptionKeyId", d.lease`),
  );
}

/** What one attempt came to, as the worker records it. */
export type AttemptOutcome = {
  /** The response's status; null when there was none (refused, timed out, not sent). */
  status: number | null;
  /** A short reason, never a secret; null for a 2xx. */
  error: string | null;
  durationMs: number;
  at: number;
  /** What the delivery becomes: delivered, failed, or pending again at `nextAttemptAtM`. */
  next: { status: "delivered" | "failed"; atM: number } | { status: "pending"; atM: number };
};

/**
 * Records an attempt of a delivery this worker still holds (`lease`): its outcome on the delivery and a row of its
 * history, in one statement. Nothing when the lease was lost (it ran out and another worker claimed the row, or the
 * delivery was replayed or deleted meanwhile): that worker's outcome is the one kept. True when recorded.
 */
export async function recordWebhookAttempt(db: Db, deliveryId: string, lease: string, outcome: AttemptOutcome): Promise<boolean> {
  const rows = rowsOf<{ delivery_id: string }>(
    await db.execute(sql`with updated as (
        update ${webhookDeliveries} set status = ${outcome.next.status}::text, next_attempt_at_m = ${outcome.next.atM}::bigint,
          lease = null, last_status = ${outcome.status}::integer, last_error = ${outcome.error}::text, updated_at_m = ${outcome.at}::bigint
        where id = ${deliveryId} and lease = ${lease}
        returning id, attempts)
      insert into ${webhookAttempts} (delivery_id, attempt, at_m, status, error, duration_ms)
      select id, attempts, ${outcome.at}::bigint, ${outcome.status}::integer, ${outcome.error}::text, ${outcome.durationMs}::integer
      from updated
      returning delivery_id`),
  );
  return rows.length > 0;
}

/**
 * `keyhaven reset-encryption-key`: the endpoints' secrets were sealed under the data keys it deletes, so they are
 * forgotten and the endpoints disabled (a new endpoint, with a new secret, replaces one). Answers how many.
 */
export async function forgetWebhookSecrets(tx: Db): Promise<number> {
  const rows = await tx
    .update(webhookEndpoints)
    .set({ secretEncrypted: null, encryptionKeyId: null, enabled: false })
    .where(or(isNotNull(webhookEndpoints.secretEncrypted), isNotNull(webhookEndpoints.encryptionKeyId)))
    .returning({ id: webhookEndpoints.id });
  return rows.length;
}

/**
 * Deletes up to `maxRows` deliveries that are done (delivered or failed) and last changed before `before`, with their
 * attempts; a pending delivery is never deleted. Answers how many went (core/webhooks webhooks.retention.ts).
 */
export async function deleteFinishedWebhookDeliveriesBefore(db: Db, before: number, maxRows: number): Promise<number> {
  const [row] = rowsOf<{ deleted: number | string }>(
    await db.execute(sql`with gone as (
        delete from ${webhookDeliveries} where id = any(array(
          select id from ${webhookDeliveries} where status <> 'pending' and updated_at_m < ${before}::bigint limit ${maxRows}::int))
        returning 1)
      select count(*)::int as deleted from gone`),
  );
  return Number(row?.deleted ?? 0);
}

/** Whether the workspace has an enabled endpoint subscribed to `event`. */
export async function workspaceSubscribesTo(db: Db, workspaceId: string, event: string): Promise<boolean> {
  const [row] = await db
    .select({ id: webhookEndpoints.id })
    .from(webhookEndpoints)
    .where(
      and(
        eq(webhookEndpoints.workspaceId, workspaceId),
        eq(webhookEndpoints.enabled, true),
        sql`${event} = any (${webhookEndpoints.events})`,
      ),
    )
    .limit(1);
  return row !== undefined;
}
