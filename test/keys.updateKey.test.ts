import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { answersNotFoundLeaving, describeRootKeyAuth, rowsOf } from "./auth-suite.js";
import { test } from "./fixtures.js";
import { expectError } from "./helper.js";

const unique = (label: string) => `${label}-${randomBytes(4).toString("hex")}`;

const ms = (value: unknown) => (value === null ? null : new Date(value as string).getTime());
const recent = (value: unknown) => Math.abs(ms(value)! - Date.now()) < 60_000;

// The file's harness, tenant and API (`h`, `t`, `apiId` of test/fixtures.ts), and helpers over them.
const it = test
  .extend("update", async ({ route }) => route("/v1/keys.updateKey"))
  .extend("updateOk", async ({ t, update }) => async (body: Record<string, unknown>, rootKey = t.rootKey) => {
    const res = await update(body, rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({});
  })
  .extend(
    "verify",
    async ({ route }) =>
      (key: string, extra: Record<string, unknown> = {}) =>
        route("/v1/keys.verifyKey").ok({ key, ...extra }, null),
  )
  .extend(
    "row",
    async ({ h }) =>
      async (keyId: string) =>
        (await h.sql<any>(`select * from keys where id = '${keyId}'`))[0],
  )
  .extend(
    "defaultLimit",
    async ({ h }) =>
      async (keyId: string) =>
        (await h.sql<any>(`select "limit", duration, auto_apply from ratelimits where key_id = '${keyId}' and name = 'default'`)).map(
          (r) => ({ ...r, duration: Number(r.duration) }),
        ),
  );
const sorted = (ids: string[]) => [...ids].sort();

describe("keys.updateKey changes only the fields it is given", () => {
  it("sets name, meta, environment and expires one at a time, leaving every other field as it was", async ({
    apiId,
    importKey,
    updateOk,
    row,
  }) => {
    const expires = Date.now() + 86_400_000;
    const { keyId } = await importKey({ name: "old", meta: { plan: "free" }, environment: "prod", remaining: 10 });
    const before = await row(keyId);

    await updateOk({ keyId, name: "new name" });
    expect(await row(keyId)).toMatchObject({ name: "new name", meta: { plan: "free" }, environment: "prod", remaining_requests: 10 });

    await updateOk({ keyId, meta: { plan: "pro", seats: { max: 3 } } });
    expect(await row(keyId)).toMatchObject({ name: "new name", meta: { plan: "pro", seats: { max: 3 } }, environment: "prod" });

    await updateOk({ keyId, environment: "staging" });
    await updateOk({ keyId, expires });
    const after = await row(keyId);
    expect(after).toMatchObject({
      name: "new name",
      meta: { plan: "pro", seats: { max: 3 } },
      environment: "staging",
      remaining_requests: 10,
      enabled: true,
      hash: before.hash,
      start: before.start,
      api_id: apiId,
      identity_id: null,
      owner_id: null,
      refill_amount: null,
      deleted_at_m: null,
    });
    expect(ms(after.expires)).toBe(expires);
    expect(Number(after.updated_at_m)).toBeGreaterThan(Date.now() - 60_000);
  });

  it("clears name, meta, environment and expires with null", async ({ importKey, updateOk, row }) => {
    const { keyId } = await importKey({
      name: "n",
      meta: { a: 1 },
      environment: "prod",
      expires: Date.now() + 86_400_000,
    });
    await updateOk({ keyId, name: null, meta: null, environment: null, expires: null });
    expect(await row(keyId)).toMatchObject({ name: null, meta: null, environment: null, expires: null });
  });

  it("stores expires 0 as never expires, as v1 does", async ({ importKey, updateOk, row }) => {
    const { keyId } = await importKey({ expires: Date.now() + 86_400_000 });
    await updateOk({ keyId, expires: 0 });
    expect((await row(keyId)).expires).toBeNull();
  });

  it("answers an update with only keyId with {} and changes nothing", async ({ importKey, updateOk, row }) => {
    const { keyId } = await importKey({ name: "same", meta: { a: 1 }, remaining: 3 });
    const before = await row(keyId);
    await updateOk({ keyId });
    expect(await row(keyId)).toEqual(before);
  });

  it("ignores fields it does not know, as v1 does", async ({ importKey, updateOk, row }) => {
    const { keyId } = await importKey({ name: "kept" });
    await updateOk({ keyId, somethingElse: 1, hash: "x" });
    expect(await row(keyId)).toMatchObject({ name: "kept" });
  });
});

describe("the very next verification sees the update", () => {
  it("reports DISABLED after disabling, and VALID again after re-enabling", async ({ importKey, updateOk, verify, row }) => {
    const { key, keyId } = await importKey();
    await updateOk({ keyId, enabled: false });
    expect((await row(keyId)).enabled).toBe(false);
    expect(await verify(key)).toMatchObject({ valid: false, code: "DISABLED" });
    await updateOk({ keyId, enabled: true });
    expect((await row(keyId)).enabled).toBe(true);
    expect(await verify(key)).toMatchObject({ valid: true, code: "VALID" });
  });

  it("re-enables a key that was imported disabled", async ({ importKey, updateOk, verify }) => {
    const { key, keyId } = await importKey({ enabled: false });
    expect(await verify(key)).toMatchObject({ valid: false, code: "DISABLED" });
    await updateOk({ keyId, enabled: true });
    expect(await verify(key)).toMatchObject({ valid: true, code: "VALID" });
  });

  it("shows new meta, name and environment, and drops cleared ones", async ({ importKey, updateOk, verify }) => {
    const { key, keyId } = await importKey({ meta: { v: 1 } });
    await updateOk({ keyId, meta: { v: 2 }, name: "renamed", environment: "test" });
    expect(await verify(key)).toMatchObject({ valid: true, meta: { v: 2 }, name: "renamed", environment: "test" });
    await updateOk({ keyId, meta: null, name: null, environment: null });
    const body = await verify(key);
    expect(body.valid).toBe(true);
    expect(body).not.toHaveProperty("meta");
    expect(body).not.toHaveProperty("name");
    expect(body).not.toHaveProperty("environment");
  });

  it("reports EXPIRED after setting a past expiry, and VALID after clearing it", async ({ importKey, updateOk, verify }) => {
    const { key, keyId } = await importKey();
    await updateOk({ keyId, expires: Date.now() - 1000 });
    expect(await verify(key)).toMatchObject({ valid: false, code: "EXPIRED" });
    await updateOk({ keyId, expires: null });
    expect(await verify(key)).toMatchObject({ valid: true, code: "VALID" });
  });
});

describe("remaining", () => {
  it("limits an unlimited key, and verification counts down from the value set", async ({ importKey, updateOk, verify, row }) => {
    const { key, keyId } = await importKey();
    await updateOk({ keyId, remaining: 2 });
    expect((await row(keyId)).remaining_requests).toBe(2);
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 1 });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 0 });
    expect(await verify(key)).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", remaining: 0 });
  });

  it("brings an exhausted key back with a new remaining", async ({ importKey, updateOk, verify }) => {
    const { key, keyId } = await importKey({ remaining: 1 });
    await verify(key);
    expect(await verify(key)).toMatchObject({ valid: false, code: "USAGE_EXCEEDED" });
    await updateOk({ keyId, remaining: 5 });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 4 });
  });

  it("makes a key unlimited with remaining null", async ({ importKey, updateOk, verify, row }) => {
    const { key, keyId } = await importKey({ remaining: 3 });
    await updateOk({ keyId, remaining: null });
    expect((await row(keyId)).remaining_requests).toBeNull();
    const body = await verify(key);
    expect(body.valid).toBe(true);
    expect(body).not.toHaveProperty("remaining");
  });

  it("stores remaining 0 (an exhausted key, as v1), which updateRemaining or updateKey can top up later", async ({
    h,
    t,
    importKey,
    updateOk,
    verify,
    row,
  }) => {
    const { key, keyId } = await importKey({ remaining: 3 });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 2 });
    await updateOk({ keyId, remaining: 0 });
    expect((await row(keyId)).remaining_requests).toBe(0);
    expect(await verify(key)).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", remaining: 0 });
    const topUp = await h.post("/v1/keys.updateRemaining", { keyId, op: "increment", value: 2 }, t.rootKey);
    expect(topUp).toMatchObject({ status: 200, body: { remaining: 2 } });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 1 });
    await updateOk({ keyId, remaining: 0 });
    expect(await verify(key)).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", remaining: 0 });
    await updateOk({ keyId, remaining: 5 });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 4 });
  });

  it("stores remaining 0 on a key with a refill, which refills it when due", async ({ importKey, updateOk, verify, backdate }) => {
    const { key, keyId } = await importKey({ remaining: 5, refill: { interval: "daily", amount: 10 } });
    await updateOk({ keyId, remaining: 0 });
    expect(await verify(key)).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", remaining: 0 });
    await backdate(keyId, 1);
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 9 });
  });

  it.for([-1, 1.5, "5"])("refuses remaining %j with 400 and changes nothing", async (remaining, { importKey, update, row }) => {
    const { keyId } = await importKey({ remaining: 3 });
    expectError(await update({ keyId, remaining }), 400, "BAD_REQUEST", /^remaining: /);
    expect((await row(keyId)).remaining_requests).toBe(3);
  });
});

