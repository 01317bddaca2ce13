import postgres from "postgres";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { stopBackgroundJobs } from "../src/background.js";
import { ManualClock } from "../src/clock.js";
import { openPostgres } from "../src/storage/client.js";
import {
  ANALYTICS_ROWS_PER_STATEMENT,
  ANALYTICS_ROWS_PER_STATEMENT_POSTGRES,
  MAX_REFUSALS_PER_COUNT,
  MAX_TAG_SETS_PER_KEY_HOUR,
  OVERFLOW_TAGS,
  VerificationAnalytics,
} from "../src/storage/analytics/analytics.recorder.js";
import { answersNotFound, describeRootKeyAuthOf, rowsOf } from "./auth-suite.js";
import { harnessWith, testWith } from "./fixtures.js";
import { createHarness, expectError, type Harness, type Tenant } from "./helper.js";
import { freePort, waitFor } from "./wait.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// The shared app's clock stands still in the middle of an hour, ahead of the machine's (so that counters the
// in-memory limiter sweeps by the machine's clock are never dropped early): no test on it straddles an hour or a
// day, and none waits for the top of the hour.
const clock = new ManualClock(Date.now() - (Date.now() % HOUR) + HOUR + 30 * 60_000);

// The file's harness is the shared `h` fixture of test/fixtures.ts made on that clock (`t` and `apiId` are of it),
// with helpers over it; `verify` is file-scoped (a closure over h) for the suite setup in an it.beforeAll.
const it = testWith(harnessWith({}, { clock }))
  .extend(
    "verify",
    { scope: "file" },
    async ({ h }) =>
      (key: string, extra: Record<string, unknown> = {}, harness = h) =>
        harness.post("/v1/keys.verifyKey", { key, ...extra }),
  )
  .extend(
    "countsOf",
    async ({ h }) =>
      (where: string, harness = h) =>
        harness.sql<{ key_id: string; outcome: string; tags: string[]; n: number; workspace_id: string; api_id: string }>(
          `select key_id, outcome, tags, count::int as n, workspace_id, api_id from verification_counts where ${where} order by outcome, tags`,
        ),
  )
  .extend(
    "total",
    async ({ h }) =>
      async (where: string, harness = h) =>
        Number(
          (await harness.sql<{ n: string | null }>(`select coalesce(sum(count), 0)::int as n from verification_counts where ${where}`))[0]!
            .n,
        ),
  )
  .extend("keyVerifications", async ({ route }) => route("/v1/keys.getVerifications"))
  .extend("analytics", async ({ route }) => route("/v1/analytics.getVerifications"));

/** Makes the database refuse every count of `keyId` (a trigger raising an error), as it would refuse a bad row. */
async function refuseKey(h: Harness, keyId: string) {
  await h.sql(`create function refuse_count() returns trigger language plpgsql as $$
    begin if new.key_id = '${keyId}' then raise exception 'refused for the test'; end if; return new; end $$`);
  await h.sql("create trigger refuse_count before insert on verification_counts for each row execute function refuse_count()");
}

async function stopRefusing(h: Harness) {
  await h.sql("drop trigger refuse_count on verification_counts");
  await h.sql("drop function refuse_count()");
}

