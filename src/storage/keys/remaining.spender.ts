import type { Db } from "../client.js";
import { Coalescer, onceThisTurn } from "../coalescer.js";
import {
  MAX_REMAINING_READS_PER_STATEMENT,
  MAX_SPENDS_PER_STATEMENT,
  prepareSpendStatements,
  readRemainingOf,
  type SpendRequest,
  type SpendResult,
  type SpendStatements,
  spendRemaining,
} from "./keys.repository.js";

/**
 * A spend's outcome: `left` the uses after it (undefined when refused, or when the key is gone or unlimited), `had`
 * the uses it found (what a refused spend found insufficient; undefined when the key is gone or unlimited).
 */
export type SpendAnswer = { left: number | undefined; had: number | undefined };

type Spend = {
  keyId: string;
  cost: number;
  /** spendIfCurrent's condition; undefined for an unconditional spend. */
  ifEpochAtMost: bigint | undefined;
  resolve: (answer: SpendAnswer | undefined) => void;
  reject: (err: unknown) => void;
};
/** Spends of one key at one cost, in arrival order: one group of a statement. */
type Group = { request: SpendRequest; spends: Spend[] };
/** A read of a key's uses (peek), answered by the next reading statement. */
type Peek = { keyId: string; resolve: (left: number | undefined) => void; reject: (err: unknown) => void };

/** How many spending statements run at once by default (see RemainingSpender). */
export const DEFAULT_SPEND_STATEMENTS_IN_FLIGHT = 2;
/**
 * On PostgreSQL, how long a spending statement runs alone before a second one may start beside it (see
 * RemainingSpender): longer than a statement takes under load (p99 4–11 ms on the 2-core machines of
 * docs/benchmarks.md), short enough that a statement stuck on a row lock does not hold every key's verifications.
 */
export const SPEND_OVERLAP_AFTER_MS = 20;

/**
 * Spends the remaining uses of verifications in few database statements: verifications that arrive while
 * statements run wait, and the next statement spends all of them together, whatever their keys (up to
 * MAX_SPENDS_PER_STATEMENT groups of one key and one cost). Many keys verified at once, and one key verified by many
 * clients at once, therefore cost one statement and one commit per batch instead of one per verification, while
 * every spend is still atomic in the database: no overdraw across any number of processes, and no use granted that
 * the database did not record.
 *
 * Up to `inFlight` statements run at once, but a key is never in two of them: its later verifications wait for the
 * statement that holds it, so they are answered in arrival order and never wait on a row lock of their own process.
 * A statement that fails rejects the verifications it carried, and only those. One per process (services.ts).
 *
 * A spend that finds a statement free does not start one at once but in the check phase of the event loop's turn
 * (onceThisTurn, as Coalescer's batches begin), so the verifications read in the same turn share it. On PGlite, which runs a
 * statement on this thread and keeps none in flight, that is what makes batches at all: started at once, 4,327
 * spends took 4,176 statements (432 req/s, 200 keys at random, 50 connections); deferred, 33,450 took 1,102
 * (3,704 req/s). Statements that end start the next one at once: what waited for them is already there.
 *
 * With `overlapAfterMs`, a statement starts beside running ones only once the youngest of them has run that long.
 * On PostgreSQL one statement at a time carries more spends each (23 instead of 14 with two at once, 200 keys at
 * 50 connections) and costs less per spend: PostgreSQL's CPU 18–20 µs per verification instead of 26–32, this
 * process's 47–50 µs instead of 50–62 (docs/benchmarks.md); a second one still starts when the first is stuck (a
 * row lock held by another transaction), so that other keys' verifications go on.
 *
 * With `answerAfterNextStatement` (PostgreSQL), a statement that ends starts the next one before its own
 * verifications are answered: answered first, their replies (serialising and writing some 20 responses, about 0.7 ms
 * of this thread) ran before the driver wrote the next statement, and every statement waited for them. 200 keys with
 * remaining uses at 50 connections: p50 3.4–3.9 ms instead of 3.8–4.6, 11,508–13,238 req/s instead of 10,169–11,799
 * (bench:budgets, alternated; docs/benchmarks.md, session 22).
 */
