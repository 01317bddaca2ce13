import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { PGlite } from "@electric-sql/pglite";
import type { ExtractTablesWithRelations } from "drizzle-orm";
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import { ConnectWatch } from "./connectWatch.js";
import { classifyPostgresError, DependencyState, DependencyUnavailableError, withOwnStatementTimeout } from "./dependency.js";
import { lockDataDir, restrictDataDirWarning } from "./dataDir.js";
import { RequestDeadlineError, requestDeadlineMs, requestDeadlinePassed, requestTimeLeft } from "./deadline.js";
import { startPglite } from "./pgliteParsers.js";
import * as schema from "./schema.js";

export type Schema = typeof schema;
/** A drizzle handle on either store; a transaction is one too, so repositories accept both. */
export type Db = PgDatabase<PgQueryResultHKT, Schema, ExtractTablesWithRelations<Schema>>;
export type Tx = PgTransaction<PgQueryResultHKT, Schema, ExtractTablesWithRelations<Schema>>;

export type Store = {
  kind: "postgres" | "pglite";
  db: Db;
  /** Where the data lives, for the start-up message (never includes a password). */
  description: string;
  /** Whether the store serves, as real statements found; logs changes of state once (see dependency.ts). */
  state: DependencyState;
  /**
   * The embedded store only: how many statements or transactions that may have written have finished. PGlite is
   * this process's alone (its data directory is locked, `memory://` is private) and every statement goes through
   * this store's client, so while the count stands still nothing can have moved the epoch (epoch.ts reads it then
   * without a statement). PostgreSQL has other writers (replicas, the CLI): there, undefined.
   */
  writes?: WriteCount;
  /**
   * PostgreSQL only: the one deadline each request gets for everything it waits for on the store (deadline.ts), the
   * documented bound `DATABASE_STATEMENT_TIMEOUT_MS` + 0.5 s. The embedded store has no outage to wait out: undefined.
   */
  requestDeadlineMs?: number;
  close(): Promise<void>;
};

/** A count that only grows (Store.writes). */
export type WriteCount = { readonly value: number };

/** Deadlines on PostgreSQL (DATABASE_CONNECT_TIMEOUT_MS, DATABASE_STATEMENT_TIMEOUT_MS). */
export type PostgresTimeouts = { connectTimeoutMs: number; statementTimeoutMs: number };
export const DEFAULT_POSTGRES_TIMEOUTS: PostgresTimeouts = { connectTimeoutMs: 3000, statementTimeoutMs: 5000 };
/**
 * The client-side deadline is the server's statement_timeout plus this: a slow statement is cancelled by the server
 * first (a clean error, the connection stays); only a server or network that does not answer at all meets the
 * client's deadline, and then every connection is dropped so that the pool reconnects.
 */
export const CLIENT_DEADLINE_GRACE_MS = 500;

export const MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations", import.meta.url));

// Any fixed 64-bit number; held while migrating and bootstrapping so that replicas starting together take turns.
const MIGRATION_LOCK_ID = 4_242_424_242;

