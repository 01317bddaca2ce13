import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";

// keys.createKey, v1's and v2's, uses a root key it holds in memory without reading the store's epoch first: the
// statement that inserts the key re-checks the root key at its own snapshot, and any refusal is answered after
// authenticating again at a fresh epoch (RootKeyAuthenticator.authorizeWrite, issue 13 §3: a round trip fewer per
// call). Each case puts the root key in memory with a first createKey, changes it behind the app's back, and expects
// the very next createKey to be answered as it is for a root key authenticated at a fresh epoch, writing nothing
// when refused. Both the one-statement insert (a plain key) and the transaction (a key with an owner) are covered.

type Case = { route: "/v1/keys.createKey" | "/v2/keys.createKey"; shape: "plain key" | "key with an owner" };
const CASES: Case[] = (["/v1/keys.createKey", "/v2/keys.createKey"] as const).flatMap((route) =>
  (["plain key", "key with an owner"] as const).map((shape) => ({ route, shape })),
);
const bodyOf = (c: Case, apiId: string) => ({ apiId, ...(c.shape === "key with an owner" && { externalId: "owner-1" }) });

/** A fresh workspace whose root key is in memory (it created one key), with its API and its keys counted. */
async function cachedRootKey(h: Harness, c: Case) {
  const t: Tenant = await h.tenant();
  const apiId = await h.createApi(t);
  const create = () => h.post(c.route, bodyOf(c, apiId), t.rootKey);
  const keysInApi = async () => (await h.sql<{ n: number }>(`select count(*)::int as n from keys where api_id = '${apiId}'`))[0]!.n;
  expect((await create()).status).toBe(200);
  return { t, apiId, create, keysInApi };
}

/** The refusal's status and code, v1's `error.code` or v2's `error.type`'s last word. */
const refusal = (res: { status: number; body: { error?: { code?: string; type?: string } } }) => ({
  status: res.status,
  code: res.body.error?.code ?? res.body.error?.type?.split("/").at(-1),
});

describe("keys.createKey with a root key in memory: the insert re-checks it", () => {
  test.for(CASES)("$route, $shape: reads no epoch before writing", async (c, { h }) => {
    const { create, keysInApi } = await cachedRootKey(h, c);
    const epochs = h.services.epochs;
    const current = epochs.current;
    let reads = 0;
    epochs.current = () => {
      reads++;
      return current.call(epochs);
    };
    try {
      expect((await create()).status).toBe(200);
    } finally {
      epochs.current = current;
    }
    expect(reads).toBe(0);
    expect(await keysInApi()).toBe(2);
  });

  test.for(CASES)("$route, $shape: refuses a root key deleted since, and writes nothing", async (c, { h }) => {
    const { t, create, keysInApi } = await cachedRootKey(h, c);
    await h.sql(`delete from root_keys where id = '${t.rootKeyId}'`);
    const res = await create();
    expect(res.status).toBe(c.route.startsWith("/v1") ? 403 : 401);
    if (c.route.startsWith("/v1")) expect(res.body.error.message).toBe("key not found");
    expect(await keysInApi()).toBe(1);
  });

  test.for(CASES)("$route, $shape: refuses a root key that lost create_key since, and writes nothing", async (c, { h }) => {
    const { t, create, keysInApi } = await cachedRootKey(h, c);
    await h.sql(`update root_keys set permissions = '{api.*.read_api}' where id = '${t.rootKeyId}'`);
    // v2 answers a root key that may not create keys in the API as if the API were not there.
    expect(refusal(await create())).toEqual(
      c.route.startsWith("/v1") ? { status: 403, code: "INSUFFICIENT_PERMISSIONS" } : { status: 404, code: "api_not_found" },
    );
    expect(await keysInApi()).toBe(1);
  });

  test.for(CASES)("$route, $shape: refuses a root key whose workspace was disabled since, and writes nothing", async (c, { h }) => {
    const { t, create, keysInApi } = await cachedRootKey(h, c);
    await h.disableWorkspace(t.workspaceId);
    expect((await create()).status).toBe(403);
    expect(await keysInApi()).toBe(1);
  });

  test.for(CASES)("$route, $shape: accepts a root key granted create_key since it was refused", async (c, { h }) => {
    const { t, create, keysInApi } = await cachedRootKey(h, c);
    await h.sql(`update root_keys set permissions = '{api.*.read_api}' where id = '${t.rootKeyId}'`);
    expect((await create()).status).toBe(c.route.startsWith("/v1") ? 403 : 404); // in memory again, without create_key
    await h.sql(`update root_keys set permissions = '{*}' where id = '${t.rootKeyId}'`);
    expect((await create()).status).toBe(200);
    expect(await keysInApi()).toBe(2);
  });

  test.for(CASES)("$route, $shape: answers 404 for an API deleted since, and writes nothing", async (c, { h }) => {
    const { apiId, create, keysInApi } = await cachedRootKey(h, c);
    await h.sql(`update apis set deleted_at_m = 1 where id = '${apiId}'`);
    expect((await create()).status).toBe(404);
    expect(await keysInApi()).toBe(1);
  });
});
