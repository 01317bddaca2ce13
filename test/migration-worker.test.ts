import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { describe, expect } from "vitest";
import { DrizzleQueryError } from "drizzle-orm/errors";
import { hashKey } from "../src/crypto/hash.js";
import { isTransientFailure } from "../src/storage/dependency.js";
import { describeUnexpected } from "../src/log.js";
import { MigrationWorker, migrationRetryDelayMs } from "../src/core/import/import.worker.js";
import { harnessWith, testWith } from "./fixtures.js";
import { ADMIN_TOKEN, createHarness, expectError } from "./helper.js";
import { installKeyInsertFault, keyInsertFault } from "./key-insert-fault.js";

// One app without its own worker: each test drives a worker of its own, with a clock and backoff it controls.
// One app without its own worker (the shared `h` fixture of test/fixtures.ts made so; `t` and `apiId` are of it): each
// test drives a worker of its own, with a clock and backoff it controls. Helpers over it are fixtures.
const it = testWith(
  harnessWith({}, { migrationWorker: false }, async (h) => {
    // Inserting a key named `fail:<SQLSTATE>` fails with that SQLSTATE while the fault is switched on.
    await installKeyInsertFault(h);
  }),
)
  .extend(
    "fault",
    async ({ h }) =>
      (on: boolean) =>
        keyInsertFault(h, on),
  )
  .extend("enqueue", async ({ route, apiId }) => async (migrationId: string, keys: unknown[]) => {
    await route("/v1/migrations.enqueueKeys").ok({ migrationId, apiId, keys });
  })
  .extend(
    "getMigration",
    async ({ route }) =>
      (migrationId: string) =>
        route("/v1/migrations.getMigration").ok({ migrationId }),
  )
  .extend(
    "retryMigration",
    async ({ h }) =>
      (body: unknown, token = ADMIN_TOKEN) =>
        h.post("/v1/migrations.retryMigration", body, undefined, { authorization: `Bearer ${token}` }),
  )
  .extend(
    "batchesOf",
    async ({ h }) =>
      (migrationId: string) =>
        h.sql<{ id: string; status: string; attempts: number; keys: unknown }>(
          `select id, status, attempts, keys from migration_batches where migration_id = '${migrationId}' order by id`,
        ),
  )
  .extend(
    "keysNamed",
    async ({ h }) =>
      async (name: string) =>
        Number((await h.sql<{ n: string }>(`select count(*) as n from keys where name = '${name}'`))[0]!.n),
  )
  /** A worker on a clock that moves only when the test says, with a fixed 60 s backoff that it records. */
  .extend("manualWorker", async ({ h }) => () => {
    let now = Date.now();
    const delays: number[] = [];
    const worker = new MigrationWorker(h.db, {
      now: () => now,
      retryDelayMs: (attempts) => {
        delays.push(attempts);
        return 60_000;
      },
    });
    return { worker, delays, advance: (ms: number) => (now += ms) };
  });