describe("verification analytics: recording and writing", () => {
  it("counts every verification of an existing key per outcome and tags, written within about a second", async ({
    h,
    t,
    apiId,
    verify,
    countsOf,
    total,
  }) => {
    const { key, keyId } = await h.importKey(t, apiId, { remaining: 2 });
    expect((await verify(key)).body.code).toBe("VALID");
    expect((await verify(key, { tags: ["path=/a", "region=eu"] })).body.code).toBe("VALID");
    expect((await verify(key)).body.code).toBe("USAGE_EXCEEDED");
    expect((await verify(key, { apiId: "api_other" })).body.code).toBe("FORBIDDEN");
    expect((await verify("sk_not_a_key_of_anyone")).body.code).toBe("NOT_FOUND");

    // No explicit flush: the background flusher writes them.
    await waitFor("the 4 counts written", async () => (await total(`key_id = '${keyId}'`)) === 4);
    expect(await countsOf(`key_id = '${keyId}'`)).toEqual([
      { key_id: keyId, outcome: "FORBIDDEN", tags: [], n: 1, workspace_id: t.workspaceId, api_id: apiId },
      { key_id: keyId, outcome: "USAGE_EXCEEDED", tags: [], n: 1, workspace_id: t.workspaceId, api_id: apiId },
      { key_id: keyId, outcome: "VALID", tags: [], n: 1, workspace_id: t.workspaceId, api_id: apiId },
      { key_id: keyId, outcome: "VALID", tags: ["path=/a", "region=eu"], n: 1, workspace_id: t.workspaceId, api_id: apiId },
    ]);
    // Unknown keys belong to no workspace and are not counted.
    expect(await total("true")).toBe(await total(`workspace_id = '${t.workspaceId}'`));
  });

  it("adds to the stored counts on later writes (one row per key, hour, outcome and tags)", async ({ h, t, apiId, verify, countsOf }) => {
    const { key, keyId } = await h.importKey(t, apiId);
    for (let i = 0; i < 3; i++) await verify(key);
    await h.jobs.analytics.flush();
    for (let i = 0; i < 4; i++) await verify(key);
    await h.jobs.analytics.flush();
    expect(await countsOf(`key_id = '${keyId}'`)).toMatchObject([{ outcome: "VALID", n: 7 }]);
  });

  it("writes every count recorded before a clean shutdown", async ({ verify, total }) => {
    const harness = await createHarness();
    const tenant = await harness.tenant();
    const api = await harness.createApi(tenant);
    const { key, keyId } = await harness.importKey(tenant, api);
    const n = 37;
    await Promise.all(Array.from({ length: n }, () => verify(key, {}, harness)));
    // What main.ts does on SIGTERM: close the app (no request in flight), stop the jobs, then the store.
    await harness.app.close();
    await stopBackgroundJobs(harness.jobs);
    expect(harness.jobs.analytics.unwritten).toBe(0);
    expect(await total(`key_id = '${keyId}'`, harness)).toBe(n);
    await harness.close();
  });

  it("keeps the counts of a key deleted permanently before they were written, under its API", async ({ h, t, apiId, verify, countsOf }) => {
    const { key, keyId } = await h.importKey(t, apiId);
    const n = 4;
    for (let i = 0; i < n; i++) expect((await verify(key)).body).toMatchObject({ valid: true });
    const deleted = await h.post("/v1/keys.deleteKey", { keyId, permanent: true }, t.rootKey);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect(await h.sql(`select id from keys where id = '${keyId}'`)).toEqual([]);
    await h.jobs.analytics.flush();
    expect(await countsOf(`key_id = '${keyId}'`)).toEqual([
      { key_id: keyId, outcome: "VALID", tags: [], n, workspace_id: t.workspaceId, api_id: apiId },
    ]);
  });

  it("keeps the counts of a failed write for the next one", async ({ verify, total }) => {
    const harness = await createHarness();
    try {
      const tenant = await harness.tenant();
      const api = await harness.createApi(tenant);
      const { key, keyId } = await harness.importKey(tenant, api);
      await harness.sql("alter table verification_counts rename to verification_counts_away");
      try {
        for (let i = 0; i < 5; i++) await verify(key, {}, harness);
        await expect(harness.jobs.analytics.flush()).rejects.toThrow();
        expect(harness.jobs.analytics.unwritten).toBe(5);
        await verify(key, {}, harness);
      } finally {
        await harness.sql("alter table verification_counts_away rename to verification_counts");
      }
      await harness.jobs.analytics.flush();
      expect(await total(`key_id = '${keyId}'`, harness)).toBe(6);
    } finally {
      await harness.close();
    }
  });

  it("writes many counts in several statements; a count the database refuses holds back none of the others and is kept for the next write", async ({
    h,
    total,
  }) => {
    // 2.5 statements' worth of counts, the second statement refused for the count of key `chunk_boom` alone.
    const n = ANALYTICS_ROWS_PER_STATEMENT * 2 + ANALYTICS_ROWS_PER_STATEMENT / 2;
    const boom = ANALYTICS_ROWS_PER_STATEMENT + 7;
    const keyOf = (i: number) => (i === boom ? "chunk_boom" : `chunk_key_${i}`);
    await refuseKey(h, "chunk_boom");
    const job = new VerificationAnalytics(h.db, true, { retentionDays: 90 });
    try {
      const at = Date.now();
      for (let i = 0; i < n; i++)
        job.record({ keyId: keyOf(i), workspaceId: "ws", apiId: "api", identityId: undefined }, "VALID", undefined, at);
      await expect(job.flush()).rejects.toThrow();
      // Every count but the refused one is written, the refused one kept.
      expect(await total("key_id like 'chunk_%'")).toBe(n - 1);
      expect(job.unwritten).toBe(1);
    } finally {
      await stopRefusing(h);
    }
    await job.flush();
    // Each count once: none lost, none written twice.
    expect(await total("key_id like 'chunk_%'")).toBe(n);
    expect(
      (await h.sql<{ n: number }>("select count(*)::int as n from verification_counts where key_id like 'chunk_%' and count <> 1"))[0]!.n,
    ).toBe(0);
    expect(job.unwritten).toBe(0);
    await h.sql("delete from verification_counts where key_id like 'chunk_%'");
  });

  it(`keeps a count the database refuses for ${MAX_REFUSALS_PER_COUNT} writes at most, then drops and logs it; the others are written each time`, async ({
    h,
    total,
  }) => {
    await refuseKey(h, "poison_key");
    const errors: { obj: unknown; msg: string | undefined }[] = [];
    const job = new VerificationAnalytics(h.db, true, { retentionDays: 90 });
    // The logger is the job's once started; stopped at once, so that only this test's flushes write.
    job.start({ info: () => {}, warn: () => {}, error: (obj, msg) => errors.push({ obj, msg }) });
    await job.stop();
    try {
      const at = Date.now();
      const subject = (keyId: string) => ({ keyId, workspaceId: "ws", apiId: "api", identityId: undefined });
      for (let write = 1; write <= MAX_REFUSALS_PER_COUNT + 1; write++) {
        job.record(subject("poison_key"), "VALID", ["a"], at);
        for (let i = 0; i < 30; i++) job.record(subject(`poison_other_${i}`), "VALID", ["a"], at);
        await expect(job.flush()).rejects.toThrow();
        expect(await total("key_id like 'poison_other_%'")).toBe(30 * write);
        // Kept while it has been refused fewer times than the bound (its counts merged), then dropped.
        expect(job.unwritten).toBe(write < MAX_REFUSALS_PER_COUNT ? write : write - MAX_REFUSALS_PER_COUNT);
      }
      const dropped = errors.filter((e) => e.msg?.includes("dropped"));
      expect(dropped.map((e) => e.obj)).toEqual([
        {
          keyId: "poison_key",
          hourM: at - (at % HOUR),
          outcome: "VALID",
          count: MAX_REFUSALS_PER_COUNT,
          tags: 1,
          refusals: MAX_REFUSALS_PER_COUNT,
        },
      ]);
    } finally {
      await stopRefusing(h);
      await h.sql("delete from verification_counts where key_id like 'poison_%'");
    }
  });

  it("keeps each count once when an outage ends a flush that was finding a refused count", async ({ h, total }) => {
    // The statement is refused for iso_a_refused (found by splitting it), then fails as an outage for
    // iso_z_outage (SQLSTATE 57014, as a cancelled statement): every count not written is kept, once.
    await h.sql(`create function refuse_count() returns trigger language plpgsql as $$
      begin
        if new.key_id = 'iso_a_refused' then raise exception 'refused for the test'; end if;
        if new.key_id = 'iso_z_outage' then raise exception 'cancelled for the test' using errcode = '57014'; end if;
        return new;
      end $$`);
    await h.sql("create trigger refuse_count before insert on verification_counts for each row execute function refuse_count()");
    const job = new VerificationAnalytics(h.db, true, { retentionDays: 90 });
    const ids = ["iso_a_refused", "iso_b", "iso_c", "iso_d", "iso_z_outage"];
    try {
      const at = Date.now();
      for (const keyId of ids) job.record({ keyId, workspaceId: "ws", apiId: "api", identityId: undefined }, "VALID", undefined, at);
      await expect(job.flush()).rejects.toThrow();
      const written = await total("key_id like 'iso\\_%'");
      expect(written + job.unwritten).toBe(ids.length);
    } finally {
      await stopRefusing(h);
    }
    await job.flush();
    expect(await h.sql("select key_id, count::int as n from verification_counts where key_id like 'iso\\_%' order by key_id")).toEqual(
      ids.map((key_id) => ({ key_id, n: 1 })),
    );
    await h.sql("delete from verification_counts where key_id like 'iso\\_%'");
  });

  it("stores and counts a tag set of 20 tags of 512 characters (v2's bound), and every other workspace's counts with it", async ({
    h,
    t,
    apiId,
    verify,
    analytics,
    total,
  }) => {
    // 20 random tags of 512 characters (UTF-16 units, as both schemas count them), some outside the BMP: 12-20 KiB
    // in UTF-8, far beyond what a btree entry may hold.
    const alphabet = ["a", "Z", "7", " ", ",", '"', "\\", "{", "é", "✓", "😀"];
    const randomTag = () => {
      let tag = "";
      while (tag.length < 512) {
        const c = alphabet[Math.floor(Math.random() * alphabet.length)]!;
        tag += tag.length + c.length <= 512 ? c : "a";
      }
      return tag;
    };
    const big = Array.from({ length: 20 }, randomTag);
    const verifier = await h.rootKey(t.workspaceId, ["api.*.verify_key"]);
    const { key, keyId } = await h.importKey(t, apiId);
    const other = await h.tenant();
    const otherApi = await h.createApi(other);
    const otherKey = await h.importKey(other, otherApi);
    for (let i = 0; i < 2; i++) {
      const res = await h.post("/v2/keys.verifyKey", { key, tags: big }, verifier);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data.code).toBe("VALID");
    }
    await verify(otherKey.key);
    await h.jobs.analytics.flush();
    expect(h.jobs.analytics.unwritten).toBe(0);
    expect(await total(`key_id = '${keyId}'`)).toBe(2);
    expect(await total(`key_id = '${otherKey.keyId}'`)).toBe(1);
    // Written again: added to the same row.
    await h.post("/v2/keys.verifyKey", { key, tags: big }, verifier);
    await h.jobs.analytics.flush();
    const [stored] = await h.sql<{ tags: string[]; n: number }>(
      `select tags, count::int as n from verification_counts where key_id = '${keyId}' and cardinality(tags) = 20`,
    );
    expect(stored).toEqual({ tags: big, n: 3 });

    const start = String(clock.now() - HOUR);
    const byTags = (await analytics({ apiId, start, groupBy: "tags", keyId })).body as { tags: string[]; total: number }[];
    expect(byTags.find((r) => r.tags.length === 20)).toMatchObject({ tags: big, total: 3 });
    const byTag = (await analytics({ apiId, start, groupBy: "tag", keyId })).body as { tag: string; total: number }[];
    expect(byTag.find((r) => r.tag === big[19])).toMatchObject({ total: 3 });
  });

  it("stores tags and identities as counted, whatever characters the tags hold", async ({ h }) => {
    const job = new VerificationAnalytics(h.db, true, { retentionDays: 90 });
    const at = Date.now();
    const odd = ['quote"d', "comma,s", "{braces}", "back\\slash", "NULL", "ünïcødé ✓", " spaced "];
    job.record({ keyId: "enc_a", workspaceId: "ws", apiId: "api", identityId: "id_enc" }, "VALID", odd, at);
    job.record({ keyId: "enc_b", workspaceId: "ws", apiId: "api", identityId: undefined }, "RATE_LIMITED", undefined, at);
    job.record({ keyId: "enc_c", workspaceId: "ws", apiId: "api", identityId: undefined }, "VALID", [...OVERFLOW_TAGS], at);
    await job.flush();
    try {
      expect(
        await h.sql<{ key_id: string; outcome: string; tags: string[]; identity_id: string | null; n: number }>(
          "select key_id, outcome, tags, identity_id, count::int as n from verification_counts where key_id like 'enc\\_%' order by key_id",
        ),
      ).toEqual([
        { key_id: "enc_a", outcome: "VALID", tags: odd, identity_id: "id_enc", n: 1 },
        { key_id: "enc_b", outcome: "RATE_LIMITED", tags: [], identity_id: null, n: 1 },
        { key_id: "enc_c", outcome: "VALID", tags: [""], identity_id: null, n: 1 },
      ]);
    } finally {
      await h.sql("delete from verification_counts where key_id like 'enc\\_%'");
    }
  });

  it("writes 2,000 counts per statement on PostgreSQL, 200 on the embedded store (whose thread runs them)", ({ h }) => {
    expect(h.services.analytics.rowsPerStatement).toBe(h.onPostgres ? ANALYTICS_ROWS_PER_STATEMENT_POSTGRES : ANALYTICS_ROWS_PER_STATEMENT);
    expect([ANALYTICS_ROWS_PER_STATEMENT, ANALYTICS_ROWS_PER_STATEMENT_POSTGRES]).toEqual([200, 2000]);
  });

  it("records nothing with KEYHAVEN_ANALYTICS=off (but the key's last use, a field of the key)", async ({ verify, total }) => {
    const harness = await createHarness({ KEYHAVEN_ANALYTICS: "off" });
    try {
      const tenant = await harness.tenant();
      const { key, keyId } = await harness.importKey(tenant, await harness.createApi(tenant));
      expect((await verify(key, {}, harness)).body.valid).toBe(true);
      expect(harness.jobs.analytics.unwritten).toBe(0);
      await harness.jobs.analytics.flush();
      expect(await total("true", harness)).toBe(0);
      await harness.jobs.lastUsed.flush();
      expect(await harness.sql(`select 1 from key_last_used where key_id = '${keyId}'`)).toHaveLength(1);
    } finally {
      await harness.close();
    }
  });
});