describe("refill", () => {
  it("sets a monthly refill on its day and starts its period now", async ({ importKey, updateOk, row }) => {
    const { keyId } = await importKey({ remaining: 10 });
    await updateOk({ keyId, refill: { interval: "monthly", amount: 100, refillDay: 15 } });
    const r = await row(keyId);
    expect(r).toMatchObject({ refill_amount: 100, refill_day: 15, remaining_requests: 10 });
    expect(recent(r.last_refill_at)).toBe(true);
  });

  it("refills a monthly key on day 1 when no refillDay is given", async ({ importKey, updateOk, row }) => {
    const { keyId } = await importKey({ remaining: 10 });
    await updateOk({ keyId, refill: { interval: "monthly", amount: 100 } });
    expect(await row(keyId)).toMatchObject({ refill_amount: 100, refill_day: 1 });
  });

  it("stores a daily refill with no refill day (keyhaven; v1 stored day 1)", async ({ importKey, updateOk, row }) => {
    const { keyId } = await importKey({ remaining: 10, refill: { interval: "monthly", amount: 5, refillDay: 20 } });
    await updateOk({ keyId, refill: { interval: "daily", amount: 50 } });
    const r = await row(keyId);
    expect(r).toMatchObject({ refill_amount: 50, refill_day: null });
    expect(recent(r.last_refill_at)).toBe(true);
  });

  it("accepts refillDay null on a daily refill", async ({ importKey, updateOk, row }) => {
    const { keyId } = await importKey({ remaining: 10 });
    await updateOk({ keyId, refill: { interval: "daily", amount: 50, refillDay: null } });
    expect(await row(keyId)).toMatchObject({ refill_amount: 50, refill_day: null });
  });

  it("clears amount, day and last refill with refill null, keeping remaining", async ({ importKey, updateOk, row }) => {
    const { keyId } = await importKey({ remaining: 10, refill: { interval: "monthly", amount: 5, refillDay: 3 } });
    await updateOk({ keyId, refill: { interval: "monthly", amount: 5, refillDay: 3 } });
    await updateOk({ keyId, refill: null });
    expect(await row(keyId)).toMatchObject({ refill_amount: null, refill_day: null, last_refill_at: null, remaining_requests: 10 });
  });

  it("limits an unlimited key and gives it a refill in one update", async ({ importKey, updateOk, verify, row }) => {
    const { key, keyId } = await importKey();
    await updateOk({ keyId, remaining: 20, refill: { interval: "daily", amount: 20 } });
    expect(await row(keyId)).toMatchObject({ remaining_requests: 20, refill_amount: 20, refill_day: null });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 19 });
  });

  it("makes a key unlimited and drops its refill in one update", async ({ importKey, updateOk, row }) => {
    const { keyId } = await importKey({ remaining: 5, refill: { interval: "daily", amount: 5 } });
    await updateOk({ keyId, remaining: null, refill: null });
    expect(await row(keyId)).toMatchObject({ remaining_requests: null, refill_amount: null, refill_day: null });
  });

  it("refuses remaining null together with a refill (400)", async ({ importKey, update, row }) => {
    const { keyId } = await importKey({ remaining: 5 });
    const before = await row(keyId);
    expectError(
      await update({ keyId, remaining: null, refill: { interval: "daily", amount: 5 } }),
      400,
      "BAD_REQUEST",
      "Cannot set refill on a key with unlimited requests",
    );
    expect(await row(keyId)).toEqual(before);
  });

  it("refuses a refill on a key that is and stays unlimited (400)", async ({ importKey, update, row }) => {
    const { keyId } = await importKey({ name: "unlimited" });
    const before = await row(keyId);
    expectError(
      await update({ keyId, name: "changed", refill: { interval: "monthly", amount: 5 } }),
      400,
      "BAD_REQUEST",
      "Cannot set refill on a key with unlimited requests",
    );
    expect(await row(keyId)).toEqual(before);
  });

  it("refuses a refillDay on a daily refill (400)", async ({ importKey, update, row }) => {
    const { keyId } = await importKey({ remaining: 5 });
    const before = await row(keyId);
    expectError(
      await update({ keyId, refill: { interval: "daily", amount: 5, refillDay: 3 } }),
      400,
      "BAD_REQUEST",
      "Cannot set 'refillDay' if 'interval' is 'daily'",
    );
    expect(await row(keyId)).toEqual(before);
  });

  it.for<[Record<string, unknown>, RegExp]>([
    [{ interval: "weekly", amount: 5 }, /^refill\.interval: /],
    [{ interval: "daily", amount: 0 }, /^refill\.amount: /],
    [{ interval: "monthly", amount: 5, refillDay: 32 }, /^refill\.refillDay: /],
    [{ interval: "monthly" }, /^refill\.amount: /],
  ])("refuses the refill %j with 400", async ([refill, message], { importKey, update, row }) => {
    const { keyId } = await importKey({ remaining: 5 });
    expectError(await update({ keyId, refill }), 400, "BAD_REQUEST", message);
    expect((await row(keyId)).refill_amount).toBeNull();
  });
});

