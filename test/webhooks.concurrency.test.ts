import { expect } from "vitest";
import { ManualClock } from "../src/clock.js";
import { WebhookWorker, type WebhookWorkerOptions } from "../src/core/webhooks/webhooks.worker.js";
import { type Db, openPostgres, type Store } from "../src/storage/client.js";
import { claimDueWebhookDeliveries, recordWebhookAttempt } from "../src/storage/webhooks/webhooks.repository.js";
import { harnessWith, testWith } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
import { WebhookReceiver } from "./webhook-receiver.js";
import { waitFor } from "./wait.js";

// The per-endpoint bound of webhook deliveries (docs/webhooks.md, "Delivery") across every worker on one database:
// at most 4 deliveries of an endpoint are held (claimed, not yet recorded, lease not run out) at once, whichever
// worker holds them. On PostgreSQL each extra worker has a connection pool of its own, as another replica has; on
// PGlite (one embedded instance) they share the harness's store. The clock is set by hand: a lease runs out when the
// test moves it, and the attempt deadline (real time) is far beyond any wait here, so no held request times out.
const clock = new ManualClock();
const LEASE_MS = 120_000;
const PER_ENDPOINT = 4;
const WORKER_OPTIONS: Partial<WebhookWorkerOptions> = {
  pollMs: 20,
  leaseMs: LEASE_MS,
  attemptDeadlineMs: 600_000,
  perEndpoint: PER_ENDPOINT,
  overall: 16,
  random: () => 0.5,
};
// The harness's own worker claims once, at its start, and then not for an hour (no test here replays a delivery or
// has it send one): the workers of a test are its own, and a test of the claims alone runs with none.
const it = testWith(
  harnessWith({ KEYHAVEN_WEBHOOK_ALLOW_PRIVATE: "true" }, { clock, webhooks: { ...WORKER_OPTIONS, pollMs: 3_600_000 } }, (h) =>
    waitFor("the harness's worker's first claim", () => h.services.webhookWorker.stats.claims >= 1),
  ),
);

async function createWebhook(h: Harness, t: Tenant, url: string, events: string[]): Promise<string> {
  const res = await h.post("/v2/keyhaven.createWebhook", { url, events }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.webhookId as string;
}

/** Deliveries of `endpointId` under a lease that has not run out at `now` (the clock's unless told). */
async function held(h: Harness, endpointId: string, now = clock.now()): Promise<number> {
  const [row] = await h.sql<{ n: string }>(
    `select count(*) as n from webhook_deliveries where endpoint_id = '${endpointId}' and status = 'pending'
       and lease is not null and next_attempt_at_m > ${now}`,
  );
  return Number(row!.n);
}

/** `n` deliveries of `endpointId` due at `dueAt`, named `${prefix}-<i>`, inserted as the outbox trigger writes them. */
async function insertDue(h: Harness, t: Tenant, endpointId: string, prefix: string, n: number, dueAt: number): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `msg_${prefix}_${String(i).padStart(3, "0")}`);
  await h.sql(
    `insert into webhook_deliveries (id, workspace_id, endpoint_id, event, payload, next_attempt_at_m, created_at_m, updated_at_m)
     select id, '${t.workspaceId}', '${endpointId}', 'identity.create', '{"type":"identity.create","data":{}}', ${dueAt}, ${dueAt}, ${dueAt}
     from unnest(array[${ids.map((id) => `'${id}'`).join(",")}]) as id`,
  );
  return ids;
}

/** A claim as the worker makes it: in a transaction of its own (the worker's is the write gate's). */
const claimIn = (db: Db, claim: Parameters<typeof claimDueWebhookDeliveries>[1]) =>
  db.transaction((tx) => claimDueWebhookDeliveries(tx as unknown as Db, claim));

/**
 * `n` stores on the harness's database, as `n` other processes would have: pools of their own on PostgreSQL, the one
 * embedded instance on PGlite (whose transactions run one at a time).
 */
function storesOf(h: Harness, n: number): { stores: Store[]; close(): Promise<void> } {
  const stores = Array.from({ length: n }, () => (h.databaseUrl ? openPostgres(h.databaseUrl, 3) : h.store));
  return {
    stores,
    async close() {
      for (const store of stores) if (store !== h.store) await store.close();
    },
  };
}