describe("keys.getVerifications", () => {
  it("answers daily counts of a key: success, rate limited, usage exceeded", async ({ h, t, apiId, verify, keyVerifications }) => {
    const { key, keyId } = await h.importKey(t, apiId, {
      remaining: 3,
      ratelimit: { limit: 4, refillRate: 4, refillInterval: 60_000 },
    });
    const codes = [];
    for (let i = 0; i < 5; i++) codes.push((await verify(key)).body.code);
    expect(codes).toEqual(["VALID", "VALID", "VALID", "USAGE_EXCEEDED", "RATE_LIMITED"]);
    await h.jobs.analytics.flush();

    const today = clock.now() - (clock.now() % DAY);
    const res = await keyVerifications({ keyId });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ verifications: [{ time: today, success: 3, rateLimited: 1, usageExceeded: 1 }] });
    // A window before the verifications holds none.
    expect((await keyVerifications({ keyId, start: "0", end: String(today - DAY) })).body).toEqual({ verifications: [] });
    expect((await keyVerifications({ keyId, start: String(today), granularity: "day" })).body.verifications).toHaveLength(1);
  });

  it("sums every key of an owner (its ownerId, or its identity's externalId)", async ({ h, t, apiId, verify, keyVerifications }) => {
    const a = await h.importKey(t, apiId, { ownerId: "owner-7" });
    const b = await h.importKey(t, await h.createApi(t), { externalId: "owner-7" });
    await verify(a.key);
    await verify(b.key);
    await verify(b.key);
    await h.jobs.analytics.flush();
    const res = await keyVerifications({ ownerId: "owner-7" });
    expect(res.body.verifications).toMatchObject([{ success: 3, rateLimited: 0, usageExceeded: 0 }]);
  });

  it("refuses a query without keyId or ownerId, a bad window or granularity, and unknown keys", async ({
    h,
    t,
    apiId,
    keyVerifications,
  }) => {
    expectError(await keyVerifications({}), 400, "BAD_REQUEST", "keyId or ownerId must be provided");
    expectError(await keyVerifications({ keyId: "k", granularity: "hour" }), 400, "BAD_REQUEST", /^granularity: /);
    expectError(await keyVerifications({ keyId: "k", start: "x" }), 400, "BAD_REQUEST", /^start: /);
    const { keyId } = await h.importKey(t, apiId);
    expectError(await keyVerifications({ keyId, start: "10", end: "5" }), 400, "BAD_REQUEST", "start must not be after end");
    // v1's message for an unknown keyId; an owner without keys keeps its own.
    expectError(await keyVerifications({ keyId: "key_missing" }), 404, "NOT_FOUND", "key key_missing not found");
    expectError(await keyVerifications({ ownerId: "nobody" }), 404, "NOT_FOUND", "No keys were found to match your query");
  });

  it("accepts read_key on the key's API, and refuses other permissions", async ({ h, t, apiId, keyVerifications }) => {
    const { keyId } = await h.importKey(t, apiId);
    expect((await keyVerifications({ keyId }, await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]))).status).toBe(200);
    expectError(
      await keyVerifications({ keyId }, await h.rootKey(t.workspaceId, [`api.${apiId}.read_api`])),
      403,
      "INSUFFICIENT_PERMISSIONS",
    );
  });
});

