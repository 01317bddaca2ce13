import { describe, expect } from "vitest";
import { stopBackgroundJobs } from "../src/background.js";
import { ManualClock } from "../src/clock.js";
import { VerificationLogRetention } from "../src/core/verification/verification.logRetention.js";
import { openPostgres } from "../src/storage/client.js";
import { VerificationLog } from "../src/storage/verificationLog/verificationLog.recorder.js";
import { insertVerificationLogRows, type VerificationLogRow } from "../src/storage/verificationLog/verificationLog.repository.js";
import { harnessWith, testWith } from "./fixtures.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { freePort, waitFor } from "./wait.js";

// The raw verification log (issue 38 §2): a row per verification the analytics count, written in batches off the
// request (storage/verificationLog), pruned by age and per-workspace cap (core/verification/verification.logRetention.ts).

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const REGION = "test-region-1";

// Business time stands still in the middle of an hour, so that the counts of a test fall in one hour.
const clock = new ManualClock(Date.now() - (Date.now() % HOUR) + HOUR + 30 * 60_000);
const it = testWith(harnessWith({ KEYHAVEN_REGION: REGION }, { clock }));

type LogRow = {
  request_id: string;
  time_m: string;
  workspace_id: string;
  key_space_id: string;
  key_id: string;
  identity_id: string | null;
  external_id: string | null;
  outcome: string;
  tags: string[];
  spent_credits: string;
  latency: number;
  region: string;
};

const logOf = (h: Harness, where: string) =>
  h.sql<LogRow>(
    `select request_id, time_m::text as time_m, workspace_id, key_space_id, key_id, identity_id, external_id, outcome, tags,
       spent_credits::text as spent_credits, latency, region
     from key_verifications_log where ${where} order by time_m`,
  );
const countLog = async (h: Harness, where = "true") =>
  Number((await h.sql<{ n: string }>(`select count(*) as n from key_verifications_log where ${where}`))[0]!.n);

