import { randomBytes } from "node:crypto";
import { Unkey } from "@unkey/api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { waitFor } from "./wait.js";

/** The v1 TypeScript SDK, unchanged, pointed at keyhaven over a real socket. */
let h: Harness;
let t: Tenant;
let baseUrl: string;
let unkey: Unkey;
beforeAll(async () => {
  h = await createHarness();
  t = await h.tenant();
  baseUrl = await h.app.listen({ port: 0, host: "127.0.0.1" });
  unkey = new Unkey({ rootKey: t.rootKey, baseUrl, disableTelemetry: true, retry: { attempts: 0 } });
});
afterAll(() => h.close());

describe("@unkey/api@0.38.0 against keyhaven", () => {
  it("answers a wrong root key exactly as the SDK's own test expects", async () => {
    const wrong = new Unkey({ rootKey: "wrong", baseUrl, disableTelemetry: true, retry: { attempts: 0 } });
    const res = await wrong.keys.create({ apiId: "" });
    expect(res.result).toBeUndefined();
    expect(res.error).toMatchObject({ code: "UNAUTHORIZED", message: "key not found" });
    expect(res.error!.docs).toMatch(/\/docs\/errors\/UNAUTHORIZED$/);
    expect(res.error!.requestId).toMatch(/^req_/);
  });

  it("drives the key lifecycle: apis, keys, verification, import, roles and permissions", async () => {
    const api = await unkey.apis.create({ name: "sdk-api" });
    expect(api.error).toBeUndefined();
    const apiId = api.result!.apiId;
    expect((await unkey.apis.get({ apiId })).result).toEqual({ id: apiId, workspaceId: t.workspaceId, name: "sdk-api" });

    expect((await unkey.permissions.createRole({ name: "sdk.role" })).result?.roleId).toMatch(/^role_/);
    expect((await unkey.permissions.createPermission({ name: "sdk.read" })).result?.permissionId).toMatch(/^perm_/);

    const created = await unkey.keys.create({
      apiId,
      prefix: "sdk",
      name: "created by the SDK",
      externalId: "sdk-user",
      meta: { plan: "pro" },
      roles: ["sdk.role"],
      permissions: ["sdk.read"],
      remaining: 10,
      refill: { interval: "daily", amount: 10 },
      ratelimit: { async: false, limit: 100, duration: 60_000 },
      environment: "test",
    });
    expect(created.error).toBeUndefined();
    const { key, keyId } = created.result!;
    expect(key).toMatch(/^sdk_/);

    const verified = await unkey.keys.verify({ key, apiId, authorization: { permissions: "sdk.read" } });
    expect(verified.error).toBeUndefined();
    expect(verified.result).toMatchObject({
      valid: true,
      code: "VALID",
      keyId,
      name: "created by the SDK",
      ownerId: "sdk-user",
      meta: { plan: "pro" },
      remaining: 9,
      ratelimit: { limit: 100, remaining: 99 },
      enabled: true,
      permissions: ["sdk.read"],
      roles: ["sdk.role"],
      environment: "test",
      identity: { externalId: "sdk-user" },
    });

    const got = await unkey.keys.get({ keyId });
    expect(got.result).toMatchObject({
      id: keyId,
      apiId,
      name: "created by the SDK",
      remaining: 9,
      refill: { interval: "daily", amount: 10 },
      ratelimit: { limit: 100, duration: 60_000 },
      roles: ["sdk.role"],
      permissions: ["sdk.read"],
      enabled: true,
      identity: { externalId: "sdk-user" },
    });

    expect((await unkey.keys.update({ keyId, enabled: false, meta: { plan: "free" } })).error).toBeUndefined();
    expect((await unkey.keys.verify({ key })).result).toMatchObject({ valid: false, code: "DISABLED", meta: { plan: "free" } });
    await unkey.keys.update({ keyId, enabled: true });

    const remaining = await unkey.keys.updateRemaining({ keyId, op: "set", value: 3 });
    expect(remaining.result).toEqual({ remaining: 3 });

    const plaintext = `sk_imported_${randomBytes(8).toString("hex")}`;
    const imported = await unkey.migrations.createKeys([{ apiId, plaintext, name: "imported" } as never]);
    expect(imported.error).toBeUndefined();
    expect(imported.result!.keyIds).toHaveLength(1);
    expect((await unkey.keys.verify({ key: plaintext })).result).toMatchObject({ valid: true, keyId: imported.result!.keyIds[0] });

    const listed = await unkey.apis.listKeys({ apiId, limit: 10 });
    expect(listed.result!.total).toBe(2);
    expect(listed.result!.keys.map((k) => k.id).sort()).toEqual([keyId, imported.result!.keyIds[0]].sort());

    expect((await unkey.keys.delete({ keyId })).result).toEqual({});
    expect((await unkey.keys.verify({ key })).result).toMatchObject({ valid: false, code: "NOT_FOUND" });
    expect((await unkey.keys.get({ keyId })).error).toMatchObject({ code: "NOT_FOUND" });

    expect((await unkey.apis.delete({ apiId })).result).toEqual({});
    expect((await unkey.keys.verify({ key: plaintext })).result).toMatchObject({ valid: false, code: "NOT_FOUND" });
  });

  it("passes 4xx errors through in the envelope the SDK returns as-is", async () => {
    const res = await unkey.keys.get({ keyId: "key_missing" });
    expect(res.error).toMatchObject({ code: "NOT_FOUND", message: "key key_missing not found" });
  });
});

