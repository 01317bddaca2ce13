import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
import { expectV2Error } from "./v2-errors.js";

// v2's apis.listKeys (contract §3.4) over the core v1's listKeys uses: pages by id with v2's inclusive cursor,
// KeyResponseData with rate limits, the identity filter, decrypt, and a forbidden API answered as a missing one.

const NOT_FOUND = "The requested API does not exist or has been deleted.";

async function v1Key(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown> = {}) {
  const res = await h.post("/v1/keys.createKey", { apiId, ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { key: string; keyId: string };
}

const list = (h: Harness, body: Record<string, unknown>, rootKey: string) => h.post("/v2/apis.listKeys", body, rootKey);

describe("v2 apis.listKeys", () => {
  test("pages an API's keys by id (inclusive cursor, hasMore), each as KeyResponseData with its rate limits", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const ids: string[] = [];
    ids.push((await v1Key(h, t, apiId, { name: "limited", ratelimit: { limit: 10, duration: 60_000 }, remaining: 5 })).keyId);
    for (let i = 0; i < 2; i++) ids.push((await v1Key(h, t, apiId)).keyId);
    ids.sort();
    const first = await list(h, { apiId, limit: 2 }, t.rootKey);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.data.map((k: { keyId: string }) => k.keyId)).toEqual(ids.slice(0, 2));
    expect(first.body.pagination).toEqual({ hasMore: true, cursor: ids[2] });
    const second = await list(h, { apiId, limit: 2, cursor: ids[2] }, t.rootKey);
    expect(second.body.data.map((k: { keyId: string }) => k.keyId)).toEqual([ids[2]]);
    expect(second.body.pagination).toEqual({ hasMore: false });
    const all = await list(h, { apiId }, t.rootKey);
    const limited = all.body.data.find((k: { name?: string }) => k.name === "limited");
    expect(limited).toMatchObject({
      credits: { remaining: 5 },
      ratelimits: [{ id: expect.stringMatching(/^rl_/), name: "default", limit: 10, duration: 60_000, autoApply: true }],
    });
    // The same key, as getKey shows it.
    const got = await h.post("/v2/keys.getKey", { keyId: limited.keyId }, t.rootKey);
    expect(limited).toEqual(got.body.data);
  });

  test("filters by the identity's externalId; an unknown one lists nothing", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const mine = await v1Key(h, t, apiId, { externalId: "user_listed" });
    await v1Key(h, t, apiId);
    const filtered = await list(h, { apiId, externalId: "user_listed" }, t.rootKey);
    expect(filtered.body.data.map((k: { keyId: string }) => k.keyId)).toEqual([mine.keyId]);
    expect(filtered.body.data[0].identity).toMatchObject({ externalId: "user_listed" });
    const none = await list(h, { apiId, externalId: "nobody" }, t.rootKey);
    expect(none.body).toEqual({ meta: { requestId: expect.any(String) }, data: [], pagination: { hasMore: false } });
  });

  test("a missing API, another workspace's, and one the root key may not read are the same 404", async ({ h, t, apiId }) => {
    const other = await h.tenant();
    const theirs = await h.createApi(other);
    const cannotRead = await h.rootKey(t.workspaceId, [`api.${apiId}.read_api`]);
    for (const [body, key] of [
      [{ apiId: "api_missing_1" }, t.rootKey],
      [{ apiId: theirs }, t.rootKey],
      [{ apiId }, cannotRead],
    ] as const) {
      expectV2Error(await list(h, body, key), 404, "unkey/data/api_not_found", NOT_FOUND);
    }
    const reader = await h.rootKey(t.workspaceId, [`api.${apiId}.read_api`, `api.${apiId}.read_key`]);
    expect((await list(h, { apiId }, reader)).status).toBe(200);
  });

  test("decrypt: the plaintexts with decrypt_key, 403 without it, 412 for an API that stores no keys encrypted", async ({ h, t }) => {
    const encrypting = await h.createApi(t, { storeEncryptedKeys: true });
    const { key, keyId } = await v1Key(h, t, encrypting, { recoverable: true });
    const listed = await list(h, { apiId: encrypting, decrypt: true }, t.rootKey);
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    expect(listed.body.data.find((k: { keyId: string }) => k.keyId === keyId).plaintext).toBe(key);
    expect((await list(h, { apiId: encrypting }, t.rootKey)).body.data[0]).not.toHaveProperty("plaintext");
    const reader = await h.rootKey(t.workspaceId, ["api.*.read_api", "api.*.read_key"]);
    expectV2Error(await list(h, { apiId: encrypting, decrypt: true }, reader), 403, "unkey/authorization/insufficient_permissions");
    const plain = await h.createApi(t);
    expectV2Error(await list(h, { apiId: plain, decrypt: true }, t.rootKey), 412, "unkey/application/precondition_failed");
  });

  test("refuses unknown fields and a bad limit (400)", async ({ h, t, apiId }) => {
    expectV2Error(await list(h, { apiId, other: 1 }, t.rootKey), 400, "unkey/application/invalid_input");
    expectV2Error(await list(h, { apiId, limit: 0 }, t.rootKey), 400, "unkey/application/invalid_input");
    expectV2Error(await list(h, { apiId, limit: 101 }, t.rootKey), 400, "unkey/application/invalid_input");
  });
});
