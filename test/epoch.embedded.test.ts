import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { rowsOf, type Store } from "../src/storage/client.js";
import { EpochReader } from "../src/storage/epoch.js";
import { preparePgliteSelect } from "../src/storage/pglitePrepared.js";
import { createHarness, type Harness } from "./helper.js";
import { pooledPglite } from "./pglite-pool.js";

// The embedded store is this process's alone, so its epoch cannot move while no statement that may write has finished
// (Store.writes): EpochReader then answers the last epoch it read without a statement. Each case reads the epoch,
// does something, and expects the next `current()` to read again (or not) and to return the epoch as it now stands.

let store: Store;
let reader: EpochReader;
let reads: ReturnType<typeof vi.spyOn>;

const bump = sql`update keyhaven_epoch set value = value + 1 where shard = 0`;
const epochInDb = async () =>
  BigInt(rowsOf<{ e: string }>(await store.db.execute(sql`select sum(value)::text as e from keyhaven_epoch`))[0]!.e);

beforeAll(async () => {
  store = await pooledPglite();
  reader = new EpochReader(store.db, store.writes);
  reads = vi.spyOn(reader.invalidations, "readEpoch");
});
afterAll(() => store.close());

/** `current()` after `between`: the epoch it answered and whether it ran the epoch statement. */
async function currentAfter(between: () => Promise<unknown>) {
  await reader.current();
  await between();
  reads.mockClear();
  const epoch = await reader.current();
  return { epoch, read: reads.mock.calls.length > 0 };
}

describe("the epoch on the embedded store", () => {
  it("is answered without a statement while nothing was written, even after reads", async () => {
    const before = await reader.current();
    const { epoch, read } = await currentAfter(() => store.db.execute(sql`select count(*) from keys`));
    expect(read).toBe(false);
    expect(epoch).toBe(before);
    expect(epoch).toBe(await epochInDb());
  });

  it("is read again after a write, and is the write's epoch", async () => {
    const before = await reader.current();
    const { epoch, read } = await currentAfter(() => store.db.execute(bump));
    expect(read).toBe(true);
    expect(epoch).toBe(before + 1n);
  });

  it("is read again after a transaction's commit, and after its rollback", async () => {
    const before = await reader.current();
    const committed = await currentAfter(() => store.db.transaction(async (tx) => tx.execute(bump)));
    expect(committed).toEqual({ epoch: before + 1n, read: true });
    const rolledBack = await currentAfter(() =>
      store.db
        .transaction(async (tx) => {
          await tx.execute(bump);
          tx.rollback();
        })
        .catch(() => {}),
    );
    expect(rolledBack).toEqual({ epoch: before + 1n, read: true });
  });

  it("is read again after a write that failed, and after any other call of the client", async () => {
    const failed = await currentAfter(() => store.db.execute(sql`update no_such_table set x = 1`).catch(() => {}));
    expect(failed.read).toBe(true);
    const client = (store.db as unknown as { $client: { exec(q: string): Promise<unknown> } }).$client;
    const before = await reader.current();
    const exec = await currentAfter(() => client.exec("update keyhaven_epoch set value = value + 1 where shard = 0"));
    expect(exec).toEqual({ epoch: before + 1n, read: true });
  });

  it("counts an exec as a read only when it is one select: exec may run several statements", async () => {
    const client = (store.db as unknown as { $client: { exec(q: string): Promise<unknown> } }).$client;
    await reader.current();
    expect(await currentAfter(() => client.exec("select 1"))).toMatchObject({ read: false });
    const before = await reader.current();
    const twice = await currentAfter(() => client.exec("select 1; update keyhaven_epoch set value = value + 1 where shard = 0"));
    expect(twice).toEqual({ epoch: before + 1n, read: true });
  });

  it("counts EXECUTE as a read because only selects are prepared", () => {
    expect(() => preparePgliteSelect(store.db, "keyhaven_test_write", "update keys set name = $1", {})).toThrow(/selects only/);
  });

  it("is read when a write finished while the previous read ran", async () => {
    await reader.current();
    await store.db.execute(bump);
    // The read starts, then a write finishes before the next current(): that one must read again.
    const first = reader.current();
    const write = store.db.execute(bump);
    expect(await first).toBeLessThanOrEqual(await epochInDb());
    await write;
    reads.mockClear();
    expect(await reader.current()).toBe(await epochInDb());
    expect(reads).toHaveBeenCalled();
  });
});

describe("through the harness's store", () => {
  let h: Harness;
  beforeAll(async () => {
    // Nothing in the background: no analytics flush, no migration worker polling the store, no last-used flush
    // (kept with analytics off, so stopped here).
    h = await createHarness({ KEYHAVEN_ANALYTICS: "off" }, { redisUrl: null, migrationWorker: false });
    await h.jobs.lastUsed.stop();
  });
  afterAll(() => h?.close());

  it.skipIf(!process.env.TEST_DATABASE_URL)("is read on every call on PostgreSQL: other replicas write", async () => {
    expect(h.store.writes).toBeUndefined();
    const r = new EpochReader(h.db, h.store.writes);
    const spy = vi.spyOn(r.invalidations, "readEpoch");
    await r.current();
    await r.current();
    expect(spy).toHaveBeenCalledTimes(2);
  });

  it.skipIf(process.env.TEST_DATABASE_URL)("a cached verification runs no statement, and sees the key disabled right after", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const { key, keyId } = await h.importKey(t, apiId);
    const verify = () => h.post("/v1/keys.verifyKey", { apiId, key });
    // The first loads the key (its epoch comes with the row), the second reads the epoch once after the import.
    expect((await verify()).body.valid).toBe(true);
    expect((await verify()).body.valid).toBe(true);
    const client = (h.db as unknown as { $client: { query: (...a: unknown[]) => unknown; exec: (...a: unknown[]) => unknown } }).$client;
    const queries = vi.spyOn(client, "query");
    const execs = vi.spyOn(client, "exec");
    try {
      expect((await verify()).body.valid).toBe(true);
      expect([...queries.mock.calls, ...execs.mock.calls].map((c) => String(c[0]).slice(0, 200))).toEqual([]);
    } finally {
      queries.mockRestore();
      execs.mockRestore();
    }
    expect((await h.post("/v1/keys.updateKey", { keyId, enabled: false }, t.rootKey)).status).toBe(200);
    expect((await verify()).body).toMatchObject({ valid: false, code: "DISABLED" });
  });
});
