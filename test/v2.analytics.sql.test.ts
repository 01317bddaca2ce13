import { sql } from "drizzle-orm";
import { describe, expect } from "vitest";
import { ManualClock } from "../src/clock.js";
import { parseAnalyticsQuery } from "../src/core/analytics/analytics.sql.parse.js";
import { translateAnalyticsQuery } from "../src/core/analytics/analytics.sql.translate.js";
import { findDependencyFailure } from "../src/storage/dependency.js";
import { insertCountRows, insertLogRows } from "./analytics-sql-tables.js";
import { harnessWith, testWith } from "./fixtures.js";
import { logCapture } from "./log-capture.js";
import { expectV2Error } from "./v2-errors.js";

// v2 analytics.getVerifications' SQL (issue 38 §2, contract §10): what the translator allows and answers, what it
// refuses with which error, and that no query, however hostile, reads another workspace's rows.

const NOW = Date.UTC(2026, 5, 15, 12, 30);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const clock = new ManualClock(NOW);
const test = testWith(
  harnessWith({ KEYHAVEN_ANALYTICS_RETENTION_DAYS: "30", KEYHAVEN_VERIFICATION_LOG_DAYS: "7" }, { clock }, async (h) => {
    // Nothing but the rows these tests write: the flushers would add the tests' own verifications.
    await h.jobs.verificationLog.stop();
  }),
).extend("seeded", { scope: "file" }, async ({ h, t, apiId }) => {
  const other = await h.tenant();
  const otherApi = await h.createApi(other);
  const secondApi = await h.createApi(t);
  const mine = (i: number, fields: Partial<Parameters<typeof insertLogRows>[1][number]> = {}) => ({
    requestId: `req_mine_${i}`,
    timeM: NOW - i * HOUR,
    workspaceId: t.workspaceId,
    apiId,
    keyId: i % 2 === 0 ? "key_mine_even" : "key_mine_odd",
    outcome: i % 3 === 0 ? "RATE_LIMITED" : "VALID",
    tags: i % 2 === 0 ? ["path=/a", "region=eu"] : ["path=/b"],
    spentCredits: 1,
    latency: i,
    ...fields,
  });
  await insertLogRows(h, [
    ...Array.from({ length: 6 }, (_, i) => mine(i + 1)),
    mine(7, { apiId: secondApi, keyId: "key_mine_second_api" }),
    // Older than the log's 7 days: never answered.
    mine(8, { timeM: NOW - 8 * DAY }),
    {
      requestId: "req_theirs",
      timeM: NOW - HOUR,
      workspaceId: other.workspaceId,
      apiId: otherApi,
      keyId: "key_THEIRS_secret",
      outcome: "VALID",
      tags: ["THEIR_TAG"],
    },
  ]);
  const hour = NOW - (NOW % HOUR);
  await insertCountRows(h, [
    {
      keyId: "key_mine_even",
      hourM: hour - HOUR,
      outcome: "VALID",
      workspaceId: t.workspaceId,
      apiId,
      count: 5,
      spentCredits: 5,
      latencySum: 10,
    },
    { keyId: "key_mine_odd", hourM: hour - 2 * DAY, outcome: "RATE_LIMITED", workspaceId: t.workspaceId, apiId, count: 2, latencySum: 4 },
    // Older than the counts' 30 days.
    { keyId: "key_mine_even", hourM: hour - 40 * DAY, outcome: "VALID", workspaceId: t.workspaceId, apiId, count: 100 },
    { keyId: "key_THEIRS_secret", hourM: hour - HOUR, outcome: "VALID", workspaceId: other.workspaceId, apiId: otherApi, count: 1000 },
  ]);
  return { other, otherApi, secondApi };
});

const run = (h: any, rootKey: string, query: string) => h.post("/v2/analytics.getVerifications", { query }, rootKey);

async function rows(h: any, rootKey: string, query: string): Promise<any[]> {
  const res = await run(h, rootKey, query);
  expect(res.status, `${query}\n${JSON.stringify(res.body)}`).toBe(200);
  return res.body.data;
}

