import { hkdfSync } from "node:crypto";
import type { Clock } from "../../clock.js";
import { sha256Hex } from "../../crypto/hash.js";
import { open, seal } from "../../crypto/vault.js";
import type { Db } from "../../storage/client.js";
import { DependencyUnavailableError } from "../../storage/dependency.js";
import { deleteIdempotencyKeysBefore, findIdempotencyKey, insertIdempotencyKey } from "../../storage/idempotency/idempotency.repository.js";
import type { IdempotencyScope } from "../caller.js";
import { BackgroundPruner } from "../pruner.js";

/** How long a stored answer is replayed (issue 35 §3): a retry a day later is a new request. */
export const IDEMPOTENCY_TTL_MS = 86_400_000;
/** Rows one pruning statement deletes at most, and statements one run makes at most (as the audit log's). */
export const IDEMPOTENCY_PRUNE_BATCH_ROWS = 1000;
const IDEMPOTENCY_PRUNE_MAX_BATCHES = 100;
const IDEMPOTENCY_PRUNE_INTERVAL_MS = 3_600_000;

/** An answer as it is stored and replayed: its status, its content type, its body as sent. */
export type StoredAnswer = { readonly status: number; readonly contentType: string; readonly body: string };

/** What a lookup found for a key: the answer to replay, or the key used with another request (a 422). */
export type Found = { readonly kind: "replay"; readonly answer: StoredAnswer } | { readonly kind: "mismatch" };

/** A request's identity for its key: who asks (`scope`: a workspace and its actor, or the operator), with which key, for what. */
export type IdempotentRequest = { readonly scope: string; readonly key: string; readonly fingerprint: string };

