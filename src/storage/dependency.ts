/** The services keyhaven needs to answer: the store, and Redis when REDIS_URL is set. */
export type DependencyName = "PostgreSQL" | "Redis";

type Logger = { info(obj: unknown, msg?: string): void; warn(obj: unknown, msg?: string): void };
const silent: Logger = { info: () => {}, warn: () => {} };

/**
 * A dependency could not serve a request: unreachable, too slow, or (PostgreSQL) out of disk. Thrown by the store
 * and the rate limiter; app.ts answers it with 503 SERVICE_UNAVAILABLE naming the dependency, never with a 500.
 */
export class DependencyUnavailableError extends Error {
  override name = "DependencyUnavailableError";
  constructor(
    readonly dependency: DependencyName,
    /** What clients are told, e.g. "PostgreSQL is unreachable". Never holds a URL, a query or a value. */
    readonly publicMessage: string,
    /** What is logged: the driver's own reason (an error code, "timed out after 5000 ms", ...). */
    readonly reason: string,
    readonly diskFull = false,
  ) {
    super(`${publicMessage} (${reason})`);
  }
}

/** The DependencyUnavailableError in `err`'s cause chain (drizzle wraps driver errors), if any. */
export function findDependencyFailure(err: unknown): DependencyUnavailableError | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof DependencyUnavailableError) return e;
  }
  return undefined;
}

// Connection-level failures of the socket (Node), of postgres.js, and PostgreSQL SQLSTATEs meaning "cannot serve
// now": class 08 (connection exception), 57P01-57P03 (shutting down, crashed, starting), 53300 (no connection
// slot), 57014 (statement_timeout cancelled the statement).
const SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "EPIPE"]);
const POSTGRES_JS_CODES = new Set(["CONNECT_TIMEOUT", "CONNECTION_CLOSED", "CONNECTION_ENDED", "CONNECTION_DESTROYED"]);
const UNAVAILABLE_SQLSTATES = new Set(["57P01", "57P02", "57P03", "53300", "57014"]);
export const DISK_FULL_SQLSTATE = "53100";

/**
 * Ends the text of a statement whose caller set it a statement_timeout of its own, shorter than the store's (v2
 * analytics: a tenant's query, run under a deadline of its own in a transaction of its own). PostgreSQL's cancelling
 * it (57014) says that the statement was too heavy, not that PostgreSQL cannot serve: the driver wrappers
 * (client.ts) report it as an OwnStatementTimeoutError, which never marks the store down nor logs it unreachable.
 * Every other statement's 57014 is the store's own deadline (DATABASE_STATEMENT_TIMEOUT_MS), and stays an outage.
 */
export const OWN_STATEMENT_TIMEOUT = "/* keyhaven: under its own statement_timeout */";

/** A statement marked OWN_STATEMENT_TIMEOUT ran past the deadline its caller gave it: that statement's failure. */
export class OwnStatementTimeoutError extends Error {
  override name = "OwnStatementTimeoutError";
  constructor(cause: unknown) {
    super("the statement ran past the statement_timeout its caller set for it", { cause });
  }
}

/**
 * `err`, a driver's error for the statement `text`, as the driver wrappers pass it on: an OwnStatementTimeoutError
 * when the statement is marked OWN_STATEMENT_TIMEOUT and PostgreSQL cancelled it (57014), else `err` itself.
 */
export function withOwnStatementTimeout(err: unknown, text: string): unknown {
  if (!text.endsWith(OWN_STATEMENT_TIMEOUT)) return err;
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === "57014") return new OwnStatementTimeoutError(err);
  }
  return err;
}

/**
 * Classifies a driver error of the store (postgres.js or PGlite): a DependencyUnavailableError when PostgreSQL
 * could not serve the statement, else undefined (a real error of the statement: constraint, syntax, ...; or a
 * statement cancelled at a deadline of its caller's own, OwnStatementTimeoutError).
 */