export function openPostgres(url: string, poolSize: number, timeouts: PostgresTimeouts = DEFAULT_POSTGRES_TIMEOUTS): Store {
  const state = new DependencyState("PostgreSQL");
  const sockets = new Set<net.Socket>();
  let nextHost = 0;
  const dial = (options: SocketOptions) => {
    const i = nextHost++ % options.host.length;
    const socket = options.path ? net.connect(options.path) : net.connect(options.port[i]!, options.host[i]!);
    // postgres.js reads it for TLS's servername.
    (socket as net.Socket & { host?: string }).host = options.host[i];
    return socket;
  };
  // Where the pool dials (postgres.js's parsed hosts, ports or path), for the probes of `connects`.
  let target: SocketOptions | undefined;
  // Connects into a black hole must not hold up serving once PostgreSQL answers again (connectWatch.ts).
  const connects = new ConnectWatch(() => dial(target!));
  const client = postgres(url, {
    max: poolSize,
    onnotice: () => {},
    connection: { application_name: "keyhaven", statement_timeout: timeouts.statementTimeoutMs },
    connect_timeout: timeouts.connectTimeoutMs / 1000,
    // The default backoff grows to 20 s after repeated failures, and applies to the first connection after an
    // outage too: serving would resume up to 20 s after PostgreSQL is back. Connects are cheap; retry fast.
    backoff: (retries: number) => Math.min(0.05 * retries, 0.5),
    // Our own sockets, only so that a statement that misses its deadline can drop them (see guardQuery).
    socket: (options: SocketOptions) => {
      target = options;
      const socket = dial(options);
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
      connects.track(socket);
      return socket;
    },
  } as postgres.Options<Record<string, never>>);
  const deadline = {
    ms: timeouts.statementTimeoutMs + CLIENT_DEADLINE_GRACE_MS,
    state,
    dropConnections: () => {
      for (const socket of sockets) socket.destroy();
    },
  };
  const db = drizzlePostgres({ client: withDeadlines(client, deadline), schema }) as unknown as Db;
  return {
    kind: "postgres",
    db,
    description: `PostgreSQL at ${redactUrl(url)}`,
    state,
    requestDeadlineMs: deadline.ms,
    // Called once nothing runs any more (main.ts closes the app and the jobs first): a statement still unanswered
    // after a second is on a connection that will not answer (PostgreSQL frozen), so do not wait longer for it.
    close: () => {
      connects.close();
      return client.end({ timeout: 1 });
    },
  };
}

type SocketOptions = { host: string[]; port: number[]; path?: string | false };

type Deadline = { ms: number; state: DependencyState; dropConnections(): void };
type PendingQuery = PromiseLike<unknown> & {
  values(): unknown;
  cancel(): unknown;
  state?: unknown;
  cancelled?: unknown;
  args?: unknown;
};

const WRITE_STATEMENT = /^\s*(insert|update|delete|with\b[\s\S]*\b(insert|update|delete)\b)/i;

/**
 * The postgres.js client as drizzle uses it (`unsafe`, `begin`, `savepoint`), with a deadline on every statement:
 * postgres.js has none, and a statement on a frozen connection (server stopped, network partitioned) would wait
 * for as long as TCP does. Errors that mean "PostgreSQL cannot serve" become DependencyUnavailableError.
 */
function withDeadlines<T extends object>(sql: T, deadline: Deadline, pooled = true): T {
  return new Proxy(sql, {
    get(target, prop, receiver) {
      const real = Reflect.get(target, prop, receiver);
      if (prop === "unsafe") {
        return (...args: unknown[]) => {
          const query = (real as (...a: unknown[]) => PendingQuery).apply(target, args);
          // postgres.js queries are lazy (sent when awaited) and `.values()` must be chosen first, as drizzle does.
          const lazy = {
            values() {
              query.values();
              return lazy;
            },
            // biome-ignore lint/suspicious/noThenProperty: a thenable on purpose, so that `await` sends the query as postgres.js does
            then(onOk?: (v: unknown) => unknown, onErr?: (e: unknown) => unknown) {
              return guardQuery(query, String(args[0]), deadline, pooled).then(onOk, onErr);
            },
          };
          return lazy;
        };
      }
      if (prop === "begin") {
        return (...args: unknown[]) => guardBegin(real as (...a: unknown[]) => Promise<unknown>, target, args, deadline);
      }
      if (prop === "savepoint" && typeof real === "function") {
        return (fn: (sql: unknown) => unknown) => real.call(target, (inner: object) => fn(withDeadlines(inner, deadline, false)));
      }
      return real;
    },
  });
}

/**
 * A statement with its deadline: its own (`deadline.ms`, from when it is awaited, so a wait for a pool slot or a
 * connection counts) or what is left of its request's (deadline.ts), whichever ends first. Past the request's, the
 * caller is answered and nothing more is sent for it; past the statement's own, PostgreSQL did not answer at all.
 */