describe("writes of remaining keep lazy refills right", () => {
  it("does not apply a refill that was due on top of a remaining just set", async ({ importKey, updateOk, verify, row, backdate }) => {
    const { key, keyId } = await importKey({ remaining: 2, refill: { interval: "daily", amount: 10 } });
    await backdate(keyId, 2);
    await updateOk({ keyId, remaining: 5 });
    const r = await row(keyId);
    expect(r.remaining_requests).toBe(5);
    expect(recent(r.last_refill_at)).toBe(true);
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 4 });
  });

  it("does not apply a refill on top of a remaining set on a key that was unlimited with a refill kept", async ({
    importKey,
    updateOk,
    verify,
    backdate,
  }) => {
    const { key, keyId } = await importKey({ remaining: 2, refill: { interval: "daily", amount: 10 } });
    await updateOk({ keyId, remaining: null });
    await backdate(keyId, 2);
    await updateOk({ keyId, remaining: 3 });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 2 });
  });

  it("keeps a refill that fell due before the refill settings changed", async ({ importKey, updateOk, verify, row, backdate }) => {
    const { key, keyId } = await importKey({ remaining: 2, refill: { interval: "daily", amount: 10 } });
    await backdate(keyId, 2);
    await updateOk({ keyId, refill: { interval: "daily", amount: 20 } });
    const r = await row(keyId);
    expect(r).toMatchObject({ remaining_requests: 10, refill_amount: 20 });
    expect(recent(r.last_refill_at)).toBe(true);
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 9 });
  });

  it("keeps a refill that fell due before the refill was removed", async ({ importKey, updateOk, verify, row, backdate }) => {
    const { key, keyId } = await importKey({ remaining: 1, refill: { interval: "daily", amount: 10 } });
    await backdate(keyId, 2);
    await updateOk({ keyId, refill: null });
    expect(await row(keyId)).toMatchObject({ remaining_requests: 10, refill_amount: null, last_refill_at: null });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 9 });
  });

  it("does not refill a key again in the period in which a new refill was set", async ({ importKey, updateOk, verify, backdate }) => {
    const { key, keyId } = await importKey({ remaining: 3 });
    await backdate(keyId, 2);
    await updateOk({ keyId, refill: { interval: "daily", amount: 50 } });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 2 });
  });
});

