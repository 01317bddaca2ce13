import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { rowsOf, type Store } from "../src/storage/client.js";
import { isIdle, pooledPglite } from "./pglite-pool.js";

// The tests' pool of migrated PGlite instances (pglite-pool.ts): a file must never see what an earlier one left.

const query = async <T>(store: Store, text: string) => rowsOf<T>(await store.db.execute(sql.raw(text)));
/** The instance behind a store: a property set on it is seen through every store on the same instance. */
const instanceOf = (store: Store) => (store.db as unknown as { $client: { poolTestMark?: string } }).$client;

describe("the tests' pool of PGlite instances", () => {
  it("hands an instance back emptied to what migrating left", async () => {
    const first = await pooledPglite();
    const seeded = await query(first, "select * from keyhaven_epoch order by shard");
    instanceOf(first).poolTestMark = "reused";
    await query(first, "insert into workspaces (id, name, created_at_m) values ('ws_pool', 'pool', 0)");
    await query(first, "update keyhaven_epoch set value = value + 5");
    await query(first, "select nextval('migration_batches_id_seq')");
    await query(first, "analyze workspaces");
    await first.close();

    const second = await pooledPglite();
    try {
      expect(instanceOf(second).poolTestMark).toBe("reused");
      expect(await query(second, "select id from workspaces")).toEqual([]);
      expect(await query(second, "select * from keyhaven_epoch order by shard")).toEqual(seeded);
      expect(await query(second, "select nextval('migration_batches_id_seq')::int as id")).toEqual([{ id: 1 }]);
      expect(await query(second, "select count(*)::int as n from pg_statistic where starelid = 'workspaces'::regclass")).toEqual([
        { n: 0 },
      ]);
    } finally {
      await second.close();
    }
  });

  it("refuses statements on a store once closed, though its instance lives on", async () => {
    const store = await pooledPglite();
    await store.close();
    const err = await query(store, "select 1").catch((e: Error) => e);
    expect((err as Error & { cause?: Error }).cause?.message).toBe("the store is closed");
  });

  it("does not reuse an instance whose schema a test changed", async () => {
    const first = await pooledPglite();
    instanceOf(first).poolTestMark = "altered";
    await query(first, 'alter table ratelimits add constraint pool_test check ("limit" <> 1) not valid');
    await first.close();
    // Closed, not kept idle: no later caller can get it. (Asked of the pool itself: popping every idle instance and
    // a new one to see that none is the altered one cost up to 4 new instances, 13 s on a loaded machine.)
    expect(isIdle(first)).toBe(false);
    const next = await pooledPglite();
    try {
      expect(instanceOf(next).poolTestMark).not.toBe("altered");
      expect(await query(next, "select conname from pg_constraint where conname = 'pool_test'")).toEqual([]);
    } finally {
      await next.close();
    }
    // An instance left as migrating left it is kept.
    expect(isIdle(next)).toBe(true);
  });
});