describe("the supported subset", () => {
  test("every construct of the subset runs on the store and answers rows", async ({ h, t, seeded }) => {
    expect(seeded).toBeDefined();
    const queries = [
      "SELECT count(*) AS n FROM key_verifications_v1",
      "SELECT count() FROM key_verifications_v1 WHERE time >= now() - INTERVAL 7 DAY",
      "SELECT key_id, count(*) AS c FROM key_verifications_v1 GROUP BY key_id HAVING c > 0 ORDER BY c DESC, key_id LIMIT 10 OFFSET 0",
      "SELECT outcome, countIf(outcome = 'VALID') AS ok, sumIf(spent_credits, outcome != 'VALID') AS s FROM key_verifications_v1 GROUP BY outcome",
      "SELECT round(avg(latency), 2), min(latency), max(latency), sum(spent_credits) FROM key_verifications_v1",
      "SELECT uniq(key_id), uniqExact(key_id), groupArray(request_id) FROM key_verifications_v1",
      "SELECT toStartOfHour(fromUnixTimestamp64Milli(time)) AS h, count(*) FROM key_verifications_v1 GROUP BY h ORDER BY h",
      "SELECT toDate(time), toStartOfMinute(time), toStartOfDay(time), toStartOfWeek(time), toStartOfMonth(time), toStartOfYear(time), toUnixTimestamp(now()), today() FROM key_verifications_v1 LIMIT 1",
      "SELECT arrayJoin(tags) AS tag, count(*) FROM key_verifications_v1 GROUP BY tag ORDER BY tag",
      "SELECT count(*) FROM key_verifications_v1 WHERE has(tags, 'path=/a') AND hasAny(tags, ['x', 'path=/b']) OR hasAll(tags, ['path=/a', 'region=eu'])",
      "SELECT arrayFilter(x -> startsWith(x, 'path'), tags) AS paths, length(tags) FROM key_verifications_v1",
      "SELECT count(*) FROM key_verifications_v1 WHERE outcome IN ('VALID', 'RATE_LIMITED') AND latency BETWEEN 1 AND 5 AND NOT (key_id = 'x')",
      "WITH a AS (SELECT key_id, count(*) AS c FROM key_verifications_v1 GROUP BY key_id), b AS (SELECT key_id, sum(count) AS d FROM key_verifications_per_hour_v1 GROUP BY key_id) SELECT a.key_id, a.c, b.d FROM a LEFT JOIN b ON a.key_id = b.key_id ORDER BY a.key_id",
      "SELECT 'raw' AS src, count(*) AS n FROM key_verifications_v1 UNION ALL SELECT 'hour', sum(count) FROM key_verifications_per_hour_v1",
      "SELECT * FROM (SELECT key_id, count(*) AS c FROM key_verifications_v1 GROUP BY key_id) AS s WHERE s.c > 1",
      "SELECT time, count, latency_avg, latency_p75, latency_p99 FROM key_verifications_per_minute_v1 ORDER BY time",
      "SELECT time, sum(count) FROM key_verifications_per_day_v1 WHERE time >= now() - INTERVAL 7 DAY GROUP BY time",
      "SELECT time, sum(count), sum(spent_credits), avg(latency_avg) FROM key_verifications_per_month_v1 GROUP BY time",
      "SELECT count(*) / 0, 7 % 2, 1.5 * 2, -max(latency) FROM key_verifications_v1",
      "SELECT * FROM key_verifications_v1 LIMIT 1",
    ];
    for (const query of queries) await rows(h, t.rootKey, query);
  });

  test("answers numbers as numbers, times as RFC 3339, and a division by zero as null", async ({ h, t, seeded }) => {
    expect(seeded).toBeDefined();
    const [row] = await rows(
      h,
      t.rootKey,
      "SELECT count(*) AS n, count(*) / 0 AS inf, avg(latency) AS a, toStartOfDay(max(time)) AS d FROM key_verifications_v1 WHERE key_id = 'key_mine_even'",
    );
    expect(row).toEqual({ n: 3, inf: null, a: 4, d: "2026-06-15T00:00:00Z" });
  });

  test("`time` compares with now() - INTERVAL on the raw table (unix ms) and on the rollups (bucket start)", async ({ h, t, seeded }) => {
    expect(seeded).toBeDefined();
    expect(await rows(h, t.rootKey, "SELECT count(*) AS n FROM key_verifications_v1 WHERE time >= now() - INTERVAL 3 HOUR")).toEqual([
      { n: 3 },
    ]);
    expect(
      await rows(h, t.rootKey, "SELECT sum(count) AS n FROM key_verifications_per_hour_v1 WHERE time >= now() - INTERVAL 1 DAY"),
    ).toEqual([{ n: 5 }]);
    expect(await rows(h, t.rootKey, "SELECT sum(count) AS n FROM key_verifications_per_day_v1 WHERE time < today()")).toEqual([{ n: 2 }]);
  });

  test("reads only rows within retention when the query has no time filter", async ({ h, t, seeded }) => {
    expect(seeded).toBeDefined();
    expect(await rows(h, t.rootKey, "SELECT count(*) AS n FROM key_verifications_v1")).toEqual([{ n: 7 }]);
    expect(await rows(h, t.rootKey, "SELECT sum(count) AS n FROM key_verifications_per_month_v1")).toEqual([{ n: 7 }]);
  });

  test("caps the rows at 10,000 and adds the limit when there is none", () => {
    const sql = (query: string) =>
      parseAnalyticsQuery(query).then(
        (s) =>
          translateAnalyticsQuery(s, {
            workspaceId: "ws",
            keySpaceIds: undefined,
            nowMs: NOW,
            logRetentionDays: 7,
            aggregateRetentionDays: 30,
            maxRows: 10_000,
          }).sql,
      );
    return Promise.all([
      expect(sql("SELECT key_id FROM key_verifications_v1")).resolves.toMatch(/ limit 10000$/),
      expect(sql("SELECT key_id FROM key_verifications_v1 LIMIT 50000")).resolves.toMatch(/ limit 10000$/),
      expect(sql("SELECT key_id FROM key_verifications_v1 LIMIT 5")).resolves.toMatch(/ limit 5$/),
    ]);
  });
});

