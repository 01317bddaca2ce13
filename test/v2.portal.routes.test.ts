import { describe, expect } from "vitest";
import { ManualClock } from "../src/clock.js";
import { auditEntries } from "./audit-entries.js";
import { harnessWith, testWith } from "./fixtures.js";
import { createHarness, type Harness } from "./helper.js";
import { liveSession, makePortal, uniqueExternalId, v2Key } from "./portal-helpers.js";
import { expectV2Error } from "./v2-errors.js";

// What a portal session does (issue 39), as upstream's tests have it (v2_portal_list_keys, v2_portal_reroll_key,
// v2_portal_get_verifications; research §8): its end user's keys only, its scopes only, and a day's life that no
// cache extends. Business time is a ManualClock (in the middle of an hour), so that expiry and buckets need no waiting.

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const clock = new ManualClock(Date.now() - (Date.now() % HOUR) + HOUR + 30 * MINUTE);
const it = testWith(harnessWith({}, { clock }));

const SESSION_INVALID = "The portal session is invalid or has expired.";

/** A tenant of its own, with a portal: the test's keys and sessions are then the only ones of its workspace. */
async function portalTenant(h: Harness, apiSettings: Record<string, unknown> = {}) {
  const t = await h.tenant();
  const apiId = await h.createApi(t, apiSettings);
  const portal = await makePortal(h, t, apiId);
  return { t, ...portal };
}

const keyIdsOf = (body: { data: { keyId: string }[] }) => body.data.map((k) => k.keyId);
const byId = (ids: string[]) => [...ids].sort();

