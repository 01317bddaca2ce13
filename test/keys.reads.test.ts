import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { answersNotFound, describeRootKeyAuthOf, rowsOf } from "./auth-suite.js";
import { test } from "./fixtures.js";
import { expectError, type Harness, type Tenant } from "./helper.js";

const secret = () => `sk_${randomBytes(16).toString("hex")}`;
const randomHash = () => hashKey(randomBytes(16).toString("hex"));
const byHash = (api: string, fields: Record<string, unknown> = {}) => ({
  apiId: api,
  hash: { value: randomHash(), variant: "sha256_base64" },
  ...fields,
});

async function importKeys(h: Harness, tenant: Tenant, items: Record<string, unknown>[]): Promise<string[]> {
  const res = await h.post("/v1/migrations.createKeys", items, tenant.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.keyIds;
}
// The file's harness, tenant and API (`h`, `t`, `apiId` of test/fixtures.ts), and helpers over them; those a
// suite's it.beforeAll uses are file-scoped (closures over the file's h, t and apiId).
const it = test
  .extend(
    "importOne",
    { scope: "file" },
    async ({ h, t, apiId }) =>
      async (fields: Record<string, unknown>) =>
        (await importKeys(h, t, [{ apiId, ...fields }]))[0]!,
  )
  /** `null` sends no Authorization header at all. */
  .extend("getKey", async ({ route }) => route("/v1/keys.getKey"))
  .extend("listKeys", async ({ route }) => route("/v1/apis.listKeys"))
  .extend("whoami", async ({ route }) => route("/v1/keys.whoami"))
  .extend(
    "grantToRole",
    { scope: "file" },
    async ({ h, t }) =>
      (roleId: string, permissionId: string) =>
        h.sql(`insert into roles_permissions (role_id, permission_id, workspace_id, created_at_m)
         values ('${roleId}', '${permissionId}', '${t.workspaceId}', 0)`),
  )
  .extend(
    "softDelete",
    async ({ h }) =>
      (keyId: string) =>
        h.sql(`update keys set deleted_at_m = 1 where id = '${keyId}'`),
  );

const todayMidnightUtc = () => {
  const d = new Date();
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
};

describe("the key object", () => {
  let fullKeyId: string;
  const fullPlaintext = `sk_${randomBytes(16).toString("hex")}`;
  const expires = Date.now() + 7 * 86_400_000;
  let identityId: string;

  it.beforeAll(async ({ h, importOne, createRole, createPermission, grantToRole }) => {
    const adminRole = await createRole("reads.admin");
    await createRole("reads.viewer");
    const read = await createPermission("documents.read");
    await createPermission("documents.write", "docs.write");
    const audit = await createPermission("audit.read");
    await grantToRole(adminRole, read);
    await grantToRole(adminRole, audit);

    fullKeyId = await importOne({
      plaintext: fullPlaintext,
      prefix: "sk",
      name: "Customer key",
      ownerId: "legacy-owner",
      externalId: "reads-customer",
      meta: { plan: "pro", nested: { seats: 3, tags: ["a", "b"] } },
      roles: ["reads.viewer", "reads.admin"],
      permissions: ["documents.write", "documents.read"],
      expires,
      remaining: 500,
      refill: { interval: "monthly", amount: 1000, refillDay: 15 },
      ratelimit: { type: "fast", limit: 10, refillRate: 10, refillInterval: 60_000 },
      enabled: false,
      environment: "production",
    });
    const [row] = await h.sql<{ identity_id: string }>(`select identity_id from keys where id = '${fullKeyId}'`);
    identityId = row!.identity_id;
    await h.sql(`update identities set meta = '{"tier":"gold"}'::jsonb where id = '${identityId}'`);
    await h.sql(`update keys set updated_at_m = 1760000000000, last_refill_at = now() where id = '${fullKeyId}'`);
  });

  const expectedFullKey = async (h: Harness, t: Tenant, apiId: string) => {
    const [row] = await h.sql<{ created_at_m: string; last_refill_at: string }>(
      `select created_at_m, last_refill_at from keys where id = '${fullKeyId}'`,
    );
    return {
      id: fullKeyId,
      start: fullPlaintext.slice(0, 7),
      workspaceId: t.workspaceId,
      apiId,
      name: "Customer key",
      ownerId: "legacy-owner",
      meta: { plan: "pro", nested: { seats: 3, tags: ["a", "b"] } },
      createdAt: Number(row!.created_at_m),
      updatedAt: 1760000000000,
      expires,
      remaining: 500,
      refill: { interval: "monthly", amount: 1000, refillDay: 15, lastRefillAt: new Date(row!.last_refill_at).getTime() },
      ratelimit: { async: false, limit: 10, duration: 60_000, refillRate: 10, refillInterval: 60_000 },
      roles: ["reads.admin", "reads.viewer"],
      enabled: false,
      identity: { id: identityId, externalId: "reads-customer", meta: { tier: "gold" } },
      environment: "production",
    };
  };

  it("keys.getKey returns every field, with the key's direct permissions by name", async ({ h, t, apiId, getKey }) => {
    const res = await getKey({ keyId: fullKeyId });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ ...(await expectedFullKey(h, t, apiId)), permissions: ["documents.read", "documents.write"] });
  });

  it("apis.listKeys returns the same object, with direct and role-derived permissions by slug, each once", async ({
    h,
    t,
    apiId,
    listKeys,
  }) => {
    const res = await listKeys({ apiId, externalId: "reads-customer" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      keys: [{ ...(await expectedFullKey(h, t, apiId)), permissions: ["audit.read", "docs.write", "documents.read"] }],
      total: 1,
    });
  });

  it("omits every absent field of a minimal key instead of sending null", async ({ h, t, apiId, getKey }) => {
    const [keyId] = await importKeys(h, t, [byHash(apiId)]);
    const res = await getKey({ keyId: keyId! });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: keyId,
      start: "",
      workspaceId: t.workspaceId,
      apiId,
      createdAt: expect.any(Number),
      roles: [],
      permissions: [],
      enabled: true,
    });
    expect(JSON.stringify(res.body)).not.toContain("null");
  });

  it("reports a daily refill with refillDay null, as v1 does, and no lastRefillAt before the first refill", async ({
    apiId,
    importOne,
    getKey,
  }) => {
    const keyId = await importOne(byHash(apiId, { remaining: 3, refill: { interval: "daily", amount: 7 } }));
    const res = await getKey({ keyId });
    expect(res.body.remaining).toBe(3);
    expect(res.body.refill).toEqual({ interval: "daily", amount: 7, refillDay: null });
  });

  it("omits an identity's meta when it has none", async ({ apiId, importOne, getKey }) => {
    const keyId = await importOne(byHash(apiId, { externalId: `no-meta-${randomBytes(3).toString("hex")}` }));
    const res = await getKey({ keyId });
    expect(res.body.identity).toEqual({ id: expect.any(String), externalId: expect.stringMatching(/^no-meta-/) });
  });

  it("reports only the rate limit named default, in v1's shape", async ({ h, t, apiId, importOne, getKey }) => {
    const keyId = await importOne(byHash(apiId));
    await h.sql(`insert into ratelimits (id, workspace_id, name, key_id, "limit", duration, auto_apply, created_at_m)
                 values ('rl_other_${keyId}', '${t.workspaceId}', 'search', '${keyId}', 5, 1000, false, 0)`);
    expect((await getKey({ keyId })).body.ratelimit).toBeUndefined();
    await h.sql(`insert into ratelimits (id, workspace_id, name, key_id, "limit", duration, auto_apply, created_at_m)
                 values ('rl_default_${keyId}', '${t.workspaceId}', 'default', '${keyId}', 20, 5000, true, 0)`);
    expect((await getKey({ keyId })).body.ratelimit).toEqual({
      async: false,
      limit: 20,
      duration: 5000,
      refillRate: 20,
      refillInterval: 5000,
    });
  });
});

