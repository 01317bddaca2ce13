import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
import { expectV2Error } from "./v2-errors.js";

// v2's keys.updateKey (contract §4.4) over the core v1's updateKey uses: three-state fields (§1.8), credits,
// ratelimits replaced by name, roles/permissions with update_key alone, externalId, and the cache: the very next
// verification (v1 or v2's reads) sees the change.

const unique = (name: string) => `${name}_${randomBytes(4).toString("hex")}`;

async function v2Key(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown> = {}) {
  const res = await h.post("/v2/keys.createKey", { apiId, ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { key: string; keyId: string };
}

const read = async (h: Harness, t: Tenant, keyId: string) => {
  const res = await h.post("/v2/keys.getKey", { keyId }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
};

describe("v2 keys.updateKey", () => {
  // The file's app and tenant are built here, under the hooks' timeout, not inside the first test's.
  test.beforeAll(async ({ h, t }) => {
    expect(h.app).toBeDefined();
    expect(t.rootKey).toBeDefined();
  });

  test("name, meta, expires, externalId: absent keeps, a value sets, null clears", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const externalId = unique("user");
    const { keyId } = await v2Key(h, t, apiId, { name: "one", meta: { a: 1 }, expires: 4_000_000_000_000, externalId });
    const update = async (body: Record<string, unknown>) => {
      const res = await h.post("/v2/keys.updateKey", { keyId, ...body }, t.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toEqual({ meta: { requestId: expect.any(String) }, data: {} });
    };
    await update({ enabled: true });
    expect(await read(h, t, keyId)).toMatchObject({ name: "one", meta: { a: 1 }, expires: 4_000_000_000_000, identity: { externalId } });
    const other = unique("other");
    await update({ name: "two", meta: { b: 2 }, expires: 4_100_000_000_000, externalId: other });
    expect(await read(h, t, keyId)).toMatchObject({
      name: "two",
      meta: { b: 2 },
      expires: 4_100_000_000_000,
      identity: { externalId: other },
    });
    await update({ name: null, meta: null, expires: null, externalId: null });
    const cleared = await read(h, t, keyId);
    for (const field of ["name", "meta", "expires", "identity"]) expect(cleared[field]).toBeUndefined();
    // Unlinking keeps the identity.
    expect((await h.post("/v2/identities.getIdentity", { identity: other }, t.rootKey)).status).toBe(200);
  });

  test("credits: null clears remaining and refill; remaining null too; refill null clears the refill only; each alone keeps the other", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const refill = { interval: "monthly", amount: 50, refillDay: 5 };
    const { keyId } = await v2Key(h, t, apiId, { credits: { remaining: 10, refill } });
    const update = async (credits: unknown) => {
      const res = await h.post("/v2/keys.updateKey", { keyId, credits }, t.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return (await read(h, t, keyId)).credits;
    };
    expect(await update({ remaining: 7 })).toEqual({ remaining: 7, refill });
    expect(await update({ refill: { interval: "daily", amount: 9 } })).toEqual({ remaining: 7, refill: { interval: "daily", amount: 9 } });
    expect(await update({ refill: null })).toEqual({ remaining: 7 });
    expect(await update({})).toEqual({ remaining: 7 });
    expect(await update(null)).toBeUndefined();
    expect(await update({ remaining: 100, refill: { interval: "daily", amount: 50 } })).toEqual({
      remaining: 100,
      refill: { interval: "daily", amount: 50 },
    });
    expect(await update({ remaining: null })).toBeUndefined();
    const [row] = await h.sql<{ remaining_requests: number | null; refill_amount: number | null; refill_day: number | null }>(
      `select remaining_requests, refill_amount, refill_day from keys where id = '${keyId}'`,
    );
    expect(row).toEqual({ remaining_requests: null, refill_amount: null, refill_day: null });
  });

  test("refill day rules are 400 in v2's words and roll the whole update back", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { keyId } = await v2Key(h, t, apiId, { name: "kept", credits: { remaining: 3 } });
    expectV2Error(
      await h.post(
        "/v2/keys.updateKey",
        { keyId, name: "changed", credits: { refill: { interval: "daily", amount: 5, refillDay: 3 } } },
        t.rootKey,
      ),
      400,
      "unkey/application/invalid_input",
      "`refillDay` must not be provided when the refill interval is `daily`.",
    );
    expectV2Error(
      await h.post("/v2/keys.updateKey", { keyId, name: "changed", credits: { refill: { interval: "monthly", amount: 5 } } }, t.rootKey),
      400,
      "unkey/application/invalid_input",
      "`refillDay` must be provided when the refill interval is `monthly`.",
    );
    expect(await read(h, t, keyId)).toMatchObject({ name: "kept", credits: { remaining: 3 } });
  });

  test("ratelimits replace the key's own by name: same names keep their ids, others go, [] removes all", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { keyId } = await v2Key(h, t, apiId, {
      ratelimits: [
        { name: "keep", limit: 1, duration: 1000, autoApply: true },
        { name: "drop", limit: 2, duration: 2000, autoApply: false },
      ],
    });
    const before = (await read(h, t, keyId)).ratelimits as { id: string; name: string }[];
    const keptId = before.find((r) => r.name === "keep")!.id;
    const replace = (ratelimits: unknown[]) => h.post("/v2/keys.updateKey", { keyId, ratelimits }, t.rootKey);
    expect(
      (
        await replace([
          { name: "keep", limit: 5, duration: 60_000, autoApply: false },
          { name: "new", limit: 3, duration: 3000, autoApply: true },
        ])
      ).status,
    ).toBe(200);
    expect((await read(h, t, keyId)).ratelimits).toEqual([
      { id: keptId, name: "keep", limit: 5, duration: 60_000, autoApply: false },
      { id: expect.stringMatching(/^rl_/), name: "new", limit: 3, duration: 3000, autoApply: true },
    ]);
    // The same request twice leaves one row per name.
    await replace([{ name: "keep", limit: 6, duration: 60_000, autoApply: true }]);
    await replace([{ name: "keep", limit: 6, duration: 60_000, autoApply: true }]);
    expect((await read(h, t, keyId)).ratelimits).toEqual([{ id: keptId, name: "keep", limit: 6, duration: 60_000, autoApply: true }]);
    await replace([]);
    expect((await read(h, t, keyId)).ratelimits).toBeUndefined();
  });

  test("roles and permissions replace the key's direct sets with update_key alone; missing permissions are created, a missing role is 404", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const [roleA, roleB] = [unique("role a"), unique("role b")];
    for (const name of [roleA, roleB]) expect((await h.post("/v1/permissions.createRole", { name }, t.rootKey)).status).toBe(200);
    const { keyId } = await v2Key(h, t, apiId, { roles: [roleA], permissions: ["p.one"] });
    const updater = await h.rootKey(t.workspaceId, [`api.${apiId}.update_key`]);
    const slug = unique("created.perm");
    const res = await h.post("/v2/keys.updateKey", { keyId, roles: [roleB], permissions: [slug] }, updater);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const after = await read(h, t, keyId);
    expect(after.roles).toEqual([roleB]);
    expect(after.permissions).toEqual([slug]);
    const ghost = unique("ghost");
    expectV2Error(
      await h.post("/v2/keys.updateKey", { keyId, name: "not written", roles: [ghost] }, updater),
      404,
      "unkey/data/role_not_found",
      `Role '${ghost}' was not found.`,
    );
    const unchanged = await read(h, t, keyId);
    expect(unchanged.roles).toEqual([roleB]);
    expect(unchanged.name).toBeUndefined();
    await h.post("/v2/keys.updateKey", { keyId, roles: [], permissions: [] }, updater);
    const none = await read(h, t, keyId);
    expect(none.roles).toBeUndefined();
    expect(none.permissions).toBeUndefined();
  });

  test("the very next verification sees the change: v1 verifyKey after a v2 update (credits, enabled, expires)", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { key, keyId } = await v2Key(h, t, apiId, { credits: { remaining: 1 } });
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: true, remaining: 0 });
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: false, code: "USAGE_EXCEEDED" });
    await h.post("/v2/keys.updateKey", { keyId, credits: { remaining: 50 } }, t.rootKey);
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: true, remaining: 49 });
    await h.post("/v2/keys.updateKey", { keyId, enabled: false }, t.rootKey);
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: false, code: "DISABLED" });
    await h.post("/v2/keys.updateKey", { keyId, enabled: true, expires: 1_000 }, t.rootKey);
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: false, code: "EXPIRED" });
    await h.post("/v2/keys.updateKey", { keyId, expires: null, credits: null }, t.rootKey);
    const valid = (await h.post("/v1/keys.verifyKey", { key, apiId })).body;
    expect(valid).toMatchObject({ valid: true });
    expect(valid.remaining).toBeUndefined();
    await h.post("/v2/keys.updateKey", { keyId, ratelimits: [{ name: "tight", limit: 1, duration: 60_000, autoApply: true }] }, t.rootKey);
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: true });
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: false, code: "RATE_LIMITED" });
  });

  test("a key created through v1 is updated through v2 and v1 sees it", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { key, keyId } = (await h.post("/v1/keys.createKey", { apiId, name: "v1" }, t.rootKey)).body;
    await h.post("/v2/keys.updateKey", { keyId, name: "v2", meta: { via: "v2" } }, t.rootKey);
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: true, name: "v2", meta: { via: "v2" } });
  });

  test("needs update_key (403 in v2's words); a missing, deleted or other workspace's key is 404", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const otherApi = await h.createApi(t);
    const { keyId } = await v2Key(h, t, apiId, { name: "kept" });
    for (const perms of [["api.*.read_key"], [`api.${otherApi}.update_key`], [`api.${apiId}.create_key`]]) {
      expectV2Error(
        await h.post("/v2/keys.updateKey", { keyId, name: "x" }, await h.rootKey(t.workspaceId, perms)),
        403,
        "unkey/authorization/insufficient_permissions",
        /^Missing one of these permissions: /,
      );
    }
    expect((await read(h, t, keyId)).name).toBe("kept");
    for (const perms of [["api.*.update_key"], [`api.${apiId}.update_key`]]) {
      expect((await h.post("/v2/keys.updateKey", { keyId, name: "y" }, await h.rootKey(t.workspaceId, perms))).status).toBe(200);
    }
    expectV2Error(await h.post("/v2/keys.updateKey", { keyId: "key_doesnotexist", name: "x" }, t.rootKey), 404, "unkey/data/key_not_found");
    const other = await h.tenant();
    expectV2Error(await h.post("/v2/keys.updateKey", { keyId, name: "x" }, other.rootKey), 404, "unkey/data/key_not_found");
    expect((await read(h, t, keyId)).name).toBe("y");
    await h.post("/v2/keys.deleteKey", { keyId }, t.rootKey);
    expectV2Error(await h.post("/v2/keys.updateKey", { keyId, name: "x" }, t.rootKey), 404, "unkey/data/key_not_found");
  });

  test("schema: missing keyId, bad fields and unknown fields are 400; authentication 400/401", async ({ h, t }) => {
    const keyId = "key_whatever";
    for (const body of [
      {},
      { keyId: "" },
      { keyId, name: "" },
      { keyId, enabled: null },
      { keyId, externalId: "a b" },
      { keyId, expires: -1 },
      { keyId, credits: { remaining: -1 } },
      { keyId, credits: { refill: { interval: "weekly", amount: 1 } } },
      { keyId, ratelimits: [{ name: "abc", limit: 0, duration: 1000, autoApply: true }] },
      { keyId, permissions: ["bad slug"] },
      { keyId, ratelimit: { limit: 1, duration: 1000 } },
    ]) {
      expectV2Error(
        await h.post("/v2/keys.updateKey", body, t.rootKey),
        400,
        "unkey/application/invalid_input",
        "POST request body for '/v2/keys.updateKey' failed to validate schema",
      );
    }
    expectV2Error(await h.post("/v2/keys.updateKey", { keyId }), 400, "unkey/application/invalid_input");
    expectV2Error(await h.post("/v2/keys.updateKey", { keyId }, "unknown_root_key"), 401, "unkey/authentication/key_not_found");
  });
});
