/**
 * Import throughput benchmark: how many keys per second `POST /v1/migrations.createKeys` takes in, in batches of
 * 100, and how that compares with a raw PostgreSQL ceiling measured in the same run.
 *
 * Scenarios, each run for BENCH_SECONDS at every concurrency level of BENCH_CONCURRENCY, each on a fresh store:
 *   - ceiling (PostgreSQL only): N workers, each looping `BEGIN; INSERT INTO keys ... VALUES (...) x100; COMMIT`
 *     through postgres.js in this process, with the rows an import of 100 hash-only keys would write.
 *   - ceiling-plaintext (PostgreSQL only): the same, plus the 100 `encrypted_keys` rows a plaintext import also
 *     writes, as a second multi-row INSERT in the same transaction: the yardstick for the plaintext variant.
 *   - hash:      N HTTP workers, each posting 100 keys `{ apiId, hash: { value, variant: "sha256_base64" } }`.
 *   - plaintext: N HTTP workers, each posting 100 keys `{ apiId, plaintext }` (hashed and encrypted by keyhaven).
 * The HTTP scenarios run on PostgreSQL (a fresh `keyhaven_bench_<random>` database on BENCH_DATABASE_URL's server)
 * and on PGlite (a fresh KEYHAVEN_DATA_DIR under the OS temp directory). keyhaven runs as a child process
 * (compiled: `node dist/cli/main.js serve`) so that the load generator does not share its event loop; note
 * that the load generator, keyhaven and PostgreSQL still share this machine's CPUs.
 *
 * Reported per scenario: keys/s overall and per BENCH_SLICE_SECONDS slice (to see a slow-down as the table
 * grows), request (or transaction) latency p50/p99, failures, and for PostgreSQL the ratio to the ceiling at the
 * same concurrency. The table is printed at the end and the results are written to bench/results/import-<ts>.json.
 * Every key sent is unique across the run; a failed request counts as a failure, never as imported keys, and the
 * number of rows in `keys` is checked against the count of imported keys at the end of each scenario.
 *
 * Run:   npm run bench:import                   (60 s per scenario: about 10 minutes with the defaults)
 *        BENCH_SECONDS=10 npm run bench:import  (a quick run)
 *        npm run bench                          (this benchmark, then bench/verify.bench.ts)
 * Environment:
 *   BENCH_SECONDS        seconds per scenario (default 60)
 *   BENCH_CONCURRENCY    comma-separated concurrency levels (default "1,4")
 *   BENCH_SLICE_SECONDS  width of the throughput slices (default 10)
 *   BENCH_DATABASE_URL   PostgreSQL server to create the bench databases on
 *                        (default postgres://postgres@127.0.0.1:5432/postgres)
 *   BENCH_STORES         comma-separated subset of "postgres,pglite" (default both)
 *   BENCH_VARIANTS       comma-separated subset of "ceiling,ceiling-plaintext,hash,plaintext" (default all;
 *                        the ceilings are PostgreSQL only)
 *   DATABASE_POOL_SIZE   passed through to keyhaven when set (keyhaven's default is 4)
 *   BENCH_SERVER_NODE_ARGS  extra node flags for the keyhaven child, space-separated
 *                        (e.g. "--cpu-prof --cpu-prof-dir=/tmp/keyhaven-prof" to profile the server)
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { startPglite } from "../src/storage/pgliteParsers.js";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import { Keyring } from "../src/keyring/keyring.js";
import { MIGRATIONS_DIR, redactUrl } from "../src/storage/client.js";
import { newId } from "../src/ids.js";
import { planImport } from "../src/core/import/import.plan.js";
import type { KeyRow } from "../src/storage/import/import.rows.js";
import type { ImportKey } from "../src/core/import/import.keys.types.js";
import {
  type Admin,
  Cleanup,
  createDatabase,
  DEFAULT_DATABASE_URL,
  describeError,
  envIntList,
  environmentInfo,
  envList,
  envPositive,
  envServerNodeArgs,
  formatCount,
  formatMs,
  formatShare,
  formatTable as formatRows,
  handleInterrupts,
  indent,
  interrupted,
  openAdmin,
  post,
  reportOutcome,
  round,
  startKeyhaven,
  summarizeLatencies,
  writeResults,
} from "./lib.js";

const BATCH_SIZE = 100;
type StoreKind = "postgres" | "pglite";
type Variant = "ceiling" | "ceiling-plaintext" | "hash" | "plaintext";
type HttpVariant = Exclude<Variant, "ceiling" | "ceiling-plaintext">;
const isCeiling = (v: Variant): v is "ceiling" | "ceiling-plaintext" => v === "ceiling" || v === "ceiling-plaintext";
/** The ceiling each HTTP variant is measured against: the same rows, inserted raw. */
const ceilingOf: Record<HttpVariant, Variant> = { hash: "ceiling", plaintext: "ceiling-plaintext" };

