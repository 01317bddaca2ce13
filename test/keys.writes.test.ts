import { randomBytes } from "node:crypto";
import bs58 from "bs58";
import { describe, expect } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { answersNotFound, describeRootKeyAuth, rowsOf } from "./auth-suite.js";
import { inClear, storedCiphertext, test } from "./fixtures.js";
import { expectError, type Harness } from "./helper.js";

const MAX_INT32 = 2_147_483_647;
const suffix = () => randomBytes(4).toString("hex");

/** The random bytes of a generated key: base58 of `[1, N, N bytes]` after the prefix. */
function decodeKey(key: string, prefix?: string): Buffer {
  let body = key;
  if (prefix !== undefined) {
    expect(key.startsWith(`${prefix}_`)).toBe(true);
    body = key.slice(prefix.length + 1);
  }
  expect(body).toMatch(/^[1-9A-HJ-NP-Za-km-z]+$/);
  const bytes = Buffer.from(bs58.decode(body));
  expect(bytes[0]).toBe(1);
  expect(bytes[1]).toBe(bytes.length - 2);
  return bytes.subarray(2);
}

// The file's harness, tenant and API (`h`, `t`, `apiId` of test/fixtures.ts), and helpers over them.
const it = test
  .extend("createKeyRequest", async ({ route }) => route("/v1/keys.createKey"))
  .extend(
    "createKey",
    async ({ t, apiId, createKeyRequest }) =>
      async (body: Record<string, unknown> = {}, rootKey = t.rootKey): Promise<{ keyId: string; key: string }> => {
        const res = await createKeyRequest({ apiId, ...body }, rootKey);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        return res.body;
      },
  )
  .extend(
    "verify",
    async ({ h }) =>
      (key: string) =>
        h.post("/v1/keys.verifyKey", { key }).then((r) => r.body),
  )
  .extend(
    "keyRow",
    async ({ h }) =>
      async (keyId: string) =>
        (await h.sql<any>(`select * from keys where id = '${keyId}'`))[0],
  )
  .extend("deleteKey", async ({ route }) => route("/v1/keys.deleteKey"))
  .extend("update", async ({ route }) => route("/v1/keys.updateRemaining"))
  .extend(
    "remainingOf",
    async ({ keyRow }) =>
      async (keyId: string) =>
        (await keyRow(keyId)).remaining_requests,
  )
  .extend("deleteApi", async ({ route }) => route("/v1/apis.deleteApi"))
  .extend("deleteKeys", async ({ route }) => route("/v1/apis.deleteKeys"));

