import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { describe, expect, vi } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { EpochReader } from "../src/storage/epoch.js";
import { RemainingSpender } from "../src/storage/keys/remaining.spender.js";
import { prepareVerificationLookup } from "../src/storage/keys/keys.repository.js";
import { POSTGRES_LOOKUPS_IN_FLIGHT, VerificationCache } from "../src/storage/keys/verification.cache.js";
import { test } from "./fixtures.js";
import { waitFor } from "./wait.js";

// Verification answers from an in-process cache (src/storage/keys/verification.cache.ts) validated against the
// database's epoch. Each case below first verifies the key (so it is cached), then changes it through the API, and
// expects the very next verification to see the change.

// The file's harness, tenant and API (`h`, `t`, `apiId` of test/fixtures.ts), and readers over them.
const it = test
  .extend(
    "verify",
    async ({ h }) =>
      async (body: Record<string, unknown>) =>
        (await h.post("/v1/keys.verifyKey", body)).body,
  )
  .extend(
    "epoch",
    async ({ h }) =>
      async () =>
        (await h.sql<{ e: string }>("select sum(value)::text as e from keyhaven_epoch"))[0]!.e,
  )
  .extend(
    "remainingOf",
    async ({ h }) =>
      async (keyId: string) =>
        (await h.sql<{ r: number }>(`select remaining_requests as r from keys where id = '${keyId}'`))[0]!.r,
  );

const ok = async (res: Promise<{ status: number; body: unknown }>) => {
  const r = await res;
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as any;
};