function guardQuery(query: PendingQuery, text: string, deadline: Deadline, pooled: boolean): Promise<unknown> {
  const left = requestTimeLeft();
  if (left === 0) {
    // The request already gave up: the statement is never sent (it is lazy until awaited).
    return Promise.reject(requestDeadlinePassed(requestDeadlineMs()!));
  }
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (failure: unknown) => {
      if (settled) return;
      settled = true;
      reject(failure);
    };
    const requestTimer =
      left !== undefined && left < deadline.ms
        ? setTimeout(() => {
            // Never sent: take it out of the queue, so that it cannot run after its caller was told it failed. Sent:
            // its own deadline below still decides whether the connection is dead.
            if (!query.state) withdraw(query, pooled);
            fail(requestDeadlinePassed(requestDeadlineMs()!));
          }, left)
        : undefined;
    const timer = setTimeout(() => {
      clearTimeout(requestTimer);
      const failure = new DependencyUnavailableError("PostgreSQL", "PostgreSQL is unreachable", `no answer within ${deadline.ms} ms`);
      // `state` is set once postgres.js has sent the statement. Never sent: take it out of the queue, so that it
      // cannot run after its caller was told it failed. Sent: its connection does not answer; drop them all.
      if (query.state) deadline.dropConnections();
      else withdraw(query, pooled);
      deadline.state.failed(failure);
      fail(failure);
    }, deadline.ms);
    query.then(
      (rows) => {
        clearTimeout(timer);
        clearTimeout(requestTimer);
        deadline.state.succeeded(deadline.state.awaitingWrite && WRITE_STATEMENT.test(text));
        if (!settled) {
          settled = true;
          resolve(rows);
        }
      },
      (raw: unknown) => {
        clearTimeout(timer);
        clearTimeout(requestTimer);
        const err = withOwnStatementTimeout(raw, text);
        const failure = classifyPostgresError(err);
        if (failure) deadline.state.failed(failure);
        fail(failure ?? err);
      },
    );
  });
}

/**
 * Takes a statement that was never sent out of the driver's hands, so that it cannot run after its caller was told
 * it failed. postgres.js's `cancel` takes it out of the pool's queue; but a statement may instead be the one a pool
 * connection is connecting for (postgres.js 3.4.9 dials a closed connection on behalf of the statement that needs
 * it), and once that connect succeeds the driver skips a cancelled statement without ever putting the connection
 * back in the pool: the connection is lost until the process restarts, and once every one of them is, nothing is
 * served any more (issue 34 §6: what an outage's cancelled statements left of the pool after PostgreSQL answered
 * again; test/postgres-driver.test.ts). So a statement of the pool is withdrawn differently once out of the queue:
 * marked not cancelled, with no arguments left to build it from, the driver fails it when it comes to send it, with
 * nothing of it sent (only a Sync), and the connection joins the pool. Inside a transaction, a statement is never
 * one a connection connects for (the transaction holds its connection), and `cancel` suffices.
 */
function withdraw(query: PendingQuery, pooled: boolean) {
  void Promise.resolve(query.cancel()).catch(() => {});
  if (!pooled || query.state) return;
  query.cancelled = null;
  query.args = null;
}

/**
 * `begin` with a deadline on getting the transaction started and on its COMMIT or ROLLBACK (each statement inside
 * has its own): the statement's, or what is left of the request's, whichever ends first (see guardQuery).
 */