describe("keys.createKey stores every field", () => {
  it("round-trips every field to the database and answers only the key id and the key", async ({
    h,
    t,
    apiId,
    count,
    createKeyRequest,
    keyRow,
  }) => {
    const expires = Date.now() + 86_400_000;
    const externalId = `customer-${suffix()}`;
    const res = await createKeyRequest({
      apiId,
      prefix: "acme",
      name: "Customer key",
      byteLength: 32,
      externalId,
      meta: { plan: "pro", nested: { seats: 3, tags: ["a", "b"] } },
      roles: ["writes.admin"],
      permissions: ["writes.documents.read"],
      expires,
      remaining: 500,
      refill: { interval: "monthly", amount: 1000, refillDay: 15 },
      ratelimit: { async: true, limit: 10, duration: 60_000 },
      enabled: false,
      environment: "production",
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(["key", "keyId"]);
    const { keyId, key } = res.body;
    expect(keyId).toMatch(/^key_/);
    expect(decodeKey(key, "acme")).toHaveLength(32);

    const row = await keyRow(keyId);
    expect(row).toMatchObject({
      workspace_id: t.workspaceId,
      api_id: apiId,
      hash: hashKey(key),
      start: key.slice(0, "acme_".length + 4),
      prefix: "acme",
      name: "Customer key",
      owner_id: externalId,
      meta: { plan: "pro", nested: { seats: 3, tags: ["a", "b"] } },
      remaining_requests: 500,
      refill_day: 15,
      refill_amount: 1000,
      enabled: false,
      environment: "production",
      deleted_at_m: null,
    });
    expect(new Date(row.expires).getTime()).toBe(expires);
    expect(new Date(row.last_refill_at).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(Number(row.created_at_m)).toBeGreaterThan(Date.now() - 60_000);

    const [identity] = await h.sql<any>(`select * from identities where id = '${row.identity_id}'`);
    expect(identity).toMatchObject({ workspace_id: t.workspaceId, external_id: externalId, environment: "default" });
    expect(await h.sql(`select r.name from keys_roles kr join roles r on r.id = kr.role_id where kr.key_id = '${keyId}'`)).toEqual([
      { name: "writes.admin" },
    ]);
    expect(
      await h.sql(
        `select p.name, p.slug from keys_permissions kp join permissions p on p.id = kp.permission_id where kp.key_id = '${keyId}'`,
      ),
    ).toEqual([{ name: "writes.documents.read", slug: "writes.documents.read" }]);
    const ratelimits = await h.sql<any>(`select name, "limit", duration, auto_apply from ratelimits where key_id = '${keyId}'`);
    expect(ratelimits.map((r) => ({ ...r, duration: Number(r.duration) }))).toEqual([
      { name: "default", limit: 10, duration: 60_000, auto_apply: true },
    ]);
    expect(await count(`encrypted_keys where key_id = '${keyId}'`)).toBe(0);
    // The key itself is stored nowhere: only its hash.
    const dump = await h.sql<{ row: string }>(`select row_to_json(k)::text as row from keys k where id = '${keyId}'`);
    expect(dump[0]!.row).not.toContain(key);
  });

  it("writes a key with nothing to link (its row only) exactly as a key written with its links", async ({ t, createKey, keyRow }) => {
    // A key with no role, permission, identity or rate limit is written in one statement, one with a rate limit in a
    // transaction: every column must come out the same either way.
    const settings = {
      prefix: "solo",
      name: "Row only",
      byteLength: 24,
      meta: { plan: "pro", nested: { seats: 3, tags: ["a", "b"] }, quote: 'it\'s "fine"' },
      expires: Date.now() + 86_400_000,
      remaining: 500,
      refill: { interval: "monthly", amount: 1000, refillDay: 15 },
      enabled: false,
      environment: "production",
    };
    const alone = await keyRow((await createKey(settings)).keyId);
    const linked = await keyRow((await createKey({ ...settings, ratelimit: { limit: 10, duration: 60_000 } })).keyId);
    const comparable = (row: Record<string, unknown>) => {
      const { id: _id, hash: _hash, start, created_at_m, last_refill_at, ...rest } = row;
      return {
        ...rest,
        start: String(start).slice(0, "solo_".length),
        createdRecently: Number(created_at_m) > Date.now() - 60_000,
        refilledRecently: new Date(last_refill_at as string).getTime() > Date.now() - 60_000,
      };
    };
    expect(comparable(alone)).toEqual(comparable(linked));
    expect(alone).toMatchObject({
      workspace_id: t.workspaceId,
      meta: settings.meta,
      enabled: false,
      identity_id: null,
      updated_at_m: null,
    });
    expect(new Date(alone.expires).getTime()).toBe(settings.expires);

    const plain = await keyRow((await createKey({})).keyId);
    expect(plain).toMatchObject({ enabled: true, prefix: null, name: null, meta: null, remaining_requests: null, last_refill_at: null });
  });

  it("applies the defaults: 16 random bytes, no prefix, enabled, unlimited, no identity", async ({ count, createKey, keyRow }) => {
    const { keyId, key } = await createKey();
    expect(decodeKey(key)).toHaveLength(16);
    expect(await keyRow(keyId)).toMatchObject({
      start: key.slice(0, 5),
      prefix: null,
      name: null,
      owner_id: null,
      identity_id: null,
      meta: null,
      expires: null,
      remaining_requests: null,
      refill_day: null,
      refill_amount: null,
      last_refill_at: null,
      enabled: true,
      environment: null,
    });
    expect(await count(`ratelimits where key_id = '${keyId}'`)).toBe(0);
  });

  it("makes keys of 16 to 255 random bytes, each key different", async ({ createKey }) => {
    const short = await createKey({ byteLength: 16, prefix: "x" });
    const long = await createKey({ byteLength: 255, prefix: "x" });
    expect(decodeKey(short.key, "x")).toHaveLength(16);
    expect(decodeKey(long.key, "x")).toHaveLength(255);
    const keys = await Promise.all(Array.from({ length: 20 }, () => createKey()));
    expect(new Set(keys.map((k) => k.key)).size).toBe(20);
  });

  it("starts `start` with the requested prefix and four characters", async ({ createKey, keyRow }) => {
    const { keyId, key } = await createKey({ prefix: "sk_live" });
    expect(key.startsWith("sk_live_")).toBe(true);
    expect((await keyRow(keyId)).start).toBe(key.slice(0, "sk_live_".length + 4));
  });

  it("uses the API's default prefix and byte length, and (as v1) only five characters of start for them", async ({
    t,
    newApi,
    createKey,
    keyRow,
  }) => {
    const defaults = await newApi(t, { defaultPrefix: "dflt", defaultBytes: 24 });
    const { keyId, key } = await createKey({ apiId: defaults });
    expect(decodeKey(key, "dflt")).toHaveLength(24);
    expect(await keyRow(keyId)).toMatchObject({ start: "dflt_", prefix: "dflt" });

    const overridden = await createKey({ apiId: defaults, prefix: "own", byteLength: 40 });
    expect(decodeKey(overridden.key, "own")).toHaveLength(40);
    expect((await keyRow(overridden.keyId)).start).toBe(overridden.key.slice(0, 8));
  });

  it("stores a daily refill without a refill day, a monthly one on day 1 by default, and expires: 0 as never", async ({
    createKey,
    keyRow,
  }) => {
    const daily = await createKey({ remaining: 3, refill: { interval: "daily", amount: 10 } });
    expect(await keyRow(daily.keyId)).toMatchObject({ refill_day: null, refill_amount: 10, remaining_requests: 3 });
    const monthly = await createKey({ remaining: 3, refill: { interval: "monthly", amount: 10 }, expires: 0 });
    expect(await keyRow(monthly.keyId)).toMatchObject({ refill_day: 1, refill_amount: 10, expires: null });
  });

  it("maps the deprecated refillRate and refillInterval of a rate limit to limit and duration", async ({ h, createKey }) => {
    const { keyId } = await createKey({ ratelimit: { type: "consistent", limit: 5, refillRate: 7, refillInterval: 2000 } });
    const [rl] = await h.sql<any>(`select "limit", duration, auto_apply from ratelimits where key_id = '${keyId}'`);
    expect({ ...rl, duration: Number(rl.duration) }).toEqual({ limit: 5, duration: 2000, auto_apply: true });
  });
});

describe("keys.createKey identities", () => {
  it("creates an identity for ownerId alone, and lets externalId win over ownerId", async ({ h, count, createKey, keyRow }) => {
    const owner = `owner-${suffix()}`;
    const a = await createKey({ ownerId: owner });
    const rowA = await keyRow(a.keyId);
    expect(rowA.owner_id).toBe(owner);
    const [identityA] = await h.sql<any>(`select external_id, meta from identities where id = '${rowA.identity_id}'`);
    expect(identityA).toEqual({ external_id: owner, meta: {} });

    const external = `ext-${suffix()}`;
    const b = await createKey({ ownerId: "ignored-owner", externalId: external });
    const rowB = await keyRow(b.keyId);
    expect(rowB.owner_id).toBe(external);
    expect((await h.sql<any>(`select external_id from identities where id = '${rowB.identity_id}'`))[0].external_id).toBe(external);
    expect(await count(`identities where external_id = 'ignored-owner'`)).toBe(0);
  });

  it("reuses the workspace's identity with that externalId, including one made by an import", async ({
    h,
    t,
    apiId,
    count,
    createKey,
    keyRow,
  }) => {
    const external = `reuse-${suffix()}`;
    const imported = await h.post(
      "/v1/migrations.createKeys",
      [{ apiId, hash: { value: hashKey(`k-${suffix()}`), variant: "sha256_base64" }, externalId: external }],
      t.rootKey,
    );
    expect(imported.status).toBe(200);
    const a = await createKey({ externalId: external });
    const b = await createKey({ externalId: external });
    expect(await count(`identities where external_id = '${external}'`)).toBe(1);
    const [identity] = await h.sql<any>(`select id from identities where external_id = '${external}'`);
    expect((await keyRow(a.keyId)).identity_id).toBe(identity.id);
    expect((await keyRow(b.keyId)).identity_id).toBe(identity.id);
  });

  it("makes one identity when many keys for a new externalId are created at once", async ({ count, createKey, keyRow }) => {
    const external = `concurrent-${suffix()}`;
    const created = await Promise.all(Array.from({ length: 10 }, () => createKey({ externalId: external })));
    expect(await count(`identities where external_id = '${external}'`)).toBe(1);
    const ids = new Set(await Promise.all(created.map(async (k) => (await keyRow(k.keyId)).identity_id)));
    expect(ids.size).toBe(1);
  });

  it("never links an identity of another workspace", async ({ h, newApi, createKey, keyRow }) => {
    const other = await h.tenant();
    const otherApi = await newApi(other);
    const external = `shared-${suffix()}`;
    const mine = await createKey({ externalId: external });
    const theirs = await createKey({ apiId: otherApi, externalId: external }, other.rootKey);
    const [a, b] = [await keyRow(mine.keyId), await keyRow(theirs.keyId)];
    expect(a.identity_id).not.toBe(b.identity_id);
    const [identity] = await h.sql<any>(`select workspace_id from identities where id = '${b.identity_id}'`);
    expect(identity.workspace_id).toBe(other.workspaceId);
  });
});

describe("keys.createKey roles and permissions", () => {
  it("links existing roles by name and permissions by slug, without creating any", async ({ h, t, count, createKey, snapshot }) => {
    const role = `role.${suffix()}`;
    const slug = `docs.${suffix()}`;
    expect((await h.post("/v1/permissions.createRole", { name: role }, t.rootKey)).status).toBe(200);
    const perm = await h.post("/v1/permissions.createPermission", { name: `named.${suffix()}`, slug }, t.rootKey);
    expect(perm.status).toBe(200);
    // create_key alone is enough when nothing has to be created.
    const weak = await h.rootKey(t.workspaceId, ["api.*.create_key"]);
    const before = await snapshot();
    const { keyId } = await createKey({ roles: [role, role], permissions: [slug] }, weak);
    const after = await snapshot();
    expect(after.roles).toBe(before.roles);
    expect(after.permissions).toBe(before.permissions);
    expect(await h.sql(`select permission_id from keys_permissions where key_id = '${keyId}'`)).toEqual([
      { permission_id: perm.body.permissionId },
    ]);
    expect(await count(`keys_roles where key_id = '${keyId}'`)).toBe(1);
  });

  it("creates missing roles and permissions (name = slug) with rbac.*.create_role and rbac.*.create_permission", async ({
    h,
    t,
    count,
    createKey,
  }) => {
    const rootKey = await h.rootKey(t.workspaceId, ["api.*.create_key", "rbac.*.create_role", "rbac.*.create_permission"]);
    const role = `new.role.${suffix()}`;
    const slug = `new.perm.${suffix()}`;
    const { keyId, key } = await createKey({ roles: [role], permissions: [slug] }, rootKey);
    expect(await h.sql(`select workspace_id, name from roles where name = '${role}'`)).toEqual([
      { workspace_id: t.workspaceId, name: role },
    ]);
    expect(await h.sql(`select workspace_id, name, slug from permissions where slug = '${slug}'`)).toEqual([
      { workspace_id: t.workspaceId, name: slug, slug },
    ]);
    expect(await count(`keys_roles where key_id = '${keyId}'`)).toBe(1);
    const res = await h.post("/v1/keys.verifyKey", { key, authorization: { permissions: slug } });
    expect(res.body).toMatchObject({ valid: true, code: "VALID", roles: [role], permissions: [slug] });
  });

  it("creates each new role and permission once when many keys asking for them are created at once", async ({
    apiId,
    count,
    createKeyRequest,
  }) => {
    const names = [`race.a.${suffix()}`, `race.b.${suffix()}`, `race.c.${suffix()}`];
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => {
        const order = i % 2 ? [...names].reverse() : names;
        return createKeyRequest({ apiId, roles: order, permissions: order });
      }),
    );
    for (const res of results) expect(res.status, JSON.stringify(res.body)).toBe(200);
    const list = names.map((n) => `'${n}'`).join(",");
    expect(await count(`roles where name in (${list})`)).toBe(3);
    expect(await count(`permissions where slug in (${list})`)).toBe(3);
    for (const res of results) {
      expect(await count(`keys_roles where key_id = '${res.body.keyId}'`)).toBe(3);
      expect(await count(`keys_permissions where key_id = '${res.body.keyId}'`)).toBe(3);
    }
  });

  it.for<[string, string[], Record<string, unknown>, RegExp]>([
    ["role", ["api.*.create_key", "rbac.*.create_permission"], { roles: ["missing.role"] }, /^roles \["missing.role"\] do not exist/],
    [
      "permission",
      ["api.*.create_key", "rbac.*.create_role"],
      { permissions: ["missing.perm"] },
      /^permissions \["missing.perm"\] do not exist/,
    ],
  ])(
    "refuses a missing %s without the permission to create it (403) and writes nothing at all",
    async ([, perms, body, message], { h, t, apiId, createKeyRequest, snapshot }) => {
      const rootKey = await h.rootKey(t.workspaceId, perms);
      const existingRole = `present.${suffix()}`;
      expect((await h.post("/v1/permissions.createRole", { name: existingRole }, t.rootKey)).status).toBe(200);
      const before = await snapshot();
      const res = await createKeyRequest(
        {
          apiId,
          externalId: `nobody-${suffix()}`,
          ratelimit: { limit: 1, duration: 1000 },
          roles: [existingRole, ...((body as { roles?: string[] }).roles ?? [])],
          // In the role case a new permission is also asked for, which that key may create.
          permissions: (body as { permissions?: string[] }).permissions ?? [`new.allowed.${suffix()}`],
          remaining: 5,
        },
        rootKey,
      );
      expectError(res, 403, "INSUFFICIENT_PERMISSIONS", message);
      expect(await snapshot()).toEqual(before);
    },
  );
});

describe("keys.createKey recoverable keys", () => {
  it("refuses recoverable: true on an API that does not store encrypted keys (412)", async ({ apiId, createKeyRequest, snapshot }) => {
    const before = await snapshot();
    expectError(
      await createKeyRequest({ apiId, recoverable: true }),
      412,
      "PRECONDITION_FAILED",
      `api ${apiId} does not support recoverable keys`,
    );
    expect(await snapshot()).toEqual(before);
  });

  it("refuses recoverable: true without encrypt_key (403) and leaves zero rows in every table", async ({
    h,
    t,
    newApi,
    createKeyRequest,
    snapshot,
  }) => {
    const encrypting = await newApi(t, { storeEncryptedKeys: true });
    const rootKey = await h.rootKey(t.workspaceId, ["api.*.create_key", "rbac.*.create_role", "rbac.*.create_permission"]);
    const before = await snapshot();
    const res = await createKeyRequest(
      {
        apiId: encrypting,
        recoverable: true,
        externalId: `enc-${suffix()}`,
        roles: [`r.${suffix()}`],
        permissions: [`p.${suffix()}`],
        ratelimit: { limit: 3, duration: 1000 },
      },
      rootKey,
    );
    expectError(res, 403, "INSUFFICIENT_PERMISSIONS", /^insufficient permissions to encrypt keys/);
    expect(await snapshot()).toEqual(before);
  });

  it("stores a recoverable key encrypted: the row decrypts to the key, which appears nowhere in clear", async ({
    h,
    t,
    newApi,
    createKey,
    verify,
  }) => {
    const encrypting = await newApi(t, { storeEncryptedKeys: true });
    for (const perms of [["*"], ["api.*.create_key", `api.${encrypting}.encrypt_key`]]) {
      const rootKey = await h.rootKey(t.workspaceId, perms);
      const { keyId, key } = await createKey({ apiId: encrypting, recoverable: true, prefix: "rec" }, rootKey);
      const enc = await storedCiphertext(h, t.workspaceId, keyId);
      expect(enc.workspace_id).toBe(t.workspaceId);
      expect(enc.decrypted).toBe(key);
      expect(await inClear(h, key)).toBe(false);
      expect(await verify(key)).toMatchObject({ valid: true, keyId });
    }
  });
});

describe("keys.createKey is one transaction", () => {
  it("leaves no row anywhere when its last write fails", async ({ h, t, newApi, createKeyRequest, snapshot }) => {
    const encrypting = await newApi(t, { storeEncryptedKeys: true });
    // A fault in the database at the rate-limit insert, after the roles, identity, key and ciphertext were written.
    await h.sql(`alter table ratelimits add constraint test_fault check ("limit" <> 7777) not valid`);
    try {
      const before = await snapshot();
      const res = await createKeyRequest({
        apiId: encrypting,
        recoverable: true,
        externalId: `fault-${suffix()}`,
        roles: [`fault.role.${suffix()}`],
        permissions: [`fault.perm.${suffix()}`],
        ratelimit: { limit: 7777, duration: 1000 },
      });
      expect(res.status).toBe(500);
      expect(await snapshot()).toEqual(before);
    } finally {
      await h.sql(`alter table ratelimits drop constraint test_fault`);
    }
  });
});

describe("keys.createKey refuses bad requests and writes nothing", () => {
  it.for<[Record<string, unknown>, string | RegExp]>([
    [{ remaining: 0 }, "remaining must be greater than 0."],
    [{ remaining: -5 }, "remaining must be greater than 0."],
    [{ refill: { interval: "daily", amount: 10 } }, "remaining must be set if you are using refill."],
    [
      { remaining: 5, refill: { interval: "daily", amount: 10, refillDay: 3 } },
      "when interval is set to 'daily', 'refillDay' must be null.",
    ],
    [{ byteLength: 15 }, /^byteLength: /],
    [{ byteLength: 256 }, /^byteLength: /],
    [{ prefix: "a".repeat(17) }, /^prefix: /],
    [{ ratelimit: { limit: 10 } }, /^ratelimit\.duration: /],
    [{ ratelimit: { limit: 0, duration: 1000 } }, /^ratelimit\.limit: /],
    [{ ratelimit: { limit: 1, duration: 999 } }, /^ratelimit\.duration: /],
    [{ refill: { interval: "weekly", amount: 1 }, remaining: 1 }, /^refill\.interval: /],
    [{ roles: [""] }, /^roles\.0: /],
    [{ expires: 1.5 }, /^expires: /],
    [{ meta: "not an object" }, /^meta: /],
  ])("answers %j with 400", async ([body, message], { apiId, createKeyRequest, snapshot }) => {
    const before = await snapshot();
    expectError(await createKeyRequest({ apiId, ...body }), 400, "BAD_REQUEST", message);
    expect(await snapshot()).toEqual(before);
  });

  it("answers a missing apiId with 400", async ({ createKeyRequest }) => {
    expectError(await createKeyRequest({}), 400, "BAD_REQUEST", /^apiId: /);
  });

  it("answers an unknown API, a deleted one and another workspace's with the same 404", async ({
    h,
    t,
    newApi,
    createKeyRequest,
    snapshot,
  }) => {
    const other = await h.tenant();
    const otherApi = await newApi(other);
    const deleted = await newApi(t);
    expect((await h.post("/v1/apis.deleteApi", { apiId: deleted }, t.rootKey)).status).toBe(200);
    const before = await snapshot();
    for (const id of ["api_missing", deleted, otherApi]) {
      expectError(await createKeyRequest({ apiId: id }), 404, "NOT_FOUND", `api ${id} not found`);
    }
    expect(await snapshot()).toEqual(before);
  });

  it("answers an empty apiId with a wrong root key by authentication first (403 key not found), as the v1 SDK expects", async ({
    createKeyRequest,
  }) => {
    expectError(await createKeyRequest({ apiId: "" }, "wrong_root_key"), 403, "UNAUTHORIZED", "key not found");
  });

  it("checks permissions scoped to one API", async ({ h, t, apiId, newApi, createKeyRequest, createKey }) => {
    const scoped = await h.rootKey(t.workspaceId, [`api.${apiId}.create_key`]);
    await createKey({}, scoped);
    const otherApi = await newApi(t);
    expectError(await createKeyRequest({ apiId: otherApi }, scoped), 403, "INSUFFICIENT_PERMISSIONS");
  });
});

describe("a created key verifies", () => {
  it("verifies VALID with its fields, and counts down its remaining uses", async ({ createKey, verify }) => {
    const externalId = `verify-${suffix()}`;
    const { keyId, key } = await createKey({
      name: "verified",
      meta: { a: 1 },
      remaining: 2,
      externalId,
      environment: "test",
      ratelimit: { limit: 5, duration: 60_000 },
    });
    const first = await verify(key);
    expect(first).toMatchObject({
      valid: true,
      code: "VALID",
      keyId,
      name: "verified",
      ownerId: externalId,
      meta: { a: 1 },
      remaining: 1,
      enabled: true,
      environment: "test",
      identity: { externalId, meta: {} },
      ratelimit: { limit: 5, remaining: 4 },
    });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 0 });
    expect(await verify(key)).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", remaining: 0 });
  });

  it("verifies a disabled key as DISABLED", async ({ createKey, verify }) => {
    const { key } = await createKey({ enabled: false });
    expect(await verify(key)).toMatchObject({ valid: false, code: "DISABLED" });
  });
});