describe("refusals", () => {
  const invalid = "user/bad_request/invalid_analytics_query";
  const cases: [string, number, string, string | RegExp][] = [
    ["", 400, invalid, "No SQL statements found"],
    ["-- only a comment", 400, invalid, "No SQL statements found"],
    ["SELEC count(*) FROM key_verifications_v1", 400, invalid, /^Invalid SQL syntax: /],
    ["SELECT 1; SELECT 2", 400, invalid, "Analytics queries must contain exactly one statement"],
    [`SELECT ${"1 + ".repeat(5000)}1`, 400, invalid, /^Analytics query exceeds the maximum length/],
    [`SELECT ${"(".repeat(600)}1${")".repeat(600)}`, 400, invalid, /^Analytics query is too complex/],
    [
      `SELECT ${Array.from({ length: 700 }, (_, i) => `a${i}`).join(", ")} FROM key_verifications_v1`,
      400,
      invalid,
      /^Analytics query is too complex/,
    ],
    [
      `SELECT ${Array.from({ length: 65 }, () => "key_id").join(", ")} FROM key_verifications_v1`,
      400,
      invalid,
      "Analytics query selects more than 64 columns",
    ],
    ["SELECT nope FROM key_verifications_v1", 400, invalid, "Unknown column 'nope' in table 'key_verifications_v1'"],
    [
      "SELECT latency_p75 FROM key_verifications_per_hour_v1",
      400,
      invalid,
      /^Column 'latency_p75' is not available in table 'key_verifications_per_hour_v1'/,
    ],
    [
      "SELECT latency_p99 FROM key_verifications_per_day_v1",
      400,
      invalid,
      /^Column 'latency_p99' is not available in table 'key_verifications_per_day_v1'/,
    ],
    ["SELECT count(*) FROM key_verifications_v1 SETTINGS max_threads = 1", 400, invalid, "Unsupported SQL: SETTINGS"],
    ["SELECT * FROM users", 400, "user/bad_request/invalid_analytics_table", "Access to table 'users' is not allowed"],
    ["SELECT * FROM system.tables", 400, "user/bad_request/invalid_analytics_table", "Access to table 'system.tables' is not allowed"],
    [
      "SELECT * FROM url('http://example.com', CSV)",
      400,
      "user/bad_request/invalid_analytics_table",
      "Access to table 'url' is not allowed",
    ],
    [
      "SELECT * FROM key_verifications_log",
      400,
      "user/bad_request/invalid_analytics_table",
      "Access to table 'key_verifications_log' is not allowed",
    ],
    ["SELECT sleep(3) FROM key_verifications_v1", 400, "user/bad_request/invalid_analytics_function", "Function 'sleep' is not allowed"],
    [
      "SELECT upper(key_id) FROM key_verifications_v1",
      400,
      "user/bad_request/invalid_analytics_function",
      "Function 'upper' is not allowed",
    ],
    ["SELECT currentUser()", 400, "user/bad_request/invalid_analytics_function", "Function 'currentUser' is not allowed"],
    [
      "INSERT INTO key_verifications_v1 VALUES (1)",
      400,
      "user/bad_request/invalid_analytics_query_type",
      "Only SELECT queries are allowed",
    ],
    ["DROP TABLE key_verifications_v1", 400, "user/bad_request/invalid_analytics_query_type", "Only SELECT queries are allowed"],
    [
      "SELECT * FROM key_verifications_v1 INTO OUTFILE '/tmp/x'",
      400,
      "user/bad_request/invalid_analytics_query_type",
      "Only SELECT queries are allowed",
    ],
    [
      "SELECT count(*) FROM key_verifications_v1 WHERE time >= now() - INTERVAL 8 DAY",
      400,
      "user/bad_request/query_range_exceeds_retention",
      /^Cannot query data older than 7 days\. /,
    ],
    [
      "SELECT sum(count) FROM key_verifications_per_day_v1 WHERE time BETWEEN now() - INTERVAL 60 DAY AND now()",
      400,
      "user/bad_request/query_range_exceeds_retention",
      /^Cannot query data older than 30 days\. /,
    ],
    [
      "SELECT count(*) FROM key_verifications_per_minute_v1 WHERE time > '2020-01-01 00:00:00'",
      400,
      "user/bad_request/query_range_exceeds_retention",
      /^Cannot query data older than 7 days\. /,
    ],
    ["SELECT key_id, count(*) FROM key_verifications_v1", 400, invalid, /^The query could not be run: /],
  ];

  test("each refusal has its error type and words", async ({ h, t }) => {
    for (const [query, status, type, detail] of cases) {
      const res = await run(h, t.rootKey, query);
      expectV2Error(res, status, type, detail);
      expect(res.body.error.title).toBe("Bad Request");
      expect(res.body.error.errors).toEqual([]);
    }
  });

  test("the read_analytics check comes before the query is looked at", async ({ h, t }) => {
    const key = await h.rootKey(t.workspaceId, ["api.*.read_api"]);
    expectV2Error(
      await run(h, key, "SELECT sleep(3)"),
      403,
      "unkey/authorization/insufficient_permissions",
      "Missing permission: 'api.*.read_analytics'",
    );
  });
});

