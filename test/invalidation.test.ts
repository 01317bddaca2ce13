import { randomBytes } from "node:crypto";
import { describe, expect, vi } from "vitest";
import { LRUCache } from "lru-cache";
import postgres from "postgres";
import type { FastifyInstance } from "fastify";
import { InvalidationPruner, InvalidationTracker, TaggedEntries } from "../src/storage/invalidations.js";
import type { Services } from "../src/services.js";
import { test } from "./fixtures.js";

// A write drops from memory only what it can change (issue 13 §1, migration invalidation_log): each case caches keys
// (or root keys), makes a write, and counts the rows the caches read again: an unrelated write reads none, a related
// one drops exactly what depends on it, and the very next verification, here or on a replica, sees it. When the log
// cannot be caught up (pruned, a bulk write), everything is dropped, as before the log.

const it = test;
const onPostgres = process.env.TEST_DATABASE_URL !== undefined;
const HOUR = 3_600_000;

const ok = async (res: Promise<{ status: number; body: unknown }>) => {
  const r = await res;
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as any;
};

const verifyOn = async (app: FastifyInstance, body: Record<string, unknown>) =>
  (await app.inject({ method: "POST", url: "/v1/keys.verifyKey", payload: body })).json();

const loadsOf = (services: Services) => services.verificationCache.loads;
const statsOf = (services: Services) => ({ ...services.epochs.invalidations.stats });

