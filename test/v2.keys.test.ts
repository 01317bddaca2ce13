import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { countIn, test } from "./fixtures.js";
import { expectV2Error } from "./v2-errors.js";
import type { Harness, Tenant } from "./helper.js";
import { recordingDb } from "./recording-db.js";
import { LastUsed } from "../src/storage/lastUsed/lastUsed.recorder.js";

// v2's keys.getKey, keys.whoami, keys.deleteKey and keys.updateCredits (contract §4.2, §4.3, §4.5, §4.6) over the
// core v1 uses: KeyResponseData with empty fields left out, v2's errors, v1 and v2 on one store.

const unique = (name: string) => `${name}_${randomBytes(4).toString("hex")}`;
const NOT_FOUND = "The specified key was not found. We could not find the requested key.";

/** A key created through v1, with the fields given. */
async function v1Key(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown> = {}) {
  const res = await h.post("/v1/keys.createKey", { apiId, ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { key: string; keyId: string };
}

describe("v2 keys.getKey and keys.whoami", () => {
  test("a key created through v1 reads through v2 as KeyResponseData, and by its secret through whoami", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const role = unique("reader");
    const externalId = unique("user");
    await h.post(
      "/v2/identities.createIdentity",
      { externalId, meta: { tier: "gold" }, ratelimits: [{ name: "tokens", limit: 5, duration: 60_000, autoApply: false }] },
      t.rootKey,
    );
    const { key, keyId } = await v1Key(h, t, apiId, {
      name: "svc",
      meta: { plan: "pro" },
      remaining: 10,
      refill: { interval: "monthly", amount: 20, refillDay: 15 },
      ratelimit: { type: "fast", limit: 100, duration: 60_000 },
      roles: [role],
      permissions: ["b.write", "a.read"],
      externalId,
      expires: 4_000_000_000_000,
    });
    const expected = {
      keyId,
      start: expect.any(String),
      enabled: true,
      createdAt: expect.any(Number),
      name: "svc",
      meta: { plan: "pro" },
      expires: 4_000_000_000_000,
      permissions: ["a.read", "b.write"],
      roles: [role],
      credits: { remaining: 10, refill: { interval: "monthly", amount: 20, refillDay: 15 } },
      identity: {
        id: expect.stringMatching(/^id_/),
        externalId,
        meta: { tier: "gold" },
        ratelimits: [{ id: expect.stringMatching(/^rl_/), name: "tokens", limit: 5, duration: 60_000, autoApply: false }],
      },
      ratelimits: [{ id: expect.stringMatching(/^rl_/), name: "default", limit: 100, duration: 60_000, autoApply: true }],
    };
    const got = await h.post("/v2/keys.getKey", { keyId }, t.rootKey);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body).toEqual({ meta: { requestId: expect.any(String) }, data: expected });
    expect(key.startsWith(got.body.data.start)).toBe(true);
    const who = await h.post("/v2/keys.whoami", { key }, t.rootKey);
    expect(who.status, JSON.stringify(who.body)).toBe(200);
    expect(who.body.data).toEqual(expected);
  });

  test("permissions are slugs, direct and through roles, each once; a bare key shows only what it has", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const role = unique("role");
    await h.post("/v1/permissions.createPermission", { name: "via.role" }, t.rootKey);
    const created = await h.post("/v1/permissions.createRole", { name: role }, t.rootKey);
    const perm = await h.post("/v2/permissions.getPermission", { permission: "via.role" }, t.rootKey);
    await h.post(
      "/v1/permissions.addPermissionsToRole",
      { roleId: created.body.roleId, permissions: [{ id: perm.body.data.id }] },
      t.rootKey,
    );
    const { key, keyId } = await v1Key(h, t, apiId, { roles: [role], permissions: ["direct.one"] });
    const got = await h.post("/v2/keys.getKey", { keyId }, t.rootKey);
    expect([...got.body.data.permissions].sort()).toEqual(["direct.one", "via.role"]);
    expect((await h.post("/v2/keys.whoami", { key }, t.rootKey)).body.data.permissions).toEqual(["direct.one", "via.role"]);

    const bare = await v1Key(h, t, apiId);
    const plain = await h.post("/v2/keys.getKey", { keyId: bare.keyId }, t.rootKey);
    expect(plain.body.data).toEqual({ keyId: bare.keyId, start: expect.any(String), enabled: true, createdAt: expect.any(Number) });
  });

  test("getKey: decrypt: true adds the plaintext of a recoverable key, needs decrypt_key (403) and an API storing encrypted keys (412)", async ({
    h,
    t,
  }) => {
    const plainApi = await h.createApi(t);
    const plainKey = await v1Key(h, t, plainApi);
    expectV2Error(
      await h.post("/v2/keys.getKey", { keyId: plainKey.keyId, decrypt: true }, t.rootKey),
      412,
      "unkey/application/precondition_failed",
      "The API for this key does not support key encryption.",
    );
    expect((await h.get("/v1/keys.getKey", { keyId: plainKey.keyId, decrypt: "true" }, t.rootKey)).status).toBe(200);
    const apiId = await h.createApi(t, { storeEncryptedKeys: true });
    const { key, keyId } = await v1Key(h, t, apiId, { recoverable: true });
    const got = await h.post("/v2/keys.getKey", { keyId, decrypt: true }, t.rootKey);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body.data.plaintext).toBe(key);
    expect((await h.post("/v2/keys.getKey", { keyId }, t.rootKey)).body.data).not.toHaveProperty("plaintext");
    const reader = await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]);
    expect((await h.post("/v2/keys.getKey", { keyId }, reader)).status).toBe(200);
    expectV2Error(await h.post("/v2/keys.getKey", { keyId, decrypt: true }, reader), 403, "unkey/authorization/insufficient_permissions");
  });

  test("getKey: unknown, deleted and other workspace's keys are 404; without read_key 403 in v2's words; bad input 400", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const { keyId } = await v1Key(h, t, apiId);
    expectV2Error(await h.post("/v2/keys.getKey", { keyId: "key_missing_123" }, t.rootKey), 404, "unkey/data/key_not_found", NOT_FOUND);
    const other = await h.tenant();
    expectV2Error(await h.post("/v2/keys.getKey", { keyId }, other.rootKey), 404, "unkey/data/key_not_found", NOT_FOUND);
    const otherApi = await h.createApi(t);
    for (const perms of [[], [`api.*.create_key`], [`api.${otherApi}.read_key`], [`api.${apiId}.delete_key`]]) {
      expectV2Error(
        await h.post("/v2/keys.getKey", { keyId }, await h.rootKey(t.workspaceId, perms)),
        403,
        "unkey/authorization/insufficient_permissions",
        `Missing one of these permissions: api.*.read_key or api.${apiId}.read_key or unkey:v1:${t.workspaceId}:keyspaces/${apiId}/keys/${keyId}#read_key`,
      );
    }
    expect((await h.post("/v2/keys.getKey", { keyId }, await h.rootKey(t.workspaceId, ["api.*.read_key"]))).status).toBe(200);
    expectV2Error(await h.post("/v2/keys.getKey", { keyId: "" }, t.rootKey), 400, "unkey/application/invalid_input");
    expectV2Error(await h.post("/v2/keys.getKey", { keyId: "key-with-dash" }, t.rootKey), 400, "unkey/application/invalid_input");
    expectV2Error(await h.post("/v2/keys.getKey", { keyId, extra: 1 }, t.rootKey), 400, "unkey/application/invalid_input");
    await h.post("/v2/keys.deleteKey", { keyId }, t.rootKey);
    expectV2Error(await h.post("/v2/keys.getKey", { keyId }, t.rootKey), 404, "unkey/data/key_not_found", NOT_FOUND);
  });

  test("whoami: without read_key, of another workspace or unknown is a plain 404 (no permission named); a disabled key is shown", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const { key } = await v1Key(h, t, apiId, { enabled: false });
    const who = await h.post("/v2/keys.whoami", { key }, t.rootKey);
    expect(who.status).toBe(200);
    expect(who.body.data.enabled).toBe(false);
    const otherApi = await h.createApi(t);
    for (const perms of [[], ["api.*.create_key"], [`api.${otherApi}.read_key`]]) {
      const res = await h.post("/v2/keys.whoami", { key }, await h.rootKey(t.workspaceId, perms));
      expectV2Error(res, 404, "unkey/data/key_not_found", NOT_FOUND);
      expect(res.body.error.detail).not.toContain("permission");
    }
    expect((await h.post("/v2/keys.whoami", { key }, await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]))).status).toBe(200);
    expectV2Error(await h.post("/v2/keys.whoami", { key }, (await h.tenant()).rootKey), 404, "unkey/data/key_not_found", NOT_FOUND);
    expectV2Error(await h.post("/v2/keys.whoami", { key: "sk_unknown_0123456789" }, t.rootKey), 404, "unkey/data/key_not_found", NOT_FOUND);
    expectV2Error(await h.post("/v2/keys.whoami", { key: "" }, t.rootKey), 400, "unkey/application/invalid_input");
    // v1's whoami is unchanged: a caller without read_key is refused with 403.
    expect((await h.post("/v1/keys.whoami", { key }, await h.rootKey(t.workspaceId, ["api.*.create_key"]))).status).toBe(403);
  });
});

