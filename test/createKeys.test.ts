import { randomBytes } from "node:crypto";
import { getTableColumns, type Table } from "drizzle-orm";
import { describe, expect } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import type { Keyring } from "../src/keyring/keyring.js";
import { keys } from "../src/storage/schema.js";
import { planImport } from "../src/core/import/import.plan.js";
import { inClear, storedCiphertext, test } from "./fixtures.js";
import { createHarness, expectError } from "./helper.js";

const randomHash = () => hashKey(randomBytes(16).toString("hex"));
const byHash = (api: string, n: number) =>
  Array.from({ length: n }, () => ({ apiId: api, hash: { value: randomHash(), variant: "sha256_base64" } }));

// The file's harness, tenant and API (`h`, `t`, `apiId` of test/fixtures.ts), and helpers over them.
const it = test.extend("importKeys", async ({ route }) => route("/v1/migrations.createKeys"));

describe("migrations.createKeys stores every field", () => {
  it("round-trips every field of a key imported by hash", async ({ h, t, apiId, importKeys, count, createRole, createPermission }) => {
    const roleId = await createRole("importer.admin");
    const permissionId = await createPermission("documents.read");
    const hash = randomHash();
    const expires = Date.now() + 86_400_000;
    const res = await importKeys([
      {
        apiId,
        prefix: "sk_live",
        name: "Customer key",
        hash: { value: hash, variant: "sha256_base64" },
        start: "sk_live_abcd",
        ownerId: "legacy-owner",
        externalId: "customer-42",
        meta: { plan: "pro", nested: { seats: 3, tags: ["a", "b"] } },
        roles: ["importer.admin"],
        permissions: ["documents.read"],
        expires,
        remaining: 500,
        refill: { interval: "monthly", amount: 500, refillDay: 15 },
        ratelimit: { type: "fast", limit: 10, refillRate: 10, refillInterval: 60_000 },
        enabled: false,
        environment: "production",
      },
    ]);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ keyIds: [expect.stringMatching(/^key_/)] });
    const keyId = res.body.keyIds[0];

    const [key] = await h.sql<any>(`select * from keys where id = '${keyId}'`);
    expect(key).toMatchObject({
      workspace_id: t.workspaceId,
      api_id: apiId,
      hash,
      start: "sk_live_abcd",
      prefix: "sk_live",
      name: "Customer key",
      owner_id: "legacy-owner",
      meta: { plan: "pro", nested: { seats: 3, tags: ["a", "b"] } },
      remaining_requests: 500,
      refill_day: 15,
      refill_amount: 500,
      last_refill_at: null,
      enabled: false,
      environment: "production",
      deleted_at_m: null,
    });
    expect(new Date(key.expires).getTime()).toBe(expires);
    expect(Number(key.created_at_m)).toBeGreaterThan(Date.now() - 60_000);

    const [identity] = await h.sql<any>(`select * from identities where id = '${key.identity_id}'`);
    expect(identity).toMatchObject({ workspace_id: t.workspaceId, external_id: "customer-42", environment: "default" });
    // As v1's import: the identities it creates carry no meta (keys.createKey and keys.updateKey store {}).
    expect(identity.meta).toBeNull();
    expect(await h.sql(`select role_id from keys_roles where key_id = '${keyId}'`)).toEqual([{ role_id: roleId }]);
    expect(await h.sql(`select permission_id from keys_permissions where key_id = '${keyId}'`)).toEqual([{ permission_id: permissionId }]);
    const ratelimits = await h.sql<any>(`select name, "limit", duration, auto_apply from ratelimits where key_id = '${keyId}'`);
    expect(ratelimits.map((r) => ({ ...r, duration: Number(r.duration) }))).toEqual([
      { name: "default", limit: 10, duration: 60_000, auto_apply: true },
    ]);
    expect(await count(`encrypted_keys where key_id = '${keyId}'`)).toBe(0);
  });

  it("applies the defaults: enabled, no expiry, unlimited, empty start for a hash", async ({ h, apiId, importKeys }) => {
    const res = await importKeys(byHash(apiId, 1));
    const [key] = await h.sql<any>(`select * from keys where id = '${res.body.keyIds[0]}'`);
    expect(key).toMatchObject({
      enabled: true,
      start: "",
      name: null,
      prefix: null,
      owner_id: null,
      identity_id: null,
      meta: null,
      expires: null,
      remaining_requests: null,
      refill_day: null,
      refill_amount: null,
      environment: null,
    });
  });

  it("stores expires: 0 as never expiring, and a monthly refill without refillDay on day 1", async ({ h, apiId, importKeys }) => {
    const [k] = byHash(apiId, 1);
    const res = await importKeys([{ ...k, expires: 0, remaining: 5, refill: { interval: "monthly", amount: 10 } }]);
    const [key] = await h.sql<any>(`select * from keys where id = '${res.body.keyIds[0]}'`);
    expect(key).toMatchObject({ expires: null, refill_day: 1, refill_amount: 10, remaining_requests: 5 });
  });

  it("stores a daily refill without a refill day", async ({ h, apiId, importKeys }) => {
    const [k] = byHash(apiId, 1);
    const res = await importKeys([{ ...k, remaining: 1, refill: { interval: "daily", amount: 100 } }]);
    const [key] = await h.sql<any>(`select * from keys where id = '${res.body.keyIds[0]}'`);
    expect(key).toMatchObject({ refill_day: null, refill_amount: 100, remaining_requests: 1 });
  });

  it("hashes a plaintext key with SHA-256 (base64) and keeps the plaintext only encrypted", async ({ h, t, apiId, importKeys }) => {
    const plaintext = `sk_live_${randomBytes(24).toString("hex")}`;
    const res = await importKeys([{ apiId, prefix: "sk_live", plaintext }]);
    expect(res.status).toBe(200);
    const keyId = res.body.keyIds[0];
    const [key] = await h.sql<any>(`select * from keys where id = '${keyId}'`);
    expect(key.hash).toBe(hashKey(plaintext));
    expect(key.start).toBe(plaintext.slice(0, "sk_live_".length + 4));

    const enc = await storedCiphertext(h, t.workspaceId, keyId);
    expect(enc.workspace_id).toBe(t.workspaceId);
    expect(enc.encrypted).not.toContain(plaintext);
    expect(Buffer.from(enc.encrypted, "base64").includes(Buffer.from(plaintext))).toBe(false);
    expect(enc.decrypted).toBe(plaintext);

    // The plaintext appears nowhere in the database, in any table.
    expect(await inClear(h, plaintext)).toBe(false);
  });

  it("binds each ciphertext to its key: moved to another key it does not decrypt", async ({ h, t, apiId, importKeys }) => {
    const res = await importKeys([
      { apiId, plaintext: `a_${randomBytes(8).toString("hex")}` },
      { apiId, plaintext: `b_${randomBytes(8).toString("hex")}` },
    ]);
    const [a, b] = res.body.keyIds;
    const [enc] = await h.sql<any>(`select * from encrypted_keys where key_id = '${a}'`);
    await expect(h.keyring.decrypt(h.db, t.workspaceId, enc.encryption_key_id, b, enc.encrypted)).rejects.toThrow();
  });

  it("defaults start to the first four characters of a plaintext without the prefix", async ({ h, apiId, importKeys }) => {
    const res = await importKeys([{ apiId, plaintext: "abcdefghijklmnop" }]);
    const [key] = await h.sql<any>(`select start from keys where id = '${res.body.keyIds[0]}'`);
    expect(key.start).toBe("abcd");
  });

  it("never returns the hash or the plaintext", async ({ apiId, importKeys }) => {
    const plaintext = `secret_${randomBytes(8).toString("hex")}`;
    const res = await importKeys([{ apiId, plaintext }]);
    const text = JSON.stringify(res.body);
    expect(text).not.toContain(plaintext);
    expect(text).not.toContain(hashKey(plaintext));
    expect(Object.keys(res.body)).toEqual(["keyIds"]);
  });
});