describe("a write drops only the cached entries it can change", () => {
  it("keeps a cached key when another key is created or updated, or another key's roles change", async ({ h, t, apiId }) => {
    const suffix = randomBytes(4).toString("hex");
    await ok(h.post("/v1/permissions.createRole", { name: `other-${suffix}` }, t.rootKey));
    const kept = await h.importKey(t, apiId, { name: "kept" });
    const other = await h.importKey(t, apiId, { name: "other" });
    expect(await verifyOn(h.app, { key: kept.key })).toMatchObject({ valid: true, name: "kept" });
    const loads = loadsOf(h.services);
    const before = statsOf(h.services);

    await ok(h.post("/v1/keys.updateKey", { keyId: other.keyId, name: "renamed" }, t.rootKey));
    expect(await verifyOn(h.app, { key: kept.key })).toMatchObject({ valid: true, name: "kept" });
    await ok(h.post("/v1/keys.createKey", { apiId }, t.rootKey));
    await ok(h.post("/v1/keys.setRoles", { keyId: other.keyId, roles: [{ name: `other-${suffix}` }] }, t.rootKey));
    expect(await verifyOn(h.app, { key: kept.key })).toMatchObject({ valid: true, name: "kept" });

    // Caught up from the log, tag by tag, and the kept key was never read again.
    expect(loadsOf(h.services)).toBe(loads);
    const after = statsOf(h.services);
    expect(after.tagsApplied).toBeGreaterThan(before.tagsApplied);
    expect(after.clearedAll).toBe(before.clearedAll);
    // The updated key itself was dropped: its next verification reads it and sees the new name.
    expect(await verifyOn(h.app, { key: other.key })).toMatchObject({ valid: true, name: "renamed" });
  });

  it("drops a key when a permission is added to one of its roles, and keeps the keys without that role", async ({ h, t, apiId }) => {
    const suffix = randomBytes(4).toString("hex");
    const perm = `docs.read.${suffix}`;
    await ok(h.post("/v1/permissions.createPermission", { name: perm }, t.rootKey));
    const { roleId } = await ok(h.post("/v1/permissions.createRole", { name: `reader-${suffix}` }, t.rootKey));
    const reader = await h.importKey(t, apiId, { roles: [`reader-${suffix}`] });
    const bystander = await h.importKey(t, apiId);
    const check = { key: reader.key, authorization: { permissions: perm } };
    expect(await verifyOn(h.app, check)).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS" });
    expect(await verifyOn(h.app, { key: bystander.key })).toMatchObject({ valid: true });
    const loads = loadsOf(h.services);

    await ok(h.post("/v1/permissions.addPermissionsToRole", { roleId, permissions: [{ slug: perm }] }, t.rootKey));
    expect(await verifyOn(h.app, check)).toMatchObject({ valid: true, code: "VALID" });
    expect(await verifyOn(h.app, { key: bystander.key })).toMatchObject({ valid: true });
    expect(loadsOf(h.services)).toBe(loads + 1); // the reader only
  });

  it("drops a key when its identity gets a rate limit, and keeps a key without identity", async ({ h, t, apiId }) => {
    const externalId = `user-${randomBytes(4).toString("hex")}`;
    const withIdentity = await h.importKey(t, apiId, { externalId });
    const without = await h.importKey(t, apiId);
    expect(await verifyOn(h.app, { key: withIdentity.key })).not.toHaveProperty("ratelimit");
    expect(await verifyOn(h.app, { key: without.key })).toMatchObject({ valid: true });
    const loads = loadsOf(h.services);

    await ok(
      h.post("/v1/identities.updateIdentity", { externalId, ratelimits: [{ name: "burst", limit: 1, duration: 60_000 }] }, t.rootKey),
    );
    expect(await verifyOn(h.app, { key: withIdentity.key, ratelimits: [{ name: "burst" }] })).toMatchObject({ valid: true });
    expect(await verifyOn(h.app, { key: withIdentity.key, ratelimits: [{ name: "burst" }] })).toMatchObject({ code: "RATE_LIMITED" });
    expect(await verifyOn(h.app, { key: without.key })).toMatchObject({ valid: true });
    expect(loadsOf(h.services)).toBe(loads + 1);
  });

  it("drops the keys of a deleted API, and keeps the keys of another API", async ({ h, t, apiId }) => {
    const doomedApi = await h.createApi(t);
    const doomed = await h.importKey(t, doomedApi);
    const kept = await h.importKey(t, apiId);
    expect(await verifyOn(h.app, { key: doomed.key })).toMatchObject({ valid: true });
    expect(await verifyOn(h.app, { key: kept.key })).toMatchObject({ valid: true });
    const loads = loadsOf(h.services);

    await ok(h.post("/v1/apis.deleteApi", { apiId: doomedApi }, t.rootKey));
    expect(await verifyOn(h.app, { key: doomed.key })).toMatchObject({ valid: false, code: "NOT_FOUND" });
    expect(await verifyOn(h.app, { key: kept.key })).toMatchObject({ valid: true });
    expect(loadsOf(h.services)).toBe(loads); // the doomed key is gone (no row), the kept one still in memory
  });

  it("drops a root key whose permissions change, and keeps the root keys of other workspaces", async ({ h }) => {
    const changed = await h.tenant();
    const kept = await h.tenant();
    const createApi = (rootKey: string) => h.post("/v1/apis.createApi", { name: "inv" }, rootKey);
    expect((await createApi(changed.rootKey)).status).toBe(200);
    expect((await createApi(kept.rootKey)).status).toBe(200);
    const loads = h.services.rootKeys.loads;

    await h.sql(`update root_keys set permissions = '{api.*.read_api}' where id = '${changed.rootKeyId}'`);
    expect((await createApi(changed.rootKey)).status).toBe(403);
    expect((await createApi(kept.rootKey)).status).toBe(200);
    expect(h.services.rootKeys.loads).toBe(loads + 1);
  });

  it("keeps a namespace's lookups when another namespace's override is set", async ({ h, t }) => {
    const limit = (namespace: string, identifier: string) =>
      ok(h.post("/v1/ratelimits.limit", { namespace, identifier, limit: 5, duration: HOUR }, t.rootKey));
    const [a, b] = [`ns-a-${randomBytes(3).toString("hex")}`, `ns-b-${randomBytes(3).toString("hex")}`];
    await limit(a, "user-x");
    await limit(b, "user-x");
    await limit(a, "user-x"); // now cached
    const cache = (h.services.limitLookups as unknown as { cache: { loads: number } }).cache;
    const loads = cache.loads;
    await ok(h.post("/v1/ratelimits.setOverride", { namespaceName: b, identifier: "user-x", limit: 1, duration: HOUR }, t.rootKey));
    expect(await limit(a, "user-x")).toMatchObject({ limit: 5 });
    expect(await limit(b, "user-x")).toMatchObject({ limit: 1 });
    expect(cache.loads).toBe(loads + 1); // b's lookup only
  });
});

