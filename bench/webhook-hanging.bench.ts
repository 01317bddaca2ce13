/**
 * Whether a hanging webhook receiver changes verification throughput (issue 38 §3): in-process, concurrent
 * `POST /v2/keys.verifyKey` through app.inject on keys with credits that cross key.credits.low and
 * key.credits.exhausted (each verification round writes threshold events to the outbox), with the delivery worker
 * running and the workspace's endpoint pointing at a server on 127.0.0.1 that accepts every request and never answers.
 * Rounds rotate three variants: no endpoint enabled (nothing is queued, the worker idles), an endpoint whose receiver
 * answers 204 at once (every crossing is queued and sent), and an endpoint whose receiver never answers (every
 * crossing is queued; the worker holds its attempts open until their 10 s deadline), on the embedded store or on
 * PostgreSQL (BENCH_DATABASE_URL: a database the run may migrate and write to). The fast and the hanging variants
 * write the same events: their difference is what a hanging receiver costs verification; the first and the second
 * differ by what deciding and writing the events costs. Reported: verifications per second of each variant, the
 * changes, and the deliveries written and attempted.
 *
 * Run: npx tsx bench/webhook-hanging.bench.ts
 *      BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/whbench npx tsx bench/webhook-hanging.bench.ts
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { sql } from "drizzle-orm";
import { rowsOf } from "../src/storage/client.js";
import { inProcessKeyhaven } from "./inprocess.js";

const KEYS = Number(process.env.BENCH_KEYS ?? 200);
const CREDITS = Number(process.env.BENCH_CREDITS ?? 20);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const url = process.env.BENCH_DATABASE_URL;

// The receiver: reads every request and never answers (until the run ends).
let held = 0;
const hanging = createServer((req) => {
  held++;
  req.resume();
});
await new Promise<void>((resolve) => hanging.listen(0, "127.0.0.1", resolve));
const receiverUrl = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/hook`;
const fast = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.statusCode = 204;
    res.end();
  });
});
await new Promise<void>((resolve) => fast.listen(0, "127.0.0.1", resolve));
const fastUrl = `http://127.0.0.1:${(fast.address() as AddressInfo).port}/hook`;

const { store, services, app, post } = await inProcessKeyhaven(url, 10, { KEYHAVEN_WEBHOOK_ALLOW_PRIVATE: "true" });
const silent = { warn() {}, error() {}, info() {} };
services.webhookWorker.start(silent);
const apiId = (await post("/v2/apis.createApi", { name: "hanging-bench" })).data.apiId as string;
await post("/v2/keyhaven.setAlertThresholds", { apiId, creditsLow: { remaining: Math.ceil(CREDITS / 2) } });
const events = ["key.credits.low", "key.credits.exhausted"];
const hangingId = (await post("/v2/keyhaven.createWebhook", { url: receiverUrl, events })).data.webhookId as string;
const fastId = (await post("/v2/keyhaven.createWebhook", { url: fastUrl, events })).data.webhookId as string;

/** One round: fresh keys, each verified until its credits are spent (every key crosses both thresholds once). */
async function round(): Promise<{ verifications: number; seconds: number }> {
  const keys: string[] = [];
  for (let i = 0; i < KEYS; i++)
    keys.push((await post("/v2/keys.createKey", { apiId, credits: { remaining: CREDITS } })).data.key as string);
  const work: string[] = [];
  for (let c = 0; c < CREDITS; c++) work.push(...keys);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < work.length) await post("/v2/keys.verifyKey", { key: work[next++]! });
    }),
  );
  return { verifications: work.length, seconds: (performance.now() - started) / 1000 };
}

type Variant = "none" | "fast" | "hanging";
const enable = async (variant: Variant) => {
  await post("/v2/keyhaven.updateWebhook", { webhookId: hangingId, enabled: variant === "hanging" });
  await post("/v2/keyhaven.updateWebhook", { webhookId: fastId, enabled: variant === "fast" });
};
const perSecond: Record<Variant, number[]> = { none: [], fast: [], hanging: [] };
const order: Variant[] = ["none", "fast", "hanging"];
await enable("none");
await round(); // warm-up, not counted
for (let r = 0; r < ROUNDS * 3; r++) {
  const variant = order[r % 3]!;
  await enable(variant);
  const { verifications, seconds } = await round();
  perSecond[variant].push(verifications / seconds);
}
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const [row] = rowsOf<{ n: number; attempted: number }>(
  await store.db.execute(sql`select count(*)::int as n, count(*) filter (where attempts > 0)::int as attempted from webhook_deliveries`),
);
console.log(
  JSON.stringify(
    {
      store: url ? "postgres" : "pglite",
      keysPerRound: KEYS,
      verificationsPerRound: KEYS * CREDITS,
      concurrency: CONCURRENCY,
      noEndpointPerSecond: perSecond.none.map((x) => Math.round(x)),
      fastReceiverPerSecond: perSecond.fast.map((x) => Math.round(x)),
      hangingReceiverPerSecond: perSecond.hanging.map((x) => Math.round(x)),
      hangingVsFast: `${(((mean(perSecond.hanging) - mean(perSecond.fast)) / mean(perSecond.fast)) * 100).toFixed(1)} %`,
      eventsVsNone: `${(((mean(perSecond.fast) - mean(perSecond.none)) / mean(perSecond.none)) * 100).toFixed(1)} %`,
      deliveriesWritten: row?.n,
      deliveriesAttempted: row?.attempted,
      requestsHeldByReceiver: held,
    },
    null,
    2,
  ),
);
await services.webhookWorker.stop();
await app.close();
await store.close();
hanging.closeAllConnections();
hanging.close();
fast.close();