describe("the verification cache never answers with stale data", () => {
  it("sees a key disabled, re-enabled, renamed and given new meta", async ({ h, t, apiId, verify }) => {
    const { key, keyId } = await h.importKey(t, apiId, { name: "before", meta: { v: 1 } });
    expect(await verify({ key })).toMatchObject({ valid: true, name: "before", meta: { v: 1 } });
    await ok(h.post("/v1/keys.updateKey", { keyId, enabled: false }, t.rootKey));
    expect(await verify({ key })).toMatchObject({ valid: false, code: "DISABLED" });
    await ok(h.post("/v1/keys.updateKey", { keyId, enabled: true, name: "after", meta: { v: 2 } }, t.rootKey));
    expect(await verify({ key })).toMatchObject({ valid: true, name: "after", meta: { v: 2 } });
  });

  it("sees an expiry set in the past, and a usage limit added to an unlimited key", async ({ h, t, apiId, verify }) => {
    const { key, keyId } = await h.importKey(t, apiId);
    expect(await verify({ key })).toMatchObject({ valid: true });
    await ok(h.post("/v1/keys.updateKey", { keyId, remaining: 2 }, t.rootKey));
    expect(await verify({ key })).toMatchObject({ valid: true, remaining: 1 });
    await ok(h.post("/v1/keys.updateKey", { keyId, expires: Date.now() - 1000 }, t.rootKey));
    expect(await verify({ key })).toMatchObject({ valid: false, code: "EXPIRED" });
  });

  it("sees a key deleted, and a deleted API", async ({ h, t, apiId, verify }) => {
    const a = await h.importKey(t, apiId);
    expect(await verify({ key: a.key })).toMatchObject({ valid: true });
    await ok(h.post("/v1/keys.deleteKey", { keyId: a.keyId }, t.rootKey));
    expect(await verify({ key: a.key })).toMatchObject({ valid: false, code: "NOT_FOUND" });

    const otherApi = await h.createApi(t);
    const b = await h.importKey(t, otherApi);
    expect(await verify({ key: b.key })).toMatchObject({ valid: true });
    await ok(h.post("/v1/apis.deleteApi", { apiId: otherApi }, t.rootKey));
    expect(await verify({ key: b.key })).toMatchObject({ valid: false, code: "NOT_FOUND" });
  });

  it("sees permissions granted and taken away directly and through a role", async ({ h, t, apiId, verify }) => {
    const suffix = randomBytes(4).toString("hex");
    const perm = `docs.read.${suffix}`;
    const roleName = `reader-${suffix}`;
    await ok(h.post("/v1/permissions.createPermission", { name: perm }, t.rootKey));
    const { roleId } = await ok(h.post("/v1/permissions.createRole", { name: roleName }, t.rootKey));
    const { key, keyId } = await h.importKey(t, apiId, { roles: [roleName] });
    const check = { key, authorization: { permissions: perm } };

    expect(await verify(check)).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS" });
    await ok(h.post("/v1/permissions.addPermissionsToRole", { roleId, permissions: [{ slug: perm }] }, t.rootKey));
    expect(await verify(check)).toMatchObject({ valid: true, code: "VALID" });
    await ok(h.post("/v1/permissions.removePermissionsFromRole", { roleId, permissions: [{ slug: perm }] }, t.rootKey));
    expect(await verify(check)).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS" });
    await ok(h.post("/v1/keys.addPermissions", { keyId, permissions: [{ name: perm }] }, t.rootKey));
    expect(await verify(check)).toMatchObject({ valid: true, permissions: [perm] });
  });

  it("sees a rate limit added to the key's identity", async ({ h, t, apiId, verify }) => {
    const externalId = `user-${randomBytes(4).toString("hex")}`;
    const { key } = await h.importKey(t, apiId, { externalId });
    expect(await verify({ key })).not.toHaveProperty("ratelimit");
    await ok(
      h.post("/v1/identities.updateIdentity", { externalId, ratelimits: [{ name: "burst", limit: 1, duration: 60_000 }] }, t.rootKey),
    );
    expect(await verify({ key, ratelimits: [{ name: "burst" }] })).toMatchObject({ valid: true });
    expect(await verify({ key, ratelimits: [{ name: "burst" }] })).toMatchObject({ code: "RATE_LIMITED" });
  });

  it("sees its workspace disabled", async ({ h, verify }) => {
    const other = await h.tenant();
    const otherApi = await h.createApi(other);
    const { key } = await h.importKey(other, otherApi);
    expect(await verify({ key })).toMatchObject({ valid: true });
    await h.disableWorkspace(other.workspaceId);
    const res = await h.post("/v1/keys.verifyKey", { key });
    expect(res.status).toBe(403);
  });

  it("sees a change made through another cache on the same database (another replica)", async ({ h, t, apiId }) => {
    const { key, keyId } = await h.importKey(t, apiId, { name: "one" });
    const replicaCache = new VerificationCache(h.db, new EpochReader(h.db));
    expect(await replicaCache.lookup(hashKey(key))).toMatchObject({ name: "one" });
    await ok(h.post("/v1/keys.updateKey", { keyId, name: "two" }, t.rootKey));
    expect(await replicaCache.lookup(hashKey(key))).toMatchObject({ name: "two" });
    await ok(h.post("/v1/keys.deleteKey", { keyId }, t.rootKey));
    expect(await replicaCache.lookup(hashKey(key))).toBeUndefined();
  });
});