type Logger = { info(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void };

/**
 * Idempotency-Key (issue 35 §3): a request's answer is stored with its change, in the change's transaction, and a
 * retry with the same key and request gets that answer instead of a second change. The answer is sealed with a key
 * derived from the Idempotency-Key itself (HKDF-SHA256), so that the table alone yields none (createKey's answer holds
 * a plaintext key, createRootKey's a root key); the row names the key by its sha256 only.
 */
export class Idempotency {
  /** Prunes expired answers in the background: at start, then hourly, in bounded batches (core/pruner.ts). */
  private readonly pruner: BackgroundPruner;

  constructor(
    /** The store: a request that made no change stores its answer on it, in a statement of its own. */
    readonly db: Db,
    private readonly clock: Clock,
  ) {
    this.pruner = new BackgroundPruner({
      what: "expired idempotency keys",
      intervalMs: IDEMPOTENCY_PRUNE_INTERVAL_MS,
      batchRows: IDEMPOTENCY_PRUNE_BATCH_ROWS,
      maxBatches: IDEMPOTENCY_PRUNE_MAX_BATCHES,
      cutoff: () => this.clock.now() - IDEMPOTENCY_TTL_MS,
      deleteBatch: (before, rows) => deleteIdempotencyKeysBefore(this.db, before, rows),
    });
  }

  /** The stored answer of `request`'s key (not expired), or that the key was used for another request, or nothing. */
  async find(request: IdempotentRequest): Promise<Found | undefined> {
    const row = await findIdempotencyKey(this.db, request.scope, sha256Hex(request.key), this.clock.now() - IDEMPOTENCY_TTL_MS);
    if (row === undefined) return undefined;
    if (row.fingerprint !== request.fingerprint) return { kind: "mismatch" };
    return { kind: "replay", answer: unseal(request, row.answer) };
  }

  /**
   * The scope of `request`, which has no stored answer: its changes run in one transaction, opened on first use and
   * held until `commit` stores the answer with them, or rolled back by `rollback`, or when `holdMs` pass first.
   */
  begin(request: IdempotentRequest, holdMs: number): RequestScope {
    return new RequestScope(this, request, holdMs);
  }

  /** Stores `answer` in `tx`; false when another request stored one for the key first. */
  store(tx: Db, request: IdempotentRequest, answer: StoredAnswer): Promise<boolean> {
    const now = this.clock.now();
    const row = {
      scope: request.scope,
      keyHash: sha256Hex(request.key),
      fingerprint: request.fingerprint,
      status: answer.status,
      answer: sealAnswer(request, answer),
      createdAtM: now,
    };
    return insertIdempotencyKey(tx, row, now - IDEMPOTENCY_TTL_MS);
  }

  start(log: Logger): void {
    this.pruner.start(log);
  }

  /** Deletes the expired answers, batch by batch; returns how many went. */
  pruneNow(): Promise<number> {
    return this.pruner.pruneNow();
  }

  stop(): Promise<void> {
    return this.pruner.stop();
  }
}

/** What `commit` answers: the answer to send (this request's, or a concurrent duplicate's that stored first), or that the duplicate is still running. */
export type Committed =
  | { readonly kind: "answer"; readonly answer: StoredAnswer; readonly replayed: boolean }
  | { readonly kind: "inProgress" };

type Held = { readonly tx: Db; release(commit: boolean): void; readonly finished: Promise<void> };

const ROLLBACK = Symbol("rollback");

/**
 * One request's idempotency scope (caller.idempotency). Its one transaction is opened by the first `within` and held
 * for the rest of the request, so that the answer stored by `commit` commits with every change of the request or not
 * at all. Each `within` runs in a savepoint of it, so that work that throws is undone as a transaction of its own
 * would be, and the request may go on. The transaction is rolled back when `holdMs` pass before `commit`: a handler
 * that waits for the store while the scope holds it (PGlite's one connection) cannot hold it for ever.
 */
export class RequestScope implements IdempotencyScope {
  readonly key: string;
  private opening: Promise<Held> | undefined;
  private readonly pending: Array<() => void> = [];
  private closed: "committed" | "rolledBack" | "expired" | undefined;
  private readonly timer: NodeJS.Timeout;
  /** Rejects (503) when the scope's bound passes before the answer is stored: race the request's work with it. */
  readonly expiry: Promise<never>;

  constructor(
    private readonly owner: Idempotency,
    private readonly request: IdempotentRequest,
    private readonly holdMs: number,
  ) {
    this.key = request.key;
    let expire!: (err: Error) => void;
    this.expiry = new Promise<never>((_, reject) => {
      expire = reject;
    });
    this.expiry.catch(() => {});
    this.timer = setTimeout(() => {
      if (this.closed !== undefined) return;
      this.closed = "expired";
      expire(heldTooLong(holdMs));
      void this.finish(false).catch(() => {});
    }, holdMs);
    this.timer.unref();
  }

  /** Whether the scope's bound passed before the answer was stored (the request is answered 503). */
  get expired(): boolean {
    return this.closed === "expired";
  }

  async within<T>(db: Db, work: (tx: Db) => Promise<T>): Promise<T> {
    this.assertOpen();
    const held = await (this.opening ??= this.open(db));
    this.assertOpen();
    return held.tx.transaction((savepoint) => work(savepoint as unknown as Db));
  }

  afterCommit(fn: () => void): void {
    this.pending.push(fn);
  }

  async read<T>(db: Db, work: (db: Db) => Promise<T>): Promise<T> {
    if (this.opening === undefined) return work(db);
    return this.within(db, work);
  }

  /**
   * Stores `answer` with the request's changes and commits (in a short transaction of its own when it made none);
   * when a concurrent request with the same key stored first, rolls back and answers with that one's answer.
   */
  async commit(answer: StoredAnswer): Promise<Committed> {
    this.assertOpen();
    const held = this.opening === undefined ? undefined : await this.opening;
    this.assertOpen();
    let stored: boolean;
    if (held === undefined) {
      stored = await this.owner.store(this.owner.db, this.request, answer);
      this.closed = stored ? "committed" : "rolledBack";
    } else {
      try {
        stored = await this.owner.store(held.tx, this.request, answer);
      } catch (err) {
        await this.rollback();
        throw err;
      }
      this.assertOpen();
      this.closed = stored ? "committed" : "rolledBack";
      await this.finish(stored);
    }
    clearTimeout(this.timer);
    if (stored) {
      for (const fn of this.pending.splice(0)) fn();
      return { kind: "answer", answer, replayed: false };
    }
    // Lost to a concurrent duplicate: on PostgreSQL the insert waited for its transaction, which has committed.
    const winner = await this.owner.find(this.request);
    if (winner?.kind === "replay") return { kind: "answer", answer: winner.answer, replayed: true };
    return { kind: "inProgress" };
  }

  /** Undoes whatever the request changed (an error answer, or the request gave up); nothing is stored. */
  async rollback(): Promise<void> {
    clearTimeout(this.timer);
    if (this.closed === undefined) this.closed = "rolledBack";
    await this.finish(false);
  }

  private assertOpen(): void {
    if (this.closed === "expired") throw heldTooLong(this.holdMs);
    if (this.closed !== undefined) throw new Error("idempotency scope used after it ended");
  }

  private async finish(commit: boolean): Promise<void> {
    if (this.opening === undefined) return;
    const held = await this.opening.catch(() => undefined);
    if (held === undefined) return;
    held.release(commit);
    await held.finished;
  }

  /** Opens the held transaction; resolves once it has begun, with its handle and how to end it. */
  private open(db: Db): Promise<Held> {
    return new Promise<Held>((resolve, reject) => {
      let release!: (commit: boolean) => void;
      const decided = new Promise<boolean>((r) => {
        release = r;
      });
      let began = false;
      const finished = db
        .transaction(async (tx) => {
          began = true;
          resolve({ tx: tx as unknown as Db, release, finished: finishedQuietly });
          if (!(await decided)) throw ROLLBACK;
        })
        .then(
          () => {},
          (err: unknown) => {
            if (!began) reject(err);
            else if (err !== ROLLBACK) throw err;
          },
        );
      // A rollback's own failure is not the request's: the row it would have written was never committed.
      const finishedQuietly = finished.catch((err: unknown) => {
        if (this.closed === "committed") throw err;
      });
    });
  }
}

/** The answer of a request whose scope held its transaction past its bound: nothing of it was committed. */
function heldTooLong(ms: number): DependencyUnavailableError {
  return new DependencyUnavailableError(
    "PostgreSQL",
    `the request did not finish within ${ms} ms; nothing was changed, retry with the same Idempotency-Key`,
    `idempotency scope held its transaction past ${ms} ms`,
  );
}

/** The key that seals `request`'s answer: derived from the Idempotency-Key, which the table never holds. */
function answerKey(request: IdempotentRequest): Buffer {
  return Buffer.from(hkdfSync("sha256", request.key, request.scope, "keyhaven idempotency answer", 32));
}

const aadOf = (request: IdempotentRequest) => `idempotency_keys:${request.scope}:${sha256Hex(request.key)}`;

function sealAnswer(request: IdempotentRequest, answer: StoredAnswer): string {
  const plain = JSON.stringify({ status: answer.status, contentType: answer.contentType, body: answer.body });
  return seal(answerKey(request), Buffer.from(plain, "utf8"), aadOf(request));
}

function unseal(request: IdempotentRequest, sealed: string): StoredAnswer {
  const plain = JSON.parse(open(answerKey(request), sealed, aadOf(request)).toString("utf8")) as StoredAnswer;
  return { status: plain.status, contentType: plain.contentType, body: plain.body };
}