describe("replicas on one database", () => {
  it("keeps a replica's unrelated keys and shows it the changed one on its next verification", async ({ h, t, apiId }) => {
    const kept = await h.importKey(t, apiId, { name: "kept" });
    const changed = await h.importKey(t, apiId, { name: "before" });
    const replica = await h.replica();
    try {
      expect(await verifyOn(replica.app, { key: kept.key })).toMatchObject({ name: "kept" });
      expect(await verifyOn(replica.app, { key: changed.key })).toMatchObject({ name: "before" });
      const loads = loadsOf(replica.services);

      await ok(h.post("/v1/keys.updateKey", { keyId: changed.keyId, name: "after" }, t.rootKey));
      expect(await verifyOn(replica.app, { key: changed.key })).toMatchObject({ name: "after" });
      expect(await verifyOn(replica.app, { key: kept.key })).toMatchObject({ name: "kept" });
      expect(loadsOf(replica.services)).toBe(loads + 1);
      await ok(h.post("/v1/keys.updateKey", { keyId: changed.keyId, enabled: false }, t.rootKey));
      expect(await verifyOn(replica.app, { key: changed.key })).toMatchObject({ valid: false, code: "DISABLED" });
    } finally {
      await replica.close();
    }
  });

  it.skipIf(!onPostgres)(
    "sees a change whose transaction began before, and committed after, another one the replica already caught up with",
    async ({ h, t, apiId }) => {
      const late = await h.importKey(t, apiId, { name: "late-before" });
      const early = await h.importKey(t, apiId, { name: "early-before" });
      const replica = await h.replica();
      const client = postgres(h.config.databaseUrl!, { max: 1, onnotice: () => {} });
      try {
        expect(await verifyOn(replica.app, { key: late.key })).toMatchObject({ name: "late-before" });
        expect(await verifyOn(replica.app, { key: early.key })).toMatchObject({ name: "early-before" });

        // The late transaction takes its id first and commits last: a reader that only asked for ids above the
        // greatest it had read would never see its row.
        const conn = await client.reserve();
        await conn`begin`;
        await conn`select pg_current_xact_id()`;
        await conn`update keys set name = 'late-after' where id = ${late.keyId}`;
        await ok(h.post("/v1/keys.updateKey", { keyId: early.keyId, name: "early-after" }, t.rootKey));
        expect(await verifyOn(replica.app, { key: early.key })).toMatchObject({ name: "early-after" });
        expect(await verifyOn(replica.app, { key: late.key })).toMatchObject({ name: "late-before" }); // not committed
        await conn`commit`;
        conn.release();
        expect(await verifyOn(replica.app, { key: late.key })).toMatchObject({ name: "late-after" });
      } finally {
        await client.end();
        await replica.close();
      }
    },
  );
});