describe("a key with remaining uses in memory, verified in one statement (its spend)", () => {
  it("sees every change committed before the verification, and spends nothing when refused", async ({
    h,
    t,
    apiId,
    verify,
    remainingOf,
  }) => {
    const { key, keyId } = await h.importKey(t, apiId, { remaining: 10 });
    expect(await verify({ key })).toMatchObject({ valid: true, remaining: 9 });
    await ok(h.post("/v1/keys.updateKey", { keyId, enabled: false }, t.rootKey));
    expect(await verify({ key })).toMatchObject({ valid: false, code: "DISABLED" });
    expect(await remainingOf(keyId)).toBe(9);
    await ok(h.post("/v1/keys.updateKey", { keyId, enabled: true }, t.rootKey));
    expect(await verify({ key })).toMatchObject({ valid: true, remaining: 8 });
    // As another replica would write it: nothing in this process hears of it but the database.
    await h.sql(`update keys set expires = now() - interval '1 second' where id = '${keyId}'`);
    expect(await verify({ key })).toMatchObject({ valid: false, code: "EXPIRED" });
    await h.sql(`update keys set expires = null, remaining_requests = null where id = '${keyId}'`);
    const unlimited = await verify({ key });
    expect(unlimited).toMatchObject({ valid: true });
    expect(unlimited.remaining).toBeUndefined();
    await h.sql(`update keys set remaining_requests = 1 where id = '${keyId}'`);
    expect(await verify({ key })).toMatchObject({ valid: true, remaining: 0 });
    expect(await verify({ key })).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", remaining: 0 });
    await ok(h.post("/v1/keys.deleteKey", { keyId }, t.rootKey));
    expect(await verify({ key })).toMatchObject({ valid: false, code: "NOT_FOUND" });
  });

  it("reads no epoch of its own, unless a root key or a rate limit is involved", async ({ h, t, apiId, verify }) => {
    const { key } = await h.importKey(t, apiId, { remaining: 100 });
    const limited = await h.importKey(t, apiId, { remaining: 100, ratelimit: { limit: 100, refillRate: 100, refillInterval: 60_000 } });
    await verify({ key });
    await verify({ key: limited.key });
    const reads = vi.spyOn(h.services.epochs, "current");
    const spender = h.services.remainingSpender;
    try {
      const sent = spender.statementsSent;
      for (let i = 0; i < 3; i++) expect(await verify({ key })).toMatchObject({ valid: true, remaining: 98 - i });
      expect(reads).not.toHaveBeenCalled();
      expect(spender.statementsSent - sent).toBe(3);
      // Each of these decides from a statement that reads the epoch, as any verification did before.
      expect(await verify({ key: limited.key })).toMatchObject({ valid: true, remaining: 98 });
      expect((await h.post("/v1/keys.verifyKey", { key }, t.rootKey)).body).toMatchObject({ valid: true, remaining: 95 });
      expect(reads).toHaveBeenCalledTimes(2);
    } finally {
      reads.mockRestore();
    }
  });
});

describe("the verification epoch", () => {
  it("is not moved by spending remaining uses, so hot keys stay cached", async ({ h, t, apiId, verify, epoch }) => {
    const { key } = await h.importKey(t, apiId, { remaining: 10 });
    await verify({ key });
    const before = await epoch();
    for (let i = 0; i < 3; i++) expect(await verify({ key })).toMatchObject({ valid: true });
    expect(await epoch()).toBe(before);
    expect(await verify({ key })).toMatchObject({ remaining: 5 });
  });

  it("moves once per transaction, however many rows it changes", async ({ h, epoch }) => {
    const before = BigInt(await epoch());
    await h.sql("update workspaces set name = name");
    expect(BigInt(await epoch())).toBe(before + 1n);
  });

  it("is bumped by a change to any column of keys that verification reads", async ({ h }) => {
    // Every column of `keys` must be in the trigger's comparison except the ones spending writes, and
    // pending_migration_id and adopted_at_m, which verification does not read (completing a migration, or adopting a
    // pending key, changes the hash, which is watched), and credits_start, the base of a percentage threshold of
    // key.credits.low that only the keys' alert triggers read (migration 0025).
    const exempt = new Set([
      "remaining_requests",
      "last_refill_at",
      "updated_at_m",
      "pending_migration_id",
      "adopted_at_m",
      "credits_start",
    ]);
    const columns = await h.sql<{ column_name: string }>(
      "select column_name from information_schema.columns where table_name = 'keys' and table_schema = current_schema()",
    );
    const [trigger] = await h.sql<{ def: string }>(
      "select pg_get_triggerdef(oid) as def from pg_trigger where tgname = 'keys_bump_epoch_on_update'",
    );
    expect(columns.length).toBeGreaterThan(10);
    for (const { column_name } of columns) {
      if (exempt.has(column_name)) continue;
      expect(trigger!.def, `keys.${column_name} is not watched by the epoch trigger`).toContain(`old.${column_name}`);
    }
    expect(trigger!.def).toContain("(old.remaining_requests IS NULL) IS DISTINCT FROM (new.remaining_requests IS NULL)");
  });
});