describe("keys.deleteKey", () => {
  it("soft-deletes: the key verifies NOT_FOUND at once and its row stays with deleted_at_m", async ({
    h,
    createKey,
    verify,
    keyRow,
    deleteKey,
  }) => {
    const { keyId, key } = await createKey();
    expect(await verify(key)).toMatchObject({ valid: true });
    const res = await deleteKey({ keyId });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    const res2 = await h.post("/v1/keys.verifyKey", { key });
    expect(res2.body).toEqual({ valid: false, code: "NOT_FOUND", requestId: res2.headers["unkey-request-id"] });
    const row = await keyRow(keyId);
    expect(Number(row.deleted_at_m)).toBeGreaterThan(Date.now() - 60_000);
    expectError(await deleteKey({ keyId }), 404, "NOT_FOUND", `key ${keyId} not found`);
  });

  it("deletes permanently: the row and what hangs on it are gone, and the same key can be imported again", async ({
    h,
    t,
    apiId,
    newApi,
    count,
    createKey,
    verify,
    deleteKey,
  }) => {
    const encrypting = await newApi(t, { storeEncryptedKeys: true });
    const { keyId, key } = await createKey({
      apiId: encrypting,
      recoverable: true,
      roles: [`perm.delete.${suffix()}`],
      permissions: [`perm.delete.${suffix()}`],
      ratelimit: { limit: 1, duration: 1000 },
    });
    expect(await deleteKey({ keyId, permanent: true })).toMatchObject({ status: 200, body: {} });
    expect(await count(`keys where id = '${keyId}'`)).toBe(0);
    for (const table of ["encrypted_keys", "keys_roles", "keys_permissions", "ratelimits"]) {
      expect(await count(`${table} where key_id = '${keyId}'`)).toBe(0);
    }
    expect(await verify(key)).toMatchObject({ valid: false, code: "NOT_FOUND" });

    const imported = await h.post("/v1/migrations.createKeys", [{ apiId, plaintext: key }], t.rootKey);
    expect(imported.status, JSON.stringify(imported.body)).toBe(200);
    expect(await verify(key)).toMatchObject({ valid: true, keyId: imported.body.keyIds[0] });
  });

  it("keeps the hash taken after a soft delete: the same key cannot be imported again", async ({ h, t, apiId, createKey, deleteKey }) => {
    const { keyId, key } = await createKey();
    await deleteKey({ keyId });
    expectError(await h.post("/v1/migrations.createKeys", [{ apiId, plaintext: key }], t.rootKey), 409, "CONFLICT");
  });

  it("authenticates before looking the key up: without a root key an unknown key is 403, as an existing one", async ({ deleteKey }) => {
    expectError(await deleteKey({ keyId: "key_missing" }, ""), 403, "UNAUTHORIZED", "key required");
    expectError(await deleteKey({ keyId: "key_missing" }), 404, "NOT_FOUND", "key key_missing not found");
  });

  it("answers another workspace's key exactly as a missing one, and leaves it alone", async ({
    h,
    createKey,
    verify,
    keyRow,
    deleteKey,
  }) => {
    const other = await h.tenant();
    const { keyId, key } = await createKey();
    for (const permanent of [false, true]) {
      expectError(await deleteKey({ keyId, permanent }, other.rootKey), 404, "NOT_FOUND", `key ${keyId} not found`);
    }
    expect((await keyRow(keyId)).deleted_at_m).toBeNull();
    expect(await verify(key)).toMatchObject({ valid: true });
  });

  it("accepts delete_key scoped to the key's API and refuses it scoped to another", async ({ h, t, apiId, createKey, deleteKey }) => {
    const { keyId } = await createKey();
    const elsewhere = await h.rootKey(t.workspaceId, ["api.api_other.delete_key", "api.*.create_key"]);
    expectError(await deleteKey({ keyId }, elsewhere), 403, "INSUFFICIENT_PERMISSIONS");
    const scoped = await h.rootKey(t.workspaceId, [`api.${apiId}.delete_key`]);
    expect((await deleteKey({ keyId }, scoped)).status).toBe(200);
  });

  it.for<[Record<string, unknown>]>([[{}], [{ keyId: "" }], [{ keyId: "key_x", permanent: "yes" }]])(
    "answers %j with 400",
    async ([body], { deleteKey }) => {
      expectError(await deleteKey(body), 400, "BAD_REQUEST");
    },
  );
});