describe("identity: externalId and ownerId", () => {
  it("creates an identity for a new externalId and links the key to it", async ({ h, t, importKey, updateOk, verify, row }) => {
    const { key, keyId } = await importKey();
    const externalId = unique("user");
    await updateOk({ keyId, externalId });
    const r = await row(keyId);
    expect(r.owner_id).toBe(externalId);
    const [identity] = await h.sql<any>(`select * from identities where id = '${r.identity_id}'`);
    expect(identity).toMatchObject({ workspace_id: t.workspaceId, external_id: externalId, environment: "default" });
    expect(await verify(key)).toMatchObject({
      valid: true,
      ownerId: externalId,
      identity: { id: r.identity_id, externalId, meta: {} },
    });
  });

  it("stores meta {} on the identity it creates, as keys.createKey does (getKey shows it)", async ({ h, t, importKey, updateOk, row }) => {
    const { keyId } = await importKey();
    const externalId = unique("meta");
    await updateOk({ keyId, externalId });
    const r = await row(keyId);
    const [identity] = await h.sql<any>(`select meta from identities where id = '${r.identity_id}'`);
    expect(identity.meta).toEqual({});
    const got = await h.get("/v1/keys.getKey", { keyId }, t.rootKey);
    expect(got.status).toBe(200);
    expect(got.body.identity).toEqual({ id: r.identity_id, externalId, meta: {} });
  });

  it("reuses the workspace's identity with the same externalId", async ({ importKey, updateOk, row, count }) => {
    const externalId = unique("shared");
    const first = await importKey({ externalId });
    const second = await importKey();
    await updateOk({ keyId: second.keyId, externalId });
    expect((await row(second.keyId)).identity_id).toBe((await row(first.keyId)).identity_id);
    expect(await count(`identities where external_id = '${externalId}'`)).toBe(1);
  });

  it("makes one identity when two keys are linked to a new externalId at the same time", async ({ importKey, updateOk, row, count }) => {
    const externalId = unique("race");
    const keys = await Promise.all([importKey(), importKey(), importKey()]);
    await Promise.all(keys.map(({ keyId }) => updateOk({ keyId, externalId })));
    expect(await count(`identities where external_id = '${externalId}'`)).toBe(1);
    const ids = new Set(await Promise.all(keys.map(async ({ keyId }) => (await row(keyId)).identity_id)));
    expect(ids.size).toBe(1);
  });

  it("never links an identity of another workspace with the same externalId", async ({ h, t, newApi, importKey, updateOk, row }) => {
    const other = await h.tenant();
    const externalId = unique("cross");
    const theirs = await importKey({ externalId }, other, await newApi(other));
    const { keyId } = await importKey();
    await updateOk({ keyId, externalId });
    const mine = (await row(keyId)).identity_id;
    expect(mine).not.toBe((await row(theirs.keyId)).identity_id);
    const [identity] = await h.sql<any>(`select workspace_id from identities where id = '${mine}'`);
    expect(identity.workspace_id).toBe(t.workspaceId);
  });

  it("treats the deprecated ownerId like externalId", async ({ h, importKey, updateOk, row }) => {
    const { keyId } = await importKey();
    const ownerId = unique("owner");
    await updateOk({ keyId, ownerId });
    const r = await row(keyId);
    expect(r.owner_id).toBe(ownerId);
    const [identity] = await h.sql<any>(`select external_id from identities where id = '${r.identity_id}'`);
    expect(identity.external_id).toBe(ownerId);
  });

  it("lets externalId win over ownerId", async ({ h, importKey, updateOk, row }) => {
    const { keyId } = await importKey();
    const externalId = unique("ext");
    await updateOk({ keyId, externalId, ownerId: unique("ignored") });
    const r = await row(keyId);
    expect(r.owner_id).toBe(externalId);
    const [identity] = await h.sql<any>(`select external_id from identities where id = '${r.identity_id}'`);
    expect(identity.external_id).toBe(externalId);
  });

  it("clears owner and identity with null, and keeps the identity itself", async ({ importKey, updateOk, verify, row, count }) => {
    const externalId = unique("leaving");
    const { key, keyId } = await importKey({ externalId });
    await updateOk({ keyId, ownerId: externalId });
    const identityId = (await row(keyId)).identity_id;
    await updateOk({ keyId, externalId: null });
    expect(await row(keyId)).toMatchObject({ owner_id: null, identity_id: null });
    expect(await count(`identities where id = '${identityId}'`)).toBe(1);
    const body = await verify(key);
    expect(body).not.toHaveProperty("identity");
    expect(body).not.toHaveProperty("ownerId");
  });

  it("refuses an empty externalId (400)", async ({ importKey, update }) => {
    const { keyId } = await importKey();
    expectError(await update({ keyId, externalId: "" }), 400, "BAD_REQUEST", /^externalId: /);
  });
});