describe("portal.listKeys", () => {
  /** Upstream's setup: user A with key1 and key2, user B with key3, key4 with no identity. */
  async function fourKeys(h: Harness) {
    const p = await portalTenant(h);
    const userA = uniqueExternalId("portal_user_A");
    const userB = uniqueExternalId("portal_user_B");
    const key1 = await v2Key(h, p.t, p.apiId, { externalId: userA, name: "key1" });
    const key2 = await v2Key(h, p.t, p.apiId, { externalId: userA, name: "key2" });
    const key3 = await v2Key(h, p.t, p.apiId, { externalId: userB, name: "key3" });
    const key4 = await v2Key(h, p.t, p.apiId, { name: "key4" });
    return { ...p, userA, userB, key1, key2, key3, key4 };
  }

  it("lists exactly the end user's keys (by id), each with its identity, never a plaintext", async ({ h }) => {
    const s = await fourKeys(h);
    const session = await liveSession(h, s.t.rootKey, s.slug, s.userA, ["keys:read"]);
    const res = await session.post("/v2/portal.listKeys");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(keyIdsOf(res.body)).toEqual(byId([s.key1.keyId, s.key2.keyId]));
    expect(res.body.pagination).toEqual({ hasMore: false });
    for (const key of res.body.data) {
      expect(key.identity.externalId).toBe(s.userA);
      expect(key.plaintext).toBeUndefined();
    }
    const text = JSON.stringify(res.body);
    for (const secret of [s.key1.key, s.key2.key, s.key3.keyId, s.key4.keyId]) expect(text).not.toContain(secret);
    // User B's session sees key3 only.
    const other = await liveSession(h, s.t.rootKey, s.slug, s.userB, ["keys:read"]);
    expect(keyIdsOf((await other.post("/v2/portal.listKeys")).body)).toEqual([s.key3.keyId]);
  });

  it("lists disabled and expired keys too, but no deleted key, and no key of the user's in another API", async ({ h }) => {
    const s = await fourKeys(h);
    const disabled = await v2Key(h, s.t, s.apiId, { externalId: s.userA, enabled: false });
    const expiring = await v2Key(h, s.t, s.apiId, { externalId: s.userA, expires: clock.now() + MINUTE });
    const deleted = await v2Key(h, s.t, s.apiId, { externalId: s.userA });
    expect((await h.post("/v2/keys.deleteKey", { keyId: deleted.keyId }, s.t.rootKey)).status).toBe(200);
    const elsewhere = await v2Key(h, s.t, await h.createApi(s.t), { externalId: s.userA });
    clock.advance(2 * MINUTE);
    const session = await liveSession(h, s.t.rootKey, s.slug, s.userA, ["keys:read"]);
    const ids = keyIdsOf((await session.post("/v2/portal.listKeys")).body);
    expect(ids).toEqual(byId([s.key1.keyId, s.key2.keyId, disabled.keyId, expiring.keyId]));
    expect(ids).not.toContain(elsewhere.keyId);
  });

  it("shows each key as apis.listKeys shows it to a root key (KeyResponseData): credits, rate limits, meta, roles, permissions", async ({
    h,
  }) => {
    const p = await portalTenant(h);
    const user = uniqueExternalId();
    const role = `portal-role-${user}`;
    expect((await h.post("/v2/permissions.createRole", { name: role }, p.t.rootKey)).status).toBe(200);
    const key = await v2Key(h, p.t, p.apiId, {
      externalId: user,
      name: "full",
      prefix: "pk",
      meta: { plan: "pro" },
      roles: [role],
      permissions: ["docs.read"],
      expires: clock.now() + DAY,
      credits: { remaining: 10, refill: { interval: "daily", amount: 10 } },
      ratelimits: [{ name: "requests", limit: 10, duration: MINUTE, autoApply: true }],
    });
    const session = await liveSession(h, p.t.rootKey, p.slug, user, ["keys:read"]);
    const mine = await session.post("/v2/portal.listKeys");
    const asRoot = await h.post("/v2/apis.listKeys", { apiId: p.apiId, externalId: user }, p.t.rootKey);
    expect(asRoot.status, JSON.stringify(asRoot.body)).toBe(200);
    expect(mine.body.data).toEqual(asRoot.body.data);
    expect(mine.body.data[0]).toMatchObject({ keyId: key.keyId, name: "full", meta: { plan: "pro" }, roles: [role] });
  });

  it("needs the keys:read scope (keys:reroll alone is not it): 403 naming it, without the workspace, user or keys", async ({ h }) => {
    const s = await fourKeys(h);
    const session = await liveSession(h, s.t.rootKey, s.slug, s.userA, ["keys:reroll", "analytics:read"]);
    const res = await session.post("/v2/portal.listKeys");
    expectV2Error(res, 403, "unkey/authorization/insufficient_permissions", "Missing permission: 'keys:read'");
    const text = JSON.stringify(res.body);
    for (const secret of [s.t.workspaceId, s.userA, s.key1.keyId, s.apiId]) expect(text).not.toContain(secret);
  });

  it("answers an empty page for an end user with no identity", async ({ h }) => {
    const s = await fourKeys(h);
    const session = await liveSession(h, s.t.rootKey, s.slug, uniqueExternalId("nobody"), ["keys:read"]);
    const res = await session.post("/v2/portal.listKeys");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ meta: { requestId: expect.stringMatching(/^req_/) }, data: [], pagination: { hasMore: false } });
  });

  it("pages by limit and cursor, skipping and repeating nothing", async ({ h }) => {
    const p = await portalTenant(h);
    const user = uniqueExternalId();
    const keys = [];
    for (let i = 0; i < 5; i++) keys.push((await v2Key(h, p.t, p.apiId, { externalId: user })).keyId);
    const session = await liveSession(h, p.t.rootKey, p.slug, user, ["keys:read"]);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; ; page++) {
      const res = await session.post("/v2/portal.listKeys", { limit: 2, ...(cursor && { cursor }) });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data.length).toBe(page < 2 ? 2 : 1);
      seen.push(...keyIdsOf(res.body));
      expect(res.body.pagination.hasMore).toBe(page < 2);
      if (!res.body.pagination.hasMore) {
        expect(res.body.pagination.cursor).toBeUndefined();
        break;
      }
      cursor = res.body.pagination.cursor;
    }
    expect(seen).toEqual(byId(keys));
    expectV2Error(await session.post("/v2/portal.listKeys", { limit: 101 }), 400, "unkey/application/invalid_input");
    expectV2Error(await session.post("/v2/portal.listKeys", { externalId: "someone_else" }), 400, "unkey/application/invalid_input");
  });

  it("works while the token is valid and is a 401 once the clock passes its expiresAt, however recently it was used", async ({ h }) => {
    const p = await portalTenant(h);
    const user = uniqueExternalId();
    await v2Key(h, p.t, p.apiId, { externalId: user });
    const session = await liveSession(h, p.t.rootKey, p.slug, user, ["keys:read"]);
    expect(session.expiresAt).toBe(clock.now() + DAY);
    const start = clock.now();
    try {
      clock.set(session.expiresAt - 1);
      expect((await session.post("/v2/portal.listKeys")).status).toBe(200);
      clock.set(session.expiresAt + MINUTE);
      const res = await session.post("/v2/portal.listKeys");
      expectV2Error(res, 401, "unkey/authentication/portal_session_not_found", SESSION_INVALID);
      expect(JSON.stringify(res.body)).not.toContain(session.id);
      expect(JSON.stringify(res.body)).not.toContain(session.token);
      // Exactly at expiresAt it has expired already.
      clock.set(session.expiresAt);
      expect((await session.post("/v2/portal.listKeys")).status).toBe(401);
    } finally {
      clock.set(start);
    }
  });

  it("an exchange code expires 15 minutes after it was minted", async ({ h }) => {
    const p = await portalTenant(h);
    const minted = await h.post("/v2/portal.createSession", { portal: p.slug, externalId: "u", scopes: ["keys:read"] }, p.t.rootKey);
    const code = new URL(minted.body.data.url).searchParams.get("code")!;
    clock.advance(15 * MINUTE);
    expectV2Error(
      await h.post("/v2/portal.exchangeCode", { code }),
      401,
      "unkey/authentication/portal_session_not_found",
      "Session is invalid, expired, or has already been used.",
    );
  });
});