describe("keys.updateRemaining", () => {
  it("increments, decrements and sets, answering and storing the new value", async ({ createKey, keyRow, update, remainingOf }) => {
    const { keyId } = await createKey({ remaining: 10 });
    expect(await update({ keyId, op: "increment", value: 5 })).toMatchObject({ status: 200, body: { remaining: 15 } });
    expect(await remainingOf(keyId)).toBe(15);
    expect((await update({ keyId, op: "decrement", value: 3 })).body).toEqual({ remaining: 12 });
    expect((await update({ keyId, op: "set", value: 7 })).body).toEqual({ remaining: 7 });
    expect(await remainingOf(keyId)).toBe(7);
    expect(Number((await keyRow(keyId)).updated_at_m)).toBeGreaterThan(Date.now() - 60_000);
  });

  it("never decrements below 0: a larger decrement leaves 0 and the key exhausted", async ({ createKey, verify, update }) => {
    const { keyId, key } = await createKey({ remaining: 4 });
    expect((await update({ keyId, op: "decrement", value: 100 })).body).toEqual({ remaining: 0 });
    expect(await verify(key)).toMatchObject({ valid: false, code: "USAGE_EXCEEDED" });
  });

  it("sets 0 to exhaust a key, and null to make it unlimited while keeping its refill settings", async ({
    createKey,
    verify,
    keyRow,
    update,
  }) => {
    const { keyId, key } = await createKey({ remaining: 4, refill: { interval: "daily", amount: 9 } });
    expect((await update({ keyId, op: "set", value: 0 })).body).toEqual({ remaining: 0 });
    expect(await verify(key)).toMatchObject({ valid: false, code: "USAGE_EXCEEDED" });
    expect((await update({ keyId, op: "set", value: null })).body).toEqual({ remaining: null });
    expect(await keyRow(keyId)).toMatchObject({ remaining_requests: null, refill_amount: 9, refill_day: null });
    const res = await verify(key);
    expect(res).toMatchObject({ valid: true, code: "VALID" });
    expect(res).not.toHaveProperty("remaining");
  });

  it("refuses to increment or decrement an unlimited key, even by null", async ({ createKey, update }) => {
    const { keyId } = await createKey();
    for (const op of ["increment", "decrement"]) {
      for (const value of [1, null]) {
        expectError(
          await update({ keyId, op, value }),
          400,
          "BAD_REQUEST",
          `cannot ${op} a key with unlimited remaining requests, please 'set' a value instead.`,
        );
      }
    }
    expect((await update({ keyId, op: "set", value: 3 })).body).toEqual({ remaining: 3 });
  });

  it("refuses to increment or decrement by null", async ({ createKey, update, remainingOf }) => {
    const { keyId } = await createKey({ remaining: 5 });
    expectError(await update({ keyId, op: "increment", value: null }), 400, "BAD_REQUEST", "cannot increment a key by null.");
    expectError(await update({ keyId, op: "decrement", value: null }), 400, "BAD_REQUEST", "cannot decrement a key by null.");
    expect(await remainingOf(keyId)).toBe(5);
  });

  it("refuses an increment past the largest remaining count and changes nothing", async ({ createKey, update, remainingOf }) => {
    const { keyId } = await createKey({ remaining: 5 });
    expect((await update({ keyId, op: "set", value: MAX_INT32 })).body).toEqual({ remaining: MAX_INT32 });
    expectError(
      await update({ keyId, op: "increment", value: 1 }),
      400,
      "BAD_REQUEST",
      `cannot increment a key beyond ${MAX_INT32} remaining requests.`,
    );
    expect(await remainingOf(keyId)).toBe(MAX_INT32);
  });

  it.for<[Record<string, unknown>, RegExp]>([
    [{ op: "increment", value: -1 }, /^value: /],
    [{ op: "set", value: -1 }, /^value: /],
    [{ op: "set", value: 1.5 }, /^value: /],
    [{ op: "set", value: MAX_INT32 + 1 }, /^value: /],
    [{ op: "set" }, /^value: /],
    [{ op: "multiply", value: 2 }, /^op: /],
  ])("answers %j with 400 and changes nothing", async ([body, message], { createKey, update, remainingOf }) => {
    const { keyId } = await createKey({ remaining: 5 });
    expectError(await update({ keyId, ...body }), 400, "BAD_REQUEST", message);
    expect(await remainingOf(keyId)).toBe(5);
  });

  it("applies a due refill before incrementing, in the same write", async ({ createKey, verify, keyRow, backdate, update }) => {
    const { keyId, key } = await createKey({ remaining: 2, refill: { interval: "daily", amount: 10 } });
    await backdate(keyId, 2);
    expect((await update({ keyId, op: "increment", value: 1 })).body).toEqual({ remaining: 11 });
    const row = await keyRow(keyId);
    expect(row.remaining_requests).toBe(11);
    expect(new Date(row.last_refill_at).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 10 });
  });

  it("applies a due refill before decrementing", async ({ createKey, backdate, update }) => {
    const { keyId } = await createKey({ remaining: 1, refill: { interval: "daily", amount: 10 } });
    await backdate(keyId, 1);
    expect((await update({ keyId, op: "decrement", value: 4 })).body).toEqual({ remaining: 6 });
  });

  it("sets exactly the value over a due refill: no refill is added on top of it afterwards", async ({
    createKey,
    verify,
    backdate,
    update,
  }) => {
    const { keyId, key } = await createKey({ remaining: 1, refill: { interval: "daily", amount: 50 } });
    await backdate(keyId, 1);
    expect((await update({ keyId, op: "set", value: 3 })).body).toEqual({ remaining: 3 });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 2 });
  });

  it("gives a key made limited again by set a fresh refill period", async ({ createKey, verify, backdate, update }) => {
    const { keyId, key } = await createKey({ remaining: 1, refill: { interval: "daily", amount: 50 } });
    await update({ keyId, op: "set", value: null });
    await backdate(keyId, 3);
    expect((await update({ keyId, op: "set", value: 2 })).body).toEqual({ remaining: 2 });
    expect(await verify(key)).toMatchObject({ valid: true, remaining: 1 });
  });

  it("loses no update: 50 concurrent increments of 1 add exactly 50", async ({ createKey, update, remainingOf }) => {
    const { keyId } = await createKey({ remaining: 100 });
    const results = await Promise.all(Array.from({ length: 50 }, () => update({ keyId, op: "increment", value: 1 })));
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(await remainingOf(keyId)).toBe(150);
    expect(new Set(results.map((r) => r.body.remaining)).size).toBe(50);
  });

  it("loses no update with increments and decrements racing", async ({ createKey, update, remainingOf }) => {
    const { keyId } = await createKey({ remaining: 1000 });
    const ops = Array.from({ length: 40 }, (_, i) => update({ keyId, op: i % 2 ? "decrement" : "increment", value: i % 2 ? 3 : 5 }));
    await Promise.all(ops);
    expect(await remainingOf(keyId)).toBe(1000 + 20 * 5 - 20 * 3);
  });

  it("authenticates before looking the key up, and answers deleted and other workspaces' keys as missing", async ({
    h,
    t,
    createKey,
    update,
    remainingOf,
  }) => {
    expectError(await update({ keyId: "key_missing", op: "set", value: 1 }, ""), 403, "UNAUTHORIZED", "key required");
    expectError(await update({ keyId: "key_missing", op: "set", value: 1 }), 404, "NOT_FOUND", "key key_missing not found");
    const other = await h.tenant();
    const { keyId } = await createKey({ remaining: 5 });
    expectError(await update({ keyId, op: "set", value: 1 }, other.rootKey), 404, "NOT_FOUND", `key ${keyId} not found`);
    expect(await remainingOf(keyId)).toBe(5);
    await h.post("/v1/keys.deleteKey", { keyId }, t.rootKey);
    expectError(await update({ keyId, op: "set", value: 1 }), 404, "NOT_FOUND", `key ${keyId} not found`);
  });

  it("needs update_key on the key's API", async ({ h, t, apiId, createKey, update }) => {
    const { keyId } = await createKey({ remaining: 5 });
    const weak = await h.rootKey(t.workspaceId, ["api.*.delete_key", "api.api_other.update_key"]);
    expectError(await update({ keyId, op: "set", value: 1 }, weak), 403, "INSUFFICIENT_PERMISSIONS");
    const scoped = await h.rootKey(t.workspaceId, [`api.${apiId}.update_key`]);
    expect((await update({ keyId, op: "set", value: 1 }, scoped)).body).toEqual({ remaining: 1 });
  });
});