describe("ratelimit: the key's default limit", () => {
  it("inserts an auto-applied default limit that the next verifications obey", async ({ importKey, updateOk, verify, defaultLimit }) => {
    const { key, keyId } = await importKey();
    await updateOk({ keyId, ratelimit: { limit: 2, duration: 60_000 } });
    expect(await defaultLimit(keyId)).toEqual([{ limit: 2, duration: 60_000, auto_apply: true }]);
    expect(await verify(key)).toMatchObject({ valid: true, ratelimit: { limit: 2, remaining: 1 } });
    expect(await verify(key)).toMatchObject({ valid: true, ratelimit: { limit: 2, remaining: 0 } });
    expect(await verify(key)).toMatchObject({ valid: false, code: "RATE_LIMITED" });
  });

  it("updates the existing default limit in place", async ({ importKey, updateOk, verify, count, defaultLimit }) => {
    const { key, keyId } = await importKey({ ratelimit: { limit: 1, refillRate: 1, refillInterval: 60_000 } });
    await updateOk({ keyId, ratelimit: { limit: 5, duration: 120_000 } });
    expect(await defaultLimit(keyId)).toEqual([{ limit: 5, duration: 120_000, auto_apply: true }]);
    expect(await count(`ratelimits where key_id = '${keyId}'`)).toBe(1);
    expect(await verify(key)).toMatchObject({ valid: true, ratelimit: { limit: 5, remaining: 4 } });
    expect(await verify(key)).toMatchObject({ valid: true, ratelimit: { limit: 5, remaining: 3 } });
  });

  it("takes the duration from the deprecated refillInterval when duration is missing", async ({ importKey, updateOk, defaultLimit }) => {
    const { keyId } = await importKey();
    await updateOk({ keyId, ratelimit: { limit: 3, refillRate: 3, refillInterval: 30_000, type: "fast", async: true } });
    expect(await defaultLimit(keyId)).toEqual([{ limit: 3, duration: 30_000, auto_apply: true }]);
  });

  it("deletes the default limit with null, and verification stops limiting", async ({ importKey, updateOk, verify, defaultLimit }) => {
    const { key, keyId } = await importKey({ ratelimit: { limit: 1, refillRate: 1, refillInterval: 60_000 } });
    expect(await verify(key)).toMatchObject({ valid: true });
    expect(await verify(key)).toMatchObject({ valid: false, code: "RATE_LIMITED" });
    await updateOk({ keyId, ratelimit: null });
    expect(await defaultLimit(keyId)).toEqual([]);
    const body = await verify(key);
    expect(body).toMatchObject({ valid: true, code: "VALID" });
    expect(body).not.toHaveProperty("ratelimit");
  });

  it("leaves the key's other named limits alone", async ({ h, t, importKey, updateOk }) => {
    const { keyId } = await importKey({ ratelimit: { limit: 1, refillRate: 1, refillInterval: 60_000 } });
    await h.sql(`insert into ratelimits (id, workspace_id, name, key_id, "limit", duration, auto_apply, created_at_m)
                 values ('rl_other_${keyId}', '${t.workspaceId}', 'emails', '${keyId}', 9, 1000, false, 0)`);
    await updateOk({ keyId, ratelimit: null });
    expect(await h.sql(`select name from ratelimits where key_id = '${keyId}'`)).toEqual([{ name: "emails" }]);
  });

  it.for<[Record<string, unknown>, string | RegExp]>([
    [{ limit: 5 }, "ratelimit.duration: duration is required (or the deprecated refillInterval)"],
    [{ limit: 5, duration: 999 }, /^ratelimit\.duration: /],
    [{ limit: 0, duration: 60_000 }, /^ratelimit\.limit: /],
    [{ duration: 60_000 }, /^ratelimit\.limit: /],
  ])("refuses the ratelimit %j with 400 and changes nothing", async ([ratelimit, message], { importKey, update, defaultLimit }) => {
    const { keyId } = await importKey();
    expectError(await update({ keyId, ratelimit }), 400, "BAD_REQUEST", message);
    expect(await defaultLimit(keyId)).toEqual([]);
  });
});