describe("when the log cannot be caught up, everything is dropped", () => {
  it("logs `*` once for a transaction that changes more than 100 things, and readers empty their caches", async ({ h, t, apiId }) => {
    const kept = await h.importKey(t, apiId);
    expect(await verifyOn(h.app, { key: kept.key })).toMatchObject({ valid: true });
    const before = statsOf(h.services);
    const loads = loadsOf(h.services);
    const [bumped] = await h.sql<{ rows: number }>(
      `with bumped as (select keyhaven_bump_epoch('key:bulk-' || g) from generate_series(1, 150) g)
       select count(*)::int as rows from bumped`,
    );
    expect(bumped?.rows).toBe(150);
    const logged = await h.sql<{ tag: string }>("select tag from keyhaven_invalidations where tag like 'key:bulk-%' or tag = '*'");
    expect(logged).toHaveLength(101);
    expect(logged.filter((r) => r.tag === "*")).toHaveLength(1);

    expect(await verifyOn(h.app, { key: kept.key })).toMatchObject({ valid: true });
    expect(statsOf(h.services).clearedAll).toBe(before.clearedAll + 1);
    expect(loadsOf(h.services)).toBe(loads + 1);
  });

  it("empties its caches when more rows than it reads at once were logged since its last catch-up", async ({ h }) => {
    const tracker = new InvalidationTracker(h.db, undefined, 2);
    const entries = new TaggedEntries<string>(10);
    tracker.register(entries);
    const epoch = async () => BigInt((await h.sql<{ e: string }>("select sum(value)::text as e from keyhaven_epoch"))[0]!.e);
    await tracker.reach(await epoch()); // the first catch-up has nothing to catch up from
    entries.set("a", "a", ["key:a"]);
    entries.set("b", "b", ["key:b"]);

    await h.sql("select keyhaven_bump_epoch('key:a')");
    await tracker.reach(await epoch());
    expect([entries.get("a"), entries.get("b")]).toEqual([undefined, "b"]);

    for (const tag of ["key:x", "key:y", "key:z"]) await h.sql(`select keyhaven_bump_epoch('${tag}')`);
    const cleared = tracker.stats.clearedAll;
    await tracker.reach(await epoch());
    expect(tracker.stats.clearedAll).toBe(cleared + 1);
    expect(entries.size).toBe(0);
  });

  it("prunes old rows and empties a reader's caches when rows it needed were pruned", async ({ h, t, apiId }) => {
    const changed = await h.importKey(t, apiId, { name: "before" });
    const bystander = await h.importKey(t, apiId);
    const replica = await h.replica();
    try {
      expect(await verifyOn(replica.app, { key: changed.key })).toMatchObject({ name: "before" });
      expect(await verifyOn(replica.app, { key: bystander.key })).toMatchObject({ valid: true });
      await ok(h.post("/v1/keys.updateKey", { keyId: changed.keyId, name: "after" }, t.rootKey));

      const pruner = new InvalidationPruner(h.db, { retentionMs: 0, intervalMs: HOUR });
      expect(await pruner.pruneNow()).toBeGreaterThan(0);
      expect(await h.sql("select 1 from keyhaven_invalidations")).toHaveLength(0);

      const before = statsOf(replica.services);
      const loads = loadsOf(replica.services);
      expect(await verifyOn(replica.app, { key: bystander.key })).toMatchObject({ valid: true });
      expect(await verifyOn(replica.app, { key: changed.key })).toMatchObject({ name: "after" });
      expect(statsOf(replica.services).clearedAll).toBe(before.clearedAll + 1);
      expect(loadsOf(replica.services)).toBe(loads + 2);

      // Caught up past the pruned rows, the replica drops by tag again. On a shared PostgreSQL, a transaction of
      // another database still in progress at the last catch-up, with an id below the pruned ones, makes the reader
      // empty everything once more (safe, never stale): so each round writes and checks again until one is applied
      // by tag, every round's answer being the fresh one.
      let round = 0;
      await expect
        .poll(
          async () => {
            const name = `again-${++round}`;
            await ok(h.post("/v1/keys.updateKey", { keyId: changed.keyId, name }, t.rootKey));
            expect(await verifyOn(replica.app, { key: changed.key })).toMatchObject({ name });
            expect(await verifyOn(replica.app, { key: bystander.key })).toMatchObject({ valid: true });
            return statsOf(replica.services).tagsApplied > before.tagsApplied;
          },
          { timeout: 30_000, interval: 200 },
        )
        .toBe(true);
    } finally {
      await replica.close();
    }
  });
});