type Settings = {
  seconds: number;
  sliceSeconds: number;
  concurrency: number[];
  databaseUrl: string;
  stores: StoreKind[];
  variants: Variant[];
  keyhavenPoolSize: string;
  serverNodeArgs: string[];
};

type Outcome = { ok: true } | { ok: false; error: string };

type Slice = { fromS: number; toS: number; keys: number; keysPerSecond: number };

type ScenarioResult = {
  store: StoreKind;
  variant: Variant;
  concurrency: number;
  durationS: number;
  /** Successful requests (HTTP) or committed transactions (ceiling), each worth BATCH_SIZE keys. */
  requests: number;
  keys: number;
  keysPerSecond: number;
  slices: Slice[];
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  failures: number;
  errors: { message: string; count: number }[];
  /** Rows in `keys` after the scenario; equals `keys` unless something went wrong. */
  rowsInStore: number;
  /** HTTP keys/s ÷ ceiling keys/s at the same concurrency (PostgreSQL HTTP scenarios). */
  ratioToCeiling?: number;
};

// ---------------------------------------------------------------------------------------------------------------
// Settings

function readSettings(env: NodeJS.ProcessEnv): Settings {
  const positive = (name: string, fallback: number) => envPositive(env, name, fallback);
  const list = <T extends string>(name: string, allowed: readonly T[], fallback: readonly T[]) => envList(env, name, allowed, fallback);
  const concurrency = envIntList(env, "BENCH_CONCURRENCY", "1,4", 1, 256);
  return {
    seconds: positive("BENCH_SECONDS", 60),
    sliceSeconds: positive("BENCH_SLICE_SECONDS", 10),
    concurrency,
    databaseUrl: env.BENCH_DATABASE_URL?.trim() || DEFAULT_DATABASE_URL,
    stores: list("BENCH_STORES", ["postgres", "pglite"] as const, ["postgres", "pglite"]),
    variants: list("BENCH_VARIANTS", ["ceiling", "ceiling-plaintext", "hash", "plaintext"] as const, [
      "ceiling",
      "ceiling-plaintext",
      "hash",
      "plaintext",
    ]),
    keyhavenPoolSize: env.DATABASE_POOL_SIZE?.trim() || "4 (keyhaven's default)",
    serverNodeArgs: envServerNodeArgs(env),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Unique keys (unique across the whole run: a run id and a counter go into every hash and plaintext)

const RUN_ID = randomBytes(8).toString("hex");
let sequence = 0;

function nextHash(): string {
  return createHash("sha256").update(`keyhaven-bench:${RUN_ID}:${sequence++}`).digest("base64");
}

function hashBatch(apiId: string): ImportKey[] {
  return Array.from({ length: BATCH_SIZE }, () => ({ apiId, hash: { value: nextHash(), variant: "sha256_base64" } }));
}

function plaintextBatch(apiId: string): { apiId: string; plaintext: string }[] {
  const random = randomBytes(12 * BATCH_SIZE);
  return Array.from({ length: BATCH_SIZE }, (_, i) => ({
    apiId,
    plaintext: `bench_${random.subarray(i * 12, i * 12 + 12).toString("base64url")}${(sequence++).toString(36)}`,
  }));
}

// ---------------------------------------------------------------------------------------------------------------
// Load driver: N workers, each preparing a batch (untimed) and sending it (timed), until the deadline

type RunStats = {
  durationMs: number;
  completionsMs: number[];
  latenciesMs: number[];
  failures: number;
  errors: Map<string, number>;
};

async function drive<T>(opts: {
  concurrency: number;
  seconds: number;
  prepare: () => T;
  send: (batch: T) => Promise<Outcome>;
  /** Checked between requests: true stops the run early (the server died). */
  stopEarly?: () => boolean;
}): Promise<RunStats> {
  const stats: RunStats = { durationMs: 0, completionsMs: [], latenciesMs: [], failures: 0, errors: new Map() };
  const start = performance.now();
  const deadline = start + opts.seconds * 1000;
  const fail = (message: string) => {
    stats.failures++;
    const m = message.slice(0, 300);
    stats.errors.set(m, (stats.errors.get(m) ?? 0) + 1);
  };
  const worker = async () => {
    while (performance.now() < deadline && !interrupted() && !opts.stopEarly?.()) {
      const batch = opts.prepare();
      const t0 = performance.now();
      let outcome: Outcome;
      try {
        outcome = await opts.send(batch);
      } catch (err) {
        outcome = { ok: false, error: describeError(err) };
      }
      const t1 = performance.now();
      if (outcome.ok) {
        stats.completionsMs.push(t1 - start);
        stats.latenciesMs.push(t1 - t0);
      } else {
        fail(outcome.error);
      }
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  stats.durationMs = performance.now() - start;
  return stats;
}

/** The slice width, never wider than the run. */
function sliceSecondsOf(settings: Settings): number {
  return Math.min(settings.sliceSeconds, settings.seconds);
}

function summarize(
  scenario: { store: StoreKind; variant: Variant; concurrency: number },
  stats: RunStats,
  settings: Settings,
  rowsInStore: number,
): ScenarioResult {
  const requests = stats.completionsMs.length;
  const keys = requests * BATCH_SIZE;
  const durationS = stats.durationMs / 1000;
  // Slices cover the nominal run; requests still in flight at the deadline fall into (and widen) the last one.
  const sliceMs = sliceSecondsOf(settings) * 1000;
  const sliceCount = Math.max(1, Math.ceil((settings.seconds * 1000) / sliceMs));
  const keysPerSlice = new Array<number>(sliceCount).fill(0);
  for (const t of stats.completionsMs) keysPerSlice[Math.min(sliceCount - 1, Math.floor(t / sliceMs))]! += BATCH_SIZE;
  const slices: Slice[] = keysPerSlice.map((sliceKeys, i) => {
    const from = i * sliceMs;
    const to = i === sliceCount - 1 ? Math.max(stats.durationMs, from + 1) : (i + 1) * sliceMs;
    return { fromS: from / 1000, toS: round(to / 1000, 3), keys: sliceKeys, keysPerSecond: Math.round(sliceKeys / ((to - from) / 1000)) };
  });

  return {
    ...scenario,
    durationS: round(durationS, 3),
    requests,
    keys,
    keysPerSecond: Math.round(keys / durationS),
    slices,
    latencyMs: summarizeLatencies(stats.latenciesMs),
    failures: stats.failures,
    errors: [...stats.errors].map(([message, count]) => ({ message, count })).sort((a, b) => b.count - a.count),
    rowsInStore,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// PostgreSQL databases

async function countKeysPostgres(url: string): Promise<number> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql<{ count: number }[]>`select count(*)::int as count from keys`;
    return row?.count ?? 0;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Ceiling: raw multi-row INSERTs of 100 rows, one transaction each, through postgres.js

/** A planned `keys` row; `meta` is always null for these keys (an object would need `tx.json`). */
type CeilingRow = Omit<KeyRow, "meta"> & { meta: null };

function toCeilingRow({ meta, ...row }: KeyRow): CeilingRow {
  if (meta !== null) throw new Error("the ceiling only inserts keys without meta");
  return { ...row, meta };
}

/** Inserts the workspace's data key the way an import's transaction would, so encrypted rows can reference it. */
async function storeDataKey(url: string, keyring: Keyring, workspaceId: string) {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const dataKey = await keyring.dataKeyFor(drizzle({ client: sql }) as never, workspaceId);
    if (dataKey.newRow) {
      const r = dataKey.newRow;
      await sql`insert into encryption_keys (id, workspace_id, wrapped, master_key_fingerprint, created_at_m)
                values (${r.id}, ${r.workspaceId}, ${r.wrapped}, ${r.masterKeyFingerprint}, ${r.createdAtM})`;
    }
    return dataKey;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function runCeiling(
  admin: Admin,
  settings: Settings,
  variant: "ceiling" | "ceiling-plaintext",
  concurrency: number,
  cleanup: Cleanup,
): Promise<ScenarioResult> {
  const db = await createDatabase(admin, settings.databaseUrl, cleanup);
  try {
    // The same schema keyhaven migrates to (indexes, constraints, foreign keys), plus the workspace and API rows.
    const migrator = postgres(db.url, { max: 1, onnotice: () => {} });
    const workspaceId = newId("ws");
    const apiId = newId("api");
    try {
      await migrate(drizzle({ client: migrator }), { migrationsFolder: MIGRATIONS_DIR });
      const now = Date.now();
      await migrator`insert into workspaces (id, name, created_at_m) values (${workspaceId}, 'bench', ${now})`;
      await migrator`insert into apis (id, workspace_id, name, created_at_m) values (${apiId}, ${workspaceId}, 'bench', ${now})`;
    } finally {
      await migrator.end({ timeout: 5 });
    }

    // The rows come from keyhaven's own import planner, so they carry exactly the values an import writes.
    const withPlaintext = variant === "ceiling-plaintext";
    const keyring = new Keyring(withPlaintext ? randomBytes(32) : undefined);
    const dataKey = withPlaintext ? await storeDataKey(db.url, keyring, workspaceId) : undefined;
    const noIds = new Map<string, string>();
    const prepare = () => {
      const plan = planImport(withPlaintext ? plaintextBatch(apiId) : hashBatch(apiId), {
        workspaceId,
        roleIds: noIds,
        permissionIds: noIds,
        keyring,
        dataKey,
        now: Date.now(),
      });
      return { keys: plan.keys.map(toCeilingRow), encrypted: plan.encrypted };
    };

    const sql = postgres(db.url, { max: concurrency, onnotice: () => {} });
    let stats: RunStats;
    try {
      stats = await drive({
        concurrency,
        seconds: settings.seconds,
        prepare,
        send: async ({ keys, encrypted }) => {
          await sql.begin(async (tx) => {
            await tx`insert into keys ${tx(keys)}`;
            if (encrypted.length > 0) await tx`insert into encrypted_keys ${tx(encrypted)}`;
          });
          return { ok: true };
        },
      });
    } finally {
      await sql.end({ timeout: 5 });
    }
    const rows = await countKeysPostgres(db.url);
    return summarize({ store: "postgres", variant, concurrency }, stats, settings, rows);
  } finally {
    await db.drop();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// keyhaven over HTTP

async function runHttp(
  store: StoreKind,
  variant: HttpVariant,
  concurrency: number,
  settings: Settings,
  admin: Admin | undefined,
  cleanup: Cleanup,
): Promise<ScenarioResult> {
  let storeEnv: Record<string, string>;
  let countRows: () => Promise<number>;
  let dispose: () => Promise<void>;
  if (store === "postgres") {
    if (!admin) throw new Error("no PostgreSQL connection");
    const db = await createDatabase(admin, settings.databaseUrl, cleanup);
    storeEnv = { DATABASE_URL: db.url };
    countRows = () => countKeysPostgres(db.url);
    dispose = db.drop;
  } else {
    const dir = await mkdtemp(path.join(os.tmpdir(), "keyhaven-bench-"));
    dispose = cleanup.add(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
    storeEnv = { KEYHAVEN_DATA_DIR: dir };
    countRows = async () => {
      // keyhaven keeps its cluster in <KEYHAVEN_DATA_DIR>/pgdata (src/storage/client.ts); read it once the server is gone.
      // …in the database keyhaven uses there (startPglite opens the same one).
      const pg = await startPglite(path.join(dir, "pgdata"));
      try {
        const { rows } = await pg.query<{ count: number }>("select count(*)::int as count from keys");
        return rows[0]?.count ?? 0;
      } finally {
        await pg.close();
      }
    };
  }

  try {
    const rootKey = `bench_root_${randomBytes(24).toString("base64url")}`;
    const server = await startKeyhaven(storeEnv, rootKey, settings.serverNodeArgs, cleanup);
    let stats: RunStats;
    try {
      const created = await post(server, rootKey, "/v1/apis.createApi", JSON.stringify({ name: "bench" }));
      const apiId = (created.json as { apiId?: unknown } | undefined)?.apiId;
      if (created.status !== 200 || typeof apiId !== "string") {
        throw new Error(`apis.createApi answered ${created.status}: ${JSON.stringify(created.json)}`);
      }
      const makeBatch = variant === "hash" ? () => hashBatch(apiId) : () => plaintextBatch(apiId);
      stats = await drive({
        concurrency,
        seconds: settings.seconds,
        prepare: () => JSON.stringify(makeBatch()),
        send: async (body) => {
          const { status, json } = await post(server, rootKey, "/v1/migrations.createKeys", body);
          const keyIds = (json as { keyIds?: unknown } | undefined)?.keyIds;
          if (status === 200 && Array.isArray(keyIds) && keyIds.length === BATCH_SIZE) return { ok: true };
          const error = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
          return {
            ok: false,
            error: error
              ? `${status} ${error.code}: ${error.message}`
              : `${status} ${typeof json === "string" ? json : JSON.stringify(json)}`.slice(0, 300),
          };
        },
        stopEarly: () => server.exitReason() !== undefined,
      });
      const died = server.exitReason();
      if (died !== undefined && !interrupted()) throw new Error(`${died} during the run`);
    } catch (err) {
      throw new Error(`${describeError(err)}\n--- keyhaven output ---\n${server.output()}`);
    } finally {
      await server.stop();
    }
    if (stats.failures > 0 && server.output().trim() !== "") {
      console.log(`  keyhaven output (last lines):\n${indent(server.output().trim().split("\n").slice(-20).join("\n"))}`);
    }
    const rows = await countRows();
    return summarize({ store, variant, concurrency }, stats, settings, rows);
  } finally {
    await dispose();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Report

function formatTable(results: ScenarioResult[], settings: Settings): string {
  const n = formatCount;
  const ms = (v: number) => formatMs(v, 1);
  const header = [
    "store",
    "variant",
    "conc",
    "keys/s",
    "÷ceiling",
    "p50 ms",
    "p99 ms",
    "keys",
    "fails",
    `keys/s per ${sliceSecondsOf(settings)} s slice`,
  ];
  const rows = results.map((r) => [
    r.store,
    r.variant,
    String(r.concurrency),
    n(r.keysPerSecond),
    formatShare(r.ratioToCeiling),
    ms(r.latencyMs.p50),
    ms(r.latencyMs.p99),
    n(r.keys) + (r.rowsInStore === r.keys ? "" : ` (rows: ${n(r.rowsInStore)}!)`),
    String(r.failures),
    r.slices.map((s) => n(s.keysPerSecond)).join("  "),
  ]);
  return formatRows(header, rows, new Set([2, 3, 4, 5, 6, 7, 8]));
}

// ---------------------------------------------------------------------------------------------------------------
// Main

async function main(): Promise<void> {
  const settings = readSettings(process.env);
  const startedAt = new Date();
  const cleanup = new Cleanup();
  const results: ScenarioResult[] = [];
  let failure: unknown;

  handleInterrupts("stopping after the current request");

  let postgresVersion: string | undefined;
  try {
    const opened = await openAdmin(settings.databaseUrl, settings.stores.includes("postgres"), cleanup);
    const admin = opened.admin;
    postgresVersion = opened.postgresVersion;

    const plan: { store: StoreKind; variant: Variant; concurrency: number }[] = [];
    for (const store of settings.stores) {
      for (const variant of settings.variants) {
        if (isCeiling(variant) && store !== "postgres") continue;
        for (const concurrency of settings.concurrency) plan.push({ store, variant, concurrency });
      }
    }
    console.log(
      `keyhaven import benchmark: ${plan.length} scenarios of ${settings.seconds} s, batches of ${BATCH_SIZE}, ` +
        `concurrency ${settings.concurrency.join(",")}, ${os.cpus().length} CPUs` +
        (postgresVersion ? `, PostgreSQL ${postgresVersion}` : ""),
    );

    for (const scenario of plan) {
      if (interrupted()) break;
      console.log(`▶ ${scenario.store} ${scenario.variant} c=${scenario.concurrency}`);
      const result = isCeiling(scenario.variant)
        ? await runCeiling(admin!, settings, scenario.variant, scenario.concurrency, cleanup)
        : await runHttp(scenario.store, scenario.variant, scenario.concurrency, settings, admin, cleanup);
      if (interrupted()) break; // a scenario cut short is not reported
      if (result.store === "postgres" && !isCeiling(result.variant)) {
        const yardstick = ceilingOf[result.variant];
        const ceiling = results.find((r) => r.variant === yardstick && r.concurrency === result.concurrency);
        if (ceiling && ceiling.keysPerSecond > 0) result.ratioToCeiling = round(result.keysPerSecond / ceiling.keysPerSecond, 4);
      }
      results.push(result);
      console.log(
        `  ${result.keysPerSecond.toLocaleString("en-US")} keys/s, p50 ${result.latencyMs.p50} ms, p99 ${result.latencyMs.p99} ms, ` +
          `${result.failures} failures` +
          (result.rowsInStore === result.keys ? "" : `, but ${result.rowsInStore} rows in keys for ${result.keys} imported keys`),
      );
      for (const e of result.errors.slice(0, 5)) console.log(`    ${e.count}× ${e.message}`);
    }
  } catch (err) {
    failure = err;
  } finally {
    await cleanup.runAll();
  }

  if (results.length > 0) {
    console.log(`\n${formatTable(results, settings)}`);
    console.log(
      `\n÷ceiling: HTTP keys/s as a share of raw 100-row INSERT transactions of the same rows at the same concurrency` +
        ` (PostgreSQL; hash ÷ ceiling, plaintext ÷ ceiling-plaintext).` +
        `\nkeyhaven's DATABASE_POOL_SIZE: ${settings.keyhavenPoolSize}.`,
    );
    const report = {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      complete: failure === undefined && !interrupted(),
      ...(failure !== undefined && { error: describeError(failure) }),
      settings: { ...settings, databaseUrl: redactUrl(settings.databaseUrl), batchSize: BATCH_SIZE },
      environment: environmentInfo(postgresVersion),
      results,
    };
    const file = await writeResults("import", startedAt, report);
    console.log(`results written to ${path.relative(process.cwd(), file)}`);
  }

  reportOutcome(failure, [], () => [], "the scenario in progress is not reported");
}

await main();