describe("v2 keys.deleteKey", () => {
  test("soft by default: v1 no longer reads or verifies the key; a second delete is 404", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { key, keyId } = await v1Key(h, t, apiId);
    const res = await h.post("/v2/keys.deleteKey", { keyId }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ meta: { requestId: expect.any(String) }, data: {} });
    expect((await h.get("/v1/keys.getKey", { keyId }, t.rootKey)).status).toBe(404);
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body.code).toBe("NOT_FOUND");
    expect(await countIn(h, `keys where id = '${keyId}' and deleted_at_m is not null`)).toBe(1);
    expectV2Error(await h.post("/v2/keys.deleteKey", { keyId }, t.rootKey), 404, "unkey/data/key_not_found", NOT_FOUND);
  });

  test("permanent: true removes the row with its rate limits", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { keyId } = await v1Key(h, t, apiId, { ratelimit: { type: "fast", limit: 5, duration: 60_000 }, permissions: ["p.one"] });
    expect((await h.post("/v2/keys.deleteKey", { keyId, permanent: true }, t.rootKey)).status).toBe(200);
    expect(await countIn(h, `keys where id = '${keyId}'`)).toBe(0);
    expect(await countIn(h, `ratelimits where key_id = '${keyId}'`)).toBe(0);
    expect(await countIn(h, `keys_permissions where key_id = '${keyId}'`)).toBe(0);
  });

  test("needs delete_key (403 in v2's words); another workspace's key is 404; bad input 400", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { keyId } = await v1Key(h, t, apiId);
    expectV2Error(
      await h.post("/v2/keys.deleteKey", { keyId }, await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`])),
      403,
      "unkey/authorization/insufficient_permissions",
      `Missing one of these permissions: api.*.delete_key or api.${apiId}.delete_key or unkey:v1:${t.workspaceId}:keyspaces/${apiId}/keys/${keyId}#delete_key`,
    );
    expectV2Error(await h.post("/v2/keys.deleteKey", { keyId }, (await h.tenant()).rootKey), 404, "unkey/data/key_not_found", NOT_FOUND);
    const missing = await h.post("/v2/keys.deleteKey", {}, t.rootKey);
    expectV2Error(missing, 400, "unkey/application/invalid_input", "POST request body for '/v2/keys.deleteKey' failed to validate schema");
    expectV2Error(await h.post("/v2/keys.deleteKey", { keyId: "" }, t.rootKey), 400, "unkey/application/invalid_input");
    expectV2Error(await h.post("/v2/keys.deleteKey", { keyId, permanent: "yes" }, t.rootKey), 400, "unkey/application/invalid_input");
    expect((await h.post("/v2/keys.deleteKey", { keyId }, await h.rootKey(t.workspaceId, [`api.${apiId}.delete_key`]))).status).toBe(200);
  });
});