describe("no query reads another workspace's rows", () => {
  const hostile = [
    "SELECT * FROM key_verifications_v1 WHERE workspace_id = 'ws_other' OR 1=1",
    "SELECT * FROM key_verifications_v1 WHERE 1=1 OR workspace_id != ''",
    "SELECT * FROM key_verifications_v1 -- ' OR 1=1\n",
    "SELECT * FROM key_verifications_v1 /* */ WHERE key_id = '' OR '1'='1'",
    "SELECT * FROM key_verifications_v1 WHERE key_id = 'x'' OR ''1''=''1'",
    "SELECT * FROM key_verifications_v1 WHERE key_id = 'x\\' OR 1=1 --'",
    "SELECT key_id FROM key_verifications_v1 UNION ALL SELECT key_id FROM key_verifications_per_hour_v1 WHERE workspace_id <> ''",
    "SELECT * FROM (SELECT * FROM key_verifications_v1) AS key_verifications_log",
    "WITH key_verifications_v1 AS (SELECT * FROM key_verifications_v1) SELECT * FROM key_verifications_v1",
    "SELECT a.key_id, b.key_id FROM key_verifications_v1 AS a JOIN key_verifications_per_hour_v1 AS b ON a.workspace_id != b.workspace_id OR true",
    "SELECT groupArray(key_id), groupArray(workspace_id) FROM key_verifications_per_day_v1",
    "SELECT key_id FROM key_verifications_v1 WHERE key_id IN (SELECT key_id FROM key_verifications_v1)",
    "SELECT * FROM key_verifications_v1 FINAL",
    "SELECT * FROM key_verifications_v1 SETTINGS additional_table_filters = {'key_verifications_v1': 'true'}",
    "SELECT * FROM merge('default', '.*')",
    "SELECT * FROM remote('localhost', default.key_verifications_raw_v2)",
    "SELECT * FROM default.key_verifications_raw_v2",
    "SELECT 1; SELECT * FROM verification_counts",
    "SELECT * FROM verification_counts",
    "SELECT * FROM key_verifications_v1 WHERE arrayJoin(tags) = 'THEIR_TAG'",
    // A condition that fails on a value, whose error would name it: it must never see another workspace's rows.
    "SELECT count(*) FROM key_verifications_v1 WHERE toUnixTimestamp(key_id) > 0",
    "SELECT count(*) FROM key_verifications_v1 WHERE toUnixTimestamp(arrayJoin(tags)) > 0",
    "SELECT count(*) FROM key_verifications_per_hour_v1 WHERE toDate(key_id) > now()",
  ];

  test("hostile queries answer an error or only the caller's rows", async ({ h, t, seeded }) => {
    for (const query of hostile) {
      const res = await run(h, t.rootKey, query);
      const text = JSON.stringify(res.body);
      expect(text, query).not.toContain("THEIRS");
      expect(text, query).not.toContain("THEIR_TAG");
      expect(text, query).not.toContain(seeded.other.workspaceId);
      expect(text, query).not.toContain(seeded.otherApi);
      expect([200, 400], query).toContain(res.status);
    }
  });

  test("an OR around the caller's own filter still counts only the caller's rows", async ({ h, t, seeded }) => {
    expect(
      await rows(
        h,
        t.rootKey,
        `SELECT count(*) AS n FROM key_verifications_v1 WHERE workspace_id = '${seeded.other.workspaceId}' OR 1 = 1`,
      ),
    ).toEqual([{ n: 7 }]);
    expect(
      await rows(h, seeded.other.rootKey, "SELECT count(*) AS n FROM key_verifications_v1 WHERE workspace_id = 'anything' OR 1 = 1"),
    ).toEqual([{ n: 1 }]);
  });

  test("a root key with read_analytics on one API reads only that API's rows", async ({ h, t, apiId, seeded }) => {
    const one = await h.rootKey(t.workspaceId, [`api.${seeded.secondApi}.read_analytics`]);
    expect(await rows(h, one, "SELECT key_id, count(*) AS n FROM key_verifications_v1 GROUP BY key_id")).toEqual([
      { key_id: "key_mine_second_api", n: 1 },
    ]);
    expect(await rows(h, one, "SELECT sum(count) AS n FROM key_verifications_per_hour_v1")).toEqual([{ n: 0 }]);
    const both = await h.rootKey(t.workspaceId, [`api.${seeded.secondApi}.read_analytics`, `api.${apiId}.read_analytics`]);
    expect(await rows(h, both, "SELECT count(*) AS n FROM key_verifications_v1")).toEqual([{ n: 7 }]);
    const none = await h.rootKey(t.workspaceId, ["api.api_does_not_exist.read_analytics"]);
    expect(await rows(h, none, "SELECT count(*) AS n FROM key_verifications_v1")).toEqual([{ n: 0 }]);
  });
});

