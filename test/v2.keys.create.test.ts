import { randomBytes } from "node:crypto";
import bs58 from "bs58";
import { describe, expect } from "vitest";
import { generateKey, generateKeyV2 } from "../src/crypto/keyGen.js";
import { hashKey } from "../src/crypto/hash.js";
import { test } from "./fixtures.js";
import { createHarness } from "./helper.js";
import { expectV2Error } from "./v2-errors.js";

// v2's keys.createKey (contract §4.1) over the core v1's createKey uses, with v2's rules as parameters: v2's key
// format (§11), credits 0, missing roles 404, missing permissions created, the masked 404, one transaction.

const unique = (name: string) => `${name}_${randomBytes(4).toString("hex")}`;
const API_NOT_FOUND = "The specified API was not found.";
const BASE58 = /^[1-9A-HJ-NP-Za-km-z]+$/;

describe("v2's key format (contract §11)", () => {
  test("base58 of the random bytes alone, with `prefix_` and a start of the prefix and four characters", () => {
    for (let i = 0; i < 50; i++) {
      const { key, start } = generateKeyV2("sk", 16);
      expect(key.startsWith("sk_")).toBe(true);
      const secret = key.slice(3);
      expect(secret).toMatch(BASE58);
      // No [0x01, N] header: the decoded secret is exactly the random bytes (bs58 keeps leading zero bytes as `1`s).
      expect(bs58.decode(secret)).toHaveLength(16);
      expect(start).toBe(`sk_${secret.slice(0, 4)}`);
    }
    const bare = generateKeyV2(undefined, 64);
    expect(bare.key).toMatch(BASE58);
    expect(bs58.decode(bare.key)).toHaveLength(64);
    expect(bare.start).toBe(bare.key.slice(0, 4));
  });

  test("v1's format is unchanged: base58 of [0x01, N, bytes]", () => {
    const decoded = bs58.decode(generateKey(undefined, 16));
    expect([decoded[0], decoded[1], decoded.length]).toEqual([1, 16, 18]);
  });
});