describe("migrations.createKeys batches", () => {
  it("imports 100 keys in one call and returns their ids in request order", async ({ h, apiId, importKeys }) => {
    const batch = byHash(apiId, 100);
    const res = await importKeys(batch);
    expect(res.status).toBe(200);
    expect(res.body.keyIds).toHaveLength(100);
    expect(new Set(res.body.keyIds).size).toBe(100);
    const rows = await h.sql<{ id: string; hash: string }>(
      `select id, hash from keys where id in (${res.body.keyIds.map((id: string) => `'${id}'`).join(",")})`,
    );
    const hashById = new Map(rows.map((r) => [r.id, r.hash]));
    for (const [i, id] of (res.body.keyIds as string[]).entries()) expect(hashById.get(id)).toBe(batch[i]!.hash.value);
  });

  it("refuses 101 keys and writes nothing", async ({ apiId, importKeys, snapshot }) => {
    const before = await snapshot();
    expectError(await importKeys(byHash(apiId, 101)), 400, "BAD_REQUEST", ": Array must contain at most 100 element(s)");
    expect(await snapshot()).toEqual(before);
  });

  it("answers an empty array with no key ids", async ({ importKeys }) => {
    const res = await importKeys([]);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ keyIds: [] });
  });

  it("refuses an object where the array belongs", async ({ apiId, importKeys }) => {
    expectError(
      await importKeys({ apiId, hash: { value: "x", variant: "sha256_base64" } }),
      400,
      "BAD_REQUEST",
      ": Expected array, received object",
    );
  });

  it("imports keys into several APIs of the workspace in one call", async ({ h, t, apiId, newApi, importKeys }) => {
    const other = await newApi(t);
    const res = await importKeys([...byHash(apiId, 2), ...byHash(other, 2)]);
    expect(res.status).toBe(200);
    const rows = await h.sql<{ api_id: string }>(
      `select api_id from keys where id in (${res.body.keyIds.map((id: string) => `'${id}'`).join(",")}) order by api_id`,
    );
    expect(rows.filter((r) => r.api_id === other)).toHaveLength(2);
  });
});

