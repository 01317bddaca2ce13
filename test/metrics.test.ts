import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LATENCY_BUCKETS } from "../src/http/metrics.js";
import { createHarness, expectError, type Harness, type Tenant } from "./helper.js";

/** Parses the Prometheus text format into `name{labels}` → value (label order as written). */
function parseExposition(text: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    series.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return series;
}

const scrape = async (h: Harness, headers: Record<string, string> = {}) => {
  const res = await h.app.inject({ method: "GET", url: "/metrics", headers });
  return { res, series: parseExposition(res.body) };
};

describe("GET /metrics", () => {
  let h: Harness;
  let t: Tenant;
  let text: string;
  let series: Map<string, number>;
  let keys: { key: string }[];
  // User CPU this process spent between building the app and the scrape: at least what /metrics must report.
  let cpuSinceBuilt: number;

  beforeAll(async () => {
    h = await createHarness();
    const built = process.cpuUsage();
    t = await h.tenant();
    const apiId = await h.createApi(t);
    keys = [await h.importKey(t, apiId), await h.importKey(t, apiId)];
    for (const { key } of keys) expect((await h.post("/v1/keys.verifyKey", { key })).body.code).toBe("VALID");
    expect((await h.post("/v1/keys.verifyKey", { key: keys[0]!.key })).body.code).toBe("VALID");
    expect((await h.post("/v1/keys.verifyKey", { key: "sk_unknown_key_0000" })).body.code).toBe("NOT_FOUND");
    expect((await h.post("/v1/keys.verifyKey", { key: "" })).status).toBe(400);
    expect((await h.get("/v1/apis.getApi", { apiId }, t.rootKey)).status).toBe(200);
    expect((await h.get("/v1/apis.getApi", { apiId: "api_secret_lookup_value" }, t.rootKey)).status).toBe(404);
    expect((await h.get("/no/such/path/with-a-raw-value", {})).status).toBe(404);
    cpuSinceBuilt = process.cpuUsage(built).user / 1e6;
    const { res, series: parsed } = await scrape(h);
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8");
    text = res.body;
    series = parsed;
  });
  afterAll(() => h.close());

  it("counts requests by method, route pattern and status", () => {
    expect(series.get('keyhaven_http_requests_total{method="POST",route="/v1/keys.verifyKey",status="200"}')).toBe(4);
    expect(series.get('keyhaven_http_requests_total{method="POST",route="/v1/keys.verifyKey",status="400"}')).toBe(1);
    expect(series.get('keyhaven_http_requests_total{method="POST",route="/v1/migrations.createKeys",status="200"}')).toBe(2);
    expect(series.get('keyhaven_http_requests_total{method="GET",route="/v1/apis.getApi",status="200"}')).toBe(1);
    expect(series.get('keyhaven_http_requests_total{method="GET",route="/v1/apis.getApi",status="404"}')).toBe(1);
    // Requests no route matched share one series: a scanner cannot create series, and no raw URL is exposed.
    expect(series.get('keyhaven_http_requests_total{method="GET",route="unmatched",status="404"}')).toBe(1);
    expect(text).not.toContain("with-a-raw-value");
    expect(text).not.toContain("api_secret_lookup_value");
    expect([...series.keys()].filter((k) => k.startsWith("keyhaven_http_") && k.includes("?"))).toEqual([]);
  });

  it("records latencies as a histogram per route and status, consistent with the counter", () => {
    const labels = 'method="POST",route="/v1/keys.verifyKey",status="200"';
    const buckets = [...LATENCY_BUCKETS.map(String), "+Inf"].map(
      (le) => series.get(`keyhaven_http_request_duration_seconds_bucket{${labels},le="${le}"}`)!,
    );
    expect(buckets.every((n) => Number.isInteger(n))).toBe(true);
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!).toBeGreaterThanOrEqual(buckets[i - 1]!);
    expect(buckets.at(-1)).toBe(4);
    expect(series.get(`keyhaven_http_request_duration_seconds_count{${labels}}`)).toBe(4);
    const sum = series.get(`keyhaven_http_request_duration_seconds_sum{${labels}}`)!;
    expect(sum).toBeGreaterThan(0);
    expect(sum).toBeLessThan(30);
    expect(text).toContain("# TYPE keyhaven_http_request_duration_seconds histogram");
    expect(text).toContain("# TYPE keyhaven_http_requests_total counter");
  });

  it("counts verification outcomes by code", () => {
    expect(series.get('keyhaven_key_verifications_total{code="VALID"}')).toBe(3);
    expect(series.get('keyhaven_key_verifications_total{code="NOT_FOUND"}')).toBe(1);
    // A request refused by validation is no verification.
    expect([...series.keys()].filter((k) => k.startsWith("keyhaven_key_verifications_total")).length).toBe(2);
  });

  it("reports the store and Redis", () => {
    expect(series.get("keyhaven_database_up")).toBe(1);
    const store = h.onPostgres ? "postgres" : "pglite";
    expect(series.get(`keyhaven_database_pool_size{store="${store}"}`)).toBe(h.onPostgres ? h.config.databasePoolSize : 1);
    if (process.env.TEST_REDIS_URL) expect(series.get("keyhaven_redis_up")).toBe(1);
    else expect(text).not.toContain("keyhaven_redis_up");
  });

  it("includes the process metrics of prom-client, counting CPU from the start, not from the first scrape", () => {
    expect(cpuSinceBuilt).toBeGreaterThan(0);
    expect(series.get("process_cpu_user_seconds_total")).toBeGreaterThanOrEqual(cpuSinceBuilt);
    expect(text).toContain("# TYPE nodejs_eventloop_lag_seconds gauge");
    expect(series.get("nodejs_heap_size_used_bytes")).toBeGreaterThan(0);
  });

  it("never exposes a key, a root key or a request id", () => {
    for (const { key } of keys) expect(text).not.toContain(key);
    expect(text).not.toContain(t.rootKey);
    expect(text).not.toMatch(/req_[1-9A-HJ-NP-Za-km-z]{8,}/);
  });

  it("counts the next scrape's requests on top of these", async () => {
    await h.post("/v1/keys.verifyKey", { key: keys[1]!.key });
    const { series: again } = await scrape(h);
    expect(again.get('keyhaven_http_requests_total{method="POST",route="/v1/keys.verifyKey",status="200"}')).toBe(5);
    expect(again.get('keyhaven_key_verifications_total{code="VALID"}')).toBe(4);
    expect(again.get('keyhaven_http_requests_total{method="GET",route="/metrics",status="200"}')).toBe(1);
  });
});