describe("v2 keys.updateCredits", () => {
  test("set, increment, decrement (floored at 0) answer KeyCreditsData; v1 sees each change at once", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { key, keyId } = await v1Key(h, t, apiId, { remaining: 10, refill: { interval: "daily", amount: 10 } });
    const update = (body: Record<string, unknown>) => h.post("/v2/keys.updateCredits", { keyId, ...body }, t.rootKey);
    const set = await update({ operation: "set", value: 5 });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body).toEqual({
      meta: { requestId: expect.any(String) },
      data: { remaining: 5, refill: { interval: "daily", amount: 10 } },
    });
    expect((await update({ operation: "increment", value: 3 })).body.data.remaining).toBe(8);
    const verified = await h.post("/v1/keys.verifyKey", { key, apiId });
    expect(verified.body).toMatchObject({ valid: true, remaining: 7 });
    expect((await update({ operation: "decrement", value: 100 })).body.data.remaining).toBe(0);
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: false, code: "USAGE_EXCEEDED" });
    expect((await h.get("/v1/keys.getKey", { keyId }, t.rootKey)).body.remaining).toBe(0);
  });

  test("set with null, or without a value, makes the key unlimited and removes its refill (v1 sees no refill)", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    for (const body of [{ operation: "set", value: null }, { operation: "set" }]) {
      const { keyId } = await v1Key(h, t, apiId, { remaining: 10, refill: { interval: "daily", amount: 10 } });
      const res = await h.post("/v2/keys.updateCredits", { keyId, ...body }, t.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data).toEqual({ remaining: null });
      const v1 = await h.get("/v1/keys.getKey", { keyId }, t.rootKey);
      expect(v1.body).not.toHaveProperty("remaining");
      expect(v1.body).not.toHaveProperty("refill");
      expect((await h.post("/v2/keys.getKey", { keyId }, t.rootKey)).body.data).not.toHaveProperty("credits");
    }
  });

  test("v1's updateRemaining set null still keeps the refill (the rule is v2's)", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { keyId } = await v1Key(h, t, apiId, { remaining: 10, refill: { interval: "daily", amount: 10 } });
    expect((await h.post("/v1/keys.updateRemaining", { keyId, op: "set", value: null }, t.rootKey)).status).toBe(200);
    expect(await countIn(h, `keys where id = '${keyId}' and refill_amount = 10`)).toBe(1);
  });

  test("refuses increment/decrement without a value or on an unlimited key (400); 403 without update_key; 404 elsewhere", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const limited = await v1Key(h, t, apiId, { remaining: 10 });
    const unlimited = await v1Key(h, t, apiId);
    for (const operation of ["increment", "decrement"]) {
      for (const value of [null, undefined]) {
        expectV2Error(
          await h.post("/v2/keys.updateCredits", { keyId: limited.keyId, operation, ...(value === null && { value }) }, t.rootKey),
          400,
          "unkey/application/invalid_input",
          "When specifying an increment or decrement operation, a value must be provided.",
        );
      }
      expectV2Error(
        await h.post("/v2/keys.updateCredits", { keyId: unlimited.keyId, operation, value: 1 }, t.rootKey),
        400,
        "unkey/application/invalid_input",
        "You cannot increment or decrement a key with unlimited credits.",
      );
    }
    expectV2Error(
      await h.post("/v2/keys.updateCredits", { operation: "set", value: 1 }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
    expectV2Error(
      await h.post("/v2/keys.updateCredits", { keyId: limited.keyId, operation: "add", value: 1 }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
    expectV2Error(
      await h.post("/v2/keys.updateCredits", { keyId: limited.keyId, operation: "set", value: -1 }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
    expectV2Error(
      await h.post(
        "/v2/keys.updateCredits",
        { keyId: limited.keyId, operation: "set", value: 1 },
        await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]),
      ),
      403,
      "unkey/authorization/insufficient_permissions",
      `Missing one of these permissions: api.*.update_key or api.${apiId}.update_key or unkey:v1:${t.workspaceId}:keyspaces/${apiId}/keys/${limited.keyId}#update_key`,
    );
    expectV2Error(
      await h.post("/v2/keys.updateCredits", { keyId: limited.keyId, operation: "set", value: 1 }, (await h.tenant()).rootKey),
      404,
      "unkey/data/key_not_found",
      NOT_FOUND,
    );
    expectV2Error(
      await h.post("/v2/keys.updateCredits", { keyId: "key_missing_123", operation: "set", value: 1 }, t.rootKey),
      404,
      "unkey/data/key_not_found",
      NOT_FOUND,
    );
    expect((await h.get("/v1/keys.getKey", { keyId: limited.keyId }, t.rootKey)).body.remaining).toBe(10);
  });
});

describe("lastUsedAt (issue 38 §1)", () => {
  /** The key as getKey, whoami and listKeys answer it. */
  async function readAll(h: Harness, t: Tenant, apiId: string, key: string, keyId: string) {
    const got = await h.post("/v2/keys.getKey", { keyId }, t.rootKey);
    const who = await h.post("/v2/keys.whoami", { key }, t.rootKey);
    const listed = await h.post("/v2/apis.listKeys", { apiId }, t.rootKey);
    for (const res of [got, who, listed]) expect(res.status, JSON.stringify(res.body)).toBe(200);
    return [got.body.data, who.body.data, listed.body.data.find((k: { keyId: string }) => k.keyId === keyId)];
  }

  test("absent until the key is verified; then the latest verification's time (ms, v2 or v1, any outcome) once the last-used flush wrote it", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const { key, keyId } = await v1Key(h, t, apiId);
    await h.jobs.lastUsed.flush();
    for (const data of await readAll(h, t, apiId, key, keyId)) expect(data).not.toHaveProperty("lastUsedAt");

    const before = h.clock.now();
    expect((await h.post("/v2/keys.verifyKey", { key }, t.rootKey)).body.data.valid).toBe(true);
    const after = h.clock.now();
    await h.jobs.lastUsed.flush();
    const [got, who, listed] = await readAll(h, t, apiId, key, keyId);
    expect(got.lastUsedAt).toBeGreaterThanOrEqual(before);
    expect(got.lastUsedAt).toBeLessThanOrEqual(after);
    expect(who.lastUsedAt).toBe(got.lastUsedAt);
    expect(listed.lastUsedAt).toBe(got.lastUsedAt);

    // Moved back by hand, so that the next verification's time is surely later: a v1 verification refused FORBIDDEN
    // (another API) is a use of the key too, as in the analytics counts.
    await h.sql(`update key_last_used set last_used_at_m = 1 where key_id = '${keyId}'`);
    const otherApi = await h.createApi(t);
    const beforeV1 = h.clock.now();
    expect((await h.post("/v1/keys.verifyKey", { key, apiId: otherApi })).body.code).toBe("FORBIDDEN");
    await h.jobs.lastUsed.flush();
    for (const data of await readAll(h, t, apiId, key, keyId)) expect(data.lastUsedAt).toBeGreaterThanOrEqual(beforeV1);
    // v1's key objects have no such field (v1's contract names none).
    expect((await h.get("/v1/keys.getKey", { keyId }, t.rootKey)).body).not.toHaveProperty("lastUsedAt");
  });

  test("a flush writes one row per key however often it was used, in one statement, and never moves a time back", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const keys = [await v1Key(h, t, apiId), await v1Key(h, t, apiId), await v1Key(h, t, apiId)];
    const recording = recordingDb(h);
    const lastUsed = new LastUsed(recording.db, { rowsPerStatement: 200 });
    const base = 1_800_000_000_000;
    for (let i = 0; i < 1000; i++) lastUsed.key(keys[0]!.keyId, base + i);
    lastUsed.key(keys[1]!.keyId, base + 5);
    lastUsed.key(keys[2]!.keyId, base + 7);
    expect(lastUsed.unwritten).toBe(3);
    await lastUsed.flush();
    const writes = recording.sent.filter((s) => s.query.includes("key_last_used"));
    expect(writes.length).toBe(1);
    expect(writes[0]!.params[0]).toHaveLength(3);
    expect(lastUsed.unwritten).toBe(0);
    const stored = async () =>
      new Map(
        (
          await h.sql<{ key_id: string; last_used_at_m: string }>(
            `select key_id, last_used_at_m from key_last_used where key_id in (${keys.map((k) => `'${k.keyId}'`).join(", ")})`,
          )
        ).map((r) => [r.key_id, Number(r.last_used_at_m)]),
      );
    expect(await stored()).toEqual(
      new Map([
        [keys[0]!.keyId, base + 999],
        [keys[1]!.keyId, base + 5],
        [keys[2]!.keyId, base + 7],
      ]),
    );
    // Another replica's older time (or a retry of one) changes nothing; a newer one wins.
    lastUsed.key(keys[0]!.keyId, base + 10);
    lastUsed.key(keys[1]!.keyId, base + 50);
    await lastUsed.flush();
    expect((await stored()).get(keys[0]!.keyId)).toBe(base + 999);
    expect((await stored()).get(keys[1]!.keyId)).toBe(base + 50);
    // Nothing used since: a flush sends nothing.
    const sent = recording.sent.length;
    await lastUsed.flush();
    expect(recording.sent.length).toBe(sent);
  });

  test("a key deleted permanently takes its time with it; a time a race left behind is swept", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { key, keyId } = await v1Key(h, t, apiId);
    const kept = await v1Key(h, t, apiId);
    expect((await h.post("/v2/keys.verifyKey", { key }, t.rootKey)).body.data.valid).toBe(true);
    expect((await h.post("/v2/keys.verifyKey", { key: kept.key }, t.rootKey)).body.data.valid).toBe(true);
    await h.jobs.lastUsed.flush();
    expect(await countIn(h, `key_last_used where key_id = '${keyId}'`)).toBe(1);
    expect((await h.post("/v2/keys.deleteKey", { keyId, permanent: true }, t.rootKey)).status).toBe(200);
    expect(await countIn(h, `key_last_used where key_id = '${keyId}'`)).toBe(0);
    // Permanently deleting an API's keys (v1) takes theirs too.
    const other = await h.createApi(t);
    const ofOther = await v1Key(h, t, other);
    await h.post("/v2/keys.verifyKey", { key: ofOther.key }, t.rootKey);
    await h.jobs.lastUsed.flush();
    expect(await countIn(h, `key_last_used where key_id = '${ofOther.keyId}'`)).toBe(1);
    expect((await h.post("/v1/apis.deleteKeys", { apiId: other, permanent: true }, t.rootKey)).status).toBe(200);
    expect(await countIn(h, `key_last_used where key_id = '${ofOther.keyId}'`)).toBe(0);

    // A flush that wrote a key's time as the key's deletion committed leaves it: the sweep deletes it, not others'.
    await h.sql(`insert into key_last_used (key_id, last_used_at_m) values ('${keyId}', 1), ('key_never_was', 2)`);
    await h.sql(`insert into root_key_last_used (root_key_id, last_used_at_m) values ('rk_never_was', 3)`);
    expect(await h.jobs.lastUsed.deleteOrphans()).toBeGreaterThanOrEqual(3);
    expect(await countIn(h, `key_last_used where key_id in ('${keyId}', 'key_never_was')`)).toBe(0);
    expect(await countIn(h, `root_key_last_used where root_key_id = 'rk_never_was'`)).toBe(0);
    expect(await countIn(h, `key_last_used where key_id = '${kept.keyId}'`)).toBe(1);
    expect(await countIn(h, `root_key_last_used where root_key_id = '${t.rootKeyId}'`)).toBe(1);
  });
});