describe("roles: replaced by the given set", () => {
  it("replaces the key's roles, by name and by id", async ({ importKey, updateOk, verify, keyRoles, createRole }) => {
    const [a, b, c] = [unique("role-a"), unique("role-b"), unique("role-c")];
    const [idA, , idC] = [await createRole(a), await createRole(b), await createRole(c)];
    const { key, keyId } = await importKey({ roles: [a, b] });
    await updateOk({ keyId, roles: [{ name: c }, { id: idA }] });
    expect(await keyRoles(keyId)).toEqual(sorted([idA, idC]));
    expect((await verify(key)).roles).toEqual([a, c].sort());
  });

  it("removes every role with an empty list", async ({ importKey, updateOk, keyRoles, createRole }) => {
    const a = unique("role");
    await createRole(a);
    const { keyId } = await importKey({ roles: [a] });
    await updateOk({ keyId, roles: [] });
    expect(await keyRoles(keyId)).toEqual([]);
  });

  it("connects a role named twice only once", async ({ importKey, updateOk, keyRoles, createRole }) => {
    const a = unique("role");
    const id = await createRole(a);
    const { keyId } = await importKey();
    await updateOk({ keyId, roles: [{ name: a }, { id }, { name: a, create: true }] });
    expect(await keyRoles(keyId)).toEqual([id]);
  });

  it("creates a missing role on request, with rbac.*.create_role", async ({ h, t, importKey, updateOk, keyRoles }) => {
    const name = unique("new-role");
    const rootKey = await h.rootKey(t.workspaceId, ["api.*.update_key", "rbac.*.create_role", "rbac.*.add_role_to_key"]);
    const { keyId } = await importKey();
    await updateOk({ keyId, roles: [{ name, create: true }] }, rootKey);
    const [role] = await h.sql<any>(`select id, workspace_id from roles where name = '${name}'`);
    expect(role.workspace_id).toBe(t.workspaceId);
    expect(await keyRoles(keyId)).toEqual([role.id]);
  });

  it("needs no create permission when a role asked to be created already exists", async ({
    h,
    t,
    importKey,
    updateOk,
    keyRoles,
    createRole,
  }) => {
    const name = unique("existing");
    const id = await createRole(name);
    const rootKey = await h.rootKey(t.workspaceId, ["api.*.update_key", "rbac.*.add_role_to_key"]);
    const { keyId } = await importKey();
    await updateOk({ keyId, roles: [{ name, create: true }] }, rootKey);
    expect(await keyRoles(keyId)).toEqual([id]);
  });

  it("needs the add and remove permissions of keys.setRoles / keys.setPermissions to change roles or permissions", async ({
    h,
    t,
    importKey,
    update,
    updateOk,
    verify,
    row,
    keyRoles,
    keyPermissions,
    createRole,
    createPermission,
  }) => {
    const role = await createRole(unique("granted-role"));
    const perm = unique("granted.perm");
    const permId = await createPermission(perm);
    const updateOnly = await h.rootKey(t.workspaceId, ["api.*.update_key"]);
    const { key, keyId } = await importKey({ name: "before" });
    const before = await row(keyId);
    // update_key alone used to grant any role or permission (found by a security review).
    expectError(
      await update({ keyId, name: "after", roles: [{ id: role }] }, updateOnly),
      403,
      "INSUFFICIENT_PERMISSIONS",
      /rbac\.\*\.add_role_to_key/,
    );
    expectError(
      await update({ keyId, permissions: [{ id: permId }] }, updateOnly),
      403,
      "INSUFFICIENT_PERMISSIONS",
      /rbac\.\*\.add_permission_to_key/,
    );
    expect(await row(keyId)).toEqual(before);
    expect((await verify(key)).permissions).toEqual([]);

    const adder = await h.rootKey(t.workspaceId, ["api.*.update_key", "rbac.*.add_role_to_key", "rbac.*.add_permission_to_key"]);
    await updateOk({ keyId, roles: [{ id: role }], permissions: [{ id: permId }] }, adder);
    expect(await keyRoles(keyId)).toEqual([role]);
    // Taking them away needs the remove permissions (403 UNAUTHORIZED, as keys.setRoles answers); the same set is free.
    expectError(await update({ keyId, roles: [] }, adder), 403, "UNAUTHORIZED", /rbac\.\*\.remove_role_from_key/);
    expectError(await update({ keyId, permissions: [] }, adder), 403, "UNAUTHORIZED", /rbac\.\*\.remove_permission_from_key/);
    await updateOk({ keyId, roles: [{ id: role }], permissions: [{ id: permId }] }, updateOnly);
    expect(await keyRoles(keyId)).toEqual([role]);
    expect(await keyPermissions(keyId)).toEqual([permId]);
  });

  it("refuses to create a role without rbac.*.create_role (403), changing nothing", async ({ h, t, importKey, update, row, count }) => {
    const name = unique("forbidden-role");
    const rootKey = await h.rootKey(t.workspaceId, ["api.*.update_key", "rbac.*.create_permission"]);
    const { keyId } = await importKey({ name: "before" });
    const before = await row(keyId);
    expectError(
      await update({ keyId, name: "after", roles: [{ name, create: true }] }, rootKey),
      403,
      "INSUFFICIENT_PERMISSIONS",
      /rbac\.\*\.create_role/,
    );
    expect(await row(keyId)).toEqual(before);
    expect(await count(`roles where name = '${name}'`)).toBe(0);
  });

  it("answers an unknown role name without create with 404", async ({ importKey, update }) => {
    const { keyId } = await importKey();
    const name = unique("ghost");
    expectError(await update({ keyId, roles: [{ name }] }), 404, "NOT_FOUND", `role ${name} not found`);
  });

  it("answers an unknown role id, or one of another workspace, with 404", async ({ h, importKey, update, createRole }) => {
    const other = await h.tenant();
    const theirs = await createRole(unique("theirs"), other);
    const { keyId } = await importKey();
    expectError(await update({ keyId, roles: [{ id: "role_missing" }] }), 404, "NOT_FOUND", "role role_missing not found");
    expectError(await update({ keyId, roles: [{ id: theirs }] }), 404, "NOT_FOUND", `role ${theirs} not found`);
  });

  it("refuses a role with neither id nor name (400)", async ({ importKey, update }) => {
    const { keyId } = await importKey();
    expectError(await update({ keyId, roles: [{ create: true }] }), 400, "BAD_REQUEST", "roles.0: provide either `id` or `name`");
  });
});