describe("GET /metrics: epoch reads, cache clears and remaining-use spends", () => {
  let h: Harness;
  beforeAll(async () => {
    // No analytics or last-used flush: they write, and a write makes the embedded store read the epoch again.
    h = await createHarness({ KEYHAVEN_ANALYTICS: "off" });
    await h.jobs.lastUsed.stop();
  });
  afterAll(() => h.close());
  const value = async (name: string) => (await scrape(h)).series.get(name) ?? Number.NaN;

  it("counts the statements that spend remaining uses and the verifications they carry", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const { key } = await h.importKey(t, apiId, { remaining: 10 });
    const statements = await value("keyhaven_remaining_spend_statements_total");
    const spends = await value("keyhaven_remaining_spends_total");
    for (let i = 0; i < 3; i++) expect((await h.post("/v1/keys.verifyKey", { key })).body.remaining).toBe(9 - i);
    // Four more at once: they may share statements.
    const together = await Promise.all([0, 1, 2, 3].map(() => h.post("/v1/keys.verifyKey", { key })));
    expect(together.map((r) => r.body.remaining).sort()).toEqual([3, 4, 5, 6]);
    expect((await value("keyhaven_remaining_spends_total")) - spends).toBe(7);
    const sent = (await value("keyhaven_remaining_spend_statements_total")) - statements;
    expect(sent).toBeGreaterThanOrEqual(4);
    expect(sent).toBeLessThanOrEqual(7);
  });

  it("spends the remaining uses of keys verified together in one statement, on either store", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const keys = await Promise.all(Array.from({ length: 10 }, () => h.importKey(t, apiId, { remaining: 5 })));
    // Each key once, so that all are in memory and their verifications reach the spender in the same turn.
    for (const { key } of keys) expect((await h.post("/v1/keys.verifyKey", { key })).body.remaining).toBe(4);
    const statements = await value("keyhaven_remaining_spend_statements_total");
    const together = await Promise.all(keys.map(({ key }) => h.post("/v1/keys.verifyKey", { key })));
    expect(together.map((r) => r.body.remaining)).toEqual(keys.map(() => 3));
    // One statement, the first verification's spend too: started at once, it would have gone alone (on PGlite, which
    // runs a statement on this thread, every one would have).
    expect((await value("keyhaven_remaining_spend_statements_total")) - statements).toBe(1);
  });

  it("counts lookup statements and the keys they looked up: one for keys verified together, none for a key in memory", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const keys = await Promise.all([0, 1, 2].map(() => h.importKey(t, apiId)));
    const statements = await value("keyhaven_verification_lookups_total");
    const looked = await value("keyhaven_verification_lookup_keys_total");
    const verify = async (key: string) => expect((await h.post("/v1/keys.verifyKey", { key })).body.code).toBe("VALID");
    await verify(keys[0]!.key);
    expect(await value("keyhaven_verification_lookups_total")).toBe(statements + 1);
    expect(await value("keyhaven_verification_lookup_keys_total")).toBe(looked + 1);
    // In memory now: no lookup.
    await verify(keys[0]!.key);
    expect(await value("keyhaven_verification_lookup_keys_total")).toBe(looked + 1);
    // An unknown key is looked up too; keys verified together may share a statement.
    expect((await h.post("/v1/keys.verifyKey", { key: "sk_metrics_unknown_key" })).body.code).toBe("NOT_FOUND");
    await Promise.all([verify(keys[1]!.key), verify(keys[2]!.key)]);
    expect(await value("keyhaven_verification_lookup_keys_total")).toBe(looked + 4);
    const sent = (await value("keyhaven_verification_lookups_total")) - statements;
    expect(sent).toBeGreaterThanOrEqual(3);
    expect(sent).toBeLessThanOrEqual(4);
  });

  it("counts epoch reads and cache clears; the embedded store reads none while nothing is written", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const { key } = await h.importKey(t, apiId);
    const verify = async () => expect((await h.post("/v1/keys.verifyKey", { key })).body.code).toBe("VALID");
    await verify();
    await verify();
    expect(await value("keyhaven_caches_cleared_total")).toBeGreaterThanOrEqual(1);
    const reads = await value("keyhaven_epoch_reads_total");
    expect(reads).toBeGreaterThanOrEqual(1);
    await verify();
    await verify();
    const after = await value("keyhaven_epoch_reads_total");
    if (h.onPostgres) expect(after).toBeGreaterThanOrEqual(reads + 2);
    else expect(after).toBe(reads);
  });
});

describe("GET /metrics with KEYHAVEN_METRICS_TOKEN", () => {
  const token = "metrics-token-0123456789";
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness({ KEYHAVEN_METRICS_TOKEN: token });
  });
  afterAll(() => h.close());

  it("answers only with the token", async () => {
    const missing = await h.get("/metrics", {});
    expectError(missing, 403, "UNAUTHORIZED", "metrics token required (KEYHAVEN_METRICS_TOKEN is set)");
    const t = await h.tenant();
    expectError(await h.get("/metrics", {}, t.rootKey), 403, "UNAUTHORIZED", "metrics token is not valid");
    const { res, series } = await scrape(h, { authorization: `Bearer ${token}` });
    expect(res.statusCode).toBe(200);
    expect(series.get("keyhaven_database_up")).toBe(1);
  });
});
