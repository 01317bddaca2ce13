import path from "node:path";
import { fileURLToPath } from "node:url";
import { PGlite } from "@electric-sql/pglite";
import type { ExtractTablesWithRelations } from "drizzle-orm";
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from "drizzle-orm/pg-core";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import { migrate as migratePostgres } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import { lockDataDir } from "./data-dir.js";
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
  close(): Promise<void>;
};

export const MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations", import.meta.url));

// Any fixed 64-bit number; held while migrating and bootstrapping so that replicas starting together take turns.
const MIGRATION_LOCK_ID = 4_242_424_242;

export function openPostgres(url: string, poolSize: number): Store {
  const client = postgres(url, {
    max: poolSize,
    onnotice: () => {},
    connection: { application_name: "keyhaven" },
  });
  const db = drizzlePostgres({ client, schema }) as unknown as Db;
  return {
    kind: "postgres",
    db,
    description: `PostgreSQL at ${redactUrl(url)}`,
    close: () => client.end({ timeout: 5 }),
  };
}

/**
 * The embedded store. On disk it first takes the data directory's lock (data-dir.ts): PGlite is one process's
 * database, and a second process on the same files would serve writes the first never sees, then lose them.
 */
export async function openPglite(
  dataDir: string,
  warn: (message: string) => void = (message) => console.error(`keyhaven: ${message}`),
): Promise<Store> {
  const inMemory = dataDir.startsWith("memory://");
  const lock = inMemory ? undefined : lockDataDir(dataDir, warn);
  let client: PGlite;
  try {
    client = inMemory ? new PGlite(dataDir) : new PGlite(path.join(dataDir, "pgdata"));
    await client.waitReady;
  } catch (err) {
    lock?.release();
    throw err;
  }
  const db = drizzlePglite({ client, schema }) as unknown as Db;
  return {
    kind: "pglite",
    db,
    description: inMemory ? "embedded PGlite in memory (nothing is kept)" : `embedded PGlite in ${path.resolve(dataDir)}`,
    close: async () => {
      try {
        await client.close();
      } finally {
        lock?.release();
      }
    },
  };
}

/** Applies the committed migrations; on PostgreSQL under an advisory lock, then runs `then` while still holding it. */
export async function migrateAndRun<T>(
  store: Store,
  databaseUrl: string | undefined,
  then: () => Promise<T>,
): Promise<T> {
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

/** Rows of a raw `db.execute` result: postgres.js returns an array, PGlite an object with `rows`. */
export function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result)) return result as T[];
  return ((result as { rows?: T[] }).rows ?? []) as T[];
}

const UNIQUE_VIOLATION = "23505";

export function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err; e && typeof e === "object"; e = (e as { cause?: unknown }).cause) {
    if ((e as { code?: unknown }).code === UNIQUE_VIOLATION) return true;
  }
  return false;
}

// Connection failures as Node (sockets, DNS) and postgres.js report them, before any SQLSTATE.
const TRANSIENT_CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
]);

/**
 * Whether the statement failed for a reason that trying again later can fix: the connection (SQLSTATE class 08, or
 * a socket error), a serialization failure or deadlock (40001, 40P01), a lock or statement timeout (55P03, 57014),
 * lack of resources (class 53) or the server shutting down (57P01–57P05). Anything else (a constraint, a bug, bad
 * data) fails the same way every time. The one place that decides it.
 */
export function isTransientFailure(err: unknown): boolean {
  for (let e: unknown = err; e && typeof e === "object"; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== "string") continue;
    if (TRANSIENT_CONNECTION_CODES.has(code)) return true;
    if (/^(08|53)/.test(code) || /^57P0[1-5]$/.test(code)) return true;
    if (["40001", "40P01", "55P03", "57014"].includes(code)) return true;
  }
  return false;
}

/**
 * One `T` per database handle, made on first use: prepared statements and in-memory caches live as long as the
 * handle (one per process in production, one per app instance in tests) and are never shared between handles.
 */
export function perDb<T>(make: (db: Db) => T): (db: Db) => T {
  const made = new WeakMap<Db, T>();
  return (db) => {
    let value = made.get(db);
    if (value === undefined) made.set(db, (value = make(db)));
    return value;
  };
}
