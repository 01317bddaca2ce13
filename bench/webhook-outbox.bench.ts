/**
 * What the webhook outbox trigger (migration 0024) costs an admin write when the workspace has no endpoint, and when
 * it has one subscribed to the event (issue 38 §3): in-process, `POST /v2/keys.createKey` through app.inject,
 * BENCH_CALLS calls per round, rounds alternating with the trigger dropped and present (ABAB, so that warm-up and
 * load weigh on both), on the embedded store or on PostgreSQL (BENCH_DATABASE_URL: a database the run may migrate and
 * write to). Reported: the mean and p50 latency per call of each variant, and the change. With `BENCH_ENDPOINT=1` the
 * workspace has one enabled endpoint (a documentation address) subscribed to key.create, so that each call also
 * writes an outbox row; the delivery worker is never started, so nothing is sent.
 *
 * Run: npx tsx bench/webhook-outbox.bench.ts
 *      BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/whbench BENCH_CALLS=500 npx tsx bench/webhook-outbox.bench.ts
 */
import { performance } from "node:perf_hooks";
import { sql } from "drizzle-orm";
import { rowsOf } from "../src/storage/client.js";
import { inProcessKeyhaven } from "./inprocess.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 400);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const url = process.env.BENCH_DATABASE_URL;
const withEndpoint = process.env.BENCH_ENDPOINT === "1";

const { store, app, post } = await inProcessKeyhaven(url, 4);
const apiId = (await post("/v2/apis.createApi", { name: "outbox-bench" })).data.apiId as string;
if (withEndpoint) await post("/v2/keyhaven.createWebhook", { url: "https://203.0.113.10/hook", events: ["key.create"] });

const TRIGGER = sql.raw(`CREATE TRIGGER audit_log_webhook_outbox AFTER INSERT ON audit_log REFERENCING NEW TABLE AS written
  FOR EACH STATEMENT EXECUTE FUNCTION keyhaven_webhook_outbox()`);
const setTrigger = async (on: boolean) => {
  await store.db.execute(sql.raw("DROP TRIGGER IF EXISTS audit_log_webhook_outbox ON audit_log"));
  if (on) await store.db.execute(TRIGGER);
};

async function round(): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const started = performance.now();
    await post("/v2/keys.createKey", { apiId, name: `k${i}` });
    times.push(performance.now() - started);
  }
  return times;
}

const stats = { off: [] as number[], on: [] as number[] };
await setTrigger(true);
await round(); // warm-up, not counted
for (let r = 0; r < ROUNDS; r++) {
  const on = r % 2 === 1;
  await setTrigger(on);
  stats[on ? "on" : "off"].push(...(await round()));
}
await setTrigger(true);
const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const outboxRows = rowsOf<{ n: number }>(await store.db.execute(sql.raw("select count(*)::int as n from webhook_deliveries")))[0]?.n;
console.log(
  JSON.stringify(
    {
      store: url ? "postgres" : "pglite",
      endpoint: withEndpoint,
      callsPerVariant: stats.on.length,
      triggerOff: { meanMs: +mean(stats.off).toFixed(3), p50Ms: +p50(stats.off).toFixed(3) },
      triggerOn: { meanMs: +mean(stats.on).toFixed(3), p50Ms: +p50(stats.on).toFixed(3) },
      changeOfMean: `${(((mean(stats.on) - mean(stats.off)) / mean(stats.off)) * 100).toFixed(1)} %`,
      outboxRows,
    },
    null,
    2,
  ),
);
await app.close();
await store.close();