/** `n` workers over stores of their own, with WORKER_OPTIONS, started. */
function workersOf(h: Harness, n: number) {
  const warnings: string[] = [];
  const log = {
    warn: (obj: unknown, msg?: string) => warnings.push(`${msg} ${JSON.stringify(obj)}`),
    error: (obj: unknown, msg?: string) => warnings.push(`${msg} ${JSON.stringify(obj)}`),
  };
  const { stores, close } = storesOf(h, n);
  const all = stores.map((store) => new WebhookWorker({ db: store.db, keyring: h.keyring, clock, allowPrivate: true }, WORKER_OPTIONS));
  for (const worker of all) worker.start(log);
  return {
    all,
    warnings,
    /** Until every worker has made `n` more claims (polls answered by the store): a deterministic wait for polls. */
    async polled(n: number) {
      const from = all.map((w) => w.stats.claims);
      await waitFor(`${n} more claims by each of ${all.length} workers`, () => all.every((w, i) => w.stats.claims >= from[i]! + n), {
        timeoutMs: 30_000,
        detail: () => warnings.join("\n"),
      });
    },
    async close() {
      for (const worker of all) await worker.stop();
      await close();
    },
  };
}

it("holds at most 4 deliveries of one endpoint at once across three workers on one database, and a lease that ran out does not count", async ({
  h,
}) => {
  clock.set(Date.now());
  const t = await h.tenant();
  const r = await new WebhookReceiver().start();
  let release = () => {};
  r.hold = new Promise<void>((resolve) => {
    release = resolve;
  });
  const workers = workersOf(h, 3);
  try {
    const endpointId = await createWebhook(h, t, r.url, ["identity.create"]);
    // What a worker killed mid-send (kill -9) leaves: 4 deliveries claimed (attempt 1 counted), their lease running.
    const start = clock.now();
    await h.sql(
      `insert into webhook_deliveries (id, workspace_id, endpoint_id, event, payload, status, attempts, lease, next_attempt_at_m, created_at_m, updated_at_m)
       select 'msg_dead_' || i, '${t.workspaceId}', '${endpointId}', 'identity.create', '{"type":"identity.create","data":{}}',
         'pending', 1, 'dead-worker', ${start + LEASE_MS}, ${start - 1}, ${start - 1}
       from generate_series(1, 4) as i`,
    );
    for (let i = 0; i < 8; i++) {
      expect((await h.post("/v2/identities.createIdentity", { externalId: `ext-${i}` }, t.rootKey)).status).toBe(200);
    }
    const rows = await h.sql<{ id: string }>(`select id from webhook_deliveries where endpoint_id = '${endpointId}'`);
    expect(rows).toHaveLength(12);
    // The dead worker's 4 live leases fill the endpoint's bound: however often the 3 workers poll, none claims.
    await workers.polled(3);
    expect(r.received).toEqual([]);
    expect(await held(h, endpointId)).toBe(4);
    expect(await h.sql(`select id from webhook_deliveries where endpoint_id = '${endpointId}' and lease <> 'dead-worker'`)).toEqual([]);

    // Its leases run out: they count no more, and 4 deliveries (of the 12 due) are claimed and sent, no more.
    clock.advance(LEASE_MS);
    await waitFor("4 requests held at the receiver", () => r.open === PER_ENDPOINT, { detail: () => workers.warnings.join("\n") });
    await workers.polled(3);
    expect(r.received).toHaveLength(PER_ENDPOINT);
    expect(r.maxOpen).toBe(PER_ENDPOINT);
    expect(await held(h, endpointId)).toBe(PER_ENDPOINT);
    // Held by the live workers: the dead worker's rows keep their lease until claimed again, no longer counted.
    const claimers = await h.sql<{ lease: string }>(
      `select distinct lease from webhook_deliveries where endpoint_id = '${endpointId}' and lease is not null
         and next_attempt_at_m > ${clock.now()}`,
    );
    expect(claimers.map((c) => c.lease)).not.toContain("dead-worker");

    // Released, every delivery is delivered, each sent once (the dead worker's again, once), never more than 4 at once.
    release();
    r.hold = undefined;
    await waitFor(
      "every delivery delivered",
      async () => {
        const [row] = await h.sql<{ n: string }>(
          `select count(*) as n from webhook_deliveries where endpoint_id = '${endpointId}' and status = 'delivered'`,
        );
        return Number(row!.n) === 12;
      },
      { timeoutMs: 30_000, detail: () => workers.warnings.join("\n") },
    );
    expect(r.maxOpen).toBe(PER_ENDPOINT);
    expect(r.open).toBe(0);
    const sent = r.received.map((x) => x.headers["webhook-id"] as string).sort();
    expect(sent).toEqual(rows.map((x) => x.id).sort());
    const done = await h.sql<{ id: string; attempts: number; last_status: number; lease: string | null }>(
      `select id, attempts, last_status, lease from webhook_deliveries where endpoint_id = '${endpointId}' order by id`,
    );
    for (const d of done) {
      expect(d, d.id).toMatchObject({ attempts: d.id.startsWith("msg_dead_") ? 2 : 1, last_status: 204, lease: null });
    }
    const attempts = await h.sql<{ n: string }>(
      `select count(*) as n from webhook_attempts a join webhook_deliveries d on d.id = a.delivery_id
       where d.endpoint_id = '${endpointId}' and a.status = 204`,
    );
    expect(Number(attempts[0]!.n)).toBe(12);
    expect(workers.all.reduce((n, w) => n + w.stats.delivered, 0)).toBe(12);
    expect(workers.warnings).toEqual([]);
  } finally {
    release();
    await workers.close();
    await r.close();
  }
});

