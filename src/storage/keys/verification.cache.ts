import { Coalescer } from "../coalescer.js";
import type { Db } from "../client.js";
import type { EpochReader } from "../epoch.js";
import { TaggedEntries } from "../invalidations.js";
import { type KeyForVerification, prepareVerificationLookup, type VerificationLookup } from "./keys.repository.js";

/** Keys kept in memory per process; beyond this the least recently used entries are dropped first. */
export const VERIFICATION_CACHE_ENTRIES = 50_000;
/**
 * Lookup statements at once on PostgreSQL (services.ts; one on PGlite, whose statements run on this thread). A
 * lookup of keys not in memory spends most of its time in PostgreSQL, reading their pages; the keys missed meanwhile
 * need not wait for it. Random keys among 1,000,000: +7% verifications/s, random/hot 0.485 → 0.511 (issue 13 §2,
 * docs/benchmarks.md). Batches whose keys are all in memory still wait for the statement in flight, which answers
 * their epoch too: let beside it, they split the hot set's epoch reads and cost it 15%.
 */
export const POSTGRES_LOOKUPS_IN_FLIGHT = 2;

/**
 * What a cached key's answer was read from, as the tags the writes of migration `invalidation_log` log: its row, its
 * API, its workspace, its identity (and so the identity's rate limits) and its roles (their permissions). Its own
 * permissions and rate limits log `key:<id>`.
 */
export function verificationTagsOf(key: KeyForVerification): string[] {
  const tags = [`key:${key.id}`, `api:${key.apiId}`, `ws:${key.workspaceId}`];
  if (key.identityId) tags.push(`identity:${key.identityId}`);
  for (const roleId of key.roleIds) tags.push(`role:${roleId}`);
  return tags;
}

/**
 * The key (undefined when there is none) and the epoch it was confirmed at: read by a statement that started after
 * the lookup was asked for, so other caches may use it for the same request. Absent when no such statement ran (an
 * unknown key answered by the lookup of other keys' misses).
 */
export type Lookup = { key: KeyForVerification | undefined; epoch: bigint | undefined };

type Waiter = {
  hash: string;
  resolve: (found: Lookup) => void;
  reject: (err: unknown) => void;
};

/**
 * The keys verification reads, kept in process memory without ever answering from stale data.
 *
 * Every write that can change a verification's answer bumps the database's epoch in the same transaction
 * (triggers of migration `verification_epoch`) and logs what it changed (migration `invalidation_log`). Each lookup
 * waits for a statement that starts after the lookup was asked for; that statement reads the epoch (and, in the same
 * snapshot, the keys not in memory). When the epoch moved, the process's invalidation tracker first reads what moved
 * it and drops the entries carrying those tags (`verificationTagsOf`); the others are still exact, because no write
 * they depend on has committed since. So a write that committed before a verification arrived is always seen by it,
 * on every replica, and a write to another key leaves this one in memory.
 *
 * Lookups that arrive while a statement is running are answered together by the next one: under load one small
 * query serves many verifications, and a key that is verified often is read from the database once per write.
 */
export class VerificationCache {
  private readonly entries: TaggedEntries<KeyForVerification>;
  /** Keys read from the database (rows the lookup returned): what the tests of invalidation count. */
  loads = 0;
  /** Lookup statements run (batches with a miss): what the tests of batching count. */
  statements = 0;
  /** Hashes those statements looked up (keys not in memory, present or not): /metrics, with `statements`. */
  hashesLookedUp = 0;
  private readonly queue: Coalescer<Waiter>;
  private readonly statement: VerificationLookup;

  /**
   * One per process (services.ts); `epochs` is the process's epoch reader, shared with its other caches. Up to
   * `lookupsInFlight` statements at once, a further one only for a batch with a key not in memory.
   */
  constructor(
    db: Db,
    private readonly epochs: EpochReader,
    maxEntries = VERIFICATION_CACHE_ENTRIES,
    lookupsInFlight = 1,
  ) {
    this.statement = prepareVerificationLookup(db);
    this.entries = new TaggedEntries(maxEntries);
    epochs.invalidations.register(this.entries);
    this.queue = new Coalescer(
      (batch) => this.answer(batch),
      (batch, err) => {
        for (const w of batch) w.reject(err);
      },
      { inFlight: lookupsInFlight, startsBeside: (w) => !this.entries.has(w.hash) },
    );
  }

  async lookup(hash: string): Promise<KeyForVerification | undefined> {
    return (await this.lookupWithEpoch(hash)).key;
  }

  lookupWithEpoch(hash: string): Promise<Lookup> {
    return new Promise((resolve, reject) => this.queue.add({ hash, resolve, reject }));
  }

  /**
   * The key in memory now, without a statement, with the epoch it is exact at: what any snapshot whose epoch is no
   * newer sees of it (the tracker has applied every change up to that epoch, dropping the keys they touched). Not a
   * lookup: nothing says that no write committed since; a caller that decides from it must confirm the epoch in a
   * statement that starts after the verification arrived (RemainingSpender.spendIfCurrent). Undefined when the key
   * is not in memory (or nothing has been applied yet).
   */
  inMemory(hash: string): { key: KeyForVerification; epoch: bigint } | undefined {
    const epoch = this.epochs.invalidations.applied;
    if (epoch < 0n) return undefined;
    const key = this.entries.get(hash);
    return key === undefined ? undefined : { key, epoch };
  }

  get size(): number {
    return this.entries.size;
  }

  /** Lookup statements allowed at once. */
  get lookupsInFlight(): number {
    return this.queue.inFlight;
  }

  /** One statement for the whole batch (two when only unknown keys were asked for and none exists). */
  private async answer(batch: Waiter[]): Promise<void> {
    const missed = new Set(batch.filter((w) => !this.entries.has(w.hash)).map((w) => w.hash));
    const misses = [...missed];
    let epoch: bigint | undefined;
    const found = new Map<string, KeyForVerification>();
    if (misses.length > 0) {
      this.statements++;
      this.hashesLookedUp += misses.length;
      for (const row of await this.statement.execute({ hashes: misses })) {
        epoch = BigInt(row.epoch);
        found.set(row.hash, row);
      }
      this.loads += found.size;
    }
    const hadHits = batch.some((w) => !missed.has(w.hash));
    if (epoch === undefined && hadHits) {
      // Shared with the other caches of this process; its statement starts after this batch was formed.
      epoch = await this.epochs.current();
    }

    const tracker = this.epochs.invalidations;
    // Everything this epoch's snapshot sees is applied before an entry in memory answers.
    if (epoch !== undefined && epoch > tracker.applied) await tracker.reach(epoch);
    // Read at an epoch older than what is applied, a row may predate a change already applied: used, not kept.
    if (epoch !== undefined && epoch >= tracker.applied) {
      for (const [hash, row] of found) this.entries.set(hash, row, verificationTagsOf(row));
    }

    for (const w of batch) {
      const cached = found.get(w.hash) ?? (missed.has(w.hash) ? undefined : this.entries.get(w.hash));
      if (cached) w.resolve({ key: cached, epoch });
      else if (missed.has(w.hash)) w.resolve({ key: undefined, epoch });
      // It was in memory, but a change it depends on dropped it: asked again by the next statement.
      else this.queue.add(w);
    }
  }
}