describe("apis.deleteApi", () => {
  it("deletes the API and all its keys in one go; its keys verify NOT_FOUND afterwards", async ({
    h,
    t,
    newApi,
    createKeyRequest,
    createKey,
    verify,
    keyRow,
    deleteApi,
  }) => {
    const doomed = await newApi(t);
    const keys = await Promise.all([createKey({ apiId: doomed }), createKey({ apiId: doomed }), createKey({ apiId: doomed })]);
    const survivor = await createKey();
    const res = await deleteApi({ apiId: doomed });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    for (const k of keys) {
      expect(await verify(k.key)).toMatchObject({ valid: false, code: "NOT_FOUND" });
      expect((await keyRow(k.keyId)).deleted_at_m).not.toBeNull();
    }
    const [api] = await h.sql<any>(`select deleted_at_m from apis where id = '${doomed}'`);
    expect(Number(api.deleted_at_m)).toBeGreaterThan(Date.now() - 60_000);
    expect(await verify(survivor.key)).toMatchObject({ valid: true });

    expectError(await h.get("/v1/apis.getApi", { apiId: doomed }, t.rootKey), 404, "NOT_FOUND");
    expectError(await deleteApi({ apiId: doomed }), 404, "NOT_FOUND", `api ${doomed} not found`);
    expectError(await createKeyRequest({ apiId: doomed }), 404, "NOT_FOUND", `api ${doomed} not found`);
  });

  it("refuses an API protected from deletions (412 DELETE_PROTECTED) and changes nothing", async ({
    h,
    t,
    newApi,
    createKey,
    verify,
    deleteApi,
  }) => {
    const protectedApi = await newApi(t, { deleteProtection: true });
    const { key } = await createKey({ apiId: protectedApi });
    expectError(await deleteApi({ apiId: protectedApi }), 412, "DELETE_PROTECTED", `api ${protectedApi} is protected from deletions`);
    expect((await h.sql<any>(`select deleted_at_m from apis where id = '${protectedApi}'`))[0].deleted_at_m).toBeNull();
    expect(await verify(key)).toMatchObject({ valid: true });
  });

  it("never leaves a live key in an API deleted while keys were being created in it", async ({
    t,
    newApi,
    count,
    createKeyRequest,
    deleteApi,
  }) => {
    const racing = await newApi(t);
    const results = await Promise.all([
      ...Array.from({ length: 10 }, () => createKeyRequest({ apiId: racing })),
      deleteApi({ apiId: racing }),
      ...Array.from({ length: 10 }, () => createKeyRequest({ apiId: racing })),
    ]);
    for (const res of results) {
      if (res.status !== 200) expectError(res, 404, "NOT_FOUND", `api ${racing} not found`);
    }
    expect(await count(`keys where api_id = '${racing}' and deleted_at_m is null`)).toBe(0);
  });

  it("answers 404 for an API deleted since this replica last created a key in it, before any other refusal", async ({
    h,
    t,
    newApi,
    count,
    createKeyRequest,
  }) => {
    // The API's key settings are kept in memory once seen; its deletion through another replica is still answered
    // first, as when the API is read on every call.
    const doomed = await newApi(t);
    expect((await createKeyRequest({ apiId: doomed })).status).toBe(200);
    const replica = await h.replica();
    try {
      const res = await replica.app.inject({
        method: "POST",
        url: "/v1/apis.deleteApi",
        headers: { authorization: `Bearer ${t.rootKey}` },
        payload: { apiId: doomed },
      });
      expect(res.statusCode, res.body).toBe(200);
    } finally {
      await replica.close();
    }
    expectError(await createKeyRequest({ apiId: doomed }), 404, "NOT_FOUND", `api ${doomed} not found`);
    expectError(await createKeyRequest({ apiId: doomed, remaining: 0 }), 404, "NOT_FOUND", `api ${doomed} not found`);
    expectError(await createKeyRequest({ apiId: doomed, recoverable: true }), 404, "NOT_FOUND", `api ${doomed} not found`);
    expectError(await createKeyRequest({ apiId: doomed, roles: ["r"] }), 404, "NOT_FOUND", `api ${doomed} not found`);
    expect(await count(`keys where api_id = '${doomed}' and deleted_at_m is null`)).toBe(0);
  });

  it("answers an unknown API and another workspace's API with the same 404", async ({ h, apiId, createKey, verify, deleteApi }) => {
    const other = await h.tenant();
    const { key } = await createKey();
    expectError(await deleteApi({ apiId }, other.rootKey), 404, "NOT_FOUND", `api ${apiId} not found`);
    expectError(await deleteApi({ apiId: "api_missing" }), 404, "NOT_FOUND", "api api_missing not found");
    expect(await verify(key)).toMatchObject({ valid: true });
  });

  it("answers an empty or missing apiId with 400", async ({ deleteApi }) => {
    expectError(await deleteApi({ apiId: "" }), 400, "BAD_REQUEST", /^apiId: /);
    expectError(await deleteApi({}), 400, "BAD_REQUEST", /^apiId: /);
  });
});