describe("analytics.getVerifications", () => {
  let api: string;
  let k1: { key: string; keyId: string };
  let k2: { key: string; keyId: string };
  const start = () => String(clock.now() - 3 * HOUR);
  it.beforeAll(async ({ h, t, verify }) => {
    api = await h.createApi(t);
    k1 = await h.importKey(t, api, { externalId: "customer-a" });
    k2 = await h.importKey(t, api, { enabled: false });
    await verify(k1.key, { tags: ["a", "b"] });
    await verify(k1.key, { tags: ["a"] });
    await verify(k1.key);
    await verify(k2.key, { tags: ["b"] });
    await h.jobs.analytics.flush();
  });

  const zeros = {
    valid: 0,
    notFound: 0,
    forbidden: 0,
    usageExceeded: 0,
    rateLimited: 0,
    unauthorized: 0,
    disabled: 0,
    insufficientPermissions: 0,
    expired: 0,
    total: 0,
  };

  it("answers one row of totals without groupBy", async ({ analytics }) => {
    const res = await analytics({ apiId: api, start: start() });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual([{ ...zeros, valid: 3, disabled: 1, total: 4 }]);
  });

  it("groups by hour, day and month with every slice of the range, empty ones as zeros", async ({ h, analytics }) => {
    const now = clock.now();
    const hourly = (await analytics({ apiId: api, start: String(now - 3 * HOUR), end: String(now), groupBy: "hour" })).body;
    const thisHour = now - (now % HOUR);
    // The verifications were made in this hour (the app's clock stands still in it).
    // The hours before `end`'s have a row each; `end`'s own hour only when it counted something.
    const [latest] = await h.sql<{ hour: string }>(`select max(hour_m)::text as hour from verification_counts where api_id = '${api}'`);
    const thisHourCounted = Number(latest!.hour) === thisHour;
    expect(thisHourCounted).toBe(true);
    expect(hourly.map((r: { time: number }) => r.time)).toEqual([
      thisHour - 3 * HOUR,
      thisHour - 2 * HOUR,
      thisHour - HOUR,
      ...(thisHourCounted ? [thisHour] : []),
    ]);
    for (const row of hourly) {
      expect(row).toEqual(
        row.time === Number(latest!.hour) ? { ...zeros, time: row.time, valid: 3, disabled: 1, total: 4 } : { ...zeros, time: row.time },
      );
    }

    const daily = (await analytics({ apiId: api, start: String(now - 2 * DAY), groupBy: "day", order: "desc", orderBy: "time" })).body;
    expect(daily.map((r: { total: number }) => r.total)).toEqual([4, 0, 0]);
    const d = new Date(now);
    const monthly = (await analytics({ apiId: api, start: start(), groupBy: "month" })).body;
    expect(monthly.at(-1)).toEqual({ ...zeros, time: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), valid: 3, disabled: 1, total: 4 });
  });

  it("groups by key and identity, and filters by keyId and externalId", async ({ analytics }) => {
    const byKey = (await analytics({ apiId: api, start: start(), groupBy: "key", orderBy: "total", order: "desc" })).body;
    expect(byKey).toEqual([
      { ...zeros, keyId: k1.keyId, valid: 3, total: 3 },
      { ...zeros, keyId: k2.keyId, disabled: 1, total: 1 },
    ]);
    expect(
      (await analytics({ apiId: api, start: start(), groupBy: "key", orderBy: "total", order: "desc", limit: "1" })).body,
    ).toHaveLength(1);

    const byIdentity = (await analytics({ apiId: api, start: start(), groupBy: "identity" })).body;
    expect(byIdentity).toEqual([
      { ...zeros, identity: { id: expect.stringMatching(/^id_/), externalId: "customer-a" }, valid: 3, total: 3 },
    ]);
    expect((await analytics({ apiId: api, start: start(), externalId: "customer-a" })).body).toEqual([{ ...zeros, valid: 3, total: 3 }]);
    expect((await analytics({ apiId: api, start: start(), keyId: k2.keyId })).body).toEqual([{ ...zeros, disabled: 1, total: 1 }]);
    // The SDK sends a keyId array comma-joined.
    expect((await analytics({ apiId: api, start: start(), keyId: `${k1.keyId},${k2.keyId}` })).body[0].total).toBe(4);
    expectError(
      await analytics({ apiId: api, start: start(), externalId: "nobody" }),
      404,
      "NOT_FOUND",
      "identity with externalId nobody not found",
    );
  });

  it("filters by tags (all of them) and groups by tag set or single tag", async ({ h, t, analytics }) => {
    expect((await analytics({ apiId: api, start: start(), tag: "a" })).body[0].total).toBe(2);
    expect((await analytics({ apiId: api, start: start(), tag: "b" })).body[0].total).toBe(2);
    const both = await h.app.inject({
      method: "GET",
      url: `/v1/analytics.getVerifications?apiId=${api}&start=${start()}&tag=a&tag=b`,
      headers: { authorization: `Bearer ${t.rootKey}` },
    });
    expect(JSON.parse(both.body)[0].total).toBe(1);

    const byTag = (await analytics({ apiId: api, start: start(), groupBy: "tag" })).body;
    expect(byTag.map((r: { tag: string; total: number }) => [r.tag, r.total])).toEqual([
      ["a", 2],
      ["b", 2],
    ]);
    const byTags = (await analytics({ apiId: api, start: start(), groupBy: "tags" })).body;
    expect(byTags.map((r: { tags: string[]; total: number }) => [r.tags, r.total])).toEqual([
      [[], 1],
      [["a"], 1],
      [["a", "b"], 1],
      [["b"], 1],
    ]);
  });

  it("answers upstream's own case of groupBy tags (4 tag sets × 20 verifications through verifyKey): one row per tag set", async () => {
    // Upstream's test queries from 00:00 UTC on the 2nd of the current month to a month later, and counts what
    // keys.verifyKey counted "now": on the 15th, every verification is in that window; on the 1st, none is (the
    // window starts the next day), and upstream's ClickHouse answers no row either. A clock of the harness's own
    // sets the day; the months are the machine's current one and the next, so the retention keeps their counts.
    const now = new Date();
    const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
    const own = new ManualClock(monthStart + 14 * DAY + 12 * HOUR);
    const harness = await createHarness({}, { clock: own });
    try {
      const tenant = await harness.tenant();
      const api = await harness.createApi(tenant);
      const keys = [
        ...(await Promise.all([0, 1, 2].map(() => harness.importKey(tenant, api, { externalId: "upstream-identity" })))),
        await harness.importKey(tenant, api),
      ];
      const tagSets = [["a", "b"], ["a"], [], ["b", "c"]];
      const upstreamWindow = () => {
        const d = new Date(own.now());
        d.setUTCDate(2);
        d.setUTCHours(0, 0, 0, 0);
        const start = d.getTime();
        return { apiId: api, start: String(start), end: String(new Date(start).setUTCMonth(new Date(start).getUTCMonth() + 1)) };
      };
      const verifyAll = async () => {
        for (const tags of tagSets) {
          for (let i = 0; i < 20; i++) {
            const res = await harness.post("/v1/keys.verifyKey", { key: keys[i % keys.length]!.key, tags });
            expect(res.body.valid).toBe(true);
          }
        }
        await harness.jobs.analytics.flush();
      };
      const query = async (extra: Record<string, string>) => {
        const res = await harness.get("/v1/analytics.getVerifications", { ...upstreamWindow(), ...extra }, tenant.rootKey);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        return res.body as { tags?: string[]; tag?: string; total: number }[];
      };

      await verifyAll();
      const byTags = await query({ groupBy: "tags" });
      expect(byTags.map((r) => [r.tags, r.total])).toEqual([
        [[], 20],
        [["a"], 20],
        [["a", "b"], 20],
        [["b", "c"], 20],
      ]);
      expect((await query({ groupBy: "tag" })).map((r) => [r.tag, r.total])).toEqual([
        ["a", 40],
        ["b", 40],
        ["c", 20],
      ]);

      // The 1st of the next month: the same verifications again, all before the window's start. Upstream's
      // groupBy tag test passes on no row (it checks each row it gets), its groupBy tags test wants 4.
      own.set(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1) + 12 * HOUR);
      await verifyAll();
      expect(await query({ groupBy: "tags" })).toEqual([]);
      expect(await query({ groupBy: "tag" })).toEqual([]);
      expect((await query({ tag: "a" })).map((r) => r.total)).toEqual([0]);
    } finally {
      await harness.close();
    }
  });

  it("refuses bad queries with 400", async ({ analytics }) => {
    expectError(await analytics({ apiId: api }), 400, "BAD_REQUEST", /^start: /);
    expectError(await analytics({ start: "0" }), 400, "BAD_REQUEST", /^apiId: /);
    expectError(await analytics({ apiId: api, start: "10", end: "10" }), 400, "BAD_REQUEST", "start cannot be equal or greater than end");
    expectError(await analytics({ apiId: api, start: start(), groupBy: "week" }), 400, "BAD_REQUEST", /^groupBy/);
    expectError(
      await analytics({ apiId: api, start: start(), groupBy: "tag,tags" }),
      400,
      "BAD_REQUEST",
      "You can not group by tag and tags at the same time",
    );
    expectError(
      await analytics({ apiId: api, start: start(), orderBy: "time" }),
      400,
      "BAD_REQUEST",
      "orderBy=time needs groupBy hour, day or month",
    );
    expectError(await analytics({ apiId: api, start: start(), orderBy: "nope" }), 400, "BAD_REQUEST", /^orderBy: /);
    expectError(await analytics({ apiId: api, start: start(), limit: "0" }), 400, "BAD_REQUEST", /^limit: /);
    expectError(await analytics({ apiId: api, start: "0", groupBy: "hour" }), 400, "BAD_REQUEST", /more than 10000 hours/);
    expectError(await analytics({ apiId: "api_missing", start: start() }), 404, "NOT_FOUND", "api api_missing not found");
  });

  it("accepts read_api on the API and refuses other permissions", async ({ h, t, analytics }) => {
    expect((await analytics({ apiId: api, start: start() }, await h.rootKey(t.workspaceId, [`api.${api}.read_api`]))).status).toBe(200);
    expectError(
      await analytics({ apiId: api, start: start() }, await h.rootKey(t.workspaceId, [`api.${api}.read_key`])),
      403,
      "INSUFFICIENT_PERMISSIONS",
    );
  });
});

