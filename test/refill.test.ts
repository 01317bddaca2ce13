import { describe, expect } from "vitest";
import { test } from "./fixtures.js";

// The file's harness, tenant and API (`h`, `t`, `apiId`, `importKey` and `backdate` of test/fixtures.ts), and helpers
// over them.
const it = test
  .extend("boundary", async ({ h }) => async (refillDay: number | null, at: string): Promise<string> => {
    const [row] = await h.sql<{ b: string }>(
      `select to_char(keyhaven_refill_boundary(${refillDay === null ? "null" : refillDay}::smallint, '${at}'::timestamptz) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') as b`,
    );
    return row!.b;
  })
  .extend(
    "verify",
    async ({ h }) =>
      (key: string) =>
        h.post("/v1/keys.verifyKey", { key }).then((r) => r.body),
  );

describe("the refill boundary", () => {
  it.for<[number | null, string, string]>([
    [null, "2026-03-10T15:30:00Z", "2026-03-10T00:00:00"],
    [null, "2026-03-10T00:00:00Z", "2026-03-10T00:00:00"],
    [15, "2026-03-20T08:00:00Z", "2026-03-15T00:00:00"],
    [15, "2026-03-10T08:00:00Z", "2026-02-15T00:00:00"],
    [15, "2026-03-15T00:00:00Z", "2026-03-15T00:00:00"],
    [1, "2026-01-01T00:00:01Z", "2026-01-01T00:00:00"],
    [31, "2026-02-27T12:00:00Z", "2026-01-31T00:00:00"],
    [31, "2026-02-28T00:00:00Z", "2026-02-28T00:00:00"],
    [31, "2028-02-28T12:00:00Z", "2028-01-31T00:00:00"],
    [31, "2028-02-29T01:00:00Z", "2028-02-29T00:00:00"],
    [30, "2026-03-15T00:00:00Z", "2026-02-28T00:00:00"],
    [31, "2026-04-30T10:00:00Z", "2026-04-30T00:00:00"],
    [5, "2026-01-03T00:00:00Z", "2025-12-05T00:00:00"],
  ])("for refill day %s at %s is %s (UTC)", async ([day, at, expected], { boundary }) => {
    expect(await boundary(day, at)).toBe(expected);
  });

  it("is the boundary for every refill day at instants all through 16 months (2028-02-29 among them)", async ({ h }) => {
    // Every 7 h 13 min from 2027-11-20 to 2029-03-10 (1,583 instants), so that each day of a month, month ends and
    // 2028-02-29 come at different hours; each day 1-31 and none, against the rule written out here.
    const rows = await h.sql<{ day: number | null; at: string; b: string }>(
      `select d.day, to_char(t at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as at,
         to_char(keyhaven_refill_boundary(d.day::smallint, t) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') as b
       from (select generate_series(1, 31) as day union all select null) d,
         generate_series(timestamptz '2027-11-20 03:00:00+00', timestamptz '2029-03-10 00:00:00+00', interval '7 hours 13 minutes') t`,
    );
    expect(rows.length).toBeGreaterThan(50_000);
    const wrong = rows.filter((r) => r.b !== expectedBoundary(r.day, r.at)).slice(0, 5);
    expect(wrong).toEqual([]);
  });

  it("is inlined into the statements that call it (no function call per row)", async ({ h }) => {
    const plan = await h.sql<{ "QUERY PLAN": string }>(
      "explain (verbose, costs off) select keyhaven_refill_boundary(refill_day, now()) from keys",
    );
    const text = plan.map((r) => r["QUERY PLAN"]).join("\n");
    expect(text).toContain("date_trunc");
    expect(text).not.toContain("keyhaven_refill_boundary");
  });
});

/**
 * The refill boundary by its rule: 00:00 UTC of `at`'s day, or of the refill day (clamped to the month's last day)
 * this month, or last month when this month's is later than `at`.
 */
function expectedBoundary(day: number | null, at: string): string {
  const t = new Date(at);
  const [y, m] = [t.getUTCFullYear(), t.getUTCMonth()];
  if (day === null) return new Date(Date.UTC(y, m, t.getUTCDate())).toISOString().slice(0, 19);
  const inMonth = (year: number, month: number) =>
    new Date(Date.UTC(year, month, Math.min(day, new Date(Date.UTC(year, month + 1, 0)).getUTCDate())));
  const thisMonth = inMonth(y, m);
  return (thisMonth <= t ? thisMonth : inMonth(y, m - 1)).toISOString().slice(0, 19);
}

describe("refills are applied when due, whether or not any job ran", () => {
  it("does not refill a key created after today's boundary", async ({ importKey, verify }) => {
    const { key } = await importKey({ remaining: 5, refill: { interval: "daily", amount: 10 } });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 4 });
  });

  it("refills a daily key once after midnight UTC, then counts down from the refill", async ({ h, importKey, verify, backdate }) => {
    const { key, keyId } = await importKey({ remaining: 2, refill: { interval: "daily", amount: 10 } });
    await backdate(keyId, 2);
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 9 });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 8 });
    const [row] = await h.sql<any>(`select remaining_requests, last_refill_at from keys where id = '${keyId}'`);
    expect(row.remaining_requests).toBe(8);
    expect(new Date(row.last_refill_at).getTime()).toBeGreaterThan(Date.now() - 60_000);
  });

  it("brings an exhausted key back to life at the boundary", async ({ importKey, verify, backdate }) => {
    const { key, keyId } = await importKey({ remaining: 1, refill: { interval: "daily", amount: 3 } });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 0 });
    expect(await verify(key)).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", remaining: 0 });
    await backdate(keyId, 1);
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 2 });
  });

  it("never lowers remaining: a refill sets it to the amount only when that is more", async ({ importKey, verify, backdate }) => {
    const { key, keyId } = await importKey({ remaining: 50, refill: { interval: "daily", amount: 10 } });
    await backdate(keyId, 1);
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 49 });
  });

  it("refills a monthly key whose refill day passed since its last refill", async ({ importKey, verify, backdate }) => {
    const { key, keyId } = await importKey({ remaining: 1, refill: { interval: "monthly", amount: 100, refillDay: 1 } });
    await backdate(keyId, 40);
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 99 });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 98 });
  });

  it("applies one refill exactly once under concurrent verifications", async ({ h, importKey, verify, backdate }) => {
    const { key, keyId } = await importKey({ remaining: 1, refill: { interval: "daily", amount: 30 } });
    await h.sql(`update keys set remaining_requests = 0 where id = '${keyId}'`);
    await backdate(keyId, 1);
    const results = await Promise.all(Array.from({ length: 60 }, () => verify(key)));
    expect(results.filter((r) => r.valid)).toHaveLength(30);
    const [row] = await h.sql<any>(`select remaining_requests from keys where id = '${keyId}'`);
    expect(row.remaining_requests).toBe(0);
  });
});