describe("remaining is reported with due refills applied, without writing", () => {
  it("shows a daily refill that is due on getKey, listKeys and whoami alike", async ({
    h,
    apiId,
    importOne,
    getKey,
    listKeys,
    whoami,
    backdate,
  }) => {
    const plaintext = secret();
    const keyId = await importOne({
      plaintext,
      externalId: `refill-${randomBytes(3).toString("hex")}`,
      remaining: 2,
      refill: { interval: "daily", amount: 10 },
    });
    await backdate(keyId, 2);

    const got = await getKey({ keyId });
    expect(got.body.remaining).toBe(10);
    expect(got.body.refill).toEqual({ interval: "daily", amount: 10, refillDay: null, lastRefillAt: todayMidnightUtc() });
    const listed = await listKeys({ apiId, externalId: got.body.identity.externalId });
    expect(listed.body.keys[0].remaining).toBe(10);
    expect((await whoami({ key: plaintext })).body.remaining).toBe(10);

    const [row] = await h.sql<any>(`select remaining_requests, last_refill_at from keys where id = '${keyId}'`);
    expect(row).toEqual({ remaining_requests: 2, last_refill_at: null });

    expect((await h.post("/v1/keys.verifyKey", { key: plaintext })).body).toMatchObject({ valid: true, remaining: 9 });
    expect((await getKey({ keyId })).body.remaining).toBe(9);
  });

  it("does not refill a key whose refill is not due yet", async ({ apiId, importOne, getKey }) => {
    const keyId = await importOne(byHash(apiId, { remaining: 2, refill: { interval: "daily", amount: 10 } }));
    expect((await getKey({ keyId })).body.remaining).toBe(2);
  });
});