describe("migrations.createKeys validation", () => {
  // Built when the file is collected, before any fixture: validation fails before any API is looked up.
  const anyApi = "api_validation_only";
  const one = (overrides: Record<string, unknown>) => [{ ...byHash(anyApi, 1)[0], ...overrides }];
  // v1's wording (zod 3's), exact.
  const cases: [string, unknown, string | RegExp][] = [
    ["a prefix longer than 8", one({ prefix: "123456789" }), "0.prefix: String must contain at most 8 character(s)"],
    [
      "an environment longer than 256",
      one({ environment: "e".repeat(257) }),
      "0.environment: String must contain at most 256 character(s)",
    ],
    ["remaining 0", one({ remaining: 0 }), "0.remaining: Number must be greater than or equal to 1"],
    ["a negative remaining", one({ remaining: -5 }), "0.remaining: Number must be greater than or equal to 1"],
    ["a fractional remaining", one({ remaining: 1.5 }), "0.remaining: Expected integer, received float"],
    ["remaining beyond 32 bits", one({ remaining: 2 ** 31 }), "0.remaining: Number must be less than or equal to 2147483647"],
    [
      "refill without remaining",
      one({ refill: { interval: "daily", amount: 10 } }),
      /^0\.refill: remaining must be set if you are using refill\.$/,
    ],
    [
      "refillDay with a daily refill",
      one({ remaining: 5, refill: { interval: "daily", amount: 10, refillDay: 3 } }),
      // v1 raised it in its handler: no path.
      "when interval is set to 'daily', 'refillDay' must be null.",
    ],
    [
      "refillDay 32",
      one({ remaining: 5, refill: { interval: "monthly", amount: 10, refillDay: 32 } }),
      "0.refill.refillDay: Number must be less than or equal to 31",
    ],
    [
      "refillDay 0",
      one({ remaining: 5, refill: { interval: "monthly", amount: 10, refillDay: 0 } }),
      "0.refill.refillDay: Number must be greater than or equal to 1",
    ],
    [
      "an unknown refill interval",
      one({ remaining: 5, refill: { interval: "weekly", amount: 10 } }),
      "0.refill.interval: Invalid enum value. Expected 'daily' | 'monthly', received 'weekly'",
    ],
    [
      "a refill amount of 0",
      one({ remaining: 5, refill: { interval: "daily", amount: 0 } }),
      "0.refill.amount: Number must be greater than or equal to 1",
    ],
    ["neither hash nor plaintext", [{ apiId: anyApi }], /^0: provide either `hash` or `plaintext`$/],
    ["both hash and plaintext", one({ plaintext: "abc" }), /^0: provide either `hash` or `plaintext`, not both$/],
    [
      "an unknown hash variant",
      one({ hash: { value: "x", variant: "sha512_hex" } }),
      "0.hash.variant: Invalid enum value. Expected 'sha256_base64', received 'sha512_hex'",
    ],
    ["a hash without value", one({ hash: { variant: "sha256_base64" } }), "0.hash.value: Required"],
    ["an empty plaintext", [{ apiId: anyApi, plaintext: "" }], "0.plaintext: String must contain at least 1 character(s)"],
    ["a missing apiId", [{ hash: { value: randomHash(), variant: "sha256_base64" } }], "0.apiId: Required"],
    ["a ratelimit without refillInterval", one({ ratelimit: { limit: 10, refillRate: 10 } }), "0.ratelimit.refillInterval: Required"],
    [
      "a ratelimit limit of 0",
      one({ ratelimit: { limit: 0, refillRate: 1, refillInterval: 1000 } }),
      "0.ratelimit.limit: Number must be greater than or equal to 1",
    ],
    [
      "an unknown ratelimit type",
      one({ ratelimit: { type: "slow", limit: 1, refillRate: 1, refillInterval: 1000 } }),
      "0.ratelimit.type: Invalid enum value. Expected 'fast' | 'consistent', received 'slow'",
    ],
    ["a fractional expires", one({ expires: 1.5 }), "0.expires: Expected integer, received float"],
    ["a negative expires", one({ expires: -1 }), "0.expires: Number must be greater than or equal to 0"],
    ["an expires past year 9999", one({ expires: 253_402_300_800_000 }), "0.expires: Number must be less than or equal to 253402300799999"],
    ["meta that is not an object", one({ meta: [1, 2] }), "0.meta: Expected object, received array"],
    ["an empty role name", one({ roles: [""] }), "0.roles.0: String must contain at least 1 character(s)"],
    ["a role name longer than 512", one({ roles: ["r".repeat(513)] }), "0.roles.0: String must contain at most 512 character(s)"],
    ["a non-boolean enabled", one({ enabled: "yes" }), "0.enabled: Expected boolean, received string"],
    [
      "a hash value longer than 512",
      one({ hash: { value: "h".repeat(513), variant: "sha256_base64" } }),
      "0.hash.value: String must contain at most 512 character(s)",
    ],
  ];

  it.for(cases)("refuses %s with 400 naming the field, and writes nothing", async ([, body, message], { importKeys, snapshot }) => {
    const before = await snapshot();
    expectError(await importKeys(body), 400, "BAD_REQUEST", message);
    expect(await snapshot()).toEqual(before);
  });

  it("names the failing element's index when it is not the first", async ({ apiId, importKeys }) => {
    const batch: unknown[] = byHash(apiId, 10);
    batch[7] = { apiId, hash: { value: randomHash(), variant: "sha256_base64" }, remaining: 0 };
    const res = await importKeys(batch);
    expectError(res, 400, "BAD_REQUEST", "7.remaining: Number must be greater than or equal to 1");
    // keyhaven addition for programs (the import CLI): the index as a field, not only in the message's wording.
    expect(res.body.error.keyIndex).toBe(7);
  });

  it("carries no keyIndex on a refusal of the whole body", async ({ apiId, importKeys }) => {
    const res = await importKeys({ apiId });
    expectError(res, 400, "BAD_REQUEST");
    expect(Object.keys(res.body.error).sort()).toEqual(["code", "docs", "message", "requestId"]);
  });

  it("accepts remaining 1, which the spec's 'greater than 1' would refuse (a documented decision)", async ({ apiId, importKeys }) => {
    const res = await importKeys([{ ...byHash(apiId, 1)[0], remaining: 1 }]);
    expect(res.status).toBe(200);
  });

  it("ignores unknown fields, as v1 does", async ({ apiId, importKeys }) => {
    const res = await importKeys([{ ...byHash(apiId, 1)[0], somethingElse: true }]);
    expect(res.status).toBe(200);
  });
});

