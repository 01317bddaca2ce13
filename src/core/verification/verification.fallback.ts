import { LRUCache } from "lru-cache";
import type { UnkeyFallbackConfig } from "../../config.js";
import { countPendingKeysByWorkspace, findApiWorkspace } from "../../storage/keys/keys.pending.repository.js";
import { type UnkeyCallFailure, UnkeyFallbackClient } from "../../unkey/unkey.fallback.client.js";
import type { UnkeyVerifyAnswer } from "../../unkey/unkey.schemas.js";
import type { Origin } from "../caller.js";
import type { KeyServices } from "../keys/keys.services.js";
import { type AdoptOutcome, adoptKey, refreshAdoptedKey } from "../keys/keys.adopt.js";
import { findDependencyFailure } from "../../storage/dependency.js";

/** How often the pending keys per workspace are counted again (keys_pending_idx), besides each adoption's own count. */
export const PENDING_COUNT_REFRESH_MS = 10_000;
/** Hashes of keys Unkey did not know (or keyhaven holds no pending key for) remembered at most. */
export const NEGATIVE_CACHE_ENTRIES = 100_000;
/** Workspaces whose token bucket is remembered at most (the least recently used one starts full again). */
const BUCKETS = 10_000;
/** APIs whose workspace is remembered (an API never changes workspace). */
const API_WORKSPACES = 10_000;
/** Refreshes from keys.getKey after adoptions at once; more are skipped (counted). */
export const REFRESHES_IN_FLIGHT = 8;

/** How one fallback call went (keyhaven_unkey_fallback_calls_total's `outcome`). */
export type FallbackCallOutcome = "adopted" | "not_pending" | "not_allowed" | "unknown" | "failed";
/** Why a call or a refresh failed (keyhaven_unkey_fallback_errors_total's `reason`). */
export type FallbackErrorReason = UnkeyCallFailure | "adoption_refused" | "refresh_skipped";
/** Why a miss was not asked about (keyhaven_unkey_fallback_skipped_total's `reason`). */
export type FallbackSkipReason = "negative_cache" | "rate_limited";

/** What the fallback counts for /metrics (http/metrics.ts reads it at each scrape). */
export type FallbackStats = {
  readonly calls: Map<FallbackCallOutcome, number>;
  readonly errors: Map<FallbackErrorReason, number>;
  readonly skipped: Map<FallbackSkipReason, number>;
  adopted: number;
  /** Live pending keys, from the counts in memory. */
  pending(): number;
};

/** What a miss brings to the fallback: the key, its hash, where it may be pending, who asked and who may adopt. */
export type FallbackMiss = {
  key: string;
  hash: string;
  /** The request's workspace (a root key's, or v1's apiId's); undefined: any workspace with pending keys. */
  workspaceId: string | undefined;
  origin: Origin;
  /** Whether the verification's caller may verify the pending key (v2: verify_key for its API). */
  mayAdopt: (key: { id: string; apiId: string; workspaceId: string }) => boolean;
};

/**
 * Adoption on first use (issue 36 §2, docs/operations.md, "The Unkey fallback"): a verification that misses asks hosted Unkey's
 * keys.verifyKey about the key, once, and when Unkey names a key that is pending here, adopts it (keys.adopt.ts).
 * It asks only while it is active (configured, and before KEYHAVEN_UNKEY_FALLBACK_UNTIL), only for a workspace that
 * has pending keys (counts in memory, refreshed in the background and on adoption), never about a hash it was
 * told of within KEYHAVEN_UNKEY_FALLBACK_NEGATIVE_TTL_MS, and at most KEYHAVEN_UNKEY_FALLBACK_RATE times a second
 * per workspace (a token bucket on business time). Concurrent misses of one key share one call. Every upstream
 * failure is a miss, as without the fallback; the call has a deadline and no retry.
 */