describe("portal.rerollKey", () => {
  const reroll = (session: Awaited<ReturnType<typeof liveSession>>, keyId: string, expiration = 0) =>
    session.post("/v2/portal.rerollKey", { keyId, expiration });
  const verify = async (h: Harness, key: string) => (await h.post("/v1/keys.verifyKey", { key })).body as { valid: boolean; code: string };
  const identityOf = async (h: Harness, keyId: string) =>
    (await h.sql<{ identity_id: string | null }>(`select identity_id from keys where id = '${keyId}'`))[0]!.identity_id;

  it("rerolls the end user's own key: a new id and key of the same identity; the old one stops verifying now (expiration 0)", async ({
    h,
  }) => {
    const p = await portalTenant(h);
    const user = uniqueExternalId();
    const old = await v2Key(h, p.t, p.apiId, { externalId: user, name: "mine" });
    const session = await liveSession(h, p.t.rootKey, p.slug, user, ["keys:read", "keys:reroll"]);
    expect((await verify(h, old.key)).valid).toBe(true);
    const res = await reroll(session, old.keyId);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      meta: { requestId: expect.stringMatching(/^req_/) },
      data: { keyId: expect.any(String), key: expect.any(String) },
    });
    const fresh = res.body.data as { keyId: string; key: string };
    expect(fresh.keyId).not.toBe(old.keyId);
    expect(fresh.key.length).toBeGreaterThan(0);
    expect(await identityOf(h, fresh.keyId)).toBe(await identityOf(h, old.keyId));
    expect(await verify(h, fresh.key)).toMatchObject({ valid: true });
    expect(await verify(h, old.key)).toMatchObject({ valid: false, code: "EXPIRED" });
    // The session lists the new key (the old one, expired, too: expired keys are listed).
    expect(keyIdsOf((await session.post("/v2/portal.listKeys")).body)).toContain(fresh.keyId);
    // One key.reroll entry, by the session.
    const entries = (await auditEntries(h, { workspaceId: p.t.workspaceId, event: "key.reroll" })).filter(
      (e) => e.requestId === res.body.meta.requestId,
    );
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ actorKind: "portal_session", actorId: session.id });
    expect(entries[0]!.targets.map((x) => x.id)).toEqual(expect.arrayContaining([old.keyId, fresh.keyId]));
  });

  it("keeps the old key verifying for the grace asked (60 s, rounded up to a whole minute), then not", async ({ h }) => {
    const p = await portalTenant(h);
    const user = uniqueExternalId();
    const old = await v2Key(h, p.t, p.apiId, { externalId: user });
    const session = await liveSession(h, p.t.rootKey, p.slug, user, ["keys:reroll"]);
    const res = await reroll(session, old.keyId, 60_000);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await verify(h, old.key)).valid).toBe(true);
    clock.advance(30_000);
    expect((await verify(h, old.key)).valid).toBe(true);
    clock.advance(2 * MINUTE);
    expect(await verify(h, old.key)).toMatchObject({ valid: false, code: "EXPIRED" });
    expect((await verify(h, res.body.data.key)).valid).toBe(true);
  });

  it("needs keys:reroll (keys:create is not it): the same 403 for an owned key and a missing one, naming neither", async ({ h }) => {
    const p = await portalTenant(h);
    const user = uniqueExternalId();
    const owned = await v2Key(h, p.t, p.apiId, { externalId: user });
    const session = await liveSession(h, p.t.rootKey, p.slug, user, ["keys:read", "keys:create"]);
    const missing = "key_1234567890abcdefghij";
    const [a, b] = [await reroll(session, owned.keyId), await reroll(session, missing)];
    expectV2Error(a, 403, "unkey/authorization/insufficient_permissions", "Missing permission: 'keys:reroll'");
    expect(b.status).toBe(403);
    expect(a.body.error).toEqual(b.body.error);
    for (const res of [a, b]) {
      expect(JSON.stringify(res.body)).not.toContain(owned.keyId);
      expect(JSON.stringify(res.body)).not.toContain(missing);
    }
    expect((await verify(h, owned.key)).valid).toBe(true);
  });

  it("answers any key not the end user's in the portal's API as not found, naming no key, and changes nothing", async ({ h }) => {
    const p = await portalTenant(h);
    const user = uniqueExternalId();
    const session = await liveSession(h, p.t.rootKey, p.slug, user, ["keys:read", "keys:reroll"]);
    const own = await v2Key(h, p.t, p.apiId, { externalId: user });
    // The user's key in another API of the workspace (outside the session's keyspace).
    const otherApi = await v2Key(h, p.t, await h.createApi(p.t), { externalId: user });
    // Another identity's key, and a key with no identity, in the portal's API.
    const othersKey = await v2Key(h, p.t, p.apiId, { externalId: uniqueExternalId("other") });
    const noIdentity = await v2Key(h, p.t, p.apiId);
    // A key of another workspace, whose identity has the same externalId.
    const elsewhere = await h.tenant();
    const foreign = await v2Key(h, elsewhere, await h.createApi(elsewhere), { externalId: user });
    // The user's own key, deleted.
    const deleted = await v2Key(h, p.t, p.apiId, { externalId: user });
    expect((await h.post("/v2/keys.deleteKey", { keyId: deleted.keyId }, p.t.rootKey)).status).toBe(200);
    const keysBefore = await h.sql<{ n: string }>(`select count(*)::text as n from keys`);
    for (const key of [otherApi, othersKey, noIdentity, foreign, deleted, { keyId: "key_1234567890abcdefghij", key: "" }]) {
      const res = await reroll(session, key.keyId);
      expectV2Error(res, 404, "unkey/data/key_not_found", /^The specified key was not found\./);
      expect(JSON.stringify(res.body)).not.toContain(key.keyId);
      if (key.key) expect((await verify(h, key.key)).code).not.toBe("EXPIRED");
    }
    expect(await h.sql<{ n: string }>(`select count(*)::text as n from keys`)).toEqual(keysBefore);
    expect((await reroll(session, own.keyId)).status).toBe(200);
  });

  it("rerolls a key of an API storing keys encrypted (the session was granted encrypt_key's ceiling)", async ({ h }) => {
    const p = await portalTenant(h, { storeEncryptedKeys: true });
    const user = uniqueExternalId();
    const old = await v2Key(h, p.t, p.apiId, { externalId: user, recoverable: true });
    const session = await liveSession(h, p.t.rootKey, p.slug, user, ["keys:reroll"]);
    const res = await reroll(session, old.keyId);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await verify(h, res.body.data.key)).valid).toBe(true);
  });
});