describe("decrypting keys", () => {
  let plaintext: string;
  let keyId: string;
  let hashedKeyId: string;
  it.beforeAll(async ({ apiId, importOne }) => {
    plaintext = secret();
    keyId = await importOne({ plaintext });
    hashedKeyId = await importOne(byHash(apiId));
  });

  it("returns the plaintext with decrypt=true and the decrypt permission", async ({ h, t, apiId, getKey }) => {
    const res = await getKey({ keyId, decrypt: "true" });
    expect(res.status).toBe(200);
    expect(res.body.plaintext).toBe(plaintext);
    const scoped = await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`, `api.${apiId}.decrypt_key`]);
    expect((await getKey({ keyId, decrypt: "true" }, scoped)).body.plaintext).toBe(plaintext);
  });

  it("reads decrypt=false as false, and never sends the plaintext unasked", async ({ apiId, getKey, listKeys }) => {
    for (const query of [{ keyId, decrypt: "false" }, { keyId }] as Record<string, string>[]) {
      const res = await getKey(query);
      expect(res.status).toBe(200);
      expect(res.body).not.toHaveProperty("plaintext");
    }
    const listed = await listKeys({ apiId, decrypt: "false" });
    expect(listed.status).toBe(200);
    expect(listed.body.keys.some((k: any) => "plaintext" in k)).toBe(false);
  });

  it("refuses decrypt values other than true and false", async ({ apiId, getKey, listKeys }) => {
    for (const decrypt of ["1", "yes", "", "TRUE"]) {
      expectError(await getKey({ keyId, decrypt }), 400, "BAD_REQUEST", /^decrypt: /);
      expectError(await listKeys({ apiId, decrypt }), 400, "BAD_REQUEST", /^decrypt: /);
    }
  });

  it("refuses decrypt=true without the decrypt permission (403 UNAUTHORIZED), while reading stays allowed", async ({
    h,
    t,
    apiId,
    getKey,
    listKeys,
  }) => {
    const reader = await h.rootKey(t.workspaceId, ["api.*.read_key", "api.*.read_api", "api.other.decrypt_key"]);
    expectError(await getKey({ keyId, decrypt: "true" }, reader), 403, "UNAUTHORIZED", "you're not allowed to decrypt this key");
    expectError(await listKeys({ apiId, decrypt: "true" }, reader), 403, "UNAUTHORIZED", "you're not allowed to decrypt this key");
    expect((await getKey({ keyId }, reader)).status).toBe(200);
    expect((await listKeys({ apiId }, reader)).status).toBe(200);
  });

  it("has no plaintext for a key imported by hash", async ({ getKey }) => {
    const res = await getKey({ keyId: hashedKeyId, decrypt: "true" });
    expect(res.status).toBe(200);
    expect(res.body).not.toHaveProperty("plaintext");
  });

  it("decrypts every stored key of a listed page, and only those", async ({ h, apiId, listKeys }) => {
    const res = await listKeys({ apiId, decrypt: "true" });
    expect(res.status).toBe(200);
    const byId = new Map(res.body.keys.map((k: any) => [k.id, k]));
    expect((byId.get(keyId) as any).plaintext).toBe(plaintext);
    expect(byId.get(hashedKeyId)).not.toHaveProperty("plaintext");
    const ids = res.body.keys.map((k: any) => `'${k.id}'`).join(",");
    const [stored] = await h.sql<{ n: string }>(`select count(*) as n from encrypted_keys where key_id in (${ids})`);
    expect(res.body.keys.filter((k: any) => k.plaintext !== undefined)).toHaveLength(Number(stored!.n));
  });
});

describe("keys.getKey authenticates before looking the key up", () => {
  it("asks for a root key whether or not the key exists; with one, an unknown key is 404", async ({ apiId, importOne, getKey }) => {
    const keyId = await importOne(byHash(apiId));
    expectError(await getKey({ keyId }, null), 403, "UNAUTHORIZED", "key required");
    expectError(await getKey({ keyId: "key_does_not_exist" }, null), 403, "UNAUTHORIZED", "key required");
    expectError(await getKey({ keyId: "key_does_not_exist" }), 404, "NOT_FOUND", "key key_does_not_exist not found");
  });

  it("answers a soft-deleted key as unknown", async ({ apiId, importOne, getKey, softDelete }) => {
    const keyId = await importOne(byHash(apiId));
    await softDelete(keyId);
    expectError(await getKey({ keyId }), 404, "NOT_FOUND", `key ${keyId} not found`);
  });

  it("answers another workspace's key exactly as an unknown one, whatever that root key may do", async ({
    h,
    apiId,
    importOne,
    getKey,
  }) => {
    const keyId = await importOne(byHash(apiId));
    const other = await h.tenant();
    const weakOther = await h.rootKey(other.workspaceId, ["api.*.create_api"]);
    for (const rootKey of [other.rootKey, weakOther]) {
      expectError(await getKey({ keyId }, rootKey), 404, "NOT_FOUND", `key ${keyId} not found`);
      expectError(await getKey({ keyId, decrypt: "true" }, rootKey), 404, "NOT_FOUND", `key ${keyId} not found`);
    }
  });

  it("needs read_key on the key's API", async ({ h, t, apiId, importOne, getKey }) => {
    const keyId = await importOne(byHash(apiId));
    const elsewhere = await h.rootKey(t.workspaceId, ["api.api_other.read_key", "api.*.read_api"]);
    expectError(await getKey({ keyId }, elsewhere), 403, "INSUFFICIENT_PERMISSIONS");
    const scoped = await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]);
    expect((await getKey({ keyId }, scoped)).status).toBe(200);
  });

  it("refuses a missing or empty keyId with a 400", async ({ getKey }) => {
    expectError(await getKey({}), 400, "BAD_REQUEST", /^keyId: /);
    expectError(await getKey({ keyId: "" }), 400, "BAD_REQUEST", /^keyId: /);
  });
});

describe("keys.whoami", () => {
  it("tells which key a secret is", async ({ h, importOne, whoami }) => {
    const plaintext = secret();
    const externalId = `who-${randomBytes(3).toString("hex")}`;
    const keyId = await importOne({
      plaintext,
      name: "who",
      externalId,
      meta: { team: "core" },
      remaining: 40,
      environment: "staging",
      roles: [],
    });
    const [row] = await h.sql<any>(`select identity_id, created_at_m from keys where id = '${keyId}'`);
    const res = await whoami({ key: plaintext });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      id: keyId,
      name: "who",
      remaining: 40,
      identity: { id: row.identity_id, externalId },
      meta: { team: "core" },
      createdAt: Number(row.created_at_m),
      enabled: true,
      environment: "staging",
    });
  });

  it("omits absent fields and an empty meta", async ({ importOne, whoami }) => {
    const plaintext = secret();
    const keyId = await importOne({ plaintext, meta: {}, enabled: false });
    const res = await whoami({ key: plaintext });
    expect(res.body).toEqual({ id: keyId, createdAt: expect.any(Number), enabled: false });
  });

  it("answers 404 for an unknown or deleted key, before asking for a root key", async ({ importOne, whoami, softDelete }) => {
    expectError(await whoami({ key: secret() }, null), 404, "NOT_FOUND", "Key not found");
    const plaintext = secret();
    const keyId = await importOne({ plaintext });
    expectError(await whoami({ key: plaintext }, null), 403, "UNAUTHORIZED", "key required");
    await softDelete(keyId);
    expectError(await whoami({ key: plaintext }), 404, "NOT_FOUND", "Key not found");
  });

  it("answers another workspace's key exactly as an unknown one", async ({ h, importOne, whoami }) => {
    const plaintext = secret();
    await importOne({ plaintext });
    const other = await h.tenant();
    expectError(await whoami({ key: plaintext }, other.rootKey), 404, "NOT_FOUND", "Key not found");
  });

  it("refuses a missing or empty key with a 400", async ({ whoami }) => {
    expectError(await whoami({}), 400, "BAD_REQUEST", /^key: /);
    expectError(await whoami({ key: "" }), 400, "BAD_REQUEST", /^key: /);
  });
});

describe("apis.listKeys", () => {
  it("pages through 250 keys by id: each once, in order, with a cursor until the last page and the exact total", async ({
    h,
    t,
    newApi,
    listKeys,
  }) => {
    const api = await newApi(t);
    for (let i = 0; i < 3; i++) {
      await importKeys(
        h,
        t,
        Array.from({ length: i < 2 ? 100 : 50 }, () => byHash(api)),
      );
    }
    const expected = (await h.sql<{ id: string }>(`select id from keys where api_id = '${api}' order by id`)).map((r) => r.id);
    expect(expected).toHaveLength(250);

    const seen: string[] = [];
    const pages: { size: number; cursor: string | undefined; total: number }[] = [];
    let cursor: string | undefined;
    do {
      const res = await listKeys({ apiId: api, ...(cursor && { cursor }) });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      seen.push(...res.body.keys.map((k: any) => k.id));
      pages.push({ size: res.body.keys.length, cursor: res.body.cursor, total: res.body.total });
      if (res.body.cursor !== undefined) expect(res.body.cursor).toBe(res.body.keys.at(-1).id);
      cursor = res.body.cursor;
    } while (cursor !== undefined);

    expect(pages.map((p) => [p.size, p.total])).toEqual([
      [100, 250],
      [100, 250],
      [50, 250],
    ]);
    expect(pages.at(-1)!.cursor).toBeUndefined();
    expect(seen).toEqual(expected);

    const small = await listKeys({ apiId: api, limit: "7", cursor: expected[9]! });
    expect(small.body.keys.map((k: any) => k.id)).toEqual(expected.slice(10, 17));
    expect(small.body).toMatchObject({ cursor: expected[16], total: 250 });

    const exact = await listKeys({ apiId: api, limit: "50", cursor: expected[199]! });
    expect(exact.body.keys).toHaveLength(50);
    expect(exact.body).not.toHaveProperty("cursor");

    const past = await listKeys({ apiId: api, cursor: expected[249]! });
    expect(past.body).toEqual({ keys: [], total: 250 });
  });

  it("leaves out soft-deleted keys, from the page and from the total", async ({ h, t, newApi, listKeys, softDelete }) => {
    const api = await newApi(t);
    const ids = await importKeys(h, t, [byHash(api), byHash(api), byHash(api)]);
    await softDelete(ids[1]!);
    const res = await listKeys({ apiId: api });
    expect(res.body.keys.map((k: any) => k.id).sort()).toEqual([ids[0], ids[2]].sort());
    expect(res.body.total).toBe(2);
  });

  it("filters by ownerId and by externalId, externalId winning, with totals that match", async ({ h, t, newApi, listKeys }) => {
    const api = await newApi(t);
    const [a1, a2, b1, , c1] = await importKeys(h, t, [
      byHash(api, { ownerId: "owner-a" }),
      byHash(api, { ownerId: "owner-a" }),
      byHash(api, { ownerId: "owner-b", externalId: "ext-b" }),
      byHash(api),
      byHash(api, { externalId: "ext-c" }),
    ]);
    const ids = async (query: Record<string, string>) => {
      const res = await listKeys({ apiId: api, ...query });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return { ids: res.body.keys.map((k: any) => k.id).sort(), total: res.body.total };
    };
    expect(await ids({ ownerId: "owner-a" })).toEqual({ ids: [a1, a2].sort(), total: 2 });
    expect(await ids({ ownerId: "owner-a", limit: "1" })).toMatchObject({ total: 2 });
    expect(await ids({ externalId: "ext-b" })).toEqual({ ids: [b1], total: 1 });
    expect(await ids({ externalId: "ext-c", ownerId: "owner-a" })).toEqual({ ids: [c1], total: 1 });
    expect(await ids({ ownerId: "nobody" })).toEqual({ ids: [], total: 0 });
    expect(await listKeys({ apiId: api, externalId: "unknown-external-id" }).then((r) => r.body)).toEqual({
      keys: [],
      total: 0,
    });
  });

  it("never matches another workspace's identity by externalId", async ({ h, t, newApi, listKeys }) => {
    const other = await h.tenant();
    const otherApi = await newApi(other);
    await importKeys(h, other, [byHash(otherApi, { externalId: "shared-external-id" })]);
    const api = await newApi(t);
    await importKeys(h, t, [byHash(api)]);
    expect((await listKeys({ apiId: api, externalId: "shared-external-id" })).body).toEqual({ keys: [], total: 0 });
  });

  it("answers 404 for an unknown, deleted or foreign API, in the same words", async ({ h, t, newApi, listKeys }) => {
    expectError(await listKeys({ apiId: "api_missing" }), 404, "NOT_FOUND", "api api_missing not found");
    const other = await h.tenant();
    const otherApi = await newApi(other);
    await importKeys(h, other, [byHash(otherApi)]);
    expectError(await listKeys({ apiId: otherApi }), 404, "NOT_FOUND", `api ${otherApi} not found`);
    const deleted = await newApi(t);
    await h.sql(`update apis set deleted_at_m = 1 where id = '${deleted}'`);
    expectError(await listKeys({ apiId: deleted }), 404, "NOT_FOUND", `api ${deleted} not found`);
  });

  it("needs both read_key and read_api on the API (or *)", async ({ h, t, apiId, listKeys }) => {
    const refused = [["api.*.read_key"], ["api.*.read_api"], [`api.${apiId}.read_key`, "api.other.read_api"]];
    for (const permissions of refused) {
      const rootKey = await h.rootKey(t.workspaceId, permissions);
      expectError(await listKeys({ apiId }, rootKey), 403, "INSUFFICIENT_PERMISSIONS");
    }
    const allowed = [["*"], ["api.*.read_key", "api.*.read_api"], [`api.${apiId}.read_key`, "api.*.read_api"]];
    for (const permissions of allowed) {
      const rootKey = await h.rootKey(t.workspaceId, permissions);
      expect((await listKeys({ apiId }, rootKey)).status).toBe(200);
    }
  });

  it("validates its query: apiId required, limit an integer from 1 to 100", async ({ apiId, listKeys }) => {
    expectError(await listKeys({}), 400, "BAD_REQUEST", /^apiId: /);
    expectError(await listKeys({ apiId: "" }), 400, "BAD_REQUEST", /^apiId: /);
    for (const limit of ["0", "101", "-1", "abc", "1.5", ""]) {
      expectError(await listKeys({ apiId, limit }), 400, "BAD_REQUEST", /^limit: /);
    }
    expectError(await listKeys({ apiId, ownerId: "" }), 400, "BAD_REQUEST", /^ownerId: /);
    expectError(await listKeys({ apiId, revalidateKeysCache: "maybe" }), 400, "BAD_REQUEST", /^revalidateKeysCache: /);
    expect((await listKeys({ apiId, limit: "1", revalidateKeysCache: "true" })).body.keys).toHaveLength(1);
    expect((await listKeys({ apiId, limit: "100" })).status).toBe(200);
  });

  it("refuses a NUL character in any text parameter with a 400, on both GET routes", async ({ apiId, getKey, listKeys }) => {
    for (const field of ["apiId", "cursor", "ownerId", "externalId"]) {
      expectError(
        await listKeys({ apiId, [field]: "a\u0000b" }),
        400,
        "BAD_REQUEST",
        `${field}: must not contain the NUL character or unpaired surrogates`,
      );
    }
    expectError(
      await getKey({ keyId: "key_\u0000" }),
      400,
      "BAD_REQUEST",
      "keyId: must not contain the NUL character or unpaired surrogates",
    );
  });
});

describeRootKeyAuthOf(it, { countRows: rowsOf("keys") }, [
  {
    method: "GET",
    path: "/v1/keys.getKey",
    async validRequest(h, owner) {
      const [keyId] = await importKeys(h, owner, [byHash(await h.createApi(owner))]);
      return { query: { keyId: keyId! } };
    },
    insufficientPermissions: ["api.*.read_api", "api.*.decrypt_key", "api.other.read_key"],
    missingRequest: (valid) => ({ query: { ...valid.query, keyId: "key_missing0000000000" } }),
    expectForOtherWorkspace: answersNotFound(/^key key_\w+ not found$/),
  },
  {
    method: "POST",
    path: "/v1/keys.whoami",
    async validRequest(h, owner) {
      const key = secret();
      await importKeys(h, owner, [{ apiId: await h.createApi(owner), plaintext: key }]);
      return { body: { key } };
    },
    insufficientPermissions: ["api.*.read_api", "api.*.verify_key", "api.other.read_key"],
    expectForOtherWorkspace: answersNotFound("Key not found"),
  },
  {
    method: "GET",
    path: "/v1/apis.listKeys",
    async validRequest(h, owner) {
      const api = await h.createApi(owner);
      await importKeys(h, owner, [byHash(api)]);
      return { query: { apiId: api } };
    },
    insufficientPermissions: ["api.*.read_key", "api.other.read_api"],
    expectForOtherWorkspace: answersNotFound(/^api api_\w+ not found$/),
  },
]);