it("lets claims racing from three stores take at most 4 of one endpoint together, round after round", async ({ h }) => {
  const { stores, close } = storesOf(h, 3);
  try {
    const t = await h.tenant();
    const endpointId = await createWebhook(h, t, "http://127.0.0.1:9/hooks", ["identity.create"]);
    const now = clock.now();
    const total = 22;
    await insertDue(h, t, endpointId, "race", total, now - 1);
    const claimAll = async (at: number) => {
      // Two claims at once from each store: on PostgreSQL, six transactions from three pools at the same instant.
      const claims = stores.flatMap((store, i) =>
        [0, 1].map((j) =>
          claimIn(store.db, {
            now: at,
            leaseUntil: at + LEASE_MS,
            lease: `lease-${i}-${j}-${at}`,
            limit: 16,
            perEndpoint: PER_ENDPOINT,
            busyEndpoints: [],
          }),
        ),
      );
      // Only this endpoint's: another test's (one that failed) may have left deliveries due.
      return (await Promise.all(claims)).flat().filter((c) => c.endpointId === endpointId);
    };
    const seen = new Set<string>();
    let at = now;
    for (let left = total; left > 0; ) {
      const claimed = await claimAll(at);
      // Each round starts with nothing held: the first claimer to lock the endpoint takes 4, every other one none.
      expect(claimed).toHaveLength(Math.min(PER_ENDPOINT, left));
      expect(await held(h, endpointId, at)).toBe(claimed.length);
      for (const c of claimed) {
        expect(seen.has(c.id), c.id).toBe(false);
        seen.add(c.id);
      }
      // While they are held, no claim takes another.
      expect(await claimAll(at)).toEqual([]);
      for (const c of claimed) {
        const recorded = await recordWebhookAttempt(h.db, c.id, c.lease, {
          status: 204,
          error: null,
          durationMs: 1,
          at,
          next: { status: "delivered", atM: at },
        });
        expect(recorded).toBe(true);
      }
      left -= claimed.length;
      at += 1;
    }
    expect(seen.size).toBe(total);

    // Held leases that ran out (their worker died) leave the endpoint's places free again.
    const stale = await insertDue(h, t, endpointId, "stale", 6, at - 1);
    const first = await claimAll(at);
    expect(first).toHaveLength(PER_ENDPOINT);
    expect(await claimAll(at + LEASE_MS - 1)).toEqual([]);
    const again = await claimAll(at + LEASE_MS);
    expect(again).toHaveLength(PER_ENDPOINT);
    // The 2 never claimed were due first; then 2 of the 4 whose leases ran out, their attempt 2.
    const firstIds = first.map((c) => c.id);
    const never = stale.filter((id) => !firstIds.includes(id));
    expect(never).toHaveLength(2);
    expect(again.filter((c) => never.includes(c.id)).map((c) => c.attempt)).toEqual([1, 1]);
    expect(again.filter((c) => firstIds.includes(c.id)).map((c) => c.attempt)).toEqual([2, 2]);
    expect(await held(h, endpointId, at + LEASE_MS)).toBe(PER_ENDPOINT);
  } finally {
    await close();
  }
});

it("claims for other endpoints while one is full, oldest due first", async ({ h }) => {
  const t = await h.tenant();
  const full = await createWebhook(h, t, "http://127.0.0.1:9/full", ["identity.create"]);
  const other = await createWebhook(h, t, "http://127.0.0.1:9/other", ["identity.create"]);
  const now = clock.now();
  // The full endpoint's 4 held, and 20 of its deliveries due before any of the other's.
  await insertDue(h, t, full, "full_held", 4, now - 100);
  await h.sql(`update webhook_deliveries set lease = 'live', next_attempt_at_m = ${now + LEASE_MS} where id like 'msg_full_held_%'`);
  await insertDue(h, t, full, "full_due", 20, now - 50);
  await insertDue(h, t, other, "other_due", 3, now - 10);
  const claimed = await claimIn(h.db, {
    now,
    leaseUntil: now + LEASE_MS,
    lease: "l",
    limit: 2,
    perEndpoint: PER_ENDPOINT,
    busyEndpoints: [],
  });
  expect(claimed.map((c) => c.endpointId)).toEqual([other, other]);
  expect(await held(h, full, now)).toBe(4);
  expect(await held(h, other, now)).toBe(2);
});