describe("batched lookups", () => {
  it("answers many concurrent lookups of present and absent keys each with its own row", async ({ h, t, apiId }) => {
    const imported = await Promise.all(Array.from({ length: 20 }, (_, i) => h.importKey(t, apiId, { name: `k${i}` })));
    const cache = new VerificationCache(h.db, new EpochReader(h.db));
    const asks = [
      ...imported.flatMap((k, i) => [
        { hash: hashKey(k.key), name: `k${i}` },
        { hash: hashKey(k.key), name: `k${i}` },
      ]),
      ...Array.from({ length: 20 }, () => ({ hash: hashKey(randomBytes(16).toString("hex")), name: undefined })),
    ];
    for (let round = 0; round < 2; round++) {
      const got = await Promise.all(asks.map((a) => cache.lookup(a.hash)));
      for (const [i, row] of got.entries()) expect(row?.name).toBe(asks[i]!.name);
    }
    expect(cache.size).toBe(20);
  });

  it("answers lookups asked from separate callbacks of one turn of the event loop with one statement", async ({ h, t, apiId }) => {
    const imported = await Promise.all(Array.from({ length: 10 }, (_, i) => h.importKey(t, apiId, { name: `k${i}` })));
    const cache = new VerificationCache(h.db, new EpochReader(h.db));
    // Each ask in its own callback of one phase of the loop, as requests read from different sockets each get their own
    // I/O callback: PGlite runs a statement synchronously, so a lookup started by the first callback used to have
    // answered before the second one ran (one statement per verification). setImmediate callbacks queued together run
    // in one check phase whatever the machine's speed (timers of 0 ms did not: one that fell due a moment late ran a
    // turn later, and the test failed on a slow machine).
    const got = await Promise.all(
      imported.map((k) => new Promise((resolve, reject) => setImmediate(() => cache.lookup(hashKey(k.key)).then(resolve, reject)))),
    );
    expect(got.map((row) => (row as { name?: string } | undefined)?.name)).toEqual(imported.map((_, i) => `k${i}`));
    expect(cache.statements).toBe(1);
  });

  it("allows two lookup statements at once on PostgreSQL, one on PGlite (whose thread runs them)", ({ h }) => {
    expect(h.services.verificationCache.lookupsInFlight).toBe(h.onPostgres ? POSTGRES_LOOKUPS_IN_FLIGHT : 1);
    expect(POSTGRES_LOOKUPS_IN_FLIGHT).toBe(2);
  });

  // PGlite is one session: a lock held there would block its only thread.
  it.skipIf(process.env.TEST_DATABASE_URL === undefined)(
    "starts a second lookup beside one in flight only for a key not in memory; keys in memory wait for the first",
    async ({ h, t, apiId }) => {
      const [inMemory, first, second] = await Promise.all([h.importKey(t, apiId), h.importKey(t, apiId), h.importKey(t, apiId)]);
      const cache = new VerificationCache(h.db, new EpochReader(h.db), 100, 2);
      await cache.lookup(hashKey(inMemory.key));
      const sent = cache.statements;
      // A transaction of its own holding the keys table: a lookup statement waits for it.
      const client = postgres(h.databaseUrl!, { max: 1, onnotice: () => {} });
      const conn = await client.reserve();
      await conn`begin`;
      await conn`lock table keys in access exclusive mode`;
      try {
        const stuck = cache.lookup(hashKey(first.key));
        await waitFor("the first lookup statement sent", () => cache.statements === sent + 1);
        let hitAnswered = false;
        const hit = cache.lookup(hashKey(inMemory.key)).finally(() => {
          hitAnswered = true;
        });
        for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
        await new Promise((resolve) => setTimeout(resolve, 50));
        // A batch of keys in memory only: it waits for the statement in flight (which would answer its epoch).
        expect([cache.statements, hitAnswered]).toEqual([sent + 1, false]);
        // A key not in memory: its batch (with the waiting one) starts beside the stuck statement.
        const miss = cache.lookup(hashKey(second.key));
        await waitFor("a second lookup statement beside the first", () => cache.statements === sent + 2);
        await conn`commit`;
        expect((await Promise.all([stuck, hit, miss])).map((row) => row?.id)).toEqual([first.keyId, inMemory.keyId, second.keyId]);
      } finally {
        await conn`rollback`.catch(() => {});
        conn.release();
        await client.end();
      }
    },
  );

  it("keeps at most its size, dropping the oldest entries", async ({ h, t, apiId }) => {
    const imported = await Promise.all(Array.from({ length: 5 }, () => h.importKey(t, apiId)));
    const cache = new VerificationCache(h.db, new EpochReader(h.db), 3);
    for (const k of imported) await cache.lookup(hashKey(k.key));
    expect(cache.size).toBe(3);
    expect(await cache.lookup(hashKey(imported[0]!.key))).toMatchObject({ id: imported[0]!.keyId });
  });
});