describe("migrations.createKeys is all or nothing", () => {
  it.for([0, 50, 99])(
    "rolls back everything when the key at index %i already exists",
    async (position, { apiId, importKeys, count, snapshot, createRole, createPermission }) => {
      const existing = byHash(apiId, 1);
      expect((await importKeys(existing)).status).toBe(200);
      await createRole(`rollback.role.${position}`);
      await createPermission(`rollback.perm.${position}`);

      const batch: any[] = byHash(apiId, 100).map((k, i) => ({
        ...k,
        externalId: `rollback-identity-${position}-${i}`,
        roles: [`rollback.role.${position}`],
        permissions: [`rollback.perm.${position}`],
        ratelimit: { limit: 1, refillRate: 1, refillInterval: 1000 },
        ...(i % 2 === 0 && { hash: undefined, plaintext: `plain-${position}-${i}-${randomHash()}` }),
      }));
      batch[position] = { ...existing[0] };
      const before = await snapshot();
      const res = await importKeys(batch);
      expectError(res, 409, "CONFLICT", `the key at index ${position} already exists; no key of this request was created`);
      // What the import CLI reads (never the message's wording) to set an existing key aside.
      expect(res.body.error).toMatchObject({ reason: "KEY_EXISTS", keyIndex: position });
      expect(JSON.stringify(res.body)).not.toContain(existing[0]!.hash.value);
      expect(await snapshot()).toEqual(before);
      expect(await count(`identities where external_id like 'rollback-identity-${position}-%'`)).toBe(0);
    },
  );

  it("refuses two copies of one key in the same request, naming both indexes", async ({ apiId, importKeys, snapshot }) => {
    const batch = byHash(apiId, 20);
    batch[13] = { ...batch[4]! };
    const before = await snapshot();
    const res = await importKeys(batch);
    expectError(res, 409, "CONFLICT", "the key at index 13 is the same key as the one at index 4");
    expect(res.body.error).toMatchObject({ reason: "DUPLICATE_IN_REQUEST", keyIndex: 13, sameAsKeyIndex: 4 });
    expect(JSON.stringify(res.body)).not.toContain(batch[4]!.hash.value);
    expect(await snapshot()).toEqual(before);
  });

  it("treats a plaintext and a hash of the same key as duplicates", async ({ apiId, importKeys }) => {
    const plaintext = `dup_${randomBytes(8).toString("hex")}`;
    const res = await importKeys([
      { apiId, plaintext },
      { apiId, hash: { value: hashKey(plaintext), variant: "sha256_base64" } },
    ]);
    expectError(res, 409, "CONFLICT", "the key at index 1 is the same key as the one at index 0");
  });

  it("refuses a key that exists in another workspace (hashes are unique everywhere)", async ({
    h,
    apiId,
    newApi,
    importKeys,
    snapshot,
  }) => {
    const other = await h.tenant();
    const otherApi = await newApi(other);
    const [k] = byHash(otherApi, 1);
    expect((await importKeys([k], other.rootKey)).status).toBe(200);
    const before = await snapshot();
    expectError(await importKeys([{ ...k, apiId }]), 409, "CONFLICT", /index 0 already exists/);
    expect(await snapshot()).toEqual(before);
  });

  it("refuses a soft-deleted key's hash, so an id is never reused for a revoked key", async ({ h, apiId, importKeys }) => {
    const [k] = byHash(apiId, 1);
    const res = await importKeys([k]);
    await h.sql(`update keys set deleted_at_m = 1 where id = '${res.body.keyIds[0]}'`);
    expectError(await importKeys([k]), 409, "CONFLICT");
  });

  it("rolls back and names missing roles with 412", async ({ apiId, importKeys, snapshot, createRole }) => {
    await createRole("present.role");
    const before = await snapshot();
    const batch = byHash(apiId, 5).map((k, i) => ({
      ...k,
      roles: i === 3 ? ["present.role", "absent.one", "absent.two"] : ["present.role"],
    }));
    const res = await importKeys(batch);
    expectError(res, 412, "PRECONDITION_FAILED", 'Roles ["absent.one","absent.two"] are missing, please create them first');
    expect(res.body.error.missingRoles).toEqual(["absent.one", "absent.two"]);
    expect(await snapshot()).toEqual(before);
  });

  it("rolls back and names missing permissions with 412", async ({ apiId, importKeys, snapshot }) => {
    const before = await snapshot();
    const batch = byHash(apiId, 3).map((k) => ({ ...k, permissions: ["nobody.has.this"] }));
    const res = await importKeys(batch);
    expectError(res, 412, "PRECONDITION_FAILED", 'Permissions ["nobody.has.this"] are missing, please create them first');
    expect(res.body.error.missingPermissions).toEqual(["nobody.has.this"]);
    expect(await snapshot()).toEqual(before);
  });

  it("does not see roles or permissions of another workspace", async ({ h, apiId, importKeys, createRole, createPermission }) => {
    const other = await h.tenant();
    await createRole("other.workspace.role", other);
    await createPermission("other.workspace.perm", undefined, other);
    expectError(await importKeys([{ ...byHash(apiId, 1)[0], roles: ["other.workspace.role"] }]), 412, "PRECONDITION_FAILED");
    expectError(await importKeys([{ ...byHash(apiId, 1)[0], permissions: ["other.workspace.perm"] }]), 412, "PRECONDITION_FAILED");
  });

  it("matches permissions by name, as v1 imports do", async ({ h, t, apiId, importKeys }) => {
    const res = await h.post("/v1/permissions.createPermission", { name: "billing.read", slug: "billing-read-slug" }, t.rootKey);
    const imported = await importKeys([{ ...byHash(apiId, 1)[0], permissions: ["billing.read"] }]);
    expect(imported.status).toBe(200);
    const links = await h.sql<any>(`select permission_id from keys_permissions where key_id = '${imported.body.keyIds[0]}'`);
    expect(links).toEqual([{ permission_id: res.body.permissionId }]);
  });

  it("refuses an API of another workspace with 404, as if it did not exist, and writes nothing", async ({
    h,
    apiId,
    newApi,
    importKeys,
    snapshot,
  }) => {
    const other = await h.tenant();
    const otherApi = await newApi(other);
    const before = await snapshot();
    expectError(await importKeys([...byHash(apiId, 3), ...byHash(otherApi, 1)]), 404, "NOT_FOUND", `api ${otherApi} not found`);
    expectError(await importKeys(byHash("api_does_not_exist", 1)), 404, "NOT_FOUND", "api api_does_not_exist not found");
    expect(await snapshot()).toEqual(before);
  });

  it("refuses a deleted API with 404", async ({ h, t, newApi, importKeys }) => {
    const gone = await newApi(t);
    await h.sql(`update apis set deleted_at_m = 1 where id = '${gone}'`);
    expectError(await importKeys(byHash(gone, 1)), 404, "NOT_FOUND", `api ${gone} not found`);
  });
});