async function guardBegin(begin: (...a: unknown[]) => Promise<unknown>, target: object, args: unknown[], deadline: Deadline) {
  const fn = args.pop() as (sql: unknown) => unknown;
  if (requestTimeLeft() === 0) throw requestDeadlinePassed(requestDeadlineMs()!);
  let started = false;
  let gaveUp: DependencyUnavailableError | undefined;
  let timer: NodeJS.Timeout | undefined;
  let giveUp: (reason: string, byRequest: boolean) => void = () => {};
  const timeout = new Promise<never>((_, reject) => {
    giveUp = (reason, byRequest) => {
      if (gaveUp) return;
      if (byRequest) {
        // The request's deadline, not PostgreSQL's silence: answer the caller, keep the connections.
        gaveUp = requestDeadlinePassed(requestDeadlineMs() ?? deadline.ms);
      } else {
        gaveUp = new DependencyUnavailableError("PostgreSQL", "PostgreSQL is unreachable", reason);
        deadline.dropConnections();
        deadline.state.failed(gaveUp);
      }
      reject(gaveUp);
    };
  });
  /** Arms the deadline for what comes next (the start, then the COMMIT or ROLLBACK). */
  const arm = (reason: string, unless: () => boolean) => {
    const left = requestTimeLeft();
    const byRequest = left !== undefined && left < deadline.ms;
    timer = setTimeout(
      () => {
        if (!unless()) giveUp(reason, byRequest);
      },
      byRequest ? left : deadline.ms,
    );
  };
  arm(`no transaction within ${deadline.ms} ms`, () => started);
  const transaction = begin.call(target, ...args, async (tx: object) => {
    // Started after its caller was told it failed: it must not write anything.
    if (gaveUp) throw gaveUp;
    started = true;
    clearTimeout(timer);
    try {
      return await fn(withDeadlines(tx, deadline, false));
    } finally {
      // The COMMIT or ROLLBACK that follows gets a deadline too: on a connection that died during the transaction,
      // the driver may never settle it (test/postgres-driver.test.ts).
      arm(`no COMMIT or ROLLBACK within ${deadline.ms} ms`, () => false);
    }
  });
  transaction.catch(() => {});
  try {
    return await Promise.race([transaction, timeout]);
  } catch (err) {
    const failure = classifyPostgresError(err);
    if (failure && failure !== gaveUp && !(failure instanceof RequestDeadlineError)) deadline.state.failed(failure);
    throw failure ?? err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The embedded store. On disk it first takes the data directory's lock (dataDir.ts): PGlite is one process's
 * database, and a second process on the same files would serve writes the first never sees, then lose them.
 */
export async function openPglite(
  dataDir: string,
  {
    sharedBuffersMb,
    warn = (message) => console.error(`keyhaven: ${message}`),
  }: {
    /** The buffer pool (startPglite's default unless given). */
    sharedBuffersMb?: number;
    warn?: (message: string) => void;
  } = {},
): Promise<Store> {
  const inMemory = dataDir.startsWith("memory://");
  const lock = inMemory ? undefined : lockDataDir(dataDir, warn);
  let client: PGlite;
  try {
    // The directory and what earlier runs left in it: 0700/0600 before PGlite opens it (dataDir.ts).
    if (!inMemory) restrictDataDirWarning(dataDir, warn);
    client = await startPglite(inMemory ? dataDir : path.join(dataDir, "pgdata"), sharedBuffersMb);
    // And what PGlite's initdb just wrote under this process's umask (keyhaven's commands set 077; others may not).
    if (!inMemory) restrictDataDirWarning(dataDir, warn, { quiet: true });
  } catch (err) {
    lock?.release();
    throw err;
  }
  return pgliteStore(
    client,
    inMemory ? "embedded PGlite in memory (nothing is kept)" : `embedded PGlite in ${path.resolve(dataDir)}`,
    async () => {
      try {
        await client.close();
      } finally {
        lock?.release();
      }
    },
  );
}

/**
 * The Store on a PGlite instance that is ready and this process's alone. Once `close` was called, the store refuses
 * every statement (the instance may live on: `end` decides, as the tests' pool of instances does).
 */
export function pgliteStore(client: PGlite, description: string, end: () => Promise<void>): Store {
  const state = new DependencyState("PostgreSQL");
  const writes = { value: 0 };
  const life: PgliteLife = { closed: false, broken: undefined };
  const db = drizzlePglite({ client: withStateOf(client, state, writes, life), schema }) as unknown as Db;
  return {
    kind: "pglite",
    db,
    writes,
    description,
    state,
    close: async () => {
      life.closed = true;
      await end();
    },
  };
}

/**
 * Statements that cannot write: selects (PostgreSQL refuses a data-modifying WITH below the top level, and no
 * function of ours that a select calls writes), and PREPARE / EXECUTE / DEALLOCATE of preparePgliteSelect's selects. Anything else
 * counts as a write when it finishes, a transaction as a whole too: its statements' changes are visible at COMMIT.
 * `query` runs one statement (the extended protocol); `exec` may run several, so an `exec` is read-only only when its
 * text has no `;` at all (a `;` inside a literal makes it count as a write: one more epoch read, never one fewer).
 */
const READ_ONLY_STATEMENT = /^\s*(select|prepare|execute|deallocate)\b/i;
const readOnly = (method: "query" | "exec", text: string) => READ_ONLY_STATEMENT.test(text) && (method === "query" || !text.includes(";"));
/** What a closed (or broken) store refuses (pgliteStore). */
const FENCED = new Set(["query", "transaction", "exec", "sql"]);

/** Whether the store was closed, or found broken (its error then), as every statement of it checks. */
type PgliteLife = { closed: boolean; broken: DependencyUnavailableError | undefined };

/**
 * The most bind parameters a statement may carry on the embedded store: PGlite 0.4's protocol parser reads the
 * count of a ParameterDescription as a signed 16-bit number, so 32,768 reads as -32,768 and `new Array(-32768)`
 * throws inside the parser, in the WebAssembly callback that hands it PostgreSQL's answer. The parser keeps that
 * message unconsumed, appends every later answer behind it and throws again at the same place: the instance answers
 * every later statement, of every workspace, with no rows and no error until the process restarts. (PostgreSQL
 * itself takes 65,535 and refuses more with an error, the connection unharmed.) A statement beyond this is refused
 * before it is sent; the repositories never build one (bulk.ts: one parameter a list, bounded rows a statement).
 */
export const PGLITE_MAX_PARAMETERS = 32_767;

const SELECT_STATEMENT = /^\s*(select|execute)\b/i;

/**
 * The PGlite client as drizzle uses it (`query`, `transaction`) and preparePgliteSelect (`exec`), reporting to
 * `state`: embedded, it is never unreachable, but its data directory can fill up (a write then fails with SQLSTATE
 * 53100). Every statement that may write, every transaction and every other call of the client (`sql`…) adds 1 to
 * `writes` when it finishes, whether it succeeded or not.
 */
function withStateOf<T extends object>(client: T, state: DependencyState, writes: { value: number }, life: PgliteLife, root = client): T {
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (typeof prop === "string" && FENCED.has(prop)) {
        if (life.closed) return () => Promise.reject(new Error("the store is closed"));
        const broken = life.broken;
        if (broken) return () => Promise.reject(broken);
      }
      const real = Reflect.get(target, prop, receiver);
      if (prop === "query" || prop === "exec") {
        return async (...args: unknown[]) => {
          const text = String(args[0]);
          const parameters = prop === "query" && Array.isArray(args[1]) ? args[1].length : 0;
          if (parameters > PGLITE_MAX_PARAMETERS) {
            // Never sent: nothing was written, and the instance stays sound.
            throw new Error(
              `a statement of ${parameters} parameters was refused: the embedded store takes at most ${PGLITE_MAX_PARAMETERS}`,
            );
          }
          try {
            const result = await (real as (...a: unknown[]) => Promise<unknown>).apply(target, args);
            if (SELECT_STATEMENT.test(text) && answeredNothing(result) && (await stoppedAnswering(root as unknown as PGlite))) {
              life.broken = new DependencyUnavailableError(
                "PostgreSQL",
                "the embedded database stopped answering",
                "PGlite answered selects with no row description; restart keyhaven (committed data are kept on disk)",
              );
              state.failed(life.broken);
              throw life.broken;
            }
            state.succeeded(state.awaitingWrite && WRITE_STATEMENT.test(text));
            return result;
          } catch (raw) {
            const err = withOwnStatementTimeout(raw, text);
            const failure = classifyPostgresError(err);
            if (failure) state.failed(failure);
            throw failure ?? err;
          } finally {
            if (!readOnly(prop, text)) writes.value++;
          }
        };
      }
      if (prop === "transaction") {
        return async (fn: (tx: object) => unknown) => {
          try {
            return await (real as (f: (tx: object) => unknown) => Promise<unknown>).call(target, (tx: object) =>
              fn(withStateOf(tx, state, writes, life, tx)),
            );
          } finally {
            writes.value++;
          }
        };
      }
      if (typeof real !== "function") return real;
      if (prop === "constructor") return real;
      return (...args: unknown[]) => {
        let result: unknown;
        try {
          result = (real as (...a: unknown[]) => unknown).apply(target, args);
        } catch (err) {
          writes.value++;
          throw err;
        }
        if (result instanceof Promise) return result.finally(() => writes.value++);
        writes.value++;
        return result;
      };
    },
  });
}