describe("analytics.getVerifications: time slices on a fixed clock", () => {
  // Counts recorded at fixed past times, in a harness of its own whose retention keeps them (the shared one
  // deletes counts older than 90 days in the background).
  const T = Date.UTC(2024, 11, 5, 9, 20); // 2024-12-05 09:20 UTC
  const hourOf = (ms: number) => ms - (ms % HOUR);
  let fh: Harness;
  let ft: Tenant;
  let empty: string;
  let api: string;
  const query = (q: Record<string, string | number>) =>
    fh.get("/v1/analytics.getVerifications", Object.fromEntries(Object.entries(q).map(([k, v]) => [k, String(v)])), ft.rootKey);
  const times = (rows: { time: number }[]) => rows.map((r) => r.time);
  const totals = (rows: { total: number }[]) => rows.map((r) => r.total);

  beforeAll(async () => {
    fh = await createHarness({ KEYHAVEN_ANALYTICS_RETENTION_DAYS: "36500" });
    ft = await fh.tenant();
    empty = await fh.createApi(ft);
    api = await fh.createApi(ft);
    const { keyId } = await fh.importKey(ft, api);
    const key = { keyId, workspaceId: ft.workspaceId, apiId: api, identityId: undefined };
    // 09:59:59 on day T, and twice in the 10:00 hour.
    for (const at of [hourOf(T) + HOUR - 1000, hourOf(T) + HOUR + 10 * 60_000, hourOf(T) + HOUR + 40 * 60_000]) {
      fh.jobs.analytics.record(key, "VALID", undefined, at);
    }
    await fh.jobs.analytics.flush();
  });
  afterAll(() => fh?.close());

  it("answers 30 hours, days or months as 30 rows: from start's slice up to, not including, end's", async () => {
    for (const [start, end] of [
      [T, T + 30 * HOUR],
      [hourOf(T), hourOf(T) + 30 * HOUR],
    ]) {
      const res = await query({ apiId: empty, start: start!, end: end!, groupBy: "hour" });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(times(res.body)).toEqual(Array.from({ length: 30 }, (_, i) => hourOf(T) + i * HOUR));
      expect(res.body.every((r: { total: number }) => r.total === 0)).toBe(true);
    }
    const daily = (await query({ apiId: empty, start: T, end: T + 30 * DAY, groupBy: "day" })).body;
    expect(times(daily)).toEqual(Array.from({ length: 30 }, (_, i) => Date.UTC(2024, 11, 5 + i)));
    const monthly = (await query({ apiId: empty, start: Date.UTC(2024, 0, 15), end: Date.UTC(2025, 0, 15), groupBy: "month" })).body;
    expect(times(monthly)).toEqual(Array.from({ length: 12 }, (_, i) => Date.UTC(2024, i, 1)));
    // start and end in one hour: no slice before end's, and nothing counted in it.
    expect((await query({ apiId: empty, start: T, end: T + 60_000, groupBy: "hour" })).body).toEqual([]);
  });

  it("answers what end's slice counted without an empty row for it, so no count is dropped", async () => {
    const start = hourOf(T) - 9 * HOUR + 30 * 60_000; // 00:30
    // end 10:30: the 00:00 to 09:00 rows, then the 10:00 row with its counts (the 10:40 one included: counts are
    // kept per hour, and v1 too counted end's whole slice).
    const upTo1030 = (await query({ apiId: api, start, end: hourOf(T) + HOUR + 30 * 60_000, groupBy: "hour" })).body;
    expect(times(upTo1030)).toEqual(Array.from({ length: 11 }, (_, i) => hourOf(T) - 9 * HOUR + i * HOUR));
    expect(totals(upTo1030)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]);
    // end 11:30: nothing counted in the 11:00 hour, so it has no row.
    const upTo1130 = (await query({ apiId: api, start, end: hourOf(T) + 2 * HOUR + 30 * 60_000, groupBy: "hour" })).body;
    expect(times(upTo1130)).toEqual(times(upTo1030));
    expect(totals(upTo1130)).toEqual(totals(upTo1030));
    // In descending time order with a limit, end's slice comes first.
    const latest = (
      await query({ apiId: api, start, end: hourOf(T) + HOUR + 30 * 60_000, groupBy: "hour", orderBy: "time", order: "desc", limit: 2 })
    ).body;
    expect(times(latest)).toEqual([hourOf(T) + HOUR, hourOf(T)]);
    // The same rule per day: two empty days, then day T with its counts; the day after T has no row.
    const day = Date.UTC(2024, 11, 5);
    for (const end of [T + HOUR, day + DAY + 5 * HOUR]) {
      const daily = (await query({ apiId: api, start: day - 2 * DAY + 5 * HOUR, end, groupBy: "day" })).body;
      expect(times(daily)).toEqual([day - 2 * DAY, day - DAY, day]);
      expect(totals(daily)).toEqual([0, 0, 3]);
    }
  });
});