describe("migrations.createKeys identities", () => {
  it("creates one identity per new externalId in a batch and links every key to it", async ({ h, apiId, importKeys }) => {
    const externalId = `shared-${randomBytes(4).toString("hex")}`;
    const res = await importKeys(byHash(apiId, 5).map((k) => ({ ...k, externalId })));
    expect(res.status).toBe(200);
    const identities = await h.sql<any>(`select id from identities where external_id = '${externalId}'`);
    expect(identities).toHaveLength(1);
    const keys = await h.sql<any>(
      `select distinct identity_id from keys where id in (${res.body.keyIds.map((id: string) => `'${id}'`).join(",")})`,
    );
    expect(keys).toEqual([{ identity_id: identities[0].id }]);
  });

  it("links an existing identity of the workspace instead of creating one", async ({ h, apiId, importKeys, count }) => {
    const externalId = `existing-${randomBytes(4).toString("hex")}`;
    const first = await importKeys([{ ...byHash(apiId, 1)[0], externalId }]);
    const second = await importKeys([{ ...byHash(apiId, 1)[0], externalId }]);
    const rows = await h.sql<any>(
      `select distinct identity_id from keys where id in ('${first.body.keyIds[0]}', '${second.body.keyIds[0]}')`,
    );
    expect(rows).toHaveLength(1);
    expect(await count(`identities where external_id = '${externalId}'`)).toBe(1);
  });

  it("keeps identities apart per workspace", async ({ h, t, apiId, newApi, importKeys }) => {
    const other = await h.tenant();
    const otherApi = await newApi(other);
    const externalId = `per-workspace-${randomBytes(4).toString("hex")}`;
    await importKeys([{ ...byHash(apiId, 1)[0], externalId }]);
    await importKeys([{ ...byHash(otherApi, 1)[0], externalId }], other.rootKey);
    const rows = await h.sql<any>(`select workspace_id from identities where external_id = '${externalId}' order by workspace_id`);
    expect(rows.map((r) => r.workspace_id).sort()).toEqual([t.workspaceId, other.workspaceId].sort());
  });

  it("keeps ownerId as given without creating an identity", async ({ h, apiId, importKeys }) => {
    const res = await importKeys([{ ...byHash(apiId, 1)[0], ownerId: "owner-only" }]);
    const [key] = await h.sql<any>(`select owner_id, identity_id from keys where id = '${res.body.keyIds[0]}'`);
    expect(key).toEqual({ owner_id: "owner-only", identity_id: null });
  });
});