describe("@unkey/api@0.38.0 ratelimits against keyhaven", () => {
  it("limits, and sets, reads, lists and deletes overrides", async () => {
    const namespace = `sdk-ns-${randomBytes(4).toString("hex")}`;
    const first = await unkey.ratelimits.limit({ namespace, identifier: "user_1", limit: 2, duration: 3_600_000 });
    expect(first.error).toBeUndefined();
    expect(first.result).toMatchObject({ success: true, limit: 2, remaining: 1 });
    expect(first.result!.reset).toBeGreaterThan(Date.now());
    await unkey.ratelimits.limit({ namespace, identifier: "user_1", limit: 2, duration: 3_600_000 });
    expect((await unkey.ratelimits.limit({ namespace, identifier: "user_1", limit: 2, duration: 3_600_000 })).result).toMatchObject({
      success: false,
      remaining: 0,
    });

    const set = await unkey.ratelimits.setOverride({ namespaceName: namespace, identifier: "vip_*", limit: 50, duration: 60_000 });
    expect(set.error).toBeUndefined();
    const overrideId = set.result!.overrideId;
    expect((await unkey.ratelimits.limit({ namespace, identifier: "vip_7", limit: 2, duration: 3_600_000 })).result).toMatchObject({
      success: true,
      limit: 50,
      remaining: 49,
    });
    expect((await unkey.ratelimits.getOverride({ namespaceName: namespace, identifier: "vip_*" })).result).toEqual({
      id: overrideId,
      identifier: "vip_*",
      limit: 50,
      duration: 60_000,
      async: false,
    });
    const listed = await unkey.ratelimits.listOverrides({ namespaceName: namespace, limit: 10 });
    expect(listed.result).toEqual({
      overrides: [{ id: overrideId, identifier: "vip_*", limit: 50, duration: 60_000, async: false }],
      total: 1,
    });
    expect((await unkey.ratelimits.deleteOverride({ namespaceName: namespace, identifier: "vip_*" })).result).toEqual({});
    expect((await unkey.ratelimits.getOverride({ namespaceName: namespace, identifier: "vip_*" })).error).toMatchObject({
      code: "NOT_FOUND",
      message: "Override not found",
    });
    expect((await unkey.ratelimits.limit({ namespace: "missing", identifier: "x", limit: 1, duration: 1000 })).error).toBeUndefined();
  });
});

describe("@unkey/api@0.38.0: migrations.enqueueKeys", () => {
  it("answers 202 {} and the worker imports the keys, which then verify", async () => {
    const apiId = (await unkey.apis.create({ name: "sdk-enqueue" })).result!.apiId;
    const plaintext = `sk_enqueued_${randomBytes(8).toString("hex")}`;
    const res = await unkey.migrations.enqueueKeys({
      migrationId: "sdk-migration",
      apiId,
      keys: [{ plaintext, name: "enqueued", ratelimit: { limit: 10, duration: 60_000 } }],
    });
    expect(res.error).toBeUndefined();
    expect(res.result).toEqual({});
    await waitFor("the worker imported the key", async () => (await unkey.keys.verify({ key: plaintext })).result?.valid === true);
    const verified = await unkey.keys.verify({ key: plaintext });
    expect(verified.result).toMatchObject({ valid: true, code: "VALID", name: "enqueued", ratelimit: { limit: 10 } });
  });
});

describe("@unkey/api@0.38.0: keys.getVerifications and analytics.getVerifications", () => {
  it("reads the counts of verifications made through the SDK", async () => {
    const apiId = (await unkey.apis.create({ name: "sdk-analytics" })).result!.apiId;
    const created = (await unkey.keys.create({ apiId, remaining: 2 })).result!;
    for (let i = 0; i < 3; i++) await unkey.keys.verify({ key: created.key, tags: ["sdk"] });
    await h.jobs.analytics.flush();

    const perKey = await unkey.keys.getVerifications({ keyId: created.keyId });
    expect(perKey.error).toBeUndefined();
    expect(perKey.result!.verifications).toEqual([{ time: expect.any(Number), success: 2, rateLimited: 0, usageExceeded: 1 }]);

    const start = Date.now() - 3_600_000;
    const grouped = await unkey.analytics.getVerifications({ apiId, start, groupBy: ["key", "tag"], keyId: [created.keyId] });
    expect(grouped.error).toBeUndefined();
    expect(grouped.result).toEqual([expect.objectContaining({ keyId: created.keyId, tag: "sdk", valid: 2, usageExceeded: 1, total: 3 })]);
    const totals = await unkey.analytics.getVerifications({ apiId, start });
    expect(totals.result).toEqual([expect.objectContaining({ valid: 2, usageExceeded: 1, total: 3 })]);
  });
});

