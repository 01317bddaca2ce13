import type { Db } from "../../db/client.js";
import { findDependencyFailure } from "../../dependency.js";
import { upsertVerificationCounts, type VerificationCountRow } from "./analytics.repository.js";

const HOUR_MS = 3_600_000;
/** How often the counts in memory are written to the database. */
export const ANALYTICS_FLUSH_INTERVAL_MS = 1000;

type Logger = { error(obj: unknown, msg?: string): void };

/**
 * Counts verification outcomes in process memory and writes them to `verification_counts` about once a second
 * and when the app closes. Recording is synchronous and cheap: one map lookup and an increment per verification,
 * never a query, so it adds nothing measurable to keys.verifyKey. A failed write keeps its counts for the next one.
 */
export class VerificationAnalytics {
  /** Hour (unix ms) → key id, outcome and tags → the count so far. */
  private pending = new Map<number, Map<string, VerificationCountRow>>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private log: Logger = { error: () => {} };

  constructor(
    private readonly db: Db,
    readonly enabled: boolean,
  ) {}

  /**
   * Counts one verification of an existing key (v1 counts only those). Its workspace and API are stored with the
   * count, so the count stays even if the key is deleted permanently before it is written. `tags` are kept as
   * sent; `at` is unix ms.
   */
  record(
    key: { keyId: string; workspaceId: string; apiId: string; identityId: string | undefined },
    outcome: string,
    tags: string[] | undefined,
    at: number,
  ): void {
    if (!this.enabled) return;
    const hourM = at - (at % HOUR_MS);
    let hour = this.pending.get(hourM);
    if (hour === undefined) this.pending.set(hourM, (hour = new Map()));
    // NUL never occurs in a key id, code or tag (the JSON body parser refuses it), so it separates them safely.
    const untagged = tags === undefined || tags.length === 0;
    const id = untagged ? key.keyId + "\u0000" + outcome : key.keyId + "\u0000" + outcome + "\u0000" + tags.join("\u0000");
    const row = hour.get(id);
    if (row !== undefined) {
      row.count++;
      row.identity_id = key.identityId ?? null;
    } else {
      hour.set(id, {
        key_id: key.keyId,
        workspace_id: key.workspaceId,
        api_id: key.apiId,
        hour_m: hourM,
        outcome,
        tags: tags ?? [],
        identity_id: key.identityId ?? null,
        count: 1,
      });
    }
  }

  /** Verifications counted and not yet written. */
  get unwritten(): number {
    let n = 0;
    for (const hour of this.pending.values()) for (const row of hour.values()) n += row.count;
    return n;
  }

  start(log?: Logger): void {
    if (log) this.log = log;
    if (!this.enabled || this.timer) return;
    this.timer = setInterval(() => {
      this.flush().catch((err) => {
        // An outage is logged once per change of state by the store (dependency.ts), not at every flush.
        if (!findDependencyFailure(err)) this.log.error({ err }, "writing verification counts failed; kept for the next try");
      });
    }, ANALYTICS_FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  /** Stops the timer and writes what is left (called when the app closes, after the last request finished). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    try {
      await this.flush();
    } catch (err) {
      this.log.error({ err, lost: this.unwritten }, "writing verification counts at shutdown failed");
      throw err;
    }
  }

  /** Writes every count in memory in one statement; on failure they are merged back for the next call. */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing.catch(() => {});
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    const rows = [...batch.values()].flatMap((hour) => [...hour.values()]);
    this.flushing = upsertVerificationCounts(this.db, rows).catch((err: unknown) => {
      for (const [hourM, hour] of batch) {
        const current = this.pending.get(hourM);
        if (!current) {
          this.pending.set(hourM, hour);
          continue;
        }
        for (const [id, row] of hour) {
          const newer = current.get(id);
          if (newer) newer.count += row.count;
          else current.set(id, row);
        }
      }
      throw err;
    });
    try {
      await this.flushing;
    } finally {
      this.flushing = undefined;
    }
  }
}
