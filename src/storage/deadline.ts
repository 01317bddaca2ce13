import { AsyncLocalStorage } from "node:async_hooks";
import { DependencyUnavailableError } from "./dependency.js";

/**
 * One deadline per request (issue 34 §6): every statement, pool wait, connect and transaction a request makes on
 * PostgreSQL shares it, so that waits do not add up (the documented 5.5 s had become 8.5–22 s under concurrency: a
 * deadline per statement, per pool slot, per retry). The dependency layer (client.ts) gives each statement what is left
 * of its request's deadline when that is less than the statement's own; and a request is answered 503 when its
 * deadline passes, whatever it waits for (withRequestDeadline).
 *
 * Work shared by the requests of a batch (the epoch read, key lookups, remaining-uses spends: Coalescer, onceThisTurn)
 * belongs to none of them and runs without one (detachedFromRequest): one request's deadline must not cut a statement
 * that others wait for; each of them is still answered by its own deadline.
 */
type RequestDeadline = { readonly at: number; readonly ms: number };

const deadlines = new AsyncLocalStorage<RequestDeadline>();

/**
 * Whether the request's deadline travels with its work (AsyncLocalStorage), so that each statement gets what is left
 * of it and nothing is sent once it has passed: from Node 24, where AsyncLocalStorage rides on AsyncContextFrame and
 * costs next to nothing. On Node 20 and 22 it runs on async_hooks' promise hooks, which, once enabled, slow every
 * promise of the process: PostgreSQL verifications measured 12-19% fewer req/s with it (docs/benchmarks.md). There a
 * request is still answered by its deadline (the race below), but each statement keeps only its own timeout.
 */
export const DEADLINE_TRAVELS_WITH_WORK = Number(process.versions.node.split(".")[0]) >= 24;

/** What is left of the current request's deadline, in ms (0 once passed), or undefined outside any request's. */
export function requestTimeLeft(now = Date.now()): number | undefined {
  const deadline = deadlines.getStore();
  return deadline === undefined ? undefined : Math.max(0, deadline.at - now);
}

/** The current request's whole deadline in ms (for messages), or undefined. */
export function requestDeadlineMs(): number | undefined {
  return deadlines.getStore()?.ms;
}

/**
 * A request's deadline passed: answered as PostgreSQL unreachable (503), but it says nothing about PostgreSQL's
 * state by itself (the request may have waited for others' statements), so it never marks the store down.
 */
export class RequestDeadlineError extends DependencyUnavailableError {
  constructor(readonly ms: number) {
    super("PostgreSQL", "PostgreSQL is unreachable", `no answer within the request's deadline of ${ms} ms`);
  }
}

/** The error of a request whose deadline passed (never a URL, a query or a value). */
export function requestDeadlinePassed(ms: number): RequestDeadlineError {
  return new RequestDeadlineError(ms);
}

/**
 * Runs a request's `work` under one deadline of `ms` (undefined: none, as on the embedded store, which has no
 * outage to wait out) and answers by then: when the deadline passes first, with DependencyUnavailableError (503).
 * `work` goes on until its next wait on PostgreSQL, which then fails at once: nothing it would still send is sent.
 */
export async function withRequestDeadline<T>(ms: number | undefined, work: () => Promise<T>): Promise<T> {
  if (ms === undefined) return work();
  const running = DEADLINE_TRAVELS_WITH_WORK ? deadlines.run({ at: Date.now() + ms, ms }, work) : work();
  let timer: NodeJS.Timeout | undefined;
  const passed = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(requestDeadlinePassed(ms)), ms);
  });
  // Answered by the deadline: what `work` ends with later must not become an unhandled rejection.
  running.catch(() => {});
  try {
    return await Promise.race([running, passed]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `fn` outside any request's deadline (work shared by several requests; see above). */
export function detachedFromRequest<T>(fn: () => T): T {
  return deadlines.getStore() === undefined ? fn() : deadlines.exit(fn);
}