describe("permissions: replaced by the given set", () => {
  it("replaces the key's direct permissions, matching names against slugs, and by id", async ({
    importKey,
    updateOk,
    verify,
    keyPermissions,
    createPermission,
  }) => {
    const [s1, s2, s3] = [unique("docs.read"), unique("docs.write"), unique("docs.delete")];
    const p1 = await createPermission(`${s1}.name`, s1);
    await createPermission(s2);
    const p3 = await createPermission(`${s3}.name`, s3);
    const { key, keyId } = await importKey({ permissions: [s2] });
    await updateOk({ keyId, permissions: [{ name: s1 }, { id: p3 }] });
    expect(await keyPermissions(keyId)).toEqual(sorted([p1, p3]));
    expect(await verify(key, { authorization: { permissions: s1 } })).toMatchObject({ valid: true });
    expect(await verify(key, { authorization: { permissions: s2 } })).toMatchObject({
      valid: false,
      code: "INSUFFICIENT_PERMISSIONS",
    });
  });

  it("does not match a permission by its name when the slug differs", async ({ importKey, update, createPermission }) => {
    const slug = unique("slug");
    await createPermission(`${slug}.display`, slug);
    const { keyId } = await importKey();
    expectError(
      await update({ keyId, permissions: [{ name: `${slug}.display` }] }),
      404,
      "NOT_FOUND",
      `permission ${slug}.display not found`,
    );
  });

  it("removes every direct permission with an empty list", async ({ importKey, updateOk, keyPermissions, createPermission }) => {
    const p = unique("perm");
    await createPermission(p);
    const { keyId } = await importKey({ permissions: [p] });
    await updateOk({ keyId, permissions: [] });
    expect(await keyPermissions(keyId)).toEqual([]);
  });

  it("creates a missing permission on request (name = slug), with rbac.*.create_permission", async ({
    h,
    t,
    importKey,
    updateOk,
    verify,
    keyPermissions,
  }) => {
    const slug = unique("billing.read");
    const rootKey = await h.rootKey(t.workspaceId, ["api.*.update_key", "rbac.*.create_permission", "rbac.*.add_permission_to_key"]);
    const { key, keyId } = await importKey();
    await updateOk({ keyId, permissions: [{ name: slug, create: true }] }, rootKey);
    const [perm] = await h.sql<any>(`select id, name, slug, workspace_id from permissions where slug = '${slug}'`);
    expect(perm).toMatchObject({ name: slug, slug, workspace_id: t.workspaceId });
    expect(await keyPermissions(keyId)).toEqual([perm.id]);
    expect((await verify(key)).permissions).toEqual([slug]);
  });

  it("refuses to create a permission without rbac.*.create_permission (403), changing nothing", async ({
    h,
    t,
    importKey,
    update,
    count,
    keyPermissions,
    createPermission,
  }) => {
    const slug = unique("forbidden.perm");
    const rootKey = await h.rootKey(t.workspaceId, ["api.*.update_key", "rbac.*.create_role"]);
    const existing = unique("kept");
    const existingId = await createPermission(existing);
    const { keyId } = await importKey({ permissions: [existing] });
    expectError(
      await update({ keyId, permissions: [{ name: slug, create: true }] }, rootKey),
      403,
      "INSUFFICIENT_PERMISSIONS",
      /rbac\.\*\.create_permission/,
    );
    expect(await keyPermissions(keyId)).toEqual([existingId]);
    expect(await count(`permissions where slug = '${slug}'`)).toBe(0);
  });

  it("answers an unknown permission with 404", async ({ importKey, update }) => {
    const { keyId } = await importKey();
    const slug = unique("ghost.perm");
    expectError(await update({ keyId, permissions: [{ name: slug }] }), 404, "NOT_FOUND", `permission ${slug} not found`);
    expectError(await update({ keyId, permissions: [{ id: "perm_missing" }] }), 404, "NOT_FOUND", "permission perm_missing not found");
  });
});

describe("an update is all or nothing", () => {
  it("leaves the key, its identity, limit, roles and permissions exactly as they were when a role is missing", async ({
    importKey,
    update,
    row,
    count,
    keyRoles,
    keyPermissions,
    defaultLimit,
    createRole,
    createPermission,
  }) => {
    const role = unique("kept-role");
    const roleId = await createRole(role);
    const perm = unique("kept.perm");
    const permId = await createPermission(perm);
    const { keyId } = await importKey({ name: "before", meta: { v: 1 }, remaining: 5, roles: [role], permissions: [perm] });
    const before = await row(keyId);
    const externalId = unique("never");
    const newRole = unique("created-then-rolled-back");

    const res = await update({
      keyId,
      name: "after",
      meta: { v: 2 },
      remaining: 50,
      enabled: false,
      externalId,
      ratelimit: { limit: 1, duration: 60_000 },
      permissions: [{ name: unique("also.created"), create: true }],
      roles: [{ name: newRole, create: true }, { name: unique("missing") }],
    });
    expectError(res, 404, "NOT_FOUND", /^role missing-\w+ not found$/);

    expect(await row(keyId)).toEqual(before);
    expect(await count(`identities where external_id = '${externalId}'`)).toBe(0);
    expect(await count(`roles where name = '${newRole}'`)).toBe(0);
    expect(await defaultLimit(keyId)).toEqual([]);
    expect(await keyRoles(keyId)).toEqual([roleId]);
    expect(await keyPermissions(keyId)).toEqual([permId]);
  });

  it("leaves everything as it was when a permission is missing after the roles were replaced", async ({
    importKey,
    update,
    row,
    keyRoles,
    createRole,
  }) => {
    const role = unique("kept-role");
    const roleId = await createRole(role);
    const { keyId } = await importKey({ name: "before", roles: [role] });
    const before = await row(keyId);
    const res = await update({ keyId, name: "after", roles: [], permissions: [{ name: unique("missing.perm") }] });
    expectError(res, 404, "NOT_FOUND", /^permission missing\.perm-\w+ not found$/);
    expect(await row(keyId)).toEqual(before);
    expect(await keyRoles(keyId)).toEqual([roleId]);
  });
});