export class UnkeyFallback {
  readonly stats: FallbackStats;
  private readonly client: UnkeyFallbackClient;
  private pendingCounts = new Map<string, number>();
  private readonly negative = new LRUCache<string, number>({ max: NEGATIVE_CACHE_ENTRIES });
  private readonly buckets = new LRUCache<string, { tokens: number; at: number }>({ max: BUCKETS });
  private readonly apiWorkspaces = new LRUCache<string, string>({ max: API_WORKSPACES });
  private readonly inFlight = new Map<string, Promise<boolean>>();
  private readonly refreshes = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: KeyServices,
    private readonly config: UnkeyFallbackConfig,
  ) {
    this.client = new UnkeyFallbackClient({ url: config.url, rootKey: config.rootKey, timeoutMs: config.timeoutMs });
    const counts = () => this.pendingCounts;
    this.stats = {
      calls: new Map(),
      errors: new Map(),
      skipped: new Map(),
      adopted: 0,
      pending() {
        let total = 0;
        for (const n of counts().values()) total += n;
        return total;
      },
    };
  }

  /** Configured and not past KEYHAVEN_UNKEY_FALLBACK_UNTIL. */
  isActive(): boolean {
    return this.config.until === undefined || this.deps.clock.now() <= this.config.until;
  }

  /** Whether the workspace (undefined: any) has pending keys, by the counts in memory. */
  hasPending(workspaceId: string | undefined): boolean {
    if (workspaceId === undefined) return this.pendingCounts.size > 0;
    return (this.pendingCounts.get(workspaceId) ?? 0) > 0;
  }

  /** The workspace of API `apiId` (undefined when there is none), remembered. */
  async workspaceOfApi(apiId: string): Promise<string | undefined> {
    const known = this.apiWorkspaces.get(apiId);
    if (known !== undefined) return known;
    const workspaceId = await findApiWorkspace(this.deps.db, apiId);
    if (workspaceId !== undefined) this.apiWorkspaces.set(apiId, workspaceId);
    return workspaceId;
  }

  /**
   * Asks Unkey about a missed key and adopts the pending key it names: true when a key was adopted (the caller looks
   * the hash up again), false for every other outcome (the verification answers as without the fallback).
   */
  adopt(miss: FallbackMiss): Promise<boolean> {
    if (!this.isActive() || !this.hasPending(miss.workspaceId)) return Promise.resolve(false);
    const running = this.inFlight.get(miss.hash);
    if (running !== undefined) return running;
    const now = this.deps.clock.now();
    const until = this.negative.get(miss.hash);
    if (until !== undefined && until > now) {
      count(this.stats.skipped, "negative_cache");
      return Promise.resolve(false);
    }
    if (!this.takeToken(miss.workspaceId ?? "", now)) {
      count(this.stats.skipped, "rate_limited");
      return Promise.resolve(false);
    }
    const call = this.ask(miss).finally(() => this.inFlight.delete(miss.hash));
    this.inFlight.set(miss.hash, call);
    return call;
  }

  /**
   * `count` pending keys created in the workspace now (the copy from Unkey), so that they are asked about before the
   * next count.
   */
  notePending(workspaceId: string, count: number): void {
    if (count > 0) this.pendingCounts.set(workspaceId, (this.pendingCounts.get(workspaceId) ?? 0) + count);
  }

  /** Counts the pending keys per workspace again (keys_pending_idx). */
  async refreshPendingCounts(): Promise<void> {
    this.pendingCounts = await countPendingKeysByWorkspace(this.deps.db);
  }

  /** Counts the pending keys now and every PENDING_COUNT_REFRESH_MS while active (background.ts). */
  start(): void {
    if (this.timer !== undefined) return;
    const refresh = () => {
      if (!this.isActive()) return;
      // A failed count keeps the last one: the next tick tries again.
      this.refreshPendingCounts().catch(() => {});
    };
    refresh();
    this.timer = setInterval(refresh, PENDING_COUNT_REFRESH_MS);
    this.timer.unref();
  }

  /** Resolves once the refreshes in flight have ended (tests, before they stop the source). */
  async refreshesSettled(): Promise<void> {
    await Promise.allSettled([...this.refreshes]);
  }

  /** Stops the counts and the refreshes in flight (their calls are aborted). */
  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.stopping.abort();
    await Promise.allSettled([...this.refreshes]);
  }

  private async ask(miss: FallbackMiss): Promise<boolean> {
    const answer = await this.client.verifyKey(miss.key, this.stopping.signal);
    if (!answer.ok) {
      count(this.stats.errors, answer.reason);
      count(this.stats.calls, "failed");
      return false;
    }
    const keyId = answer.value.keyId;
    const now = this.deps.clock.now();
    if (keyId === undefined) {
      count(this.stats.calls, "unknown");
      this.negative.set(miss.hash, now + this.config.negativeTtlMs);
      return false;
    }
    let adopted: AdoptOutcome;
    try {
      adopted = await adoptKey(
        this.deps.changes,
        miss.origin,
        { keyId, workspaceId: miss.workspaceId, hash: miss.hash, state: stateOf(answer.value) },
        now,
        miss.mayAdopt,
      );
    } catch (err) {
      // An outage of the store is the verification's own (a 503, as its lookup would have been); anything else the
      // store refused of Unkey's answer (a NUL in meta, …) leaves the key pending, as a failed call would.
      if (findDependencyFailure(err) !== undefined) throw err;
      count(this.stats.errors, "adoption_refused");
      count(this.stats.calls, "failed");
      return false;
    }
    if (adopted === "notPending") {
      count(this.stats.calls, "not_pending");
      this.negative.set(miss.hash, now + this.config.negativeTtlMs);
      return false;
    }
    // Pending, but not for this request: not remembered, or a caller could keep the key from its own workspace.
    if (adopted === "notAllowed") {
      count(this.stats.calls, "not_allowed");
      return false;
    }
    count(this.stats.calls, "adopted");
    this.stats.adopted += 1;
    const left = (this.pendingCounts.get(adopted.workspaceId) ?? 1) - 1;
    if (left > 0) this.pendingCounts.set(adopted.workspaceId, left);
    else this.pendingCounts.delete(adopted.workspaceId);
    this.refreshInBackground({ keyId, workspaceId: adopted.workspaceId, hash: miss.hash }, miss.origin);
    return true;
  }

  /** What getKey adds to verifyKey's answer (the refill, the key's rate limits), after the verification is answered, bounded. */
  private refreshInBackground(key: { keyId: string; workspaceId: string; hash: string }, origin: Origin): void {
    if (this.refreshes.size >= REFRESHES_IN_FLIGHT) {
      count(this.stats.errors, "refresh_skipped");
      return;
    }
    const refresh = (async () => {
      const answer = await this.client.getKey(key.keyId, this.stopping.signal);
      if (!answer.ok) {
        count(this.stats.errors, answer.reason);
        return;
      }
      if (answer.value.keyId !== key.keyId) {
        count(this.stats.errors, "malformed");
        return;
      }
      await refreshAdoptedKey(this.deps, origin, key, answer.value);
    })()
      // A refresh that fails leaves the key as adopted: it verifies by keyhaven's rules either way.
      .catch(() => {})
      .finally(() => this.refreshes.delete(refresh));
    this.refreshes.add(refresh);
  }

  /** One call from the workspace's bucket: KEYHAVEN_UNKEY_FALLBACK_RATE tokens, as many added per second. */
  private takeToken(workspaceId: string, now: number): boolean {
    const rate = this.config.ratePerSecond;
    let bucket = this.buckets.get(workspaceId);
    if (bucket === undefined) {
      bucket = { tokens: rate, at: now };
      this.buckets.set(workspaceId, bucket);
    }
    bucket.tokens = Math.min(rate, bucket.tokens + (Math.max(0, now - bucket.at) * rate) / 1000);
    bucket.at = now;
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }
}

function count<K>(counts: Map<K, number>, key: K): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** The state an adoption stores from verifyKey's answer: a field it leaves out is empty upstream (contract §5.3). */
function stateOf(answer: UnkeyVerifyAnswer) {
  return {
    name: answer.name ?? null,
    meta: answer.meta ?? null,
    expires: answer.expires === undefined ? null : new Date(answer.expires),
    enabled: answer.enabled ?? true,
    remaining: answer.credits === undefined ? null : Math.max(0, answer.credits),
  };
}