describe("apis.deleteKeys", () => {
  it("soft-deletes every live key of the API, counts them, and keeps the API", async ({
    h,
    t,
    newApi,
    createKey,
    verify,
    keyRow,
    deleteKeys,
  }) => {
    const target = await newApi(t);
    const keys = await Promise.all([1, 2, 3].map(() => createKey({ apiId: target })));
    const alreadyDeleted = await createKey({ apiId: target });
    await h.post("/v1/keys.deleteKey", { keyId: alreadyDeleted.keyId }, t.rootKey);
    const elsewhere = await createKey();

    expect(await deleteKeys({ apiId: target })).toMatchObject({ status: 200, body: { deletedKeys: 3 } });
    for (const k of keys) {
      expect(await verify(k.key)).toMatchObject({ valid: false, code: "NOT_FOUND" });
      expect((await keyRow(k.keyId)).deleted_at_m).not.toBeNull();
    }
    expect(await verify(elsewhere.key)).toMatchObject({ valid: true });
    expect((await h.get("/v1/apis.getApi", { apiId: target }, t.rootKey)).status).toBe(200);
    expect((await deleteKeys({ apiId: target })).body).toEqual({ deletedKeys: 0 });
    // The API still takes new keys.
    const fresh = await createKey({ apiId: target });
    expect(await verify(fresh.key)).toMatchObject({ valid: true });
  });

  it("removes the rows with permanent: true", async ({ t, newApi, count, createKey, deleteKeys }) => {
    const target = await newApi(t);
    const keys = await Promise.all([1, 2].map(() => createKey({ apiId: target, ratelimit: { limit: 1, duration: 1000 } })));
    expect((await deleteKeys({ apiId: target, permanent: true })).body).toEqual({ deletedKeys: 2 });
    expect(await count(`keys where api_id = '${target}'`)).toBe(0);
    for (const k of keys) expect(await count(`ratelimits where key_id = '${k.keyId}'`)).toBe(0);
  });

  it("with permanent: true also removes and counts the soft-deleted keys, whose hashes can then be imported again", async ({
    h,
    t,
    newApi,
    count,
    createKey,
    verify,
    deleteKeys,
  }) => {
    const target = await newApi(t);
    const softDeleted = await Promise.all(
      Array.from({ length: 10 }, () => createKey({ apiId: target, roles: [`r-${suffix()}`], permissions: [`p-${suffix()}`] })),
    );
    for (const k of softDeleted) expect((await h.post("/v1/keys.deleteKey", { keyId: k.keyId }, t.rootKey)).status).toBe(200);
    const live = await createKey({ apiId: target, ratelimit: { limit: 1, duration: 1000 } });
    // Verified once, so that the cache holds it and analytics may count it.
    expect(await verify(live.key)).toMatchObject({ valid: true });
    const elsewhere = await createKey();
    const ids = [...softDeleted, live].map((k) => `'${k.keyId}'`).join(", ");

    expect(await deleteKeys({ apiId: target, permanent: true })).toMatchObject({ status: 200, body: { deletedKeys: 11 } });
    expect(await count(`keys where api_id = '${target}'`)).toBe(0);
    for (const table of ["keys_roles", "keys_permissions", "ratelimits"]) {
      expect(await count(`${table} where key_id in (${ids})`)).toBe(0);
    }
    expect(await verify(live.key)).toMatchObject({ valid: false, code: "NOT_FOUND" });
    expect(await verify(elsewhere.key)).toMatchObject({ valid: true });
    expect((await deleteKeys({ apiId: target, permanent: true })).body).toEqual({ deletedKeys: 0 });

    // The same hashes are free again: v1's migration of keys deleted this way answers 200, not 409.
    const reimport = [...softDeleted, live].map((k) => ({
      apiId: target,
      hash: { value: hashKey(k.key), variant: "sha256_base64" },
    }));
    const res = await h.post("/v1/migrations.createKeys", reimport, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await verify(live.key)).toMatchObject({ valid: true });
  });

  it("answers an unknown API and another workspace's API with the same 404, deleting nothing", async ({
    h,
    apiId,
    createKey,
    verify,
    deleteKeys,
  }) => {
    const other = await h.tenant();
    const { key } = await createKey();
    expectError(await deleteKeys({ apiId }, other.rootKey), 404, "NOT_FOUND", `api ${apiId} not found`);
    expectError(await deleteKeys({ apiId: "api_missing" }), 404, "NOT_FOUND", "api api_missing not found");
    expect(await verify(key)).toMatchObject({ valid: true });
  });

  it("answers bad input with 400", async ({ apiId, deleteKeys }) => {
    expectError(await deleteKeys({ apiId: "" }), 400, "BAD_REQUEST", /^apiId: /);
    expectError(await deleteKeys({ apiId, permanent: "true" }), 400, "BAD_REQUEST", /^permanent: /);
  });
});

