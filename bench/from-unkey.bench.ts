/**
 * Copy-from-Unkey throughput (issue 36, "Done when": 100,000 keys at ≥ 1,000 keys/s against a local source): how
 * fast `keyhaven import --from-unkey` copies an Unkey workspace's keys into keyhaven, end to end.
 *
 * The "hosted Unkey" is a second keyhaven (it speaks Unkey's v2 API, apis.listKeys with decrypt included), on a fresh
 * PostgreSQL database, seeded with BENCH_KEYS keys in one API: BENCH_PLAINTEXT_SHARE of them recoverable (v2
 * keys.createKey, so apis.listKeys with decrypt returns their plaintext: they verify at once in the target), the rest
 * by hash through /v1/migrations.createKeys in batches of 100 (Unkey has no plaintext of them: they arrive pending). Each key has a name, meta and credits. Then, for each
 * target store of BENCH_STORES, a fresh keyhaven is started and the CLI runs as a user runs it, compiled (`node
 * dist/cli/main.js import --from-unkey --api … --unkey-url … --url …`, UNKEY_ROOT_KEY and KEYHAVEN_ROOT_KEY in its
 * environment, a fresh journal), timed from start to exit; its JSON summary and the target's
 * /v2/keyhaven.getCopyStatus are checked against the seed (every key copied, the right number pending).
 *
 * Reported per store: keys, seconds, keys/s (the whole command: reading Unkey's pages, writing keyhaven's batches),
 * verifiable and pending. A second run of the same command (idempotent: everything unchanged) is timed too.
 *
 * Run:   npm run bench:from-unkey
 *        BENCH_KEYS=20000 npm run bench:from-unkey      (a quick run)
 * Environment:
 *   BENCH_KEYS             keys to seed and copy (default 100000)
 *   BENCH_PLAINTEXT_SHARE  share of keys Unkey returns in plaintext, 0–1 (default 0.1)
 *   BENCH_STORES           comma-separated subset of "postgres,pglite" for the target (default both)
 *   BENCH_CLI_ARGS         extra CLI options, space-separated (e.g. "--concurrency 8 --batch-size 500")
 *   BENCH_DATABASE_URL     PostgreSQL server for the databases (default postgres://postgres@127.0.0.1:5432/postgres)
 * The results are written to bench/results/from-unkey-<ts>.json.
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import {
  type ChildServer,
  Cleanup,
  childEnv,
  createDatabase,
  DEFAULT_DATABASE_URL,
  describeError,
  environmentInfo,
  envList,
  envPositive,
  formatTable,
  handleInterrupts,
  interrupted,
  openAdmin,
  post,
  REPO_ROOT,
  reportOutcome,
  round,
  startKeyhaven,
  writeResults,
} from "./lib.js";

type StoreKind = "postgres" | "pglite";
const SEED_BATCH = 100;
const SEED_CONCURRENCY = 4;
const TARGET_KEYS_PER_SECOND = 1000;

type Run = {
  store: StoreKind;
  run: "first" | "again";
  keys: number;
  seconds: number;
  keysPerSecond: number;
  verifiable: number;
  pending: number;
};
type Failure = { store: string; error: string };

const settings = {
  keys: Math.round(envPositive(process.env, "BENCH_KEYS", 100_000)),
  plaintextShare: Math.min(1, Number(process.env.BENCH_PLAINTEXT_SHARE ?? "0.1")),
  stores: envList(process.env, "BENCH_STORES", ["postgres", "pglite"] as const),
  cliArgs: (process.env.BENCH_CLI_ARGS ?? "").split(/\s+/).filter(Boolean),
  databaseUrl: process.env.BENCH_DATABASE_URL?.trim() || DEFAULT_DATABASE_URL,
};

const rootKeyOf = () => `bench_root_${randomBytes(24).toString("base64url")}`;

async function expectOk(server: ChildServer, rootKey: string, route: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await post(server, rootKey, route, JSON.stringify(body));
  if (res.status !== 200) throw new Error(`${route} answered ${res.status}: ${JSON.stringify(res.json).slice(0, 300)}`);
  return res.json as Record<string, unknown>;
}

/** Seeds the source: one API and settings.keys keys; answers the API's id and how many keys are plaintext. */
async function seed(source: ChildServer, rootKey: string): Promise<{ apiId: string; plaintexts: number }> {
  // v1's createApi, which can ask for encrypted keys (keyhaven's extension): recoverable keys need them.
  const created = await expectOk(source, rootKey, "/v1/apis.createApi", { name: "bench-from-unkey", storeEncryptedKeys: true });
  const apiId = (created as { apiId: string }).apiId;
  const plaintextEvery = settings.plaintextShare > 0 ? Math.round(1 / settings.plaintextShare) : 0;
  let plaintexts = 0;
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < settings.keys && !interrupted()) {
      const from = next;
      const to = Math.min(settings.keys, next + SEED_BATCH);
      next = to;
      const batch = [];
      for (let i = from; i < to; i++) {
        const fields = { name: `customer ${i}`, meta: { plan: i % 3 === 0 ? "pro" : "free", n: i } };
        if (plaintextEvery > 0 && i % plaintextEvery === 0) {
          // Recoverable: created by keys.createKey, so apis.listKeys with decrypt returns its plaintext.
          await expectOk(source, rootKey, "/v2/keys.createKey", {
            apiId,
            recoverable: true,
            credits: { remaining: 1000 + (i % 100) },
            ...fields,
          });
          plaintexts++;
          continue;
        }
        const hash = createHash("sha256")
          .update(`sk_bench_${i}_${randomBytes(12).toString("base64url")}`)
          .digest("base64");
        batch.push({ apiId, hash: { value: hash, variant: "sha256_base64" }, remaining: 1000 + (i % 100), ...fields });
      }
      if (batch.length > 0) await expectOk(source, rootKey, "/v1/migrations.createKeys", batch);
    }
  };
  await Promise.all(Array.from({ length: SEED_CONCURRENCY }, worker));
  console.log(`  seeded ${settings.keys} keys (${plaintexts} by plaintext) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return { apiId, plaintexts };
}

/** Runs the CLI once; answers its wall time and JSON summary. */
function runCli(args: string[], env: Record<string, string>): Promise<{ seconds: number; summary: unknown }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    execFile(
      process.execPath,
      ["dist/cli/main.js", "import", "--from-unkey", ...args, "--json", "--quiet", ...settings.cliArgs],
      { cwd: REPO_ROOT, env: childEnv(env), maxBuffer: 64 * 1024 * 1024, timeout: 30 * 60_000 },
      (err, stdout, stderr) => {
        const seconds = (performance.now() - started) / 1000;
        if (err) return reject(new Error(`the CLI failed (${err.message}):\n${stderr.slice(-2000)}\n${stdout.slice(-1000)}`));
        try {
          resolve({ seconds, summary: JSON.parse(stdout) });
        } catch {
          reject(new Error(`the CLI's stdout is not one JSON object:\n${stdout.slice(0, 1000)}`));
        }
      },
    );
  });
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const cleanup = new Cleanup();
  const runs: Run[] = [];
  const failures: Failure[] = [];
  let failure: unknown;
  handleInterrupts("stopping");
  let postgresVersion: string | undefined;
  try {
    const opened = await openAdmin(settings.databaseUrl, true, cleanup);
    postgresVersion = opened.postgresVersion;
    console.log(
      `keyhaven copy-from-Unkey benchmark: ${settings.keys} keys (${Math.round(settings.plaintextShare * 100)}% plaintext), ` +
        `targets ${settings.stores.join(",")}, ${os.cpus().length} CPUs, load ${os.loadavg()[0]!.toFixed(2)}`,
    );
    const sourceDb = await createDatabase(opened.admin!, settings.databaseUrl, cleanup);
    const sourceRoot = rootKeyOf();
    const source = await startKeyhaven({ DATABASE_URL: sourceDb.url }, sourceRoot, [], cleanup, ["REDIS_URL"]);
    const { apiId, plaintexts } = await seed(source, sourceRoot);
    for (const store of settings.stores) {
      if (interrupted()) break;
      try {
        let storeEnv: Record<string, string>;
        if (store === "postgres") storeEnv = { DATABASE_URL: (await createDatabase(opened.admin!, settings.databaseUrl, cleanup)).url };
        else {
          const dir = await mkdtemp(path.join(os.tmpdir(), "keyhaven-bench-"));
          cleanup.add(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
          storeEnv = { KEYHAVEN_DATA_DIR: dir };
        }
        const targetRoot = rootKeyOf();
        const target = await startKeyhaven(storeEnv, targetRoot, [], cleanup, ["REDIS_URL"]);
        const journalDir = await mkdtemp(path.join(os.tmpdir(), "keyhaven-bench-journal-"));
        cleanup.add(`remove ${journalDir}`, () => rm(journalDir, { recursive: true, force: true }));
        const args = ["--api", apiId, "--unkey-url", source.url, "--url", target.url, "--journal", path.join(journalDir, "copy.journal")];
        const env = { UNKEY_ROOT_KEY: sourceRoot, KEYHAVEN_ROOT_KEY: targetRoot };
        for (const run of ["first", "again"] as const) {
          const { seconds } = await runCli(args, env);
          const status = await expectOk(target, targetRoot, "/v2/keyhaven.getCopyStatus", { apiIds: [apiId] });
          const [api] = status.data as { keys: number; verifiable: number; pending: number }[];
          if (api?.keys !== settings.keys || api.pending !== settings.keys - plaintexts)
            throw new Error(
              `the target holds ${JSON.stringify(api)}, not ${settings.keys} keys of which ${settings.keys - plaintexts} pending`,
            );
          const r: Run = {
            store,
            run,
            keys: api.keys,
            seconds: round(seconds, 2),
            keysPerSecond: Math.round(api.keys / seconds),
            verifiable: api.verifiable,
            pending: api.pending,
          };
          runs.push(r);
          console.log(
            `  ${store} ${run}: ${r.keys} keys in ${r.seconds} s, ${r.keysPerSecond} keys/s (${r.verifiable} verifiable, ${r.pending} pending)`,
          );
        }
        await target.stop();
      } catch (err) {
        failures.push({ store, error: describeError(err) });
        console.log(`  ${store}: FAILED ${describeError(err)}`);
      }
    }
  } catch (err) {
    failure = err;
  } finally {
    await cleanup.runAll();
  }
  if (runs.length > 0) {
    const rows = runs.map((r) => [
      r.store,
      r.run,
      String(r.keys),
      r.seconds.toFixed(2),
      String(r.keysPerSecond),
      String(r.verifiable),
      String(r.pending),
    ]);
    console.log(
      `\n${formatTable(["target", "run", "keys", "seconds", "keys/s", "verifiable", "pending"], rows, new Set([2, 3, 4, 5, 6]))}`,
    );
    console.log(`\ntarget: ≥ ${TARGET_KEYS_PER_SECOND} keys/s on the first run`);
    for (const r of runs.filter((x) => x.run === "first"))
      console.log(`  ${r.store}: ${r.keysPerSecond} keys/s (${r.keysPerSecond >= TARGET_KEYS_PER_SECOND ? "met" : "NOT met"})`);
    const file = await writeResults("from-unkey", startedAt, {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      settings,
      environment: environmentInfo(postgresVersion),
      runs,
      failures,
    });
    console.log(`\nresults: ${path.relative(process.cwd(), file)}`);
  }
  reportOutcome(failure, failures, (f) => [f.store]);
}

await main();