describe("verification analytics: bounds", () => {
  it("counts at most MAX_TAG_SETS_PER_KEY_HOUR distinct tag sets per key and hour, the rest under one overflow set", async ({
    h,
    t,
    apiId,
    verify,
    countsOf,
    total,
  }) => {
    const { key, keyId } = await h.importKey(t, apiId);
    const { key: disabledKey, keyId: disabledId } = await h.importKey(t, apiId, { enabled: false });
    const sent = MAX_TAG_SETS_PER_KEY_HOUR + 50;
    for (let i = 0; i < sent - 10; i++) {
      await verify(key, { tags: [`t${i}`] });
      await verify(disabledKey, { tags: [`t${i}`] });
    }
    await h.jobs.analytics.flush();
    // The bound holds across writes: later verifications of the same hour still overflow.
    for (let i = sent - 10; i < sent; i++) await verify(key, { tags: [`t${i}`] });
    await verify(key, { tags: ["t0"] });
    await verify(key);
    await h.jobs.analytics.flush();
    const rows = await countsOf(`key_id = '${keyId}'`);
    // Per hour the bound holds (the app's clock stands still: all of them are in one hour).
    expect(rows.length).toBeLessThanOrEqual(2 * (MAX_TAG_SETS_PER_KEY_HOUR + 2));
    expect(await total(`key_id = '${keyId}'`)).toBe(sent + 2);
    const hours = await h.sql<{ hour_m: string; sets: number }>(
      `select hour_m, count(*)::int as sets from verification_counts where key_id = '${keyId}' and tags <> '{}' group by hour_m`,
    );
    expect(hours).toHaveLength(1);
    for (const hour of hours) expect(hour.sets).toBeLessThanOrEqual(MAX_TAG_SETS_PER_KEY_HOUR + 1);
    const overflow = rows.filter((r) => JSON.stringify(r.tags) === JSON.stringify(OVERFLOW_TAGS));
    expect(overflow.reduce((n, r) => n + r.n, 0)).toBeGreaterThanOrEqual(sent - hours.length * MAX_TAG_SETS_PER_KEY_HOUR);
    const disabledHours = await h.sql<{ sets: number }>(
      `select count(*)::int as sets from verification_counts where key_id = '${disabledId}' group by hour_m`,
    );
    for (const hour of disabledHours) expect(hour.sets).toBeLessThanOrEqual(MAX_TAG_SETS_PER_KEY_HOUR + 1);
    expect(await total(`key_id = '${disabledId}'`)).toBe(sent - 10);
  });

  it("deletes counts older than KEYHAVEN_ANALYTICS_RETENTION_DAYS in the background, on an injected clock", async ({
    h,
    t,
    apiId,
    countsOf,
    total,
  }) => {
    expect(h.jobs.analytics.retentionDays).toBe(90);
    const { keyId } = await h.importKey(t, apiId);
    const now = Date.now();
    const hourOf = (ms: number) => ms - (ms % HOUR);
    const insert = (hourM: number) =>
      h.sql(`insert into verification_counts (key_id, hour_m, outcome, tags, workspace_id, api_id, count)
             values ('${keyId}', ${hourM}, 'VALID', '{}', '${t.workspaceId}', '${apiId}', 1)`);
    const [old, recent] = [hourOf(now - 3 * DAY), hourOf(now - 12 * HOUR)];
    await insert(old);
    await insert(recent);
    // The app's own job (90 days) keeps both.
    expect(await h.jobs.analytics.deleteExpired()).toBe(0);
    // A job with a 1-day retention, a clock 1 minute ahead and a 20 ms interval: it runs at start and then again.
    let clock = now + 60_000;
    const logged: unknown[] = [];
    const job = new VerificationAnalytics(h.db, false, { retentionDays: 1, cleanupIntervalMs: 20, now: () => clock });
    job.start({ info: (obj) => logged.push(obj), warn: () => {}, error: () => {} });
    try {
      await expect.poll(() => total(`key_id = '${keyId}'`)).toBe(1);
      expect((await countsOf(`key_id = '${keyId}'`)).length).toBe(1);
      expect(logged).toContainEqual({ deleted: 1, retentionDays: 1 });
      // Two days later by its clock, the recent hour has expired too.
      clock = now + 2 * DAY;
      await expect.poll(() => total(`key_id = '${keyId}'`)).toBe(0);
    } finally {
      await job.stop();
    }
  });

  it("holds at most maxPendingTagChars characters of tags in memory: further tag sets are counted under the overflow set", async ({
    h,
  }) => {
    const job = new VerificationAnalytics(h.db, true, { retentionDays: 90, maxPendingTagChars: 3000 });
    const at = Date.now();
    const subject = (i: number) => ({ keyId: `tagchars_${i}`, workspaceId: "ws", apiId: "api", identityId: undefined });
    // Tag sets of 1,024 characters: two fit in 3,000, the third does not.
    const tagSet = (i: number) => [`${i}`.padEnd(512, "x"), `${i}`.padEnd(512, "y")];
    for (let round = 0; round < 2; round++) for (let i = 0; i < 5; i++) job.record(subject(i), "VALID", tagSet(i), at);
    expect(job.unwritten).toBe(10);
    try {
      await job.flush();
      const rows = await h.sql<{ key_id: string; sets: number; n: number }>(
        "select key_id, cardinality(tags)::int as sets, count::int as n from verification_counts where key_id like 'tagchars\\_%' order by key_id",
      );
      expect(rows).toEqual([
        { key_id: "tagchars_0", sets: 2, n: 2 },
        { key_id: "tagchars_1", sets: 2, n: 2 },
        { key_id: "tagchars_2", sets: 1, n: 2 },
        { key_id: "tagchars_3", sets: 1, n: 2 },
        { key_id: "tagchars_4", sets: 1, n: 2 },
      ]);
      // Written, they hold no memory: the next ones are kept as sent again.
      job.record(subject(4), "VALID", tagSet(4), at);
      await job.flush();
      expect(await h.sql("select count::int as n from verification_counts where key_id = 'tagchars_4' and cardinality(tags) = 2")).toEqual([
        { n: 1 },
      ]);
    } finally {
      await h.sql("delete from verification_counts where key_id like 'tagchars\\_%'");
    }
  });

  it("holds at most maxPendingRows distinct counts in memory while the database is unreachable, logging it once", async () => {
    // A port nothing listens on: every write fails at once, as with a database that is down.
    const port = await freePort();
    const down = openPostgres(`postgres://postgres@127.0.0.1:${port}/none`, 1);
    const warnings: unknown[] = [];
    const job = new VerificationAnalytics(down.db, true, { retentionDays: 90, maxPendingRows: 10 });
    job.start({ info: () => {}, warn: (obj) => warnings.push(obj), error: () => {} });
    try {
      const at = Date.now();
      const subject = (i: number) => ({ keyId: `key_${i}`, workspaceId: "ws", apiId: "api", identityId: undefined });
      for (let i = 0; i < 25; i++) job.record(subject(i), "VALID", undefined, at);
      expect(job.unwritten).toBe(10);
      await expect(job.flush()).rejects.toThrow();
      // Kept for the next try, within the bound; known counts still count, new ones are dropped.
      for (let i = 0; i < 25; i++) job.record(subject(i), "VALID", undefined, at);
      await expect(job.flush()).rejects.toThrow();
      expect(job.unwritten).toBe(20);
      expect(warnings).toEqual([{ maxPendingRows: 10 }]);
    } finally {
      await job.stop().catch(() => {});
      await down.close();
    }
  });
});