/**
 * Whether a PGlite answer is what a broken instance answers to anything (see PGLITE_MAX_PARAMETERS): no row
 * description, so no fields and no rows (`exec`: each of its results so). A select always has a row description,
 * even of no rows; keyhaven sends no select of no columns.
 */
function answeredNothing(result: unknown): boolean {
  const results = Array.isArray(result) ? result : [result];
  return results.every((r) => {
    const { fields, rows } = (r ?? {}) as { fields?: unknown[]; rows?: unknown[] };
    return (fields?.length ?? 0) === 0 && (rows?.length ?? 0) === 0;
  });
}

/**
 * Confirms, on the same handle (a transaction's own, inside one), that the instance answers nothing any more: a
 * sound one answers `select 1` its one row. Run only after a select answered nothing, so never on a sound path.
 */
async function stoppedAnswering(client: Pick<PGlite, "query">): Promise<boolean> {
  try {
    const { rows } = await client.query<{ one: number }>("select 1 as one");
    return rows[0]?.one !== 1;
  } catch {
    return false;
  }
}

/** Applies the committed migrations; on PostgreSQL under an advisory lock, then runs `then` while still holding it. */
export async function migrateAndRun<T>(store: Store, databaseUrl: string | undefined, then: () => Promise<T>): Promise<T> {
  if (store.kind === "pglite" || databaseUrl === undefined) {
    await migratePglite(store.db as never, { migrationsFolder: MIGRATIONS_DIR });
    return then();
  }
  // One dedicated connection: a session-level advisory lock belongs to the connection that took it.
  const client = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await client`select pg_advisory_lock(${MIGRATION_LOCK_ID})`;
    await migratePostgres(drizzlePostgres({ client }), { migrationsFolder: MIGRATIONS_DIR });
    return await then();
  } finally {
    await client`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`.catch(() => {});
    await client.end({ timeout: 5 });
  }
}

export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(unparseable URL)";
  }
}

/**
 * A statement built by drizzle once per database handle rather than on every call: drizzle's building of even a
 * one-table select cost 0.3–0.5 ms of CPU on the slow machine of docs/benchmarks.md, a third of a read route
 * (issue 13 §3). `build` prepares it (`.prepare(name)` with `sql.placeholder`s); a transaction's handle gets its
 * own, dropped with the handle.
 */
export function preparedPerHandle<S>(build: (db: Db) => S): (db: Db) => S {
  const statements = new WeakMap<Db, S>();
  return (db) => {
    let statement = statements.get(db);
    if (!statement) statements.set(db, (statement = build(db)));
    return statement;
  };
}

/** Rows of a raw `db.execute` result: postgres.js returns an array, PGlite an object with `rows`. */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}

const UNIQUE_VIOLATION = "23505";

/** Whether `err`, or an error in its cause chain (drizzle wraps the drivers' errors), has this SQLSTATE. */
export function hasSqlState(err: unknown, sqlState: string): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if ((e as { code?: unknown }).code === sqlState) return true;
  }
  return false;
}

export function isUniqueViolation(err: unknown): boolean {
  return hasSqlState(err, UNIQUE_VIOLATION);
}
