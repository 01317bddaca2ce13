import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EpochCache } from "../src/storage/epoch.js";
import { createHarness, expectError, type Harness, type Tenant } from "./helper.js";

// Root keys and ratelimits.limit's namespace/override lookups are kept in memory behind the store's epoch
// (src/storage/epoch.ts, migration root_key_epoch). Each case first makes a request (so the entry is cached), then
// changes what it depends on, and expects the very next request, on this app or on a replica, to see the change.

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const HOUR = 3_600_000;
const uniq = (prefix: string) => `${prefix}-${randomBytes(5).toString("hex")}`;
const epoch = async () => BigInt((await h.sql<{ e: string }>("select sum(value)::text as e from keyhaven_epoch"))[0]!.e);
const createApi = (t: Tenant, rootKey = t.rootKey) => h.post("/v1/apis.createApi", { name: "epoch" }, rootKey);
const limit = (t: Tenant, body: Record<string, unknown>) =>
  h.post("/v1/ratelimits.limit", { limit: 5, duration: HOUR, ...body }, t.rootKey);

describe("root keys in memory", () => {
  it("sees a root key's permissions changed, and restored, on the next request", async () => {
    const t = await h.tenant();
    expect((await createApi(t)).status).toBe(200);
    await h.sql(`update root_keys set permissions = '{api.*.read_api}' where id = '${t.rootKeyId}'`);
    expectError(await createApi(t), 403, "INSUFFICIENT_PERMISSIONS");
    await h.sql(`update root_keys set permissions = '{*}' where id = '${t.rootKeyId}'`);
    expect((await createApi(t)).status).toBe(200);
  });

  it("refuses a deleted root key on the next request", async () => {
    const t = await h.tenant();
    expect((await createApi(t)).status).toBe(200);
    await h.sql(`delete from root_keys where id = '${t.rootKeyId}'`);
    expectError(await createApi(t), 403, "UNAUTHORIZED", "key not found");
  });

  it("refuses a root key of a workspace disabled after it was cached", async () => {
    const t = await h.tenant();
    expect((await createApi(t)).status).toBe(200);
    await h.disableWorkspace(t.workspaceId);
    expectError(await createApi(t), 403, "FORBIDDEN", "workspace is disabled");
  });

  it("accepts a root key created after an unknown one was refused (absent keys are not cached)", async () => {
    const t = await h.tenant();
    const secret = `later-${randomBytes(12).toString("hex")}`;
    const res = await h.post("/v1/apis.createApi", { name: "later" }, secret);
    expectError(res, 403, "UNAUTHORIZED", "key not found");
    const hash = (await import("../src/crypto/hash.js")).hashKey(secret);
    await h.sql(
      `insert into root_keys (id, workspace_id, hash, start, permissions, created_at_m)
       values ('rk_${randomBytes(8).toString("hex")}', '${t.workspaceId}', '${hash}', 'later', '{*}', 0)`,
    );
    expect((await h.post("/v1/apis.createApi", { name: "later" }, secret)).status).toBe(200);
  });

  it("sees a root key deleted through one app on the next request to a replica", async () => {
    const t = await h.tenant();
    const replica = await h.replica();
    try {
      const viaReplica = () =>
        replica.app.inject({
          method: "POST",
          url: "/v1/apis.createApi",
          headers: { authorization: `Bearer ${t.rootKey}`, "content-type": "application/json" },
          payload: { name: "replica" },
        });
      expect((await viaReplica()).statusCode).toBe(200);
      await h.sql(`delete from root_keys where id = '${t.rootKeyId}'`);
      const refused = await viaReplica();
      expect(refused.statusCode).toBe(403);
      expect(refused.json().error.code).toBe("UNAUTHORIZED");
    } finally {
      await replica.close();
    }
  });
});