const off = testWith(harnessWith({ KEYHAVEN_ANALYTICS: "off" }));
describe("without analytics", () => {
  off("KEYHAVEN_ANALYTICS=off answers 412 analytics_not_configured after the permission check", async ({ h, t }) => {
    expectV2Error(
      await run(h, t.rootKey, "SELECT count(*) FROM key_verifications_v1"),
      412,
      "unkey/data/analytics_not_configured",
      "Analytics are not configured for this instance",
    );
    const key = await h.rootKey(t.workspaceId, ["api.*.read_api"]);
    expectV2Error(await run(h, key, "SELECT 1"), 403, "unkey/authorization/insufficient_permissions");
  });
});

// PostgreSQL cancels the query at its statement timeout (DATABASE_STATEMENT_TIMEOUT_MS − 1 s, here 0.5 s); PGlite,
// whose statement_timeout cannot interrupt a statement on keyhaven's own thread, refuses it by its planned cost.
const logs = logCapture();
const bounded = testWith(harnessWith({ DATABASE_STATEMENT_TIMEOUT_MS: "1500" }, { logger: logs.logger }));
const HEAVY = "SELECT count(*) FROM key_verifications_v1 AS a CROSS JOIN key_verifications_v1 AS b CROSS JOIN key_verifications_v1 AS c";
describe("bounded work", () => {
  // On PGlite, refused by its planned cost: the log's events are planned as 1,000 a chunk (migration 0023's
  // keyhaven_chunk_events), so three of the log cross joined are planned as what they would cost.
  bounded("a query too heavy to answer is 422 query_execution_timeout, and the store serves the next one", async ({ h, t, apiId }) => {
    await insertLogRows(
      h,
      Array.from({ length: 2000 }, (_, i) => ({
        requestId: `req_${i}`,
        timeM: h.clock.now() - i * 1000,
        workspaceId: t.workspaceId,
        apiId,
        keyId: `key_${i % 10}`,
        outcome: "VALID",
      })),
    );
    const other = await h.tenant();
    const { key } = await h.importKey(other, await h.createApi(other));
    logs.clear();
    // Another tenant's requests while the heavy query runs (on PostgreSQL, side by side on the pool).
    const [res, theirs, theirVerification] = await Promise.all([
      run(h, t.rootKey, HEAVY),
      run(h, other.rootKey, "SELECT count(*) AS n FROM key_verifications_v1"),
      h.post("/v2/keys.verifyKey", { key }, other.rootKey),
    ]);
    expectV2Error(res, 422, "user/unprocessable_entity/query_execution_timeout", /^The query ran longer than 0\.5 seconds\./);
    expect(res.body.error.title).toBe("Unprocessable Entity");
    expect(theirs.status, JSON.stringify(theirs.body)).toBe(200);
    expect(theirVerification.status, JSON.stringify(theirVerification.body)).toBe(200);
    expect(theirVerification.body.data.valid).toBe(true);
    // One tenant's query was too heavy: PostgreSQL itself served throughout, and is never logged (nor held) down.
    expect(logs.count("PostgreSQL unreachable")).toBe(0);
    expect(logs.count("PostgreSQL reachable again")).toBe(0);
    expect(h.store.state.isDown).toBe(false);
    expect(await rows(h, t.rootKey, "SELECT count(*) AS n FROM key_verifications_v1")).toEqual([{ n: 2000 }]);
    expect((await h.get("/v1/liveness", {})).status).toBe(200);
  });

  // The store's own deadline (DATABASE_STATEMENT_TIMEOUT_MS) cancelling any other statement is still PostgreSQL
  // failing to serve: 503 for the request, logged once. (PGlite's statement_timeout cannot interrupt a statement.)
  bounded.runIf(process.env.TEST_DATABASE_URL)("a statement past the store's own statement timeout is still an outage", async ({ h }) => {
    logs.clear();
    const err = await h.db.execute(sql.raw("select pg_sleep(5)")).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(findDependencyFailure(err)?.publicMessage).toBe("PostgreSQL is unreachable");
    expect(logs.count("PostgreSQL unreachable")).toBe(1);
    await h.db.execute(sql.raw("select 1"));
    expect(logs.count("PostgreSQL reachable again")).toBe(1);
  });
});