describe("the lookup statement", () => {
  it("finds keys whose stored hashes hold quotes, backslashes, commas and braces, each by its own hash", async ({ h, t, apiId }) => {
    // Imported hashes are stored as given; on PGlite the hashes travel as an SQL literal (pglitePrepared.ts).
    const hashes = [`it's`, `back\\slash`, `"quoted"`, "a,b", "{braces}", "NULL", " spaced ", "ünï"];
    const values = hashes.map((hash, i) => `('odd_hash_key_${i}', '${t.workspaceId}', '${apiId}', '${hash.replace(/'/g, "''")}', 'x', 0)`);
    await h.sql(`insert into keys (id, workspace_id, api_id, hash, start, created_at_m) values ${values.join(", ")}`);
    const lookup = prepareVerificationLookup(h.db);
    const rows = await lookup.execute({ hashes: [...hashes, "absent"] });
    expect(new Map(rows.map((r) => [r.hash, r.id]))).toEqual(new Map(hashes.map((hash, i) => [hash, `odd_hash_key_${i}`])));
    for (const [i, hash] of hashes.entries())
      expect((await lookup.execute({ hashes: [hash] })).map((r) => r.id)).toEqual([`odd_hash_key_${i}`]);
  });

  it("on PGlite is planned once (a PREPAREd statement), and prepared again when the session dropped it", async ({ h, t, apiId }) => {
    const { key, keyId } = await h.importKey(t, apiId, { name: "prepared", meta: { a: 1 }, expires: Date.now() + 3_600_000 });
    const lookup = prepareVerificationLookup(h.db);
    const [row] = await lookup.execute({ hashes: [hashKey(key)] });
    expect(row).toMatchObject({ id: keyId, name: "prepared", meta: { a: 1 }, enabled: true, roles: [], permissions: [], ratelimits: [] });
    expect(row!.expires).toBeInstanceOf(Date);
    const prepared = async () =>
      (await h.sql<{ n: number }>("select count(*)::int as n from pg_prepared_statements where name = 'keyhaven_verification_lookup'"))[0]!
        .n;
    if (h.onPostgres) return;
    expect(await prepared()).toBe(1);
    await h.sql("deallocate all");
    expect(await prepared()).toBe(0);
    expect((await lookup.execute({ hashes: [hashKey(key)] })).map((r) => r.id)).toEqual([keyId]);
    expect(await prepared()).toBe(1);
  });

  it("answers every field with its type, as drizzle decodes it (on PGlite the rows arrive as one JSON value)", async ({ h, t, apiId }) => {
    const expires = new Date(Date.UTC(2031, 0, 2, 3, 4, 5, 678));
    const meta = { s: "ünï \"q\" 'a' \\ ,{}", n: 1.5, big: 2 ** 53 - 1, list: [1, "x", null], nested: { deep: { none: null } } };
    const full = await h.importKey(t, apiId, { name: 'a "name", with {} and ünï', meta, expires: expires.getTime(), remaining: 7 });
    const bare = await h.importKey(t, apiId, {});
    await h.sql(`insert into identities (id, workspace_id, external_id, meta, created_at_m)
      values ('fields_identity', '${t.workspaceId}', 'fields-owner', '{"plan": "pro", "seats": 3}', 0)`);
    await h.sql(`update keys set identity_id = 'fields_identity', environment = 'staging', enabled = false where id = '${full.keyId}'`);
    const rows = await prepareVerificationLookup(h.db).execute({ hashes: [hashKey(full.key), hashKey(bare.key)] });
    const byId = new Map(rows.map((r) => [r.id, r]));
    const first = byId.get(full.keyId)!;
    expect(first).toMatchObject({
      name: 'a "name", with {} and ünï',
      meta,
      remaining: 7,
      enabled: false,
      environment: "staging",
      workspaceEnabled: true,
      identityId: "fields_identity",
      identityExternalId: "fields-owner",
      identityMeta: { plan: "pro", seats: 3 },
    });
    expect(first.expires).toEqual(expires);
    expect(typeof first.epoch).toBe("string");
    expect(BigInt(first.epoch)).toBeGreaterThan(0n);
    expect(byId.get(bare.keyId)).toMatchObject({
      name: null,
      meta: null,
      expires: null,
      remaining: null,
      enabled: true,
      environment: null,
      identityId: null,
      identityMeta: null,
      roles: [],
      roleIds: [],
      permissions: [],
      ratelimits: [],
    });
  });
});