export class RemainingSpender {
  private waiting: Spend[] = [];
  /** Keys in a running statement. */
  private busy = new Set<string>();
  private running = 0;
  /** When each running statement started (performance.now()), in start order. */
  private readonly startedAt: number[] = [];
  /** Starts the waiting spends once a running statement has run for overlapAfterMs, if nothing started them before. */
  private overlapTimer: NodeJS.Timeout | undefined;
  private readonly startThisTurn = onceThisTurn(() => this.startStatements());
  private readonly statements: SpendStatements;
  /** Statements sent so far (with `spends`, how well spends share them). */
  statementsSent = 0;
  /** Spends carried by those statements. */
  spendsSent = 0;
  /** Statements that read uses for peek (with `peeks`, how well peeks share them). */
  peekStatementsSent = 0;
  /** Peeks answered by those statements. */
  peeks = 0;
  private readonly peekQueue = new Coalescer<Peek>(
    (batch) => this.answerPeeks(batch),
    (batch, err) => {
      for (const p of batch) p.reject(err);
    },
  );

  constructor(
    db: Db,
    /** How many statements may run at once. */
    readonly inFlight = DEFAULT_SPEND_STATEMENTS_IN_FLIGHT,
    /** How long the youngest running statement must have run before another starts beside it (0: at once). */
    readonly overlapAfterMs = 0,
    /**
     * Whether a statement's verifications are answered only after the next statement has been started and handed to
     * the driver (in the check phase of the loop's turn, setImmediate), instead of before: see the class comment.
     * For a store whose statements run in another process (PostgreSQL); the embedded store runs the next statement
     * on this thread, so the answers would wait for it: on PGlite, 200 keys with remaining uses ran 5,668–7,233 req/s
     * answered after, 6,323–8,745 answered first (bench:budgets, alternated; docs/benchmarks.md, session 22).
     */
    readonly answerAfterNextStatement = false,
  ) {
    this.statements = prepareSpendStatements(db);
  }

  /** The uses left after this verification's spend, or undefined when it was refused (not enough left). */
  async spend(keyId: string, cost: number): Promise<number | undefined> {
    return (await this.spendAnswering(keyId, cost)).left;
  }

  /** As `spend`, also saying what uses the spend found (v2 reports the uses a refused verification found insufficient). */
  spendAnswering(keyId: string, cost: number): Promise<SpendAnswer> {
    return this.enqueue(keyId, cost, undefined) as Promise<SpendAnswer>;
  }

  /**
   * As `spendAnswering`, but only if the statement that spends finds the verification epoch at most `epoch`, in its own
   * snapshot (which starts after this call); else nothing is spent and the answer is undefined. A verification that
   * decided from the keys in memory, without reading the epoch, spends this way with the epoch those keys are exact
   * at: the statement then confirms that no write that could change the decision committed before it, so the
   * decision stands without a statement of its own to read the epoch (verification.verify.ts).
   */
  spendIfCurrent(keyId: string, cost: number, epoch: bigint): Promise<SpendAnswer | undefined> {
    return this.enqueue(keyId, cost, epoch);
  }

