import { describe, expect } from "vitest";
import { ManualClock } from "../src/clock.js";
import { harnessWith, testWith } from "./fixtures.js";

// The questions people ask v2 analytics.getVerifications (issue 38 §2): verifications made through v2 keys.verifyKey
// (tags, credits, identities, outcomes, two months), then the usage queries of a dashboard and of billing, each
// checked against what this test counted itself.

const JUNE = Date.UTC(2026, 5, 15, 10, 0);
const MAY = Date.UTC(2026, 4, 20, 10, 0);
const clock = new ManualClock(MAY);

type Made = { keyId: string; externalId: string; code: string; spent: number; tags: string[]; month: "may" | "june" };

const test = testWith(harnessWith({ KEYHAVEN_ANALYTICS_RETENTION_DAYS: "90", KEYHAVEN_VERIFICATION_LOG_DAYS: "7" }, { clock })).extend(
  "made",
  { scope: "file" },
  async ({ h, t, apiId }) => {
    const create = async (body: Record<string, unknown>) => {
      const res = await h.post("/v2/keys.createKey", { apiId, ...body }, t.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.data as { key: string; keyId: string };
    };
    const acme = await create({ externalId: "acme", credits: { remaining: 100 } });
    const globex = await create({ externalId: "globex", credits: { remaining: 3 } });
    const free = await create({});
    const made: Made[] = [];
    const verify = async (
      k: { key: string; keyId: string },
      externalId: string,
      month: Made["month"],
      tags: string[] = [],
      cost?: number,
    ) => {
      const res = await h.post(
        "/v2/keys.verifyKey",
        { key: k.key, ...(tags.length > 0 && { tags }), ...(cost !== undefined && { credits: { cost } }) },
        t.rootKey,
      );
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const code = res.body.data.code as string;
      const spent = code === "VALID" && k !== free ? (cost ?? 1) : 0;
      made.push({ keyId: k.keyId, externalId, code, spent, tags, month });
    };

    for (let i = 0; i < 3; i++) await verify(acme, "acme", "may", ["plan=pro"]);
    await verify(globex, "globex", "may");
    await h.jobs.analytics.flush();
    await h.jobs.verificationLog.flush();

    clock.set(JUNE);
    for (let i = 0; i < 5; i++) await verify(acme, "acme", "june", ["path=/a", "plan=pro"], 2);
    for (let i = 0; i < 2; i++) await verify(acme, "acme", "june", ["path=/b"]);
    // globex has 2 credits left: 2 VALID, then USAGE_EXCEEDED.
    for (let i = 0; i < 4; i++) await verify(globex, "globex", "june", ["path=/a"]);
    clock.set(JUNE + 90 * 60_000);
    for (let i = 0; i < 3; i++) await verify(free, "", "june");
    await h.jobs.analytics.flush();
    await h.jobs.verificationLog.flush();
    clock.set(JUNE + 2 * 3_600_000);
    return { made, acme, globex, free };
  },
);

async function query(h: any, rootKey: string, sql: string): Promise<any[]> {
  const res = await h.post("/v2/analytics.getVerifications", { query: sql }, rootKey);
  expect(res.status, `${sql}\n${JSON.stringify(res.body)}`).toBe(200);
  return res.body.data;
}

const countBy = <T>(items: T[], key: (item: T) => string) => {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
};
const sorted = (m: Map<string, number>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

describe("usage queries over verifications made through the API", () => {
  test("the verifications made what this suite expects (so the numbers below test something)", ({ made }) => {
    const june = made.made.filter((m) => m.month === "june");
    expect(june.filter((m) => m.code === "USAGE_EXCEEDED")).toHaveLength(2);
    expect(made.made).toHaveLength(18);
  });

  test("daily counts: from the raw log (within its 7 days) and from the day rollup (within 90)", async ({ h, t, made }) => {
    const june = made.made.filter((m) => m.month === "june");
    expect(
      await query(
        h,
        t.rootKey,
        "SELECT toStartOfDay(fromUnixTimestamp64Milli(time)) AS day, count(*) AS total FROM key_verifications_v1 WHERE time >= now() - INTERVAL 7 DAY GROUP BY day ORDER BY day",
      ),
    ).toEqual([{ day: "2026-06-15T00:00:00Z", total: june.length }]);
    expect(
      await query(
        h,
        t.rootKey,
        "SELECT time AS day, sum(count) AS total FROM key_verifications_per_day_v1 WHERE time >= now() - INTERVAL 60 DAY GROUP BY day ORDER BY day",
      ),
    ).toEqual([
      { day: "2026-05-20T00:00:00Z", total: made.made.length - june.length },
      { day: "2026-06-15T00:00:00Z", total: june.length },
    ]);
  });

  test("outcome breakdown per hour bucket", async ({ h, t, made }) => {
    const expected = sorted(countBy(made.made, (m) => m.code)).map(([outcome, n]) => ({ outcome, n }));
    expect(
      await query(h, t.rootKey, "SELECT outcome, sum(count) AS n FROM key_verifications_per_hour_v1 GROUP BY outcome ORDER BY outcome"),
    ).toEqual(expected);
  });

  test("billing: credits spent and valid verifications per identity and per key this month", async ({ h, t, made }) => {
    const june = made.made.filter((m) => m.month === "june" && m.externalId !== "");
    const byIdentity = [...new Set(june.map((m) => m.externalId))].sort().map((externalId) => ({
      external_id: externalId,
      credits: june.filter((m) => m.externalId === externalId).reduce((s, m) => s + m.spent, 0),
      valid: june.filter((m) => m.externalId === externalId && m.code === "VALID").length,
    }));
    expect(
      await query(
        h,
        t.rootKey,
        "SELECT external_id, sum(spent_credits) AS credits, countIf(outcome = 'VALID') AS valid FROM key_verifications_v1 WHERE external_id != '' GROUP BY external_id ORDER BY external_id",
      ),
    ).toEqual(byIdentity);
    const monthly = sorted(
      countBy(
        made.made.filter((m) => m.month === "june" && m.code === "VALID"),
        (m) => m.keyId,
      ),
    ).map(([key_id, billable]) => ({
      key_id,
      billable,
    }));
    expect(
      await query(
        h,
        t.rootKey,
        "SELECT key_id, sumIf(count, outcome = 'VALID') AS billable, sum(spent_credits) AS spent FROM key_verifications_per_month_v1 WHERE time >= toStartOfMonth(now()) GROUP BY key_id ORDER BY key_id",
      ).then((rows) => rows.map(({ key_id, billable }) => ({ key_id, billable }))),
    ).toEqual(monthly);
  });

  test("error rate per key, top keys, and a tag breakdown", async ({ h, t, made }) => {
    const june = made.made.filter((m) => m.month === "june");
    const keys = [...new Set(june.map((m) => m.keyId))].sort();
    expect(
      await query(
        h,
        t.rootKey,
        "SELECT key_id, round(countIf(outcome != 'VALID') / count(*), 4) AS error_rate FROM key_verifications_v1 GROUP BY key_id ORDER BY key_id",
      ),
    ).toEqual(
      keys.map((key_id) => {
        const of = june.filter((m) => m.keyId === key_id);
        return { key_id, error_rate: Math.round((of.filter((m) => m.code !== "VALID").length / of.length) * 10_000) / 10_000 };
      }),
    );
    const top = [...countBy(made.made, (m) => m.keyId).entries()].sort(([, a], [, b]) => b - a).slice(0, 2);
    expect(
      await query(h, t.rootKey, "SELECT key_id, sum(count) AS n FROM key_verifications_per_day_v1 GROUP BY key_id ORDER BY n DESC LIMIT 2"),
    ).toEqual(top.map(([key_id, n]) => ({ key_id, n })));
    const tags = new Map<string, number>();
    for (const m of june) for (const tag of m.tags) tags.set(tag, (tags.get(tag) ?? 0) + 1);
    expect(
      await query(h, t.rootKey, "SELECT arrayJoin(tags) AS tag, count(*) AS n FROM key_verifications_v1 GROUP BY tag ORDER BY n DESC, tag"),
    ).toEqual([...tags.entries()].sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1)).map(([tag, n]) => ({ tag, n })));
    expect(
      await query(h, t.rootKey, "SELECT count(*) AS n FROM key_verifications_v1 WHERE has(tags, 'path=/a') AND NOT has(tags, 'plan=pro')"),
    ).toEqual([{ n: june.filter((m) => m.tags.includes("path=/a") && !m.tags.includes("plan=pro")).length }]);
  });

  test("month over month, from the month rollup joined with itself", async ({ h, t, made }) => {
    const may = made.made.filter((m) => m.month === "may").length;
    const june = made.made.length - may;
    expect(
      await query(h, t.rootKey, "SELECT time AS month, sum(count) AS n FROM key_verifications_per_month_v1 GROUP BY month ORDER BY month"),
    ).toEqual([
      { month: "2026-05-01T00:00:00Z", n: may },
      { month: "2026-06-01T00:00:00Z", n: june },
    ]);
    expect(
      await query(
        h,
        t.rootKey,
        `WITH m AS (SELECT time, sum(count) AS n FROM key_verifications_per_month_v1 GROUP BY time)
         SELECT cur.n AS this_month, prev.n AS last_month, round((cur.n - prev.n) / prev.n * 100, 1) AS growth
         FROM m AS cur JOIN m AS prev ON prev.time = cur.time - INTERVAL 1 MONTH`,
      ),
    ).toEqual([{ this_month: june, last_month: may, growth: Math.round(((june - may) / may) * 1000) / 10 }]);
  });

  test("per-minute latency and volume, and hourly volume of one identity", async ({ h, t, made }) => {
    const june = made.made.filter((m) => m.month === "june");
    const minutes = await query(
      h,
      t.rootKey,
      "SELECT time, sum(count) AS n, max(latency_p99) AS p99, avg(latency_avg) AS avg FROM key_verifications_per_minute_v1 GROUP BY time ORDER BY time",
    );
    expect(minutes.map((r) => r.time)).toEqual(["2026-06-15T10:00:00Z", "2026-06-15T11:30:00Z"]);
    expect(minutes.reduce((s, r) => s + r.n, 0)).toBe(june.length);
    for (const r of minutes) expect(typeof r.p99).toBe("number");
    expect(
      await query(
        h,
        t.rootKey,
        "SELECT toStartOfHour(time) AS hour, sum(count) AS n FROM key_verifications_per_hour_v1 WHERE external_id = 'globex' AND time >= now() - INTERVAL 1 DAY GROUP BY hour",
      ),
    ).toEqual([{ hour: "2026-06-15T10:00:00Z", n: june.filter((m) => m.externalId === "globex").length }]);
  });
});