// ---- The shared root-key suite, for each of the five routes ----

const createApiIn = async (h: Harness, rootKey: string) =>
  (await h.post("/v1/apis.createApi", { name: `auth-${suffix()}` }, rootKey)).body.apiId as string;
const createKeyIn = async (h: Harness, rootKey: string, body: Record<string, unknown> = {}) => {
  const apiId = await createApiIn(h, rootKey);
  const res = await h.post("/v1/keys.createKey", { apiId, ...body }, rootKey);
  expect(res.status).toBe(200);
  return res.body.keyId as string;
};
const liveKeys = rowsOf("keys where deleted_at_m is null");

describeRootKeyAuth(it, {
  method: "POST",
  path: "/v1/keys.createKey",
  validRequest: async (h, owner) => ({ body: { apiId: await createApiIn(h, owner.rootKey), remaining: 3 } }),
  insufficientPermissions: ["api.*.read_key", "api.*.encrypt_key", "api.other.create_key"],
  countRows: rowsOf("keys"),
  expectForOtherWorkspace: answersNotFound(/^api api_\w+ not found$/),
});

describeRootKeyAuth(it, {
  method: "POST",
  path: "/v1/keys.deleteKey",
  validRequest: async (h, owner) => ({ body: { keyId: await createKeyIn(h, owner.rootKey) } }),
  insufficientPermissions: ["api.*.update_key", "api.*.delete_api", "api.other.delete_key"],
  countRows: liveKeys,
  missingRequest: (valid) => ({ body: { ...(valid.body as object), keyId: "key_missing0000000000" } }),
  expectForOtherWorkspace: answersNotFound(/^key key_\w+ not found$/),
});

