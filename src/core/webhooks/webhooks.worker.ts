import { randomBytes } from "node:crypto";
import type { Clock } from "../../clock.js";
import type { Keyring } from "../../keyring/keyring.js";
import type { Db } from "../../storage/client.js";
import { type Actor, trustedCaller } from "../caller.js";
import { WriteGate } from "../changes.js";
import {
  type AttemptOutcome,
  type ClaimedDelivery,
  claimDueWebhookDeliveries,
  recordWebhookAttempt,
} from "../../storage/webhooks/webhooks.repository.js";
import { type SendResult, sendWebhook } from "./webhooks.sender.js";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
/** How soon after an attempt ends the worker claims again (the attempts ending meanwhile share the claim). */
const CLAIM_AFTER_SEND_MS = 20;

/**
 * The waits before each retry of a delivery that was not answered 2xx: within the first minute twice (5 s, 30 s),
 * then growing to hourly, hourly until about a day has passed since the first attempt; after the last, it has failed.
 * Each wait is jittered by ±20 % so that retries of many deliveries to one endpoint spread out.
 */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [
  5 * SECOND,
  30 * SECOND,
  2 * MINUTE,
  10 * MINUTE,
  30 * MINUTE,
  ...new Array<number>(23).fill(HOUR),
];

export type WebhookWorkerOptions = {
  /** How often due deliveries are looked for. */
  pollMs: number;
  /** How long a claimed delivery is this worker's: past it, another worker may send it again (at least once). */
  leaseMs: number;
  /** The deadline of one attempt, lookup and connection included. */
  attemptDeadlineMs: number;
  /**
   * Deliveries of one endpoint held at once (claimed, not yet recorded, lease not run out) across every worker on
   * the database, and so attempts in flight to it; and attempts in flight in this process in all.
   */
  perEndpoint: number;
  overall: number;
  /** Waits before each retry (DEFAULT_RETRY_SCHEDULE_MS); the delivery fails after the last. */
  retryScheduleMs: readonly number[];
  /** A number in [0, 1) for the jitter of each wait (tests make it fixed). */
  random: () => number;
};

export const DEFAULT_WEBHOOK_WORKER_OPTIONS: WebhookWorkerOptions = {
  pollMs: SECOND,
  // Beyond the longest a claimed delivery can wait here for a slot of its endpoint and then take (overall /
  // perEndpoint attempts of the deadline each, then its own): a lease never runs out under a live worker.
  leaseMs: 2 * MINUTE,
  attemptDeadlineMs: 10 * SECOND,
  perEndpoint: 4,
  overall: 16,
  retryScheduleMs: DEFAULT_RETRY_SCHEDULE_MS,
  random: Math.random,
};

type Logger = { warn(obj: unknown, msg?: string): void; error(obj: unknown, msg?: string): void };

export type WebhookWorkerDeps = {
  db: Db;
  keyring: Keyring;
  clock: Clock;
  allowPrivate: boolean;
  /** The write gate whose transaction a claim runs in (services.ts: the services' one); by default one on `db`. */
  changes?: WriteGate;
};

/** The worker as the write gate names it (a claim records no audit entry: it changes only the outbox's leases). */
export const WEBHOOK_WORKER: Actor = { kind: "worker", id: "webhook-worker", name: "webhook worker" };
const WORKER_CALLER = trustedCaller(WEBHOOK_WORKER, "", { surface: "worker" });

/**
 * Sends the webhook outbox (webhook_deliveries): polls for due pending deliveries, claims them under a lease (FOR
 * UPDATE SKIP LOCKED: replicas never send the same attempt; a worker killed mid-send leaves the row due again when the
 * lease ends), sends each once (webhooks.sender.ts) with at most `perEndpoint` deliveries of one endpoint held at
 * once by all workers together (the claim counts the live leases of every process: claimDueWebhookDeliveries) and
 * `overall` attempts in flight in this process, and records the outcome: delivered on a 2xx, else pending again after the next wait of the
 * retry schedule, failed after the last. It reads and writes the outbox alone, so a slow or dead receiver never holds
 * anything verification or a write needs.
 */
export class WebhookWorker {
  private readonly options: WebhookWorkerOptions;
  private readonly changes: WriteGate;
  private timer: NodeJS.Timeout | undefined;
  /** When the timer fires (Date.now() terms). */
  private timerAt = 0;
  private running = false;
  private polling: Promise<void> | undefined;
  private readonly inFlight = new Map<string, number>();
  private readonly waiting = new Map<string, ClaimedDelivery[]>();
  private readonly sends = new Set<Promise<void>>();
  private total = 0;
  private log: Logger | undefined;
  /**
   * Attempts made and recorded by this worker, by outcome (tests and metrics read them), and `claims`: the claims
   * this worker made (each a poll that reached the store and was answered, whether it claimed anything or not).
   */
  readonly stats = { delivered: 0, retried: 0, failed: 0, claims: 0 };

  constructor(
    private readonly deps: WebhookWorkerDeps,
    options: Partial<WebhookWorkerOptions> = {},
  ) {
    this.options = Object.assign({}, DEFAULT_WEBHOOK_WORKER_OPTIONS, options);
    this.changes = deps.changes ?? new WriteGate(deps.db, deps.clock);
  }

  start(log: Logger): void {
    if (this.running) return;
    this.running = true;
    this.log = log;
    this.schedule(0);
  }

  /** Looks for due deliveries now (after a replay, say) instead of at the next poll. */
  wake(): void {
    if (this.running && this.polling === undefined) this.schedule(0);
  }