describe("which keys a root key may update", () => {
  it("answers a key of another workspace exactly as a missing one (404), changing nothing", async ({ h, importKey, update, row }) => {
    const other = await h.tenant();
    const { keyId } = await importKey({ name: "mine" });
    const crossed = await update({ keyId, name: "stolen" }, other.rootKey);
    expectError(crossed, 404, "NOT_FOUND", `key ${keyId} not found`);
    expect((await row(keyId)).name).toBe("mine");
    const missing = await update({ keyId: "key_does_not_exist", name: "x" }, other.rootKey);
    expectError(missing, 404, "NOT_FOUND", "key key_does_not_exist not found");
    expect(Object.keys(crossed.body.error).sort()).toEqual(Object.keys(missing.body.error).sort());
  });

  it("answers a deleted key with 404", async ({ h, importKey, update, row }) => {
    const { keyId } = await importKey({ name: "gone" });
    await h.sql(`update keys set deleted_at_m = ${Date.now()} where id = '${keyId}'`);
    expectError(await update({ keyId, name: "back" }), 404, "NOT_FOUND", `key ${keyId} not found`);
    expect((await row(keyId)).name).toBe("gone");
  });

  it("answers a key of a deleted API with 404", async ({ h, t, newApi, importKey, update }) => {
    const api = await newApi(t);
    const { keyId } = await importKey({}, t, api);
    await h.sql(`update apis set deleted_at_m = ${Date.now()} where id = '${api}'`);
    expectError(await update({ keyId, name: "back" }), 404, "NOT_FOUND", `key ${keyId} not found`);
  });

  it("accepts update_key on the key's API or on every API", async ({ h, t, apiId, importKey, updateOk, row }) => {
    const { keyId } = await importKey();
    await updateOk({ keyId, name: "by-api" }, await h.rootKey(t.workspaceId, [`api.${apiId}.update_key`]));
    await updateOk({ keyId, name: "by-star" }, await h.rootKey(t.workspaceId, ["api.*.update_key"]));
    expect((await row(keyId)).name).toBe("by-star");
  });

  it("accepts update_key held for several APIs, the key's among them, and refuses it when the key's is not", async ({
    h,
    t,
    apiId,
    newApi,
    importKey,
    update,
    updateOk,
    row,
  }) => {
    const { keyId } = await importKey({ name: "kept" });
    const other = await newApi(t);
    await updateOk({ keyId, name: "by-list" }, await h.rootKey(t.workspaceId, [`api.${other}.update_key`, `api.${apiId}.update_key`]));
    expect((await row(keyId)).name).toBe("by-list");
    const elsewhere = await h.rootKey(t.workspaceId, [`api.${other}.update_key`, "api.api_x.update_key", "api..update_key"]);
    expectError(await update({ keyId, name: "changed" }, elsewhere), 403, "INSUFFICIENT_PERMISSIONS");
    expect((await row(keyId)).name).toBe("by-list");
  });

  it("refuses update_key on another API (403 INSUFFICIENT_PERMISSIONS)", async ({ h, t, importKey, update, row }) => {
    const { keyId } = await importKey({ name: "kept" });
    const rootKey = await h.rootKey(t.workspaceId, ["api.api_other.update_key", "api.*.read_key"]);
    expectError(await update({ keyId, name: "changed" }, rootKey), 403, "INSUFFICIENT_PERMISSIONS");
    expect((await row(keyId)).name).toBe("kept");
  });

  it("looks the key up only after authentication", async ({ h }) => {
    expectError(await h.post("/v1/keys.updateKey", { keyId: "key_does_not_exist" }), 403, "UNAUTHORIZED", "key required");
  });

  it("validates the body before anything else (400)", async ({ h, update }) => {
    expectError(await h.post("/v1/keys.updateKey", { name: "x" }), 400, "BAD_REQUEST", /^keyId: /);
    expectError(await update({ keyId: "" }), 400, "BAD_REQUEST", /^keyId: /);
    expectError(await update({ keyId: "k", enabled: "yes" }), 400, "BAD_REQUEST", /^enabled: /);
    expectError(await update({ keyId: "k", meta: [1] }), 400, "BAD_REQUEST", /^meta: /);
    expectError(await update({ keyId: "k", environment: "x".repeat(257) }), 400, "BAD_REQUEST", /^environment: /);
  });
});

const renamed = "renamed-by-the-auth-suite";
describeRootKeyAuth(it, {
  method: "POST",
  path: "/v1/keys.updateKey",
  validRequest: async (h, owner) => {
    const api = (await h.post("/v1/apis.createApi", { name: "auth-suite" }, owner.rootKey)).body.apiId;
    const res = await h.post(
      "/v1/migrations.createKeys",
      [{ apiId: api, plaintext: `sk_${randomBytes(16).toString("hex")}`, name: "original" }],
      owner.rootKey,
    );
    return { body: { keyId: res.body.keyIds[0], name: renamed } };
  },
  insufficientPermissions: ["api.*.read_key", "api.*.create_key", "api.api_other.update_key"],
  countRows: rowsOf(`keys where name = '${renamed}'`),
  expectForOtherWorkspace: answersNotFoundLeaving(/^key key_\w+ not found$/, "keys", 0, ` and name = '${renamed}'`),
});
