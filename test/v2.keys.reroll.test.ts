import { randomBytes } from "node:crypto";
import bs58 from "bs58";
import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
import { expectV2Error } from "./v2-errors.js";

// v2's keys.rerollKey (contract §4.7) over the core: a new key (v2's format) carrying the old one's settings, the
// old one expiring after the requested delay, in one transaction; without upstream's two bugs (§16.11): the new key
// does not inherit the old one's expiry, and a prefix with `_` is kept whole.

const unique = (name: string) => `${name}_${randomBytes(4).toString("hex")}`;
const NOT_FOUND = "The specified key was not found. We could not find the requested key.";
const MINUTE = 60_000;

async function v2Key(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown> = {}) {
  const res = await h.post("/v2/keys.createKey", { apiId, ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { key: string; keyId: string };
}

const reroll = (h: Harness, rootKey: string, keyId: string, expiration = 0) => h.post("/v2/keys.rerollKey", { keyId, expiration }, rootKey);

const read = async (h: Harness, t: Tenant, keyId: string, decrypt = false) => {
  const res = await h.post("/v2/keys.getKey", { keyId, ...(decrypt && { decrypt }) }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
};

describe("v2 keys.rerollKey", () => {
  test.beforeAll(async ({ h, t }) => {
    expect(h.app).toBeDefined();
    expect(t.rootKey).toBeDefined();
  });

  test("the new key carries everything but the id, secret and expiry; the old one expires now (expiration 0)", async ({ h, t }) => {
    const apiId = await h.createApi(t, { storeEncryptedKeys: true });
    const role = unique("role");
    expect((await h.post("/v1/permissions.createRole", { name: role }, t.rootKey)).status).toBe(200);
    const externalId = unique("user");
    const old = await v2Key(h, t, apiId, {
      prefix: "sk_live",
      name: "svc",
      externalId,
      meta: { plan: "pro" },
      roles: [role],
      permissions: ["docs.read", "docs.write"],
      expires: 4_000_000_000_000,
      credits: { remaining: 10, refill: { interval: "monthly", amount: 20, refillDay: 15 } },
      ratelimits: [
        { name: "requests", limit: 10, duration: MINUTE, autoApply: true },
        { name: "tokens", limit: 5, duration: 1000, autoApply: false },
      ],
      recoverable: true,
    });
    expect((await h.post("/v1/keys.verifyKey", { key: old.key, apiId })).body).toMatchObject({ valid: true, remaining: 9 });
    const before = await read(h, t, old.keyId);

    const res = await reroll(h, t.rootKey, old.keyId);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      meta: { requestId: expect.stringMatching(/^req_/) },
      data: { keyId: expect.any(String), key: expect.any(String) },
    });
    const fresh = res.body.data as { keyId: string; key: string };
    expect(fresh.keyId).not.toBe(old.keyId);
    // The whole prefix, underscores included (upstream cut it at the first `_`), and v2's format.
    expect(fresh.key.startsWith("sk_live_")).toBe(true);
    expect(bs58.decode(fresh.key.slice("sk_live_".length))).toHaveLength(16);

    const after = await read(h, t, fresh.keyId, true);
    const { keyId: _a, start: _s, createdAt: _c, expires, updatedAt: _u, ...carried } = before;
    expect(after).toEqual({
      ...carried,
      keyId: fresh.keyId,
      start: fresh.key.slice(0, "sk_live_".length + 4),
      createdAt: expect.any(Number),
      permissions: expect.arrayContaining(before.permissions),
      // The rate limits are copies (new ids) of the old key's.
      ratelimits: before.ratelimits.map((r: { id: string }) => ({ ...r, id: expect.not.stringMatching(r.id) })),
      plaintext: fresh.key,
    });
    expect(expires).toBe(4_000_000_000_000);
    // Not inherited: upstream copied the old key's expiry to the new key.
    expect(after.expires).toBeUndefined();
    expect(after.credits).toEqual({ remaining: 9, refill: { interval: "monthly", amount: 20, refillDay: 15 } });

    expect((await h.post("/v1/keys.verifyKey", { key: old.key, apiId })).body).toMatchObject({ valid: false, code: "EXPIRED" });
    expect((await h.post("/v1/keys.verifyKey", { key: fresh.key, apiId })).body).toMatchObject({
      valid: true,
      keyId: fresh.keyId,
      remaining: 8,
      name: "svc",
      meta: { plan: "pro" },
      identity: { externalId },
    });
    // The old key is expired, not deleted.
    expect((await read(h, t, old.keyId)).expires).toBeLessThanOrEqual(Date.now());
  });

  test("with an expiration the old key keeps verifying until then, rounded up to a whole minute", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const old = await v2Key(h, t, apiId);
    const start = Date.now();
    const res = await reroll(h, t.rootKey, old.keyId, 10 * MINUTE);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const expires = (await read(h, t, old.keyId)).expires as number;
    expect(expires % MINUTE).toBe(0);
    expect(expires).toBeGreaterThanOrEqual(start + 10 * MINUTE);
    expect(expires).toBeLessThanOrEqual(Date.now() + 11 * MINUTE);
    expect((await h.post("/v1/keys.verifyKey", { key: old.key, apiId })).body).toMatchObject({ valid: true });
    expect((await h.post("/v1/keys.verifyKey", { key: res.body.data.key, apiId })).body).toMatchObject({ valid: true });
    expect((await read(h, t, res.body.data.keyId)).expires).toBeUndefined();
  });

  test("never lengthens the old key's life: an expiry sooner than the delay stays", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const soon = Date.now() + 5 * MINUTE;
    const old = await v2Key(h, t, apiId, { expires: soon });
    expect((await reroll(h, t.rootKey, old.keyId, 60 * MINUTE)).status).toBe(200);
    expect((await read(h, t, old.keyId)).expires).toBe(soon);
  });

  test("a key created through v1 is rerolled into v2's format with the API's default prefix and length", async ({ h, t }) => {
    const apiId = await h.createApi(t, { defaultPrefix: "dflt", defaultBytes: 24 });
    const old = (await h.post("/v1/keys.createKey", { apiId, name: "from v1", ratelimit: { limit: 3, duration: MINUTE } }, t.rootKey)).body;
    const res = await reroll(h, t.rootKey, old.keyId);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { key } = res.body.data;
    expect(key.startsWith("dflt_")).toBe(true);
    expect(bs58.decode(key.slice(5))).toHaveLength(24);
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({
      valid: true,
      name: "from v1",
      ratelimit: { limit: 3, remaining: 2 },
    });
    expect((await h.post("/v1/keys.verifyKey", { key: old.key, apiId })).body).toMatchObject({ valid: false, code: "EXPIRED" });
  });

  test("needs create_key on the key's API, and encrypt_key for a recoverable key (403); the old key is left as it was", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t, { storeEncryptedKeys: true });
    const otherApi = await h.createApi(t);
    const plain = await v2Key(h, t, apiId);
    const recoverable = await v2Key(h, t, apiId, { recoverable: true });
    const keysBefore = Number((await h.sql<{ n: string }>("select count(*) as n from keys"))[0]!.n);
    for (const perms of [[], ["api.*.read_key"], [`api.${otherApi}.create_key`], [`api.${apiId}.update_key`]]) {
      expectV2Error(
        await reroll(h, await h.rootKey(t.workspaceId, perms), plain.keyId),
        403,
        "unkey/authorization/insufficient_permissions",
        /^Missing one of these permissions: /,
      );
    }
    const creator = await h.rootKey(t.workspaceId, [`api.${apiId}.create_key`]);
    expectV2Error(await reroll(h, creator, recoverable.keyId), 403, "unkey/authorization/insufficient_permissions");
    expect(Number((await h.sql<{ n: string }>("select count(*) as n from keys"))[0]!.n)).toBe(keysBefore);
    expect((await h.post("/v1/keys.verifyKey", { key: recoverable.key, apiId })).body).toMatchObject({ valid: true });
    expect((await reroll(h, creator, plain.keyId)).status).toBe(200);
    expect((await reroll(h, await h.rootKey(t.workspaceId, ["api.*.create_key"]), (await v2Key(h, t, apiId)).keyId)).status).toBe(200);
    const encrypting = await h.rootKey(t.workspaceId, [`api.${apiId}.create_key`, `api.${apiId}.encrypt_key`]);
    expect((await reroll(h, encrypting, recoverable.keyId)).status).toBe(200);
  });

  test("a recoverable key whose API no longer stores keys is 412, and nothing is written", async ({ h, t }) => {
    const apiId = await h.createApi(t, { storeEncryptedKeys: true });
    const old = await v2Key(h, t, apiId, { recoverable: true });
    // No route turns the setting off; the store may have been changed by hand (or by an older keyhaven).
    await h.sql(`update apis set store_encrypted_keys = false where id = '${apiId}'`);
    const keysBefore = Number((await h.sql<{ n: string }>("select count(*) as n from keys"))[0]!.n);
    expectV2Error(await reroll(h, t.rootKey, old.keyId), 412, "unkey/application/precondition_failed");
    expect(Number((await h.sql<{ n: string }>("select count(*) as n from keys"))[0]!.n)).toBe(keysBefore);
    expect((await read(h, t, old.keyId)).expires).toBeUndefined();
  });

  test("a missing, deleted or other workspace's key is 404 in rerollKey's words", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    expectV2Error(await reroll(h, t.rootKey, "key_doesnotexist"), 404, "unkey/data/key_not_found", NOT_FOUND);
    const other = await h.tenant();
    const theirs = await v2Key(h, other, await h.createApi(other));
    expectV2Error(await reroll(h, t.rootKey, theirs.keyId), 404, "unkey/data/key_not_found", NOT_FOUND);
    expect((await h.post("/v1/keys.verifyKey", { key: theirs.key })).body).toMatchObject({ valid: true });
    const deleted = await v2Key(h, t, apiId);
    await h.post("/v2/keys.deleteKey", { keyId: deleted.keyId }, t.rootKey);
    expectV2Error(await reroll(h, t.rootKey, deleted.keyId), 404, "unkey/data/key_not_found", NOT_FOUND);
  });

  test("schema: missing, empty or short keyId, missing or negative expiration are 400; unknown fields are ignored", async ({ h, t }) => {
    for (const body of [
      { expiration: 0 },
      { keyId: "", expiration: 0 },
      { keyId: "ab", expiration: 0 },
      { keyId: "key_abcdefgh" },
      { keyId: "key_abcdefgh", expiration: -1 },
    ]) {
      expectV2Error(
        await h.post("/v2/keys.rerollKey", body, t.rootKey),
        400,
        "unkey/application/invalid_input",
        "POST request body for '/v2/keys.rerollKey' failed to validate schema",
      );
    }
    const { keyId } = await v2Key(h, t, await h.createApi(t));
    expect((await h.post("/v2/keys.rerollKey", { keyId, expiration: 0, extra: true }, t.rootKey)).status).toBe(200);
    expectV2Error(await h.post("/v2/keys.rerollKey", { keyId, expiration: 0 }), 400, "unkey/application/invalid_input");
    expectV2Error(
      await h.post("/v2/keys.rerollKey", { keyId, expiration: 0 }, "unknown_root_key"),
      401,
      "unkey/authentication/key_not_found",
    );
  });
});