describe("batched spending of remaining uses", () => {
  it("grants exactly the uses there are to concurrent spends through two spenders, reporting each one's remainder", async ({
    h,
    t,
    apiId,
    remainingOf,
  }) => {
    const { keyId } = await h.importKey(t, apiId, { remaining: 25 });
    const spenders = [new RemainingSpender(h.db), new RemainingSpender(h.db)];
    const results = await Promise.all(Array.from({ length: 80 }, (_, i) => spenders[i % 2]!.spend(keyId, 1)));
    const granted = results.filter((r) => r !== undefined) as number[];
    expect(granted).toHaveLength(25);
    expect([...granted].sort((a, b) => a - b)).toEqual(Array.from({ length: 25 }, (_, i) => i));
    expect(await remainingOf(keyId)).toBe(0);
  });

  it("never overdraws with mixed costs, and a free verification passes even at zero", async ({ h, t, apiId, remainingOf }) => {
    const { keyId } = await h.importKey(t, apiId, { remaining: 10 });
    const spender = new RemainingSpender(h.db);
    const costs = [3, 1, 3, 1, 3, 1, 3, 1, 0, 4];
    const results = await Promise.all(costs.map((c) => spender.spend(keyId, c)));
    const spent = costs.reduce((sum, c, i) => sum + (results[i] !== undefined ? c : 0), 0);
    expect(spent).toBeLessThanOrEqual(10);
    expect(await remainingOf(keyId)).toBe(10 - spent);
    expect(results[8]).not.toBeUndefined();
    // Whatever is left, a spend that fits is granted and one that does not is refused.
    const left = 10 - spent;
    expect(await spender.spend(keyId, left + 1)).toBeUndefined();
    expect(await spender.spend(keyId, left)).toBe(0);
    expect(await spender.spend(keyId, 0)).toBe(0);
  });

  it("refuses a key without a usage limit or that no longer exists", async ({ h, t, apiId }) => {
    const { keyId } = await h.importKey(t, apiId);
    expect(await new RemainingSpender(h.db).spend(keyId, 1)).toBeUndefined();
    expect(await new RemainingSpender(h.db).spend("key_missing", 1)).toBeUndefined();
  });
});
