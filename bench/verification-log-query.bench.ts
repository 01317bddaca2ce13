/**
 * How long a v2 analytics query over a full raw verification log holds the store (issue 38 §2): one workspace's log
 * filled to each of BENCH_LOG_SIZES events (default 100,000, 250,000, 1,000,000), written as the embedded store's
 * flusher writes it (chunks of BENCH_CHUNK_EVENTS events, default 250 there, 5,000 on PostgreSQL), then each query
 * below run BENCH_SAMPLES times (default 5, after one not counted) through the core function of `analytics.getVerifications`
 * (queryVerificationsSql: parse, translation, the read-only transaction). In-process, on an embedded store in a
 * scratch directory (what `keyhaven serve` runs without DATABASE_URL), or on PostgreSQL with BENCH_DATABASE_URL (a
 * scratch database the run may migrate and write to). Reported per query: the median and largest time of a call, and
 * on PGlite the longest the event loop was held meanwhile (the longest gap between ticks of a 1 ms timer): PGlite runs every statement on
 * keyhaven's own thread, so that is how long every other tenant's requests waited.
 *
 * Run: npx tsx bench/verification-log-query.bench.ts
 *      BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/logbench npx tsx bench/verification-log-query.bench.ts
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { bootstrap } from "../src/bootstrap.js";
import { loadConfig } from "../src/config.js";
import { queryVerificationsSql } from "../src/core/analytics/analytics.core.js";
import { migrateAndRun, openPglite, openPostgres } from "../src/storage/client.js";
import { insertVerificationLogRows, type VerificationLogRow } from "../src/storage/verificationLog/verificationLog.repository.js";
import { insertWorkspace } from "../src/storage/workspaces/workspaces.repository.js";

const url = process.env.BENCH_DATABASE_URL;
const SIZES = (process.env.BENCH_LOG_SIZES ?? "100000,250000,1000000").split(",").map(Number);
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 5);
const CHUNK_EVENTS = Number(process.env.BENCH_CHUNK_EVENTS ?? (url ? 5000 : 250));
const QUERIES: [string, string][] = [
  ["SELECT 1 (no table)", "SELECT 1 AS one"],
  ["count(*)", "SELECT count(*) AS n FROM key_verifications_v1"],
  ["group by outcome", "SELECT outcome, count(*) AS n FROM key_verifications_v1 GROUP BY outcome ORDER BY outcome"],
  [
    "group by key, top 10",
    "SELECT key_id, count(*) AS total, countIf(outcome = 'VALID') AS valid FROM key_verifications_v1 " +
      "WHERE time >= now() - INTERVAL 7 DAY GROUP BY key_id ORDER BY total DESC LIMIT 10",
  ],
  ["per minute table, by hour", "SELECT toStartOfHour(time) AS hour, sum(count) AS n FROM key_verifications_per_minute_v1 GROUP BY hour"],
];

const dataDir = url ? undefined : await mkdtemp(path.join(os.tmpdir(), "keyhaven-logbench-"));
const config = loadConfig({
  KEYHAVEN_DATA_DIR: dataDir ?? "memory://",
  KEYHAVEN_ENCRYPTION_KEY: randomBytes(32).toString("base64"),
  LOG_LEVEL: "silent",
  ...(url && { DATABASE_URL: url }),
});
const store = url ? openPostgres(url, 4) : await openPglite(dataDir!);
await migrateAndRun(store, url, () => bootstrap(store.db, config));
const now = Date.now();
const workspaceId = await insertWorkspace(store.db, `logbench-${randomBytes(3).toString("hex")}`, now);
const services = { db: store.db, store, clock: { now: () => Date.now() }, config };
const principal = { workspaceId, permissions: new Set(["*"]) };
console.log(
  `${url ? "PostgreSQL" : "PGlite"} (${dataDir ?? "scratch database"}), chunks of ${CHUNK_EVENTS} events, ${SAMPLES} samples, node ${process.version}, ${os.cpus()[0]?.model ?? "?"} × ${os.cpus().length}`,
);

// Events spread over the last 6 days (within the default 7 days' retention), 100 keys of 2 APIs, some tags.
const OUTCOMES = ["VALID", "VALID", "VALID", "RATE_LIMITED", "USAGE_EXCEEDED", "DISABLED"];
let written = 0;
async function fillTo(events: number) {
  const span = 6 * 86_400_000;
  while (written < events) {
    const n = Math.min(CHUNK_EVENTS, events - written);
    const rows: VerificationLogRow[] = [];
    for (let i = 0; i < n; i++, written++) {
      rows.push({
        requestId: `req_${written}`,
        timeM: now - span + Math.floor((written / SIZES[SIZES.length - 1]!) * span),
        workspaceId,
        keySpaceId: written % 2 === 0 ? "api_a" : "api_b",
        keyId: `key_${written % 100}`,
        identityId: null,
        externalId: null,
        outcome: OUTCOMES[written % OUTCOMES.length]!,
        tags: written % 3 === 0 ? ["path=/v1/x"] : undefined,
        spentCredits: 1,
        latency: written % 7,
      });
    }
    await insertVerificationLogRows(store.db, rows, "local");
  }
}

/** The longest the event loop went without running a 1 ms timer, from now until `stop()`. */
function loopHold() {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const t = performance.now();
    longest = Math.max(longest, t - last);
    last = t;
  }, 1);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(longest, performance.now() - last);
    },
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number) => `${x.toFixed(0)} ms`;

// The parser's WebAssembly module is loaded on the first query: not part of any measurement.
await queryVerificationsSql(services, principal, "SELECT 1 AS one");
try {
  for (const size of SIZES) {
    const filling = performance.now();
    await fillTo(size);
    console.log(`\n${size.toLocaleString("en")} events (filled in ${((performance.now() - filling) / 1000).toFixed(1)} s)`);
    for (const [name, query] of QUERIES) {
      const times: number[] = [];
      const held: number[] = [];
      let answer = "";
      // One more call first, not counted: the first of each query at each size ran up to twice as long (the
      // query's plan and code paths warming up).
      for (let s = -1; s < SAMPLES; s++) {
        const loop = loopHold();
        const started = performance.now();
        try {
          const rows = await queryVerificationsSql(services, principal, query);
          answer = rows.length === 1 ? JSON.stringify(rows[0]) : `${rows.length} rows`;
        } catch (err) {
          answer = (err as Error).message;
        }
        const took = performance.now() - started;
        const longest = loop.stop();
        if (s < 0) continue;
        times.push(took);
        held.push(longest);
      }
      const loopHeld = url ? "" : `, event loop held up to ${ms(Math.max(...held))}`;
      console.log(`  ${name.padEnd(26)} median ${ms(median(times))}, max ${ms(Math.max(...times))}${loopHeld}  (${answer})`);
    }
  }
} finally {
  await store.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
}
