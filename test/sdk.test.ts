import { randomBytes } from "node:crypto";
import { Unkey } from "@unkey/api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness, type Tenant } from "./helper.js";

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