const randomHash = () => hashKey(randomBytes(16).toString("hex"));
const byHash = (fields: Record<string, unknown> = {}) => ({ hash: { value: randomHash(), variant: "sha256_base64" }, ...fields });
const newMigrationId = () => `mig_${randomBytes(6).toString("hex")}`;
describe("the migration worker retries transient failures for as long as it takes", () => {
  it("keeps a batch pending through many lock timeouts, imports other batches meanwhile, then imports it", async ({
    fault,
    enqueue,
    getMigration,
    batchesOf,
    keysNamed,
    manualWorker,
  }) => {
    await fault(true);
    try {
      const { worker, delays, advance } = manualWorker();
      const migrationId = newMigrationId();
      await enqueue(migrationId, [byHash({ name: "fail:55P03" }), byHash({ name: "fail:55P03" })]);
      await enqueue(migrationId, [byHash({ name: "beside-the-stuck-one" })]);

      expect(await worker.processNext()).toBe(true); // the first batch: deferred
      expect(await worker.processNext()).toBe(true); // the second: imported, though the first is older
      expect(await worker.processNext()).toBe(false); // the first is not due yet
      expect(await keysNamed("beside-the-stuck-one")).toBe(1);

      // Twelve attempts, over twelve minutes of the worker's clock (the old code gave up after five).
      for (let i = 2; i <= 12; i++) {
        advance(60_000);
        expect(await worker.processNext()).toBe(true);
      }
      const [stuck, other] = await batchesOf(migrationId);
      expect(stuck).toMatchObject({ status: "pending", attempts: 12 });
      expect(other).toMatchObject({ status: "done" });
      expect(delays).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
      const body = await getMigration(migrationId);
      expect(body).toMatchObject({
        batches: { pending: 1, done: 1, failed: 0 },
        keys: { enqueued: 3, imported: 1, failed: 0 },
        retrying: [
          {
            batchId: Number(stuck!.id),
            enqueuedAt: expect.any(Number),
            attempts: 12,
            lastError: "unexpected database error (SQLSTATE 55P03)",
            nextAttemptAt: expect.any(Number),
          },
        ],
        errors: [],
      });

      await fault(false);
      advance(60_000);
      expect(await worker.processNext()).toBe(true);
      expect(await keysNamed("fail:55P03")).toBe(2);
      expect(await getMigration(migrationId)).toMatchObject({
        batches: { pending: 0, done: 2, failed: 0 },
        keys: { enqueued: 3, imported: 3, failed: 0 },
        retrying: [],
        errors: [],
      });
    } finally {
      await fault(false);
    }
  });

  it("treats connection loss, deadlocks, serialization failures and timeouts as transient", async ({
    h,
    fault,
    enqueue,
    batchesOf,
    manualWorker,
  }) => {
    await fault(true);
    try {
      const { worker } = manualWorker();
      for (const sqlstate of ["08006", "40001", "40P01", "57014", "53300", "57P01"]) {
        const migrationId = newMigrationId();
        await enqueue(migrationId, [byHash({ name: `fail:${sqlstate}` })]);
        expect(await worker.processNext()).toBe(true);
        expect(await batchesOf(migrationId), sqlstate).toMatchObject([{ status: "pending", attempts: 1 }]);
      }
    } finally {
      await fault(false);
      await h.sql("update migration_batches set status = 'done', keys = null where status = 'pending'");
    }
  });

  it("classifies a driver's connection errors as transient, and describes them without calling them SQLSTATEs", () => {
    const failed = (code: string) => new DrizzleQueryError("select 1", [], Object.assign(new Error("failed"), { code }));
    for (const code of ["ECONNREFUSED", "ECONNRESET", "CONNECTION_CLOSED", "CONNECT_TIMEOUT", "08001", "57P01"]) {
      expect(isTransientFailure(failed(code)), code).toBe(true);
    }
    for (const code of ["23505", "P0001", "22P02", "42P01"]) expect(isTransientFailure(failed(code)), code).toBe(false);
    expect(isTransientFailure(new TypeError("a bug"))).toBe(false);
    expect(describeUnexpected(failed("ECONNREFUSED"))).toBe("unexpected database error (ECONNREFUSED)");
    expect(describeUnexpected(failed("55P03"))).toBe("unexpected database error (SQLSTATE 55P03)");
  });

  it("backs off exponentially from about 1 s to at most 5 min, with jitter", () => {
    expect([1, 2, 3, 4].map((n) => migrationRetryDelayMs(n, () => 1))).toEqual([1000, 2000, 4000, 8000]);
    expect([1, 2, 3].map((n) => migrationRetryDelayMs(n, () => 0))).toEqual([500, 1000, 2000]);
    expect(migrationRetryDelayMs(1_000, () => 1)).toBe(300_000);
    expect(migrationRetryDelayMs(1_000, () => 0)).toBe(150_000);
  });
});

describe("a batch that fails in a way retrying cannot fix", () => {
  it("is failed at once, and the operator can retry it once the cause is fixed", async ({
    t,
    fault,
    enqueue,
    getMigration,
    retryMigration,
    batchesOf,
    keysNamed,
    manualWorker,
  }) => {
    const { worker } = manualWorker();
    const migrationId = newMigrationId();
    await fault(true);
    try {
      await enqueue(migrationId, [byHash({ name: "fail:P0001" }), byHash({ name: "fail:P0001" })]);
      expect(await worker.processNext()).toBe(true);
      const failed = {
        batches: { pending: 0, done: 0, failed: 1 },
        keys: { enqueued: 2, imported: 0, failed: 2 },
        retrying: [],
        errors: [
          {
            index: null,
            code: "INTERNAL_SERVER_ERROR",
            message: "the batch could not be imported: unexpected database error (SQLSTATE P0001)",
          },
        ],
      };
      expect(await getMigration(migrationId)).toMatchObject(failed);
      // Kept for the retry: none of its keys exists.
      expect((await batchesOf(migrationId))[0]!.keys).not.toBeNull();

      // Retried while the cause is still there: failed again.
      expect((await retryMigration({ workspaceId: t.workspaceId, migrationId })).body).toEqual({ batches: 1 });
      expect((await getMigration(migrationId)).batches).toEqual({ pending: 1, done: 0, failed: 0 });
      expect(await worker.processNext()).toBe(true);
      expect(await getMigration(migrationId)).toMatchObject(failed);
    } finally {
      await fault(false);
    }

    expect((await retryMigration({ workspaceId: t.workspaceId, migrationId })).body).toEqual({ batches: 1 });
    expect(await worker.processNext()).toBe(true);
    expect(await getMigration(migrationId)).toMatchObject({
      batches: { pending: 0, done: 1, failed: 0 },
      keys: { enqueued: 2, imported: 2, failed: 0 },
      errors: [],
    });
    expect(await keysNamed("fail:P0001")).toBe(2);
    expect((await batchesOf(migrationId))[0]!.keys).toBeNull();
    // Nothing left to retry.
    expect((await retryMigration({ workspaceId: t.workspaceId, migrationId })).body).toEqual({ batches: 0 });
  });

  it("is retried only by the operator, of the workspace that enqueued it", async ({ h, t, enqueue, retryMigration }) => {
    const migrationId = newMigrationId();
    await enqueue(migrationId, [byHash()]);
    const other = await h.tenant();
    expectError(
      await retryMigration({ workspaceId: other.workspaceId, migrationId }),
      404,
      "NOT_FOUND",
      `migration ${migrationId} not found`,
    );
    expectError(await retryMigration({ workspaceId: t.workspaceId, migrationId }, "wrong-token"), 403, "UNAUTHORIZED");
    const asRootKey = await h.post("/v1/migrations.retryMigration", { workspaceId: t.workspaceId, migrationId }, t.rootKey);
    expectError(asRootKey, 403, "UNAUTHORIZED");
    await h.sql(`update migration_batches set status = 'done', keys = null where migration_id = '${migrationId}'`);
  });
});