describe("ratelimits.limit lookups in memory", () => {
  it("applies an override set after the identifier was cached, then the request's limit once it is deleted", async () => {
    const t = await h.tenant();
    const namespace = uniq("ns");
    const identifier = uniq("user");
    expect((await limit(t, { namespace, identifier })).body).toMatchObject({ success: true, limit: 5, remaining: 4 });

    const set = await h.post("/v1/ratelimits.setOverride", { namespaceName: namespace, identifier, limit: 50, duration: HOUR }, t.rootKey);
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    // A new override: the window's count (1) carries over under the new limit.
    expect((await limit(t, { namespace, identifier })).body).toMatchObject({ success: true, limit: 50, remaining: 48 });

    const del = await h.post("/v1/ratelimits.deleteOverride", { namespaceName: namespace, identifier }, t.rootKey);
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    expect((await limit(t, { namespace, identifier })).body).toMatchObject({ success: true, limit: 5, remaining: 2 });
  });

  it("applies a wildcard override created after the identifier was cached, and a changed one", async () => {
    const t = await h.tenant();
    const namespace = uniq("ns");
    expect((await limit(t, { namespace, identifier: "team-a-1" })).body).toMatchObject({ limit: 5 });
    const set = (l: number) =>
      h.post("/v1/ratelimits.setOverride", { namespaceName: namespace, identifier: "team-a-*", limit: l, duration: HOUR }, t.rootKey);
    expect((await set(7)).status).toBe(200);
    expect((await limit(t, { namespace, identifier: "team-a-1" })).body).toMatchObject({ limit: 7 });
    expect((await set(9)).status).toBe(200);
    expect((await limit(t, { namespace, identifier: "team-a-1" })).body).toMatchObject({ limit: 9 });
  });

  it("sees an override set through one app on the next call to a replica", async () => {
    const t = await h.tenant();
    const namespace = uniq("ns");
    const identifier = uniq("user");
    const replica = await h.replica();
    try {
      const viaReplica = async () =>
        (
          await replica.app.inject({
            method: "POST",
            url: "/v1/ratelimits.limit",
            headers: { authorization: `Bearer ${t.rootKey}`, "content-type": "application/json" },
            payload: { namespace, identifier, limit: 5, duration: HOUR },
          })
        ).json();
      expect(await viaReplica()).toMatchObject({ success: true, limit: 5 });
      const set = await h.post("/v1/ratelimits.setOverride", { namespaceName: namespace, identifier, limit: 0, duration: HOUR }, t.rootKey);
      expect(set.status, JSON.stringify(set.body)).toBe(200);
      expect(await viaReplica()).toMatchObject({ success: false, limit: 0 });
    } finally {
      await replica.close();
    }
  });
});

describe("the epoch behind these caches", () => {
  it("moves when a root key is changed or deleted and when an override is written, not when a root key is added", async () => {
    const t = await h.tenant();
    let before = await epoch();
    await h.rootKey(t.workspaceId, ["*"]);
    expect(await epoch()).toBe(before);

    await h.sql(`update root_keys set name = 'renamed' where id = '${t.rootKeyId}'`);
    expect(await epoch()).toBe(before + 1n);

    const namespace = uniq("ns");
    expect((await limit(t, { namespace, identifier: "x" })).status).toBe(200);
    before = await epoch();
    const set = await h.post(
      "/v1/ratelimits.setOverride",
      { namespaceName: namespace, identifier: "yyy", limit: 1, duration: HOUR },
      t.rootKey,
    );
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(await epoch()).toBe(before + 1n);

    before = await epoch();
    await h.sql(`delete from root_keys where id = '${t.rootKeyId}'`);
    expect(await epoch()).toBe(before + 1n);
  });
});

describe("EpochCache", () => {
  const counting = () => {
    const loads: string[] = [];
    const cache = new EpochCache<string>(async (key) => {
      loads.push(key);
      return key.startsWith("missing") ? undefined : `value of ${key}`;
    }, 3);
    return { cache, loads };
  };

  it("answers from memory at the same epoch and loads again at a newer one", async () => {
    const { cache, loads } = counting();
    expect(await cache.get("a", 1n)).toBe("value of a");
    expect(await cache.get("a", 1n)).toBe("value of a");
    expect(loads).toEqual(["a"]);
    expect(await cache.get("a", 2n)).toBe("value of a");
    expect(loads).toEqual(["a", "a"]);
  });

  it("never stores what a caller with an older epoch loaded, nor an absent value", async () => {
    const { cache, loads } = counting();
    await cache.get("a", 5n);
    expect(await cache.get("b", 4n)).toBe("value of b");
    expect(await cache.get("a", 4n)).toBe("value of a"); // loaded again: entries are only for epoch 5
    expect(await cache.get("missing", 5n)).toBeUndefined();
    expect(await cache.get("missing", 5n)).toBeUndefined();
    expect(cache.size).toBe(1);
    expect(loads).toEqual(["a", "b", "a", "missing", "missing"]);
  });

  it("drops a load that finished after another caller moved the epoch on", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const cache = new EpochCache<string>(async (key) => {
      if (key === "slow") await gate;
      return key;
    }, 10);
    const slow = cache.get("slow", 1n);
    await cache.get("fast", 2n);
    release();
    expect(await slow).toBe("slow");
    expect(cache.size).toBe(1); // only "fast", read at epoch 2
  });

  it("keeps at most its size, dropping the oldest entries", async () => {
    const { cache } = counting();
    for (const k of ["a", "b", "c", "d"]) await cache.get(k, 1n);
    expect(cache.size).toBe(3);
  });

  it("drops the least recently used entry, not one just read (lru-cache)", async () => {
    const { cache, loads } = counting();
    for (const k of ["a", "b", "c", "a", "d", "a"]) await cache.get(k, 1n);
    expect(loads).toEqual(["a", "b", "c", "d"]);
    expect(cache.size).toBe(3);
  });
});