/** A v2 key with an identity (externalId) and `remaining` credits. */
async function v2Key(h: Harness, t: Tenant, apiId: string, externalId: string, remaining: number) {
  const res = await h.post("/v2/keys.createKey", { apiId, externalId, credits: { remaining } }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { key: string; keyId: string };
}

describe("the verification log: what each verification writes", () => {
  it("is written by the background flusher within about a second", async ({ h, t, apiId }) => {
    const { key, keyId } = await h.importKey(t, apiId);
    expect((await h.post("/v1/keys.verifyKey", { key })).body.code).toBe("VALID");
    await waitFor("the row written", async () => (await countLog(h, `key_id = '${keyId}'`)) === 1);
  });

  it("holds one row per verification of an existing key (v1 and v2), with its request id, time, key, identity, outcome, tags, credits, latency and region, and never the key", async ({
    h,
    t,
    apiId,
  }) => {
    // The flusher stopped (what is in memory is written), so that what follows waits for the flush below.
    await h.jobs.verificationLog.stop();
    const { key, keyId } = await v2Key(h, t, apiId, "customer_log", 3);
    const identityId = (await h.sql<{ identity_id: string }>(`select identity_id from keys where id = '${keyId}'`))[0]!.identity_id;
    const at = clock.now();

    const v1 = await h.post("/v1/keys.verifyKey", { key, tags: ["path=/a", "plan=pro"] });
    expect(v1.body).toMatchObject({ valid: true, code: "VALID", remaining: 2 });
    clock.advance(1);
    const v2 = await h.post("/v2/keys.verifyKey", { key, credits: { cost: 2 }, tags: ["path=/b"] }, t.rootKey);
    expect(v2.body.data).toMatchObject({ valid: true, code: "VALID", credits: 0 });
    clock.advance(1);
    const exceeded = await h.post("/v2/keys.verifyKey", { key }, t.rootKey);
    expect(exceeded.body.data).toMatchObject({ valid: false, code: "USAGE_EXCEEDED" });
    clock.advance(1);
    const forbidden = await h.post("/v1/keys.verifyKey", { key, apiId: "api_other" });
    expect(forbidden.body.code).toBe("FORBIDDEN");
    // An unknown key belongs to no workspace: neither counted nor logged.
    expect((await h.post("/v1/keys.verifyKey", { key: "sk_not_a_key_of_anyone" })).body.code).toBe("NOT_FOUND");

    expect(h.jobs.verificationLog.unwritten).toBe(4);
    expect(await countLog(h, `key_id = '${keyId}'`)).toBe(0);
    await h.jobs.verificationLog.flush();
    await h.jobs.analytics.flush();
    expect(h.jobs.verificationLog.unwritten).toBe(0);

    const rows = await logOf(h, `key_id = '${keyId}'`);
    const common = {
      workspace_id: t.workspaceId,
      key_space_id: apiId,
      key_id: keyId,
      identity_id: identityId,
      external_id: "customer_log",
      region: REGION,
    };
    expect(rows.map(({ latency: _, ...r }) => r)).toEqual(
      [
        { request_id: v1.body.requestId, time_m: String(at), outcome: "VALID", tags: ["path=/a", "plan=pro"], spent_credits: "1" },
        { request_id: v2.body.meta.requestId, time_m: String(at + 1), outcome: "VALID", tags: ["path=/b"], spent_credits: "2" },
        { request_id: exceeded.body.meta.requestId, time_m: String(at + 2), outcome: "USAGE_EXCEEDED", tags: [], spent_credits: "0" },
        { request_id: forbidden.body.requestId, time_m: String(at + 3), outcome: "FORBIDDEN", tags: [], spent_credits: "0" },
      ].map((r) => Object.assign({}, common, r)),
    );
    for (const r of rows) {
      expect(r.latency).toBeGreaterThan(0);
      expect(r.latency).toBeLessThan(60_000);
    }
    // The same population as the counts, which sum the same credits and latencies.
    const [counts] = await h.sql<{ n: number; credits: number; latency: number }>(
      `select sum(count)::int as n, sum(spent_credits)::int as credits, sum(latency_sum)::float8 as latency
       from verification_counts where key_id = '${keyId}'`,
    );
    expect(counts!.n).toBe(rows.length);
    expect(counts!.credits).toBe(3);
    expect(counts!.latency).toBeCloseTo(
      rows.reduce((sum, r) => sum + r.latency, 0),
      6,
    );
    const [valid] = await h.sql<{ credits: number }>(
      `select sum(spent_credits)::int as credits from verification_counts where key_id = '${keyId}' and outcome = 'VALID'`,
    );
    expect(valid!.credits).toBe(3);
    // Never the key, nor its hash.
    const [{ hash }] = (await h.sql<{ hash: string }>(`select hash from keys where id = '${keyId}'`)) as [{ hash: string }];
    const dump = (await h.sql<{ row: string }>("select row_to_json(l)::text as row from key_verifications_log l"))
      .map((r) => r.row)
      .join("\n");
    expect(dump).not.toContain(key);
    expect(dump).not.toContain(hash);
    h.jobs.verificationLog.start();
  });

  it("counts in /metrics what it could not keep (none here)", async ({ h }) => {
    const metrics = await h.app.inject({ method: "GET", url: "/metrics" });
    expect(metrics.body).toMatch(/^keyhaven_verification_log_dropped_total 0$/m);
  });

  it("keeps at most maxPendingRows rows while the database is unreachable, puts a failed batch back, and logs the drop once", async () => {
    // A port nothing listens on: every write fails at once, as with a database that is down.
    const down = openPostgres(`postgres://postgres@127.0.0.1:${await freePort()}/none`, 1);
    const warnings: unknown[] = [];
    const log = new VerificationLog(down.db, { enabled: true, region: REGION, rowsPerStatement: 2, maxPendingRows: 3 });
    // Its logger set, and its timer stopped again (nothing to write yet), so that only the flushes below run.
    log.start({ warn: (obj) => warnings.push(obj), error: () => {} });
    await log.stop();
    try {
      for (let i = 0; i < 5; i++) log.record(rowOf("ws_down", `key_${i}`, i));
      expect(log.unwritten).toBe(3);
      expect(log.dropped).toBe(2);
      await expect(log.flush()).rejects.toThrow();
      expect(log.unwritten).toBe(3);
      log.record(rowOf("ws_down", "key_more", 9));
      expect(log.dropped).toBe(3);
      expect(warnings).toHaveLength(1);
    } finally {
      await log.stop().catch(() => {});
      await down.close();
    }
  });
});

/** A row of the log as the flusher writes it, at `timeM`. */
function rowOf(workspaceId: string, keyId: string, timeM: number): VerificationLogRow {
  return {
    requestId: `req_${workspaceId}_${timeM}`,
    timeM,
    workspaceId,
    keySpaceId: "api_x",
    keyId,
    identityId: null,
    externalId: null,
    outcome: "VALID",
    tags: undefined,
    spentCredits: 0,
    latency: 0.5,
  };
}

describe("the verification log: retention and the cap per workspace", () => {
  it("deletes rows older than the retention and a workspace's oldest beyond its cap, in bounded passes, and nothing else", async ({
    h,
    t,
  }) => {
    const now = clock.now();
    const others = await logOf(h, `workspace_id = '${t.workspaceId}'`);
    const cutoff = now - 7 * DAY;
    const times = (n: number, from: number) => Array.from({ length: n }, (_, i) => from + i);
    // ws_ret_a: 5 rows past the retention (the newest one ms before the cutoff), 4 within it (the oldest at it).
    // ws_ret_b: 10 rows within the retention, 4 beyond the cap of 6. ws_ret_c: 2 rows, nothing to delete.
    const rows = [
      ...times(5, cutoff - 5).map((tm) => rowOf("ws_ret_a", "key_a", tm)),
      ...times(4, cutoff).map((tm) => rowOf("ws_ret_a", "key_a", tm)),
      ...times(10, now - 100).map((tm) => rowOf("ws_ret_b", `key_b${tm % 2}`, tm)),
      ...times(2, now - 50).map((tm) => rowOf("ws_ret_c", "key_c", tm)),
      // ws_ret_d: 9 rows of one millisecond, 3 beyond the cap however the walk meets them.
      ...Array.from({ length: 9 }, () => rowOf("ws_ret_d", "key_d", now - 10)),
    ];
    await insertVerificationLogRows(h.db, rows, REGION);
    const timesOf = async (ws: string) =>
      (await h.sql<{ t: string }>(`select time_m::text as t from key_verifications_log where workspace_id = '${ws}' order by 1`)).map((r) =>
        Number(r.t),
      );

    // Statements of 2 rows, 2 per pass: several passes, each resuming where the last stopped; the cap found 3 rows at a time.
    const retention = new VerificationLogRetention(h.db, clock, {
      days: 7,
      maxRowsPerWorkspace: 6,
      batchRows: 2,
      maxBatches: 2,
      readChunk: 3,
    });
    let expired = 0;
    let beyondCap = 0;
    // Some fifteen statements' work: ten passes of two are enough, and a pass cut short may have deleted nothing yet.
    for (let pass = 0; pass < 10; pass++) {
      const deleted = await retention.pruneNow();
      expired += deleted.expired;
      beyondCap += deleted.beyondCap;
    }
    expect({ expired, beyondCap }).toEqual({ expired: 5, beyondCap: 7 });
    expect(await timesOf("ws_ret_a")).toEqual(times(4, cutoff));
    expect(await timesOf("ws_ret_b")).toEqual(times(6, now - 96));
    expect(await timesOf("ws_ret_c")).toEqual(times(2, now - 50));
    expect(await timesOf("ws_ret_d")).toEqual(Array(6).fill(now - 10));
    expect(await logOf(h, `workspace_id = '${t.workspaceId}'`)).toEqual(others);
    // A pass with statements enough finds nothing more to delete.
    const whole = new VerificationLogRetention(h.db, clock, { days: 7, maxRowsPerWorkspace: 6 });
    expect(await whole.pruneNow()).toEqual({ expired: 0, beyondCap: 0 });
    await h.sql("delete from key_verifications_log where workspace_id like 'ws\\_ret\\_%'");
  });
});

describe("the verification log: off", () => {
  for (const [what, env] of [
    ["KEYHAVEN_VERIFICATION_LOG_DAYS=0", { KEYHAVEN_VERIFICATION_LOG_DAYS: "0" }],
    ["KEYHAVEN_ANALYTICS=off", { KEYHAVEN_ANALYTICS: "off" }],
  ] as const) {
    it(`writes nothing with ${what}`, async () => {
      const harness = await createHarness(env);
      try {
        expect(harness.config.verificationLogDays).toBe(0);
        const tenant = await harness.tenant();
        const api = await harness.createApi(tenant);
        const { key } = await harness.importKey(tenant, api);
        for (let i = 0; i < 3; i++) expect((await harness.post("/v1/keys.verifyKey", { key, tags: ["a"] })).body.code).toBe("VALID");
        expect(harness.jobs.verificationLog.unwritten).toBe(0);
        await stopBackgroundJobs(harness.jobs);
        expect(await countLog(harness)).toBe(0);
        // The counts are the analytics' own: kept unless analytics are off.
        const [{ n }] = (await harness.sql<{ n: number }>("select coalesce(sum(count), 0)::int as n from verification_counts")) as [
          { n: number },
        ];
        expect(n).toBe(what === "KEYHAVEN_ANALYTICS=off" ? 0 : 3);
      } finally {
        await harness.close();
      }
    });
  }
});