  /**
   * Claims nothing more and waits for the attempts in flight (each within its deadline) to be recorded. What was
   * claimed and not sent yet, or is claimed by a poll still running, stays leased: it is sent again when the lease
   * ends. A poll is not waited for, so that a store that does not answer holds up nothing but the attempts.
   */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.waiting.clear();
    await Promise.allSettled([...this.sends]);
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    this.timerAt = Date.now() + ms;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.polling = this.poll().finally(() => {
        this.polling = undefined;
        if (this.running && this.timer === undefined) this.schedule(this.options.pollMs);
      });
    }, ms);
    this.timer.unref?.();
  }

  private async poll(): Promise<void> {
    if (!this.running) return;
    const free = this.options.overall - this.total;
    if (free <= 0) return;
    const busy = [...this.inFlight].filter(([, n]) => n >= this.options.perEndpoint).map(([id]) => id);
    const now = this.deps.clock.now();
    let claimed: ClaimedDelivery[];
    try {
      // One transaction of the gate's, recording nothing: the claim's endpoint locks last until it commits.
      const claim = {
        now,
        leaseUntil: now + this.options.leaseMs,
        lease: randomBytes(12).toString("base64url"),
        limit: free,
        perEndpoint: this.options.perEndpoint,
        busyEndpoints: busy,
      };
      claimed = await this.changes.change(WORKER_CALLER, (tx) => claimDueWebhookDeliveries(tx, claim));
    } catch (err) {
      this.log?.warn({ err: { message: (err as Error).message } }, "webhooks: could not claim due deliveries; trying again");
      return;
    }
    this.stats.claims++;
    if (!this.running) return;
    for (const delivery of claimed) this.enqueue(delivery);
  }

  private enqueue(delivery: ClaimedDelivery): void {
    this.total++;
    const n = this.inFlight.get(delivery.endpointId) ?? 0;
    if (n >= this.options.perEndpoint) {
      const queue = this.waiting.get(delivery.endpointId) ?? [];
      queue.push(delivery);
      this.waiting.set(delivery.endpointId, queue);
      return;
    }
    this.run(delivery);
  }

  private run(delivery: ClaimedDelivery): void {
    this.inFlight.set(delivery.endpointId, (this.inFlight.get(delivery.endpointId) ?? 0) + 1);
    const send = this.attempt(delivery)
      .catch((err: unknown) => {
        this.log?.error(
          { err: { message: (err as Error).message }, deliveryId: delivery.id },
          "webhooks: an attempt could not be recorded",
        );
      })
      .finally(() => {
        this.sends.delete(send);
        this.total--;
        const left = (this.inFlight.get(delivery.endpointId) ?? 1) - 1;
        if (left === 0) this.inFlight.delete(delivery.endpointId);
        else this.inFlight.set(delivery.endpointId, left);
        const next = this.running ? this.waiting.get(delivery.endpointId)?.shift() : undefined;
        if (next) {
          this.total--;
          this.enqueue(next);
        } else if (this.waiting.get(delivery.endpointId)?.length === 0) this.waiting.delete(delivery.endpointId);
        if (!this.running) return;
        // A place came free: claim again soon, once for the attempts that end within CLAIM_AFTER_SEND_MS (one claim per
        // attempt cost the embedded store's one thread a transaction per delivery, beside verification's).
        if (this.polling === undefined && this.timer !== undefined && this.timerAt > Date.now() + CLAIM_AFTER_SEND_MS) {
          this.schedule(CLAIM_AFTER_SEND_MS);
        }
      });
    this.sends.add(send);
  }

  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const { db, keyring, clock, allowPrivate } = this.deps;
    let result: SendResult;
    let secret: string | undefined;
    try {
      secret = await keyring.decrypt(db, delivery.workspaceId, delivery.encryptionKeyId, delivery.endpointId, delivery.secretEncrypted);
    } catch {
      secret = undefined;
    }
    if (secret === undefined) {
      result = { status: null, error: "the signing secret could not be decrypted (KEYHAVEN_ENCRYPTION_KEY)", durationMs: 0 };
    } else {
      result = await sendWebhook(
        { id: delivery.id, body: delivery.body, url: delivery.url, secret },
        { allowPrivate, deadlineMs: this.options.attemptDeadlineMs, now: clock.now() },
      );
    }
    const at = clock.now();
    const delivered = result.status !== null && result.status >= 200 && result.status < 300;
    const next = delivered ? { status: "delivered" as const, atM: at } : this.retryAfter(delivery, at);
    const outcome: AttemptOutcome = { status: result.status, error: result.error, durationMs: result.durationMs, at, next };
    if (!(await recordWebhookAttempt(db, delivery.id, delivery.lease, outcome))) return;
    if (next.status === "delivered") this.stats.delivered++;
    else if (next.status === "failed") this.stats.failed++;
    else this.stats.retried++;
  }

  /** When a delivery that just failed is tried again, or that it has failed: the wait after its n-th attempt of this round. */
  private retryAfter(delivery: ClaimedDelivery, at: number): AttemptOutcome["next"] {
    const made = delivery.attempt - delivery.scheduleFrom;
    const wait = this.options.retryScheduleMs[made - 1];
    if (wait === undefined) return { status: "failed", atM: at };
    const jitter = 0.8 + 0.4 * this.options.random();
    return { status: "pending", atM: at + Math.round(wait * jitter) };
  }
}