export function classifyPostgresError(err: unknown): DependencyUnavailableError | undefined {
  const found = findDependencyFailure(err);
  if (found) return found;
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof OwnStatementTimeoutError) return undefined;
    const code = (e as { code?: unknown }).code;
    const errno = (e as { errno?: unknown }).errno;
    if (typeof code !== "string") continue;
    if (code === DISK_FULL_SQLSTATE || code === "ENOSPC") {
      return new DependencyUnavailableError(
        "PostgreSQL",
        "PostgreSQL cannot write: its disk is full",
        `SQLSTATE ${DISK_FULL_SQLSTATE}`,
        true,
      );
    }
    if (SOCKET_CODES.has(code) || POSTGRES_JS_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || code.startsWith("08")) {
      return new DependencyUnavailableError(
        "PostgreSQL",
        "PostgreSQL is unreachable",
        typeof errno === "string" ? `${code} ${errno}` : code,
      );
    }
  }
  return undefined;
}

/** How long readiness stays unready after a write failed for a full disk, unless a later write succeeded. */
export const DISK_FULL_HOLD_MS = 10_000;

/**
 * Whether a dependency is serving, as last seen by real traffic. Logs only changes of state ("PostgreSQL
 * unreachable" once, "PostgreSQL reachable again" once), never once per failed request.
 */
export class DependencyState {
  private downReason: string | undefined;
  private diskFullAt = 0;
  private log: Logger = silent;

  constructor(readonly name: DependencyName) {}

  /** Where changes of state are logged (the app's logger; set by buildApp). */
  useLogger(log: Logger): void {
    this.log = log;
  }

  get isDown(): boolean {
    return this.downReason !== undefined;
  }

  /** Whether a successful write would clear a "disk full" state (checked before classifying a statement). */
  get awaitingWrite(): boolean {
    return this.diskFullAt !== 0;
  }

  /** Why readiness must say unready although the dependency answers (PostgreSQL's disk is full), if it must. */
  unreadyReason(now = Date.now()): string | undefined {
    return now - this.diskFullAt < DISK_FULL_HOLD_MS ? "PostgreSQL's disk is full" : undefined;
  }

  failed(failure: DependencyUnavailableError): void {
    if (failure.diskFull) {
      if (this.diskFullAt === 0) this.log.warn({ dependency: this.name, reason: failure.reason }, `${this.name} disk is full`);
      this.diskFullAt = Date.now();
      return;
    }
    if (this.downReason === undefined) this.log.warn({ dependency: this.name, reason: failure.reason }, `${this.name} unreachable`);
    this.downReason = failure.reason;
  }

  /** A statement or command succeeded; `wrote`: it was a write, so the disk takes writes again. */
  succeeded(wrote = false): void {
    if (this.downReason !== undefined) {
      this.downReason = undefined;
      this.log.info({ dependency: this.name }, `${this.name} reachable again`);
    }
    if (wrote && this.diskFullAt !== 0) {
      this.diskFullAt = 0;
      this.log.info({ dependency: this.name }, `${this.name} takes writes again`);
    }
  }
}

// Besides "cannot serve" (above): failures of one statement that the same statement may not meet again.
const RETRYABLE_SQLSTATES = new Set(["40001", "40P01", "55P03", "57014", "57P04", "57P05"]);

/**
 * Whether a statement failed for a reason that trying again later can fix: PostgreSQL could not serve it
 * (classifyPostgresError: the connection, a deadline, class 08 and 53, shutting down), a serialization failure or
 * deadlock (40001, 40P01), or a lock timeout (55P03). Anything else (a constraint, a bug, bad data) fails the same
 * way every time. The one place that decides it (the migration worker retries on it).
 */
export function isTransientFailure(err: unknown): boolean {
  if (classifyPostgresError(err)) return true;
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== "string") continue;
    if (RETRYABLE_SQLSTATES.has(code) || code.startsWith("53") || code === "ECONNABORTED") return true;
  }
  return false;
}