describe("portal.getVerifications", () => {
  const sum = (points: { total: number }[]) => points.reduce((n, p) => n + p.total, 0);
  const flush = async (h: Harness) => {
    await h.jobs.verificationLog.flush();
    await h.jobs.analytics.flush();
  };
  async function verifyTimes(h: Harness, key: string, n: number) {
    for (let i = 0; i < n; i++) expect((await h.post("/v1/keys.verifyKey", { key })).status).toBe(200);
  }

  /** Upstream's setup: user A's live key verified 3 times, a key of A's verified twice and then deleted; user B's 5 times. */
  async function verified(h: Harness) {
    const p = await portalTenant(h);
    const userA = uniqueExternalId("analytics_A");
    const userB = uniqueExternalId("analytics_B");
    const live = await v2Key(h, p.t, p.apiId, { externalId: userA });
    const gone = await v2Key(h, p.t, p.apiId, { externalId: userA });
    const theirs = await v2Key(h, p.t, p.apiId, { externalId: userB });
    const at = clock.now();
    await verifyTimes(h, live.key, 3);
    await verifyTimes(h, gone.key, 2);
    await verifyTimes(h, theirs.key, 5);
    expect((await h.post("/v2/keys.deleteKey", { keyId: gone.keyId }, p.t.rootKey)).status).toBe(200);
    await flush(h);
    return { ...p, userA, userB, live, gone, theirs, at };
  }

  it("counts the end user's verifications only, its deleted key's among them, in minute, hour and day buckets alike", async ({ h }) => {
    const s = await verified(h);
    const session = await liveSession(h, s.t.rootKey, s.slug, s.userA, ["analytics:read"]);
    for (const [start, end] of [
      [s.at - HOUR, s.at + MINUTE],
      [s.at - DAY, s.at + HOUR],
      [s.at - 10 * DAY, s.at + HOUR],
    ] as const) {
      const res = await session.post("/v2/portal.getVerifications", { startTime: start, endTime: end });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(sum(res.body.data), `window ${end - start} ms`).toBe(5);
      expect(res.body.data.reduce((n: number, p: { valid: number }) => n + p.valid, 0)).toBe(5);
      expect(res.body.pagination).toBeUndefined();
    }
    // User B's own view: their 5.
    const other = await liveSession(h, s.t.rootKey, s.slug, s.userB, ["analytics:read"]);
    const theirs = await other.post("/v2/portal.getVerifications", { startTime: s.at - HOUR, endTime: s.at + MINUTE });
    expect(sum(theirs.body.data)).toBe(5);
  });

  it("filters by keyId: the key's own count; another user's key gives zeros, not an error", async ({ h }) => {
    const s = await verified(h);
    const session = await liveSession(h, s.t.rootKey, s.slug, s.userA, ["analytics:read"]);
    for (const [startTime, endTime] of [
      [s.at - HOUR, s.at + MINUTE],
      [s.at - DAY, s.at + HOUR],
    ]) {
      const of = async (keyId: string) => {
        const res = await session.post("/v2/portal.getVerifications", { startTime, endTime, keyId });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        return sum(res.body.data);
      };
      expect(await of(s.live.keyId)).toBe(3);
      expect(await of(s.gone.keyId)).toBe(2);
      expect(await of(s.theirs.keyId)).toBe(0);
      expect(await of("key_1234567890abcdefghij")).toBe(0);
    }
  });

  it("puts each verification in its bucket, by outcome", async ({ h }) => {
    const p = await portalTenant(h);
    const user = uniqueExternalId();
    const key = await v2Key(h, p.t, p.apiId, { externalId: user, credits: { remaining: 1 } });
    const first = clock.now();
    await verifyTimes(h, key.key, 2); // VALID, then USAGE_EXCEEDED
    clock.advance(5 * MINUTE);
    expect((await h.post("/v2/keys.updateKey", { keyId: key.keyId, enabled: false }, p.t.rootKey)).status).toBe(200);
    await verifyTimes(h, key.key, 1); // DISABLED
    await flush(h);
    const session = await liveSession(h, p.t.rootKey, p.slug, user, ["analytics:read"]);
    const res = await session.post("/v2/portal.getVerifications", { startTime: first - 10 * MINUTE, endTime: first + 10 * MINUTE });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const at = (time: number) => res.body.data.find((d: { time: number }) => d.time === time - (time % MINUTE));
    expect(at(first)).toMatchObject({ total: 2, valid: 1, usageExceeded: 1, disabled: 0 });
    expect(at(first + 5 * MINUTE)).toMatchObject({ total: 1, valid: 0, disabled: 1 });
    expect(sum(res.body.data)).toBe(3);
  });

  it("without the raw verification log (KEYHAVEN_VERIFICATION_LOG_DAYS=0), minute buckets come from the hourly counts, none lost", async () => {
    // Business time at hh:30; the hour's 3 verifications are counted at hh:00.
    const own = new ManualClock(clock.now());
    const h = await createHarness({ KEYHAVEN_VERIFICATION_LOG_DAYS: "0" }, { clock: own });
    try {
      const p = await portalTenant(h);
      const user = uniqueExternalId();
      const key = await v2Key(h, p.t, p.apiId, { externalId: user });
      await verifyTimes(h, key.key, 3);
      await h.jobs.analytics.flush();
      const session = await liveSession(h, p.t.rootKey, p.slug, user, ["analytics:read"]);
      const now = own.now();
      for (const [startTime, endTime] of [
        [now - HOUR, now + MINUTE],
        // The window starts after its hour did: the hour's count goes to the window's first bucket, not nowhere.
        [now - 10 * MINUTE, now + MINUTE],
        [now - 2 * HOUR, now + HOUR],
      ]) {
        const res = await session.post("/v2/portal.getVerifications", { startTime, endTime });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(sum(res.body.data), `window [now - ${now - startTime!}, now + ${endTime! - now}]`).toBe(3);
      }
    } finally {
      await h.close();
    }
  });

  it("with KEYHAVEN_ANALYTICS=off: 412 analytics_not_configured (as analytics.getVerifications), not zeros; the scope first", async () => {
    const h = await createHarness({ KEYHAVEN_ANALYTICS: "off" }, { clock: new ManualClock(clock.now()) });
    try {
      const p = await portalTenant(h);
      const user = uniqueExternalId();
      const key = await v2Key(h, p.t, p.apiId, { externalId: user });
      await verifyTimes(h, key.key, 1);
      const now = h.clock.now();
      const body = { startTime: now - HOUR, endTime: now + MINUTE };
      const session = await liveSession(h, p.t.rootKey, p.slug, user, ["analytics:read"]);
      expectV2Error(
        await session.post("/v2/portal.getVerifications", body),
        412,
        "unkey/data/analytics_not_configured",
        "Analytics are not configured for this instance",
      );
      const reader = await liveSession(h, p.t.rootKey, p.slug, user, ["keys:read"]);
      expectV2Error(await reader.post("/v2/portal.getVerifications", body), 403, "unkey/authorization/insufficient_permissions");
    } finally {
      await h.close();
    }
  });

  it("needs the analytics:read scope (keys:read is not it), naming no workspace, user or API", async ({ h }) => {
    const p = await portalTenant(h);
    const user = uniqueExternalId();
    const session = await liveSession(h, p.t.rootKey, p.slug, user, ["keys:read", "keys:reroll"]);
    const res = await session.post("/v2/portal.getVerifications", { startTime: clock.now() - HOUR, endTime: clock.now() });
    expectV2Error(res, 403, "unkey/authorization/insufficient_permissions", "Missing permission: 'analytics:read'");
    const text = JSON.stringify(res.body);
    for (const secret of [p.t.workspaceId, user, p.apiId]) expect(text).not.toContain(secret);
  });

  it("refuses a window over 30 days and an end not after the start (400); 10 and 30 days are read", async ({ h }) => {
    const p = await portalTenant(h);
    const session = await liveSession(h, p.t.rootKey, p.slug, uniqueExternalId(), ["analytics:read"]);
    const now = clock.now();
    const ask = (startTime: number, endTime: number) => session.post("/v2/portal.getVerifications", { startTime, endTime });
    expectV2Error(
      await ask(now - 40 * DAY, now),
      400,
      "unkey/application/invalid_input",
      "The requested time window is too large. The maximum window is 30 days.",
    );
    expectV2Error(await ask(now - 30 * DAY - 1, now), 400, "unkey/application/invalid_input");
    expect((await ask(now - 10 * DAY, now)).status).toBe(200);
    expect((await ask(now - 30 * DAY, now)).status).toBe(200);
    for (const [start, end] of [
      [now, now],
      [now, now - 1],
    ]) {
      expectV2Error(await ask(start!, end!), 400, "unkey/application/invalid_input", "`endTime` must be greater than `startTime`.");
    }
    expectV2Error(await session.post("/v2/portal.getVerifications", { startTime: now }), 400, "unkey/application/invalid_input");
  });

  it("buckets by minute up to 3 hours, by hour up to 4 days, else by day, zero-filled from floor(start) to floor(end) inclusive", async ({
    h,
  }) => {
    const p = await portalTenant(h);
    const session = await liveSession(h, p.t.rootKey, p.slug, uniqueExternalId(), ["analytics:read"]);
    const start = clock.now() - 5 * DAY + 12_345; // not on any boundary
    const floor = (t: number, step: number) => t - (t % step);
    for (const [window, step] of [
      [MINUTE, MINUTE],
      [3 * HOUR, MINUTE],
      [3 * HOUR + 1, HOUR],
      [4 * DAY, HOUR],
      [4 * DAY + 1, DAY],
      [20 * DAY, DAY],
    ] as const) {
      const end = start + window;
      const res = await session.post("/v2/portal.getVerifications", { startTime: start, endTime: end });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const times = res.body.data.map((d: { time: number }) => d.time);
      const expected: number[] = [];
      for (let t = floor(start, step); t <= floor(end, step); t += step) expected.push(t);
      expect(times, `window ${window}`).toEqual(expected);
      for (const point of res.body.data) {
        expect(point).toEqual({
          time: point.time,
          total: 0,
          valid: 0,
          rateLimited: 0,
          insufficientPermissions: 0,
          forbidden: 0,
          disabled: 0,
          expired: 0,
          usageExceeded: 0,
        });
      }
    }
    // An end exactly on a boundary still gets its (empty) bucket.
    const aligned = floor(clock.now(), HOUR) - 2 * HOUR;
    const res = await session.post("/v2/portal.getVerifications", { startTime: aligned, endTime: aligned + HOUR });
    expect(res.body.data.map((d: { time: number }) => d.time)).toEqual(Array.from({ length: 61 }, (_, i) => aligned + i * MINUTE));
  });
});
