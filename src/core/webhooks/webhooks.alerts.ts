import type { Clock } from "../../clock.js";
import { PeriodicRun } from "../periodic.js";
import type { Db } from "../../storage/client.js";
import {
  forgetEndedRatelimitWindows,
  type RatelimitedWindow,
  recordRatelimited,
  scanExpiries,
} from "../../storage/webhooks/alerts.repository.js";
import { workspaceSubscribesTo } from "../../storage/webhooks/webhooks.repository.js";

// Threshold events (issue 38 §3, docs/webhooks.md#threshold-events). Which alerts hold, and the event each crossing
// sends, are decided in SQL by the statement that changes the key (migration alerts), so that the event commits with the
// spend, the refill or the update that causes it; time passing is applied by the ExpiryScan below, and the first refusal
// of a rate limit's window by RatelimitAlerts.

/** The events the keys' triggers and the expiry scan send (the SQL function keyhaven_threshold_events lists the same). */
export const THRESHOLD_EVENTS = [
  "key.credits.low",
  "key.credits.low.resolved",
  "key.credits.exhausted",
  "key.credits.exhausted.resolved",
  "key.expiring",
  "key.expiring.resolved",
  "key.expired",
  "key.expired.resolved",
  "key.ratelimited",
] as const;

/** Below this percentage of its refill amount (else of its starting credits) a key is low, unless set otherwise. */
export const DEFAULT_CREDITS_LOW_PERCENT = 10;
/** This long before its expiry a key is expiring, unless set otherwise (7 days). */
export const DEFAULT_EXPIRING_WITHIN_MS = 7 * 86_400_000;
/** The longest lead that may be set (90 days). */
export const MAX_EXPIRING_WITHIN_MS = 90 * 86_400_000;

type Logger = { warn(obj: unknown, msg?: string): void };

const SCAN_INTERVAL_MS = 15_000;
const CATCH_UP_INTERVAL_MS = 3_600_000;
const SCAN_KEYS_PER_STATEMENT = 500;
const SCAN_STATEMENTS_PER_RUN = 20;

/**
 * Applies the passing of time to key.expiring and key.expired: every 15 seconds, the keys whose crossing fell since the
 * previous scan; at start and hourly, every key within its lead (what passed while no process ran, or before its
 * endpoint was created). Replicas scanning at once send nothing twice: an alert is recorded once (key_alerts).
 */
export class ExpiryScan {
  private readonly periodic = new PeriodicRun(SCAN_INTERVAL_MS);
  private scannedTo: number | undefined;
  private caughtUpAt: number | undefined;
  private stopped = false;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  start(log: Logger): void {
    if (this.periodic.started) return;
    this.stopped = false;
    this.periodic.start(() =>
      this.scanNow().then(
        () => undefined,
        (err: unknown) => log.warn({ err }, "scanning keys' expiries for webhooks failed; retrying at the next interval"),
      ),
    );
  }

  /** One scan up to now (a catch-up when due); answers the deliveries written. */
  async scanNow(): Promise<number> {
    const to = this.clock.now();
    const catchUp = this.scannedTo === undefined || this.caughtUpAt === undefined || to - this.caughtUpAt >= CATCH_UP_INTERVAL_MS;
    let from = this.scannedTo ?? to;
    let deliveries = 0;
    for (let i = 0; i < SCAN_STATEMENTS_PER_RUN && !this.stopped; i++) {
      const scanned = await scanExpiries(this.db, { from, to, limit: SCAN_KEYS_PER_STATEMENT, catchUp: catchUp && i === 0 });
      deliveries += scanned.deliveries;
      // A scan cut by its limit goes on from its latest crossing (again: applying a key twice sends nothing twice).
      if (scanned.keys < SCAN_KEYS_PER_STATEMENT || scanned.last === null) {
        from = to;
        break;
      }
      from = scanned.last - 1;
    }
    this.scannedTo = from;
    if (catchUp) this.caughtUpAt = to;
    await forgetEndedRatelimitWindows(this.db, to, 1000);
    return deliveries;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.periodic.stop();
  }
}

const SUBSCRIPTION_TTL_MS = 10_000;
const MAX_REMEMBERED_WINDOWS = 100_000;

/**
 * key.ratelimited: the first refusal of a key by a rate limit in the limit's window records the window and writes its
 * event before the verification is answered (nothing acknowledged is lost); the process remembers the windows it
 * recorded, so a key refused again in the same window costs nothing, and it asks at most every 10 s whether a
 * workspace has an endpoint subscribed at all.
 */
export class RatelimitAlerts {
  private readonly windows = new Map<string, number>();
  private readonly subscribed = new Map<string, { yes: boolean; at: number }>();

  private log: Logger | undefined;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** Where failures are logged (background.ts; before it, they are not). */
  start(log: Logger): void {
    this.log = log;
  }

  /** After a RATE_LIMITED verification of `keyId` by `window`; never throws (a failure is logged, the answer stands). */
  async refused(workspaceId: string, keyId: string, window: RatelimitedWindow): Promise<void> {
    const now = this.clock.now();
    const until = this.windows.get(keyId);
    if (until !== undefined && until > now) return;
    try {
      if (!(await this.isSubscribed(workspaceId, now))) return;
      await recordRatelimited(this.db, keyId, now, window);
      if (this.windows.size >= MAX_REMEMBERED_WINDOWS) this.windows.clear();
      this.windows.set(keyId, window.resetAt);
    } catch (err) {
      this.log?.warn({ err, keyId }, "recording a key.ratelimited event failed");
    }
  }

  private async isSubscribed(workspaceId: string, now: number): Promise<boolean> {
    const known = this.subscribed.get(workspaceId);
    if (known !== undefined && now - known.at < SUBSCRIPTION_TTL_MS) return known.yes;
    const yes = await workspaceSubscribesTo(this.db, workspaceId, "key.ratelimited");
    if (this.subscribed.size >= MAX_REMEMBERED_WINDOWS) this.subscribed.clear();
    this.subscribed.set(workspaceId, { yes, at: now });
    return yes;
  }
}