describe("v2 keys.createKey", () => {
  // The file's app and tenant are built here, under the hooks' timeout, not inside the first test's.
  test.beforeAll(async ({ h, t }) => {
    expect(h.app).toBeDefined();
    expect(t.rootKey).toBeDefined();
  });

  test("a minimal key: v2's format, 16 bytes, enabled; it verifies through v1 and reads through v2", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const res = await h.post("/v2/keys.createKey", { apiId }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      meta: { requestId: expect.stringMatching(/^req_/) },
      data: { keyId: expect.any(String), key: expect.any(String) },
    });
    const { key, keyId } = res.body.data;
    expect(key).toMatch(BASE58);
    expect(bs58.decode(key)).toHaveLength(16);
    const [row] = await h.sql<{ hash: string; start: string; enabled: boolean }>(
      `select hash, start, enabled from keys where id = '${keyId}'`,
    );
    expect(row).toEqual({ hash: hashKey(key), start: key.slice(0, 4), enabled: true });
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: true, code: "VALID", keyId });
    const read = await h.post("/v2/keys.getKey", { keyId }, t.rootKey);
    expect(read.body.data).toEqual({ keyId, start: key.slice(0, 4), enabled: true, createdAt: expect.any(Number) });
    expect((await h.post("/v2/keys.whoami", { key }, t.rootKey)).body.data.keyId).toBe(keyId);
  });

  test("every field: prefix, name, meta, expires, credits with refill, ratelimits, identity, roles, permissions", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const role = `${unique("role")} with spaces`;
    expect((await h.post("/v1/permissions.createRole", { name: role }, t.rootKey)).status).toBe(200);
    const externalId = unique("user.x-1");
    const res = await h.post(
      "/v2/keys.createKey",
      {
        apiId,
        prefix: "sk_live",
        name: "svc",
        byteLength: 32,
        externalId,
        meta: { plan: "pro" },
        roles: [role],
        permissions: ["documents.read", "documents.*", "2fa.read", "api:read"],
        expires: 4_000_000_000_000,
        credits: { remaining: 10, refill: { interval: "monthly", amount: 20, refillDay: 15 } },
        ratelimits: [
          { name: "requests", limit: 10, duration: 60_000, autoApply: true },
          { name: "tokens", limit: 5, duration: 1000, autoApply: false },
          { name: "requests", limit: 100, duration: 60_000, autoApply: true },
        ],
        enabled: false,
      },
      t.rootKey,
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { key, keyId } = res.body.data;
    // The whole prefix is kept, underscores included.
    expect(key.startsWith("sk_live_")).toBe(true);
    expect(bs58.decode(key.slice("sk_live_".length))).toHaveLength(32);
    const read = await h.post("/v2/keys.getKey", { keyId }, t.rootKey);
    expect(read.body.data).toEqual({
      keyId,
      start: key.slice(0, "sk_live_".length + 4),
      enabled: false,
      createdAt: expect.any(Number),
      name: "svc",
      meta: { plan: "pro" },
      expires: 4_000_000_000_000,
      permissions: expect.arrayContaining(["documents.read", "documents.*", "2fa.read", "api:read"]),
      roles: [role],
      credits: { remaining: 10, refill: { interval: "monthly", amount: 20, refillDay: 15 } },
      identity: { id: expect.stringMatching(/^id_/), externalId },
      // Of a name given twice, the last wins.
      ratelimits: [
        { id: expect.stringMatching(/^rl_/), name: "requests", limit: 100, duration: 60_000, autoApply: true },
        { id: expect.stringMatching(/^rl_/), name: "tokens", limit: 5, duration: 1000, autoApply: false },
      ],
    });
    expect(read.body.data.permissions).toHaveLength(4);
    // v1 sees the same key.
    const v1 = await h.get("/v1/keys.getKey", { keyId }, t.rootKey);
    expect(v1.body).toMatchObject({ id: keyId, name: "svc", remaining: 10, enabled: false, identity: { externalId } });
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: false, code: "DISABLED" });
  });

  test("the API's default prefix and byte length apply; the request's win; start includes the default prefix", async ({ h, t }) => {
    const apiId = await h.createApi(t, { defaultPrefix: "dflt", defaultBytes: 64 });
    const withDefaults = (await h.post("/v2/keys.createKey", { apiId }, t.rootKey)).body.data;
    expect(withDefaults.key.startsWith("dflt_")).toBe(true);
    expect(bs58.decode(withDefaults.key.slice(5))).toHaveLength(64);
    const [row] = await h.sql<{ start: string }>(`select start from keys where id = '${withDefaults.keyId}'`);
    expect(row!.start).toBe(withDefaults.key.slice(0, 9));
    const own = (await h.post("/v2/keys.createKey", { apiId, prefix: "own", byteLength: 20 }, t.rootKey)).body.data;
    expect(own.key.startsWith("own_")).toBe(true);
    expect(bs58.decode(own.key.slice(4))).toHaveLength(20);
  });

  test("credits: 0 is accepted (exhausted), null is unlimited; daily refill ignores a refillDay", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const zero = (await h.post("/v2/keys.createKey", { apiId, credits: { remaining: 0 } }, t.rootKey)).body.data;
    expect((await h.post("/v1/keys.verifyKey", { key: zero.key, apiId })).body).toMatchObject({ valid: false, code: "USAGE_EXCEEDED" });
    const unlimited = await h.post("/v2/keys.createKey", { apiId, credits: { remaining: null } }, t.rootKey);
    expect(unlimited.status, JSON.stringify(unlimited.body)).toBe(200);
    expect((await h.post("/v2/keys.getKey", { keyId: unlimited.body.data.keyId }, t.rootKey)).body.data.credits).toBeUndefined();
    const daily = await h.post(
      "/v2/keys.createKey",
      { apiId, credits: { remaining: 5, refill: { interval: "daily", amount: 5, refillDay: 3 } } },
      t.rootKey,
    );
    expect(daily.status, JSON.stringify(daily.body)).toBe(200);
    expect((await h.post("/v2/keys.getKey", { keyId: daily.body.data.keyId }, t.rootKey)).body.data.credits).toEqual({
      remaining: 5,
      refill: { interval: "daily", amount: 5 },
    });
  });

  test("refill without remaining, and monthly without refillDay, are 400 in v2's words; nothing is written", async ({ h, t, snapshot }) => {
    const apiId = await h.createApi(t);
    const before = await snapshot();
    expectV2Error(
      await h.post("/v2/keys.createKey", { apiId, credits: { remaining: null, refill: { interval: "daily", amount: 5 } } }, t.rootKey),
      400,
      "unkey/application/invalid_input",
      "`credits.remaining` must be provided when `credits.refill` is set.",
    );
    expectV2Error(
      await h.post("/v2/keys.createKey", { apiId, credits: { remaining: 5, refill: { interval: "monthly", amount: 5 } } }, t.rootKey),
      400,
      "unkey/application/invalid_input",
      "`refillDay` must be provided when the refill interval is `monthly`.",
    );
    expect(await snapshot()).toEqual(before);
  });

  test("missing permissions are created without rbac.*.create_permission; a missing role is 404 and nothing is written", async ({
    h,
    t,
    snapshot,
  }) => {
    const apiId = await h.createApi(t);
    const creator = await h.rootKey(t.workspaceId, [`api.${apiId}.create_key`]);
    const slug = unique("new.perm");
    const made = await h.post("/v2/keys.createKey", { apiId, permissions: [slug] }, creator);
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    expect((await h.post("/v2/permissions.getPermission", { permission: slug }, t.rootKey)).body.data).toMatchObject({ name: slug, slug });
    const before = await snapshot();
    const missingRole = unique("ghost");
    expectV2Error(
      await h.post("/v2/keys.createKey", { apiId, externalId: unique("who"), permissions: [unique("p")], roles: [missingRole] }, t.rootKey),
      404,
      "unkey/data/role_not_found",
      `Role '${missingRole}' was not found.`,
    );
    expect(await snapshot()).toEqual(before);
  });

  test("recoverable: the key is stored encrypted and getKey decrypts it; an API that does not store keys is 412", async ({ h, t }) => {
    const storing = await h.createApi(t, { storeEncryptedKeys: true });
    const res = await h.post("/v2/keys.createKey", { apiId: storing, recoverable: true }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { key, keyId } = res.body.data;
    expect(Number((await h.sql<{ n: string }>(`select count(*) as n from encrypted_keys where key_id = '${keyId}'`))[0]!.n)).toBe(1);
    expect((await h.post("/v2/keys.getKey", { keyId, decrypt: true }, t.rootKey)).body.data.plaintext).toBe(key);
    const plain = await h.createApi(t);
    expectV2Error(
      await h.post("/v2/keys.createKey", { apiId: plain, recoverable: true }, t.rootKey),
      412,
      "unkey/application/precondition_failed",
    );
  });

  test("recoverable without an encryption key configured is 412", async () => {
    const noKey = await createHarness({ KEYHAVEN_ENCRYPTION_KEY: "" });
    try {
      const tenant = await noKey.tenant();
      const apiId = await noKey.createApi(tenant, { storeEncryptedKeys: true });
      expectV2Error(
        await noKey.post("/v2/keys.createKey", { apiId, recoverable: true }, tenant.rootKey),
        412,
        "unkey/application/precondition_failed",
        "Vault hasn't been set up.",
      );
      expect(Number((await noKey.sql<{ n: string }>("select count(*) as n from keys"))[0]!.n)).toBe(0);
    } finally {
      await noKey.close();
    }
  });

  test("without create_key (or encrypt_key for recoverable) the API is answered as missing: the same 404 as a missing API", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t, { storeEncryptedKeys: true });
    const other = await h.createApi(t);
    const missing = await h.post("/v2/keys.createKey", { apiId: "api_doesnotexist" }, t.rootKey);
    expectV2Error(missing, 404, "unkey/data/api_not_found", API_NOT_FOUND);
    for (const perms of [["api.*.read_key"], [`api.${other}.create_key`], [`api.${apiId}.read_api`]]) {
      const res = await h.post("/v2/keys.createKey", { apiId }, await h.rootKey(t.workspaceId, perms));
      expectV2Error(res, 404, "unkey/data/api_not_found", API_NOT_FOUND);
      expect(res.body.error).toEqual(missing.body.error);
    }
    const creator = await h.rootKey(t.workspaceId, [`api.${apiId}.create_key`]);
    expectV2Error(
      await h.post("/v2/keys.createKey", { apiId, recoverable: true }, creator),
      404,
      "unkey/data/api_not_found",
      API_NOT_FOUND,
    );
    expect((await h.post("/v2/keys.createKey", { apiId }, creator)).status).toBe(200);
    expect((await h.post("/v2/keys.createKey", { apiId }, await h.rootKey(t.workspaceId, ["api.*.create_key"]))).status).toBe(200);
    const encrypting = await h.rootKey(t.workspaceId, [`api.${apiId}.create_key`, `api.${apiId}.encrypt_key`]);
    expect((await h.post("/v2/keys.createKey", { apiId, recoverable: true }, encrypting)).status).toBe(200);
  });

  test("an API of another workspace is 404", async ({ h, t }) => {
    const other = await h.tenant();
    const theirs = await h.createApi(other);
    expectV2Error(await h.post("/v2/keys.createKey", { apiId: theirs }, t.rootKey), 404, "unkey/data/api_not_found", API_NOT_FOUND);
    expect(Number((await h.sql<{ n: string }>(`select count(*) as n from keys where api_id = '${theirs}'`))[0]!.n)).toBe(0);
  });

  test("schema: bad apiId, byteLength, prefix, expires, permission and role entries, unknown fields are 400", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const bodies: Record<string, unknown>[] = [
      {},
      { apiId: "" },
      { apiId: "ab" },
      { apiId, byteLength: 10 },
      { apiId, byteLength: 300 },
      { apiId, prefix: "p".repeat(17) },
      { apiId, prefix: "with-dash" },
      { apiId, expires: -1 },
      { apiId, permissions: [""] },
      { apiId, permissions: ["p".repeat(129)] },
      { apiId, permissions: ["has space"] },
      { apiId, roles: [""] },
      { apiId, roles: ["r".repeat(129)] },
      { apiId, credits: {} },
      { apiId, credits: { remaining: -1 } },
      { apiId, externalId: "a@b" },
      { apiId, ratelimits: [{ name: "rl", limit: 1, duration: 1000, autoApply: true }] },
      { apiId, ratelimits: [{ name: "name", limit: 1, duration: 999, autoApply: true }] },
      { apiId, ratelimits: [{ name: "name", limit: 1, duration: 1000 }] },
      { apiId, meta: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, i])) },
      { apiId, ownerId: "x" },
    ];
    for (const body of bodies) {
      expectV2Error(
        await h.post("/v2/keys.createKey", body, t.rootKey),
        400,
        "unkey/application/invalid_input",
        "POST request body for '/v2/keys.createKey' failed to validate schema",
      );
    }
  });

  test("authentication: no header 400, unknown root key 401, a customer's key 401", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    expectV2Error(await h.post("/v2/keys.createKey", { apiId }), 400, "unkey/application/invalid_input");
    expectV2Error(await h.post("/v2/keys.createKey", { apiId }, "unknown_root_key"), 401, "unkey/authentication/key_not_found");
    const { key } = (await h.post("/v2/keys.createKey", { apiId }, t.rootKey)).body.data;
    expectV2Error(await h.post("/v2/keys.createKey", { apiId }, key), 401, "unkey/authentication/key_not_found");
  });

  test("a key created through v1 keeps v1's format and works with v2's routes", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const v1 = (await h.post("/v1/keys.createKey", { apiId }, t.rootKey)).body as { key: string; keyId: string };
    expect(bs58.decode(v1.key)[0]).toBe(1);
    expect((await h.post("/v2/keys.whoami", { key: v1.key }, t.rootKey)).body.data.keyId).toBe(v1.keyId);
  });
});