describeRootKeyAuth(it, {
  method: "POST",
  path: "/v1/keys.updateRemaining",
  validRequest: async (h, owner) => ({
    body: { keyId: await createKeyIn(h, owner.rootKey, { remaining: 10 }), op: "increment", value: 1 },
  }),
  insufficientPermissions: ["api.*.read_key", "api.*.create_key", "api.other.update_key"],
  missingRequest: (valid) => ({ body: { ...(valid.body as object), keyId: "key_missing0000000000" } }),
  countRows: async (h) => Number((await h.sql<{ n: string }>(`select coalesce(sum(remaining_requests), 0) as n from keys`))[0]!.n),
  expectForOtherWorkspace: answersNotFound(/^key key_\w+ not found$/),
});

describeRootKeyAuth(it, {
  method: "POST",
  path: "/v1/apis.deleteApi",
  validRequest: async (h, owner) => ({ body: { apiId: await createApiIn(h, owner.rootKey) } }),
  insufficientPermissions: ["api.*.delete_key", "api.*.read_api", "api.other.delete_api"],
  countRows: rowsOf("apis where deleted_at_m is null"),
  expectForOtherWorkspace: answersNotFound(/^api api_\w+ not found$/),
});

describeRootKeyAuth(it, {
  method: "POST",
  path: "/v1/apis.deleteKeys",
  validRequest: async (h, owner) => {
    const keyId = await createKeyIn(h, owner.rootKey);
    const [row] = await h.sql<{ api_id: string }>(`select api_id from keys where id = '${keyId}'`);
    return { body: { apiId: row!.api_id } };
  },
  insufficientPermissions: ["api.*.delete_api", "api.*.update_key", "api.other.delete_key"],
  countRows: liveKeys,
  expectForOtherWorkspace: answersNotFound(/^api api_\w+ not found$/),
});