  private enqueue(keyId: string, cost: number, ifEpochAtMost: bigint | undefined): Promise<SpendAnswer | undefined> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ keyId, cost, ifEpochAtMost, resolve, reject });
      this.startThisTurn();
    });
  }

  /**
   * The key's uses now, without spending any (a verification refused before it spends still reports them, v2):
   * read from the database, since spends do not drop the verification cache's copy, by a statement that starts after
   * this call. The peeks asked while one such statement runs (or in the same turn of the event loop) are read together
   * by the next one, whatever their keys, as spends are: a flood of refused verifications costs a statement per batch,
   * not one per verification (issue 34: 199 refusals of one key were 199 statements).
   */
  peek(keyId: string): Promise<number | undefined> {
    return new Promise((resolve, reject) => this.peekQueue.add({ keyId, resolve, reject }));
  }

  /** One statement per MAX_REMAINING_READS_PER_STATEMENT distinct keys of the batch. */
  private async answerPeeks(batch: Peek[]): Promise<void> {
    const keyIds = [...new Set(batch.map((p) => p.keyId))];
    const left = new Map<string, number>();
    for (let from = 0; from < keyIds.length; from += MAX_REMAINING_READS_PER_STATEMENT) {
      this.peekStatementsSent++;
      const read = await readRemainingOf(this.statements.db, keyIds.slice(from, from + MAX_REMAINING_READS_PER_STATEMENT));
      for (const [id, uses] of read) left.set(id, uses);
    }
    this.peeks += batch.length;
    for (const p of batch) p.resolve(left.get(p.keyId));
  }

  private startStatements(): void {
    while (this.running < this.inFlight && this.waiting.length > 0 && this.mayStartBeside()) {
      const groups = this.take();
      if (groups.length === 0) return; // every waiting key is in a running statement
      this.running++;
      void this.run(groups);
    }
  }

  /** Whether a statement may start now beside the running ones (overlapAfterMs); if not yet, asks again then. */
  private mayStartBeside(): boolean {
    const youngest = this.startedAt.at(-1);
    if (youngest === undefined || this.overlapAfterMs <= 0) return true;
    const wait = youngest + this.overlapAfterMs - performance.now();
    if (wait <= 0) return true;
    this.overlapTimer ??= setTimeout(() => {
      this.overlapTimer = undefined;
      this.startStatements();
    }, Math.ceil(wait)).unref();
    return false;
  }

  /**
   * The waiting spends of keys in no running statement, grouped by key, cost and condition in arrival order (as many groups
   * as one statement takes); the others keep their place in the queue.
   */
  private take(): Group[] {
    const groups = new Map<string, Group>();
    const keys = new Set<string>();
    const left: Spend[] = [];
    for (const s of this.waiting) {
      const id = `${s.cost}:${s.ifEpochAtMost ?? ""}:${s.keyId}`;
      const group = groups.get(id);
      if (group) {
        group.spends.push(s);
        group.request.count++;
      } else if (this.busy.has(s.keyId) || groups.size >= MAX_SPENDS_PER_STATEMENT) {
        left.push(s);
      } else {
        groups.set(id, { request: { keyId: s.keyId, cost: s.cost, count: 1, ifEpochAtMost: s.ifEpochAtMost }, spends: [s] });
        keys.add(s.keyId);
      }
    }
    // A key whose later groups did not fit stays out of this statement entirely, so that its order is kept.
    for (const s of left) {
      if (keys.has(s.keyId)) {
        for (const [id, g] of groups) {
          if (g.request.keyId === s.keyId) {
            groups.delete(id);
            left.push(...g.spends);
          }
        }
        keys.delete(s.keyId);
      }
    }
    this.waiting = left.length === this.waiting.length ? this.waiting : restoreOrder(this.waiting, left);
    for (const key of keys) this.busy.add(key);
    return [...groups.values()];
  }

  private async run(groups: Group[]): Promise<void> {
    const started = performance.now();
    this.startedAt.push(started);
    this.statementsSent++;
    for (const g of groups) this.spendsSent += g.spends.length;
    let answer: () => void;
    try {
      const results = await spendRemaining(
        this.statements,
        groups.map((g) => g.request),
      );
      answer = () => answerGroups(groups, results);
    } catch (err) {
      answer = () => {
        for (const g of groups) for (const s of g.spends) s.reject(err);
      };
    }
    if (!this.answerAfterNextStatement) answer();
    try {
      for (const g of groups) this.busy.delete(g.request.keyId);
      this.startedAt.splice(this.startedAt.indexOf(started), 1);
      this.running--;
      this.startStatements();
    } finally {
      // Whatever starting the next statement did, this statement's verifications get their answers.
      if (this.answerAfterNextStatement) setImmediate(answer);
    }
  }
}

/** Answers each spend of a statement's groups from the statement's results (spendRemaining's, in the groups' order). */
function answerGroups(groups: readonly Group[], results: readonly (SpendResult | undefined)[]): void {
  for (const [n, { request, spends }] of groups.entries()) {
    const result = results[n];
    // A condition that failed: nothing spent, the verification decides again (no answer, as spendIfCurrent says).
    if (result === undefined && request.ifEpochAtMost !== undefined) {
      for (const s of spends) s.resolve(undefined);
      continue;
    }
    for (const [i, s] of spends.entries()) {
      const had = result ? result.before - request.cost * Math.min(i, result.granted) : undefined;
      s.resolve({ left: result && i < result.granted ? result.before - request.cost * (i + 1) : undefined, had });
    }
  }
}

/** `kept` (a subset of `queue`, maybe out of order) in `queue`'s order. */
function restoreOrder(queue: Spend[], kept: Spend[]): Spend[] {
  const set = new Set(kept);
  return queue.filter((s) => set.has(s));
}