describe("the queue keeps no key material once a batch is processed", () => {
  it("drops the hashes and ciphertexts of imported and partly failed batches", async ({
    h,
    t,
    apiId,
    enqueue,
    retryMigration,
    batchesOf,
    manualWorker,
  }) => {
    const { worker } = manualWorker();
    const existing = await h.importKey(t, apiId);
    const migrationId = newMigrationId();
    const plaintext = `sk_${randomBytes(16).toString("hex")}`;
    const hash = randomHash();
    await enqueue(migrationId, [{ plaintext }, { hash: { value: hash, variant: "sha256_base64" } }]);
    await enqueue(migrationId, [byHash(), { plaintext: existing.key }]);
    const before = JSON.stringify(await h.sql(`select keys from migration_batches where migration_id = '${migrationId}'`));
    expect(before).toContain(hashKey(plaintext));
    expect(before).toContain(hash);

    expect(await worker.processNext()).toBe(true);
    expect(await worker.processNext()).toBe(true);
    expect((await batchesOf(migrationId)).map((b) => [b.status, b.keys])).toEqual([
      ["done", null],
      ["failed", null],
    ]);
    const after = JSON.stringify(await h.sql(`select * from migration_batches where migration_id = '${migrationId}'`));
    for (const secret of [hashKey(plaintext), hash, hashKey(existing.key)]) expect(after).not.toContain(secret);
    // Nothing to retry either: the key that failed exists already.
    expect((await retryMigration({ workspaceId: t.workspaceId, migrationId })).body).toEqual({ batches: 0 });
  });
});

describe.runIf(process.env.TEST_DATABASE_URL)("a table lock held longer than the old retry budget (PostgreSQL)", () => {
  it("keeps the batch pending while `keys` is locked, and imports all its keys once the lock is released", async () => {
    const harness = await createHarness({}, { migrationWorker: false });
    const locker = postgres(harness.databaseUrl!, { max: 1, onnotice: () => {} });
    const worker = new MigrationWorker(harness.db, { pollIntervalMs: 20, retryDelayMs: () => 50, lockTimeoutMs: 100 });
    try {
      const tenant = await harness.tenant();
      const api = await harness.createApi(tenant);
      const migrationId = newMigrationId();
      const keys = Array.from({ length: 100 }, () => byHash());
      const res = await harness.post("/v1/migrations.enqueueKeys", { migrationId, apiId: api, keys }, tenant.rootKey);
      expect(res.status).toBe(202);

      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const holding = locker.begin(async (tx) => {
        await tx`lock table keys in access exclusive mode`;
        locked();
        await released;
      });
      await isLocked;
      const startedAt = Date.now();
      worker.start();
      const attempts = async () =>
        Number(
          (await harness.sql<{ attempts: number }>(`select attempts from migration_batches where migration_id = '${migrationId}'`))[0]!
            .attempts,
        );
      // More attempts than the old code made before giving the batch up (5).
      await expect.poll(attempts, { timeout: 30_000, interval: 50 }).toBeGreaterThanOrEqual(8);
      const heldMs = Date.now() - startedAt;
      const during = (await harness.get("/v1/migrations.getMigration", { migrationId }, tenant.rootKey)).body;
      expect(during).toMatchObject({
        batches: { pending: 1, done: 0, failed: 0 },
        retrying: [{ attempts: expect.any(Number), lastError: "unexpected database error (SQLSTATE 55P03)" }],
      });
      release();
      await holding;

      const count = async () => Number((await harness.sql<{ n: string }>(`select count(*) as n from keys where api_id = '${api}'`))[0]!.n);
      await expect.poll(count, { timeout: 30_000, interval: 50 }).toBe(100);
      const after = (await harness.get("/v1/migrations.getMigration", { migrationId }, tenant.rootKey)).body;
      expect(after).toMatchObject({ batches: { pending: 0, done: 1, failed: 0 }, keys: { imported: 100, failed: 0 }, retrying: [] });
      console.log(
        `lock held ${heldMs} ms: ${during.retrying[0].attempts} attempts; all 100 keys imported ${Date.now() - startedAt} ms after the lock was taken`,
      );
    } finally {
      await worker.stop();
      await locker.end({ timeout: 5 });
      await harness.close();
    }
  });
});
