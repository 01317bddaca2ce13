import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { stopBackgroundJobs } from "../src/background.js";
import { hashKey } from "../src/crypto/hash.js";
import { StatisticsRefresher } from "../src/storage/statistics.js";
import { test } from "./fixtures.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { waitFor } from "./wait.js";

// A pass returns at once; the machine the suite runs on may be loaded (the worker polls each second, and the
// ANALYZE waits for a quiet second after each import).
const SLOW = { timeoutMs: 60_000 };

// PGlite runs no autovacuum: a table filled by an import would never be analysed (issue 13 §2). keyhaven analyses
// the imported tables after imports there; on PostgreSQL it leaves that to autovacuum.

/** 100 keys by hash (migrations.createKeys takes at most 100 a request): more than an ANALYZE waits for. */
const hundredKeys = (apiId: string) =>
  Array.from({ length: 100 }, () => ({ apiId, hash: { value: hashKey(randomBytes(16).toString("hex")), variant: "sha256_base64" } }));

/** How many times `keys` was analysed, and how many rows the last ANALYZE counted (-1: never). */
async function keysStatistics(h: Harness) {
  const [row] = await h.sql<{ analyses: string; rows: number }>(
    `select s.analyze_count as analyses, c.reltuples::float8 as rows
     from pg_stat_user_tables s join pg_class c on c.oid = s.relid where s.relname = 'keys'`,
  );
  return { analyses: Number(row!.analyses), rows: Number(row!.rows) };
}

async function importHundred(h: Harness, t: Tenant, apiId: string) {
  const res = await h.post("/v1/migrations.createKeys", hundredKeys(apiId), t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

describe("on PGlite, the imported tables are analysed after imports", () => {
  test.skipIf(process.env.TEST_DATABASE_URL !== undefined)(
    "keys imported by migrations.createKeys, then by the enqueueKeys worker, are each followed by an ANALYZE",
    { timeout: 150_000 },
    async ({ h, t, apiId, count }) => {
      expect(await keysStatistics(h)).toEqual({ analyses: 0, rows: -1 });
      await importHundred(h, t, apiId);
      await waitFor("analysed after createKeys", async () => (await keysStatistics(h)).analyses === 1, SLOW);
      expect((await keysStatistics(h)).rows).toBe(await count("keys"));

      const migrationId = `mig_${randomBytes(6).toString("hex")}`;
      const queued = hundredKeys(apiId).map(({ apiId: _, ...key }) => key);
      const res = await h.post("/v1/migrations.enqueueKeys", { migrationId, apiId, keys: queued }, t.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      await waitFor("analysed after the worker's batch", async () => (await keysStatistics(h)).analyses === 2, SLOW);
      expect((await keysStatistics(h)).rows).toBe(await count("keys"));
    },
  );

  test.skipIf(process.env.TEST_DATABASE_URL !== undefined)(
    "keys copied from hosted Unkey (keyhaven.copyFromUnkey) are followed by an ANALYZE",
    { timeout: 150_000 },
    async () => {
      const own = await createHarness();
      try {
        const tenant = await own.tenant();
        const apiId = `api_${randomBytes(6).toString("hex")}`;
        const keys = Array.from({ length: 100 }, () => ({
          id: `key_${randomBytes(8).toString("hex")}`,
          apiId,
          start: "uk_ab",
          createdAt: 1_700_000_000_000,
          enabled: true,
        }));
        const res = await own.post("/v2/keyhaven.copyFromUnkey", { apis: [{ id: apiId, name: "copied api" }], keys }, tenant.rootKey);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        await waitFor("analysed after the copy", async () => (await keysStatistics(own)).analyses === 1, SLOW);
        expect((await keysStatistics(own)).rows).toBe(100);
      } finally {
        await own.close();
      }
    },
  );

  test.skipIf(process.env.TEST_DATABASE_URL !== undefined)(
    "stopping the background jobs right after an import runs the ANALYZE it was due and waits for it",
    async () => {
      const own = await createHarness();
      try {
        const tenant = await own.tenant();
        const api = await own.createApi(tenant);
        await importHundred(own, tenant, api);
        await stopBackgroundJobs(own.services);
        expect(await keysStatistics(own)).toEqual({ analyses: 1, rows: 100 });
      } finally {
        await own.close();
      }
    },
  );

  test.skipIf(process.env.TEST_DATABASE_URL !== undefined)(
    "the batches of one import make one ANALYZE, and imports smaller than the threshold none",
    async ({ h }) => {
      // A quiet window no test waits out: only stop() runs what is due.
      const refresher = new StatisticsRefresher(h.db, "pglite", { quietMs: 600_000, maxDelayMs: 600_000 });
      refresher.start();
      refresher.onImported(30);
      refresher.onImported(20);
      await refresher.stop();
      expect(refresher.runs).toBe(0);

      refresher.start();
      for (let batch = 0; batch < 5; batch++) refresher.onImported(100);
      await refresher.stop();
      expect(refresher.runs).toBe(1);
    },
  );
});

test.skipIf(process.env.TEST_DATABASE_URL === undefined)(
  "on PostgreSQL, keyhaven leaves statistics to autovacuum",
  async ({ h, t, apiId }) => {
    await importHundred(h, t, apiId);
    await stopBackgroundJobs(h.services);
    expect(h.services.statistics.runs).toBe(0);
  },
);