describe("@unkey/api@0.38.0: the remaining keys, permissions and identities methods", () => {
  it("adds, sets and removes a key's permissions and roles, and reads, lists and deletes roles and permissions", async () => {
    const apiId = await h.createApi(t);
    const { keyId } = await h.importKey(t, apiId);
    const suffix = randomBytes(4).toString("hex");

    const added = await unkey.keys.addPermissions({ keyId, permissions: [{ name: `p.a.${suffix}`, create: true }] });
    expect(added.error).toBeUndefined();
    expect(added.result).toEqual([expect.objectContaining({ name: `p.a.${suffix}` })]);
    const set = await unkey.keys.setPermissions({ keyId, permissions: [{ name: `p.b.${suffix}`, create: true }] });
    expect(set.error).toBeUndefined();
    expect(set.result?.map((p) => p.name)).toEqual([`p.b.${suffix}`]);
    expect((await unkey.keys.removePermissions({ keyId, permissions: [{ name: `p.b.${suffix}` }] })).error).toBeUndefined();

    const roleAdded = await unkey.keys.addRoles({ keyId, roles: [{ name: `r.a.${suffix}`, create: true }] });
    expect(roleAdded.error).toBeUndefined();
    expect(roleAdded.result).toEqual([expect.objectContaining({ name: `r.a.${suffix}` })]);
    const rolesSet = await unkey.keys.setRoles({ keyId, roles: [{ name: `r.b.${suffix}`, create: true }] });
    expect(rolesSet.result?.map((r) => r.name)).toEqual([`r.b.${suffix}`]);
    expect((await unkey.keys.removeRoles({ keyId, roles: [{ name: `r.b.${suffix}` }] })).error).toBeUndefined();
    const key = await unkey.keys.get({ keyId });
    expect(key.result).toMatchObject({ id: keyId, roles: [], permissions: [] });

    const roleId = roleAdded.result![0]!.id;
    expect((await unkey.permissions.getRole({ roleId })).result).toMatchObject({ id: roleId, name: `r.a.${suffix}` });
    expect((await unkey.permissions.listRoles()).result?.map((r) => r.name)).toContain(`r.a.${suffix}`);
    expect((await unkey.permissions.deleteRole({ roleId })).error).toBeUndefined();
    expect((await unkey.permissions.getRole({ roleId })).error).toMatchObject({ code: "NOT_FOUND" });

    const permissionId = added.result![0]!.id;
    expect((await unkey.permissions.getPermission({ permissionId })).result).toMatchObject({
      id: permissionId,
      name: `p.a.${suffix}`,
    });
    expect((await unkey.permissions.listPermissions()).result?.map((p) => p.name)).toContain(`p.a.${suffix}`);
    expect((await unkey.permissions.deletePermission({ permissionId })).error).toBeUndefined();
    expect((await unkey.permissions.getPermission({ permissionId })).error).toMatchObject({ code: "NOT_FOUND" });
  });

  it("creates, reads, lists, updates and deletes identities", async () => {
    const externalId = `sdk-user-${randomBytes(4).toString("hex")}`;
    const created = await unkey.identities.create({
      externalId,
      meta: { plan: "pro" },
      ratelimits: [{ name: "requests", limit: 10, duration: 60_000 }],
    });
    expect(created.error).toBeUndefined();
    const identityId = created.result!.identityId;
    expect((await unkey.identities.get({ externalId })).result).toMatchObject({
      id: identityId,
      externalId,
      meta: { plan: "pro" },
      ratelimits: [{ name: "requests", limit: 10, duration: 60_000 }],
    });
    const listed = await unkey.identities.list({ limit: 100 });
    expect(listed.result?.identities.map((i) => i.id)).toContain(identityId);
    const updated = await unkey.identities.update({ identityId, meta: { plan: "team" } });
    expect(updated.error).toBeUndefined();
    expect((await unkey.identities.get({ identityId })).result).toMatchObject({ meta: { plan: "team" } });
    expect((await unkey.identities.delete({ identityId })).error).toBeUndefined();
    expect((await unkey.identities.get({ identityId })).error).toMatchObject({ code: "NOT_FOUND" });
  });
});
