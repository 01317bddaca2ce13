import { detachedFromRequest } from "./deadline.js";

/**
 * Processes queued items a batch at a time: items added while a batch is in process wait, and all of them go into
 * the next batch. Under load one database statement then serves many requests, and every item is processed by a
 * run that started after it was added (what the epoch checks rely on). `fail` answers a batch whose run threw.
 *
 * A run starts once the event loop has handed over the I/O it already received (setImmediate: after the poll phase),
 * not inside the callback of the first request: the requests read in the same turn of the loop go into the first
 * batch together. On the embedded store this is what makes batches at all: PGlite runs a statement synchronously on
 * this thread, so nothing else is read while it runs, and a run started at once answered one request per statement
 * (issue 13: 3,111 lookups for ~3,400 verifications in 5 s; about 40 a statement since). On PostgreSQL the first
 * request no longer goes alone, ahead of those read with it. The wait is one turn of the loop, not a timer.
 *
 * One batch is in process at a time unless `inFlight` allows more; a batch then starts beside those in process only
 * when an item added since the last batch started may start one (`startsBeside`, asked when the item is added while
 * a batch is in process; the verification cache: a key not in memory).
 */
export class Coalescer<T> {
  private waiting: T[] = [];
  /** Whether an item waiting may start a batch beside those in process. */
  private besideWaiting = false;
  private running = 0;
  private readonly runThisTurn = onceThisTurn(() => this.startBatches());
  readonly inFlight: number;
  private readonly startsBeside: (item: T) => boolean;

  constructor(
    private readonly process: (batch: T[]) => Promise<void>,
    private readonly fail: (batch: T[], err: unknown) => void,
    options: { inFlight?: number; startsBeside?: (item: T) => boolean } = {},
  ) {
    this.inFlight = options.inFlight ?? 1;
    this.startsBeside = options.startsBeside ?? (() => true);
  }

  add(item: T): void {
    this.waiting.push(item);
    if (this.running > 0 && this.inFlight > 1 && !this.besideWaiting && this.startsBeside(item)) this.besideWaiting = true;
    if (this.running === 0 || (this.running < this.inFlight && this.besideWaiting)) this.runThisTurn();
  }

  private startBatches(): void {
    while (this.waiting.length > 0 && (this.running === 0 || (this.running < this.inFlight && this.besideWaiting))) {
      const batch = this.waiting;
      this.waiting = [];
      this.besideWaiting = false;
      this.running++;
      let done: Promise<void>;
      try {
        done = this.process(batch);
      } catch (err) {
        done = Promise.reject(err);
      }
      void done
        .catch((err: unknown) => this.fail(batch, err))
        .finally(() => {
          this.running--;
          this.startBatches();
        });
    }
  }
}

/**
 * A function that calls `start` in the check phase of this turn of the event loop (setImmediate: once the poll phase
 * has handed over the I/O already received), once however often it is called before then: how the batches of
 * Coalescer and RemainingSpender begin, so that the requests read in one turn go into one statement.
 */
export function onceThisTurn(start: () => void): () => void {
  let scheduled = false;
  return () => {
    if (scheduled) return;
    scheduled = true;
    // Shared by the requests of the batch, so bound by none's deadline (deadline.ts): each is answered by its own.
    detachedFromRequest(() =>
      setImmediate(() => {
        scheduled = false;
        start();
      }),
    );
  };
}
