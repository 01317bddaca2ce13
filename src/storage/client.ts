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
import { classifyPostgresError, DependencyState, DependencyUnavailableError } from "./dependency.js";
import { lockDataDir, restrictDataDirWarning } from "./dataDir.js";
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
  const client = postgres(url, {
    max: poolSize,
    onnotice: () => {},
    connection: { application_name: "keyhaven", statement_timeout: timeouts.statementTimeoutMs },
    connect_timeout: timeouts.connectTimeoutMs / 1000,
    // The default backoff grows to 20 s after repeated failures, and applies to the first connection after an
    // outage too: serving would resume up to 20 s after PostgreSQL is back. Connects are cheap; retry fast.
    backoff: (retries: number) => Math.min(0.05 * retries, 0.5),
    // Our own sockets, only so that a statement that misses its deadline can drop them (see guardQuery).
    socket: (options: { host: string[]; port: number[]; path?: string | false }) => {
      const i = nextHost++ % options.host.length;
      const socket = options.path ? net.connect(options.path) : net.connect(options.port[i]!, options.host[i]!);
      // postgres.js reads it for TLS's servername.
      (socket as net.Socket & { host?: string }).host = options.host[i];
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
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
    // Called once nothing runs any more (main.ts closes the app and the jobs first): a statement still unanswered
    // after a second is on a connection that will not answer (PostgreSQL frozen), so do not wait longer for it.
    close: () => client.end({ timeout: 1 }),
  };
}

type Deadline = { ms: number; state: DependencyState; dropConnections(): void };
type PendingQuery = PromiseLike<unknown> & { values(): unknown; cancel(): unknown; state?: unknown };

const WRITE_STATEMENT = /^\s*(insert|update|delete|with\b[\s\S]*\b(insert|update|delete)\b)/i;

/**
 * The postgres.js client as drizzle uses it (`unsafe`, `begin`, `savepoint`), with a deadline on every statement:
 * postgres.js has none, and a statement on a frozen connection (server stopped, network partitioned) would wait
 * for as long as TCP does. Errors that mean "PostgreSQL cannot serve" become DependencyUnavailableError.
 */
function withDeadlines<T extends object>(sql: T, deadline: Deadline): T {
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
              return guardQuery(query, String(args[0]), deadline).then(onOk, onErr);
            },
          };
          return lazy;
        };
      }
      if (prop === "begin") {
        return (...args: unknown[]) => guardBegin(real as (...a: unknown[]) => Promise<unknown>, target, args, deadline);
      }
      if (prop === "savepoint" && typeof real === "function") {
        return (fn: (sql: unknown) => unknown) => real.call(target, (inner: object) => fn(withDeadlines(inner, deadline)));
      }
      return real;
    },
  });
}

function guardQuery(query: PendingQuery, text: string, deadline: Deadline): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      const failure = new DependencyUnavailableError("PostgreSQL", "PostgreSQL is unreachable", `no answer within ${deadline.ms} ms`);
      // `state` is set once postgres.js has sent the statement. Never sent: take it out of the queue, so that it
      // cannot run after its caller was told it failed. Sent: its connection does not answer; drop them all.
      if (query.state) deadline.dropConnections();
      else void Promise.resolve(query.cancel()).catch(() => {});
      deadline.state.failed(failure);
      reject(failure);
    }, deadline.ms);
    query.then(
      (rows) => {
        clearTimeout(timer);
        deadline.state.succeeded(deadline.state.awaitingWrite && WRITE_STATEMENT.test(text));
        resolve(rows);
      },
      (err: unknown) => {
        clearTimeout(timer);
        const failure = classifyPostgresError(err);
        if (failure) deadline.state.failed(failure);
        reject(failure ?? err);
      },
    );
  });
}

/** `begin` with a deadline on getting the transaction started; each statement inside has its own. */
async function guardBegin(begin: (...a: unknown[]) => Promise<unknown>, target: object, args: unknown[], deadline: Deadline) {
  const fn = args.pop() as (sql: unknown) => unknown;
  let started = false;
  let gaveUp: DependencyUnavailableError | undefined;
  let timer: NodeJS.Timeout | undefined;
  let giveUp: (reason: string) => void = () => {};
  const timeout = new Promise<never>((_, reject) => {
    giveUp = (reason) => {
      gaveUp = new DependencyUnavailableError("PostgreSQL", "PostgreSQL is unreachable", reason);
      deadline.dropConnections();
      deadline.state.failed(gaveUp);
      reject(gaveUp);
    };
    timer = setTimeout(() => {
      if (!started) giveUp(`no transaction within ${deadline.ms} ms`);
    }, deadline.ms);
  });
  const transaction = begin.call(target, ...args, async (tx: object) => {
    // Started after its caller was told it failed: it must not write anything.
    if (gaveUp) throw gaveUp;
    started = true;
    clearTimeout(timer);
    try {
      return await fn(withDeadlines(tx, deadline));
    } finally {
      // The COMMIT or ROLLBACK that follows gets a deadline too: on a connection that died during the transaction,
      // the driver may never settle it (test/postgres-driver.test.ts).
      timer = setTimeout(() => giveUp(`no COMMIT or ROLLBACK within ${deadline.ms} ms`), deadline.ms);
    }
  });
  transaction.catch(() => {});
  try {
    return await Promise.race([transaction, timeout]);
  } catch (err) {
    const failure = classifyPostgresError(err);
    if (failure) deadline.state.failed(failure);
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
  const life = { closed: false };
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
/** What a closed store refuses (pgliteStore). */
const FENCED = new Set(["query", "transaction", "exec", "sql"]);

/**
 * The PGlite client as drizzle uses it (`query`, `transaction`) and preparePgliteSelect (`exec`), reporting to
 * `state`: embedded, it is never unreachable, but its data directory can fill up (a write then fails with SQLSTATE
 * 53100). Every statement that may write, every transaction and every other call of the client (`sql`…) adds 1 to
 * `writes` when it finishes, whether it succeeded or not.
 */
function withStateOf<T extends object>(
  client: T,
  state: DependencyState,
  writes: { value: number },
  life: { readonly closed: boolean },
): T {
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (life.closed && typeof prop === "string" && FENCED.has(prop)) return () => Promise.reject(new Error("the store is closed"));
      const real = Reflect.get(target, prop, receiver);
      if (prop === "query" || prop === "exec") {
        return async (...args: unknown[]) => {
          const text = String(args[0]);
          try {
            const result = await (real as (...a: unknown[]) => Promise<unknown>).apply(target, args);
            state.succeeded(state.awaitingWrite && WRITE_STATEMENT.test(text));
            return result;
          } catch (err) {
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
              fn(withStateOf(tx, state, writes, life)),
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