describe("migrations.createKeys permissions of the root key", () => {
  it("accepts api.<apiId>.create_key for that API only, checking every element", async ({ h, t, apiId, newApi, importKeys, snapshot }) => {
    const second = await newApi(t);
    const scoped = await h.rootKey(t.workspaceId, [`api.${apiId}.create_key`]);
    expect((await importKeys(byHash(apiId, 2), scoped)).status).toBe(200);
    const before = await snapshot();
    const res = await importKeys([...byHash(apiId, 2), ...byHash(second, 1)], scoped);
    expectError(
      res,
      403,
      "INSUFFICIENT_PERMISSIONS",
      `the key at index 2 needs one of the permissions "*", "api.*.create_key" or "api.${second}.create_key"`,
    );
    expect(res.body.error.keyIndex).toBe(2);
    expect(await snapshot()).toEqual(before);
  });

  it("accepts api.*.create_key or api.<apiId>.create_key alone, for a hash and a plaintext alike (as upstream's own tests import)", async ({
    h,
    t,
    apiId,
    importKeys,
  }) => {
    for (const permission of ["api.*.create_key", `api.${apiId}.create_key`]) {
      const creator = await h.rootKey(t.workspaceId, [permission]);
      const res = await importKeys([...byHash(apiId, 1), { apiId, plaintext: `p_${randomHash()}` }], creator);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.keyIds).toHaveLength(2);
    }
  });

  it("retrieves a key imported in plain text with create_key alone: getKey decrypts it for a root key with decrypt_key", async ({
    h,
    t,
    apiId,
    importKeys,
  }) => {
    const plaintext = `sk_${randomHash()}`;
    const creator = await h.rootKey(t.workspaceId, [`api.${apiId}.create_key`]);
    const res = await importKeys([{ apiId, plaintext }], creator);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const keyId = res.body.keyIds[0];
    const decrypter = await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`, `api.${apiId}.decrypt_key`]);
    const got = await h.get("/v1/keys.getKey", { keyId, decrypt: "true" }, decrypter);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body).toMatchObject({ id: keyId, apiId, plaintext });
    expect((await h.post("/v1/keys.verifyKey", { key: plaintext, apiId })).body).toMatchObject({ valid: true, keyId });
  });

  it("never creates a key for a root key holding only encrypt_key, plaintext or not (v1 did for plaintext)", async ({
    h,
    t,
    apiId,
    importKeys,
    snapshot,
  }) => {
    const encryptOnly = await h.rootKey(t.workspaceId, [`api.${apiId}.encrypt_key`, "api.*.encrypt_key"]);
    const before = await snapshot();
    expectError(await importKeys([{ apiId, plaintext: `p_${randomHash()}` }], encryptOnly), 403, "INSUFFICIENT_PERMISSIONS");
    expectError(await importKeys(byHash(apiId, 1), encryptOnly), 403, "INSUFFICIENT_PERMISSIONS");
    expect(await snapshot()).toEqual(before);
  });

  it("checks the root key's permissions before the roles and permissions it names, which it cannot probe", async ({
    h,
    t,
    apiId,
    importKeys,
    createRole,
  }) => {
    await createRole("existing.role.probe");
    const weak = await h.rootKey(t.workspaceId, ["api.*.read_key"]);
    for (const roles of [["missing.role.x"], ["existing.role.probe"]]) {
      expectError(
        await importKeys([{ ...byHash(apiId, 1)[0], roles }], weak),
        403,
        "INSUFFICIENT_PERMISSIONS",
        /^the key at index 0 needs /,
      );
    }
    expectError(await importKeys([{ ...byHash(apiId, 1)[0], permissions: ["missing.perm.x"] }], weak), 403, "INSUFFICIENT_PERMISSIONS");
  });
});

describe("migrations.createKeys with many role and permission names", () => {
  it("answers 100 keys naming 1,000 distinct missing roles each with 400 naming the per-request bound, not a 500", async ({
    apiId,
    importKeys,
    snapshot,
  }) => {
    const names = (key: number, kind: string) => Array.from({ length: 1000 }, (_, i) => `${kind}${(key * 1000 + i).toString(36)}`);
    const before = await snapshot();
    const roles = byHash(apiId, 100).map((k, i) => ({ ...k, roles: names(i, "r") }));
    expectError(
      await importKeys(roles),
      400,
      "BAD_REQUEST",
      "the request names 100000 distinct roles and permissions; one request may name at most 2000: send fewer keys per request",
    );
    const permissions = byHash(apiId, 100).map((k, i) => ({ ...k, permissions: names(i, "p") }));
    expectError(await importKeys(permissions), 400, "BAD_REQUEST", /^the request names 100000 distinct/);
    expect(await snapshot()).toEqual(before);
  });

  it("answers 2 keys naming 1,000 distinct missing roles each (the bound) with 412 listing all 2,000", async ({
    apiId,
    importKeys,
    snapshot,
  }) => {
    const names = (key: number, kind: string) => Array.from({ length: 1000 }, (_, i) => `${kind}${(key * 1000 + i).toString(36)}`);
    const before = await snapshot();
    const res = await importKeys(byHash(apiId, 2).map((k, i) => ({ ...k, roles: names(i, "r") })));
    expectError(res, 412, "PRECONDITION_FAILED", /^Roles \["r0","r1",.*"r\w+"\] are missing, please create them first$/);
    expect(JSON.parse(res.body.error.message.slice("Roles ".length, -" are missing, please create them first".length))).toHaveLength(2_000);
    expect(await snapshot()).toEqual(before);
  });
});

describe("migrations.createKeys without an encryption key", () => {
  it("refuses plaintext with 412 but still imports hashes", async () => {
    const noKey = await createHarness({ KEYHAVEN_ENCRYPTION_KEY: "" });
    try {
      const tenant = await noKey.tenant();
      const api = (await noKey.post("/v1/apis.createApi", { name: "no-encryption" }, tenant.rootKey)).body.apiId;
      const res = await noKey.post("/v1/migrations.createKeys", [{ apiId: api, plaintext: "plain-key-123" }], tenant.rootKey);
      expectError(res, 412, "PRECONDITION_FAILED", /KEYHAVEN_ENCRYPTION_KEY/);
      expect(Number((await noKey.sql<any>("select count(*) as n from keys"))[0].n)).toBe(0);
      const ok = await noKey.post(
        "/v1/migrations.createKeys",
        [{ apiId: api, hash: { value: randomHash(), variant: "sha256_base64" } }],
        tenant.rootKey,
      );
      expect(ok.status).toBe(200);
    } finally {
      await noKey.close();
    }
  });
});

describe("migrations.createKeys writes the columns schema.ts declares", () => {
  it("plans a value for every column but those an import leaves to their default, so a new column is decided on", () => {
    const plan = planImport(
      [
        {
          apiId: "api_x",
          hash: { value: randomHash(), variant: "sha256_base64" },
          roles: ["r"],
          permissions: ["p"],
          ratelimit: { limit: 1, refillRate: 1, refillInterval: 1000 },
        },
      ],
      {
        workspaceId: "ws_x",
        roleIds: new Map([["r", "role_x"]]),
        permissionIds: new Map([["p", "perm_x"]]),
        keyring: {} as Keyring,
        dataKey: undefined,
        now: 1,
      },
    );
    const unset = (table: Table, row: object) =>
      Object.keys(getTableColumns(table))
        .filter((field) => !Object.hasOwn(row, field))
        .sort();
    // adoptedAtM: an imported key comes with its hash, so it is never one a verification adopted (null). creditsStart:
    // set by the keys_credits_start trigger when the credits first change (they are as imported until then).
    expect(unset(keys, plan.keys[0]!)).toEqual(["adoptedAtM", "creditsStart", "deletedAtM", "lastRefillAt", "updatedAtM"]);
    // Links and default rate limits are planned as what they connect; their one writer (insertKeyLinks,
    // setKeyDefaultRatelimits, shared with keys.createKey) builds the rows.
    const keyId = plan.keys[0]!.id;
    expect(plan.keyRoles).toEqual([{ keyId, id: "role_x", workspaceId: "ws_x" }]);
    expect(plan.keyPermissions).toEqual([{ keyId, id: "perm_x", workspaceId: "ws_x" }]);
    expect(plan.ratelimits).toEqual([{ keyId, workspaceId: "ws_x", limit: 1, duration: 1000 }]);
  });
});