describe("TaggedEntries", () => {
  it("drops an entry by the tags of its latest value, and forgets the tags of evicted entries", () => {
    const entries = new TaggedEntries<string>(2);
    entries.set("k", "v1", ["t1", "t2"]);
    entries.set("k", "v2", ["t2", "t3"]);
    entries.dropTagged(new Set(["t1"]));
    expect(entries.get("k")).toBe("v2");
    entries.dropTagged(new Set(["t3"]));
    expect(entries.get("k")).toBeUndefined();

    entries.set("a", "1", ["x"]);
    entries.set("b", "2", ["x"]);
    entries.set("c", "3", ["y"]); // evicts "a"
    entries.dropTagged(new Set(["x"]));
    expect([entries.get("a"), entries.get("b"), entries.get("c")]).toEqual([undefined, undefined, "3"]);
    expect(entries.size).toBe(1);
  });

  it("keeps each tag exact as it goes from one entry to several and back", () => {
    const entries = new TaggedEntries<string>(3);
    entries.set("a", "1", ["x", "only-a"]);
    entries.set("a", "1", ["x", "only-a"]); // the same key again: still one entry under x
    entries.set("b", "2", ["x"]);
    entries.dropTagged(new Set(["only-a"]));
    expect([entries.get("a"), entries.get("b")]).toEqual([undefined, "2"]);
    entries.dropTagged(new Set(["x"]));
    expect(entries.get("b")).toBeUndefined();

    // A key set again with other tags leaves its old ones: dropping them keeps the entry.
    entries.set("c", "3", ["old"]);
    entries.set("c", "4", ["new"]);
    entries.dropTagged(new Set(["old"]));
    expect(entries.get("c")).toBe("4");

    // Evicted entries leave their tags: a new entry under the same key is not dropped by the evicted one's tag.
    entries.set("d", "5", ["shared"]);
    entries.set("e", "6", ["shared"]);
    entries.set("f", "7", []); // evicts "c"; the cache holds d, e, f
    entries.set("g", "8", []); // evicts "d"
    entries.set("h", "9", []); // evicts "e": "shared" tags nothing now
    entries.set("d", "10", ["other"]); // evicts "f"
    entries.dropTagged(new Set(["shared"]));
    expect([entries.get("d"), entries.get("g"), entries.get("h")]).toEqual(["10", "8", "9"]);
  });
  it("drops the entries of a tag many carry without visiting them, and finds them stale when read", () => {
    // An `api:` or `ws:` tag is carried by every cached key of that API or workspace: dropped entry by entry, 50,000
    // of them held the event loop ~90 ms on every replica (issue 13).
    const entries = new TaggedEntries<string>(20_000);
    for (let i = 0; i < 10_000; i++) entries.set(`k${i}`, `v${i}`, [`key:${i}`, "api:a"]);
    entries.set("other", "o", ["key:other", "api:b"]);
    const deletes = vi.spyOn(LRUCache.prototype, "delete");
    try {
      entries.dropTagged(new Set(["api:a"]));
      expect(deletes).not.toHaveBeenCalled();
    } finally {
      deletes.mockRestore();
    }
    expect(entries.get("k0")).toBeUndefined();
    expect(entries.has("k9999")).toBe(false);
    expect(entries.get("other")).toBe("o");
    expect(entries.size).toBe(1);

    // Stored after the drop, under the same tag: not stale, until the tag is dropped again.
    entries.set("k1", "again", ["key:1", "api:a"]);
    expect([entries.get("k1"), entries.size]).toEqual(["again", 2]);
    // A stale entry read is removed, and with it the tags only it carried.
    const held = entries.tagsHeld;
    expect(entries.get("k5")).toBeUndefined();
    expect(entries.tagsHeld).toBe(held - 1);
    entries.dropTagged(new Set(["api:a"]));
    expect([entries.get("k1"), entries.get("other"), entries.size]).toEqual([undefined, "o", 1]);
  });

  it("forgets the tags of entries evicted, replaced or cleared", () => {
    const entries = new TaggedEntries<string>(2);
    entries.set("a", "1", ["key:a", "api:x"]);
    entries.set("b", "2", ["key:b", "api:x"]);
    entries.set("c", "3", ["key:c", "api:y"]); // evicts "a"
    expect(entries.tagsHeld).toBe(4); // key:b, api:x, key:c, api:y
    entries.set("b", "2'", ["key:b", "api:y"]); // replaces b's value and tags: api:x is carried by none
    expect(entries.tagsHeld).toBe(3);
    entries.dropTagged(new Set(["api:x"]));
    expect([entries.get("b"), entries.get("c")]).toEqual(["2'", "3"]);
    entries.clear();
    expect([entries.size, entries.tagsHeld]).toEqual([0, 0]);
    entries.set("a", "4", ["api:x"]);
    expect([entries.get("a"), entries.tagsHeld]).toEqual(["4", 1]);
  });
});