describe("verification analytics: replicas writing counts of the same keys (PostgreSQL)", () => {
  // PGlite is one session: a lock held there would block its only thread, and no two writers share it.
  it.skipIf(process.env.TEST_DATABASE_URL === undefined)(
    "lock the rows in one order whatever order they were counted in, so two writers never deadlock",
    async ({ h, total }) => {
      const url = h.config.databaseUrl!;
      const at = Date.now();
      const subject = (keyId: string) => ({ keyId, workspaceId: "ws", apiId: "api", identityId: undefined });
      const ids = ["lockorder_a", "lockorder_m", "lockorder_z"];
      // The counts exist, so each writer's upsert locks the rows one after the other.
      const seed = new VerificationAnalytics(h.db, true, { retentionDays: 90 });
      for (const id of ids) seed.record(subject(id), "VALID", undefined, at);
      await seed.flush();

      const [first, second] = [openPostgres(url, 1), openPostgres(url, 1)];
      const holder = postgres(url, { max: 1, onnotice: () => {} });
      const conn = await holder.reserve();
      try {
        const one = new VerificationAnalytics(first.db, true, { retentionDays: 90 });
        const other = new VerificationAnalytics(second.db, true, { retentionDays: 90 });
        // Counted in opposite orders, as two replicas behind a load balancer may.
        for (const id of ids) one.record(subject(id), "VALID", undefined, at);
        for (const id of [...ids].reverse()) other.record(subject(id), "VALID", undefined, at);
        // The middle row held by a third transaction, until both writers wait for a lock: in opposite orders, each
        // then holds a row the other needs once it is released (PostgreSQL ends that deadlock by failing one).
        await conn`begin`;
        await conn`select 1 from verification_counts where key_id = 'lockorder_m' for update`;
        const writes = Promise.allSettled([one.flush(), other.flush()]);
        await waitFor("both writers waiting for a row lock", async () => {
          const [row] = await h.sql<{ n: number }>(
            "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%verification_counts%'",
          );
          return row!.n >= 2;
        });
        await conn`commit`;
        expect((await writes).map((w) => (w.status === "rejected" ? String(w.reason) : w.status))).toEqual(["fulfilled", "fulfilled"]);
        expect(await total("key_id like 'lockorder_%'")).toBe(9);
      } finally {
        conn.release();
        await holder.end();
        await Promise.all([first.close(), second.close()]);
        await h.sql("delete from verification_counts where key_id like 'lockorder_%'");
      }
    },
  );
});

describeRootKeyAuthOf(it, { countRows: rowsOf("verification_counts") }, [
  {
    method: "GET",
    path: "/v1/keys.getVerifications",
    async validRequest(h, owner) {
      const { keyId } = await h.importKey(owner, await h.createApi(owner));
      return { query: { keyId } };
    },
    insufficientPermissions: ["api.*.read_api", "api.other.read_key"],
    missingRequest: (valid) => ({ query: { ...valid.query, keyId: "key_missing0000000000" } }),
    expectForOtherWorkspace: answersNotFound(/^key key_\w+ not found$/),
  },
  {
    method: "GET",
    path: "/v1/analytics.getVerifications",
    async validRequest(h, owner) {
      return { query: { apiId: await h.createApi(owner), start: "0" } };
    },
    insufficientPermissions: ["api.*.read_key", "api.other.read_api"],
    expectForOtherWorkspace: answersNotFound(/^api api_\w+ not found$/),
  },
]);
