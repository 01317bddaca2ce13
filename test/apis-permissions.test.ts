import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import { expectError } from "./helper.js";

// One harness and tenant for the file: the fixtures `h` and `t` of test/fixtures.ts, and two readers of its own.
// (Extended once for the whole file: a test.extend inside a describe would make a second file-scoped harness.)
const it = test
  .extend(
    "getApi",
    async ({ route }) =>
      (apiId: string) =>
        route("/v1/apis.getApi").ok({ apiId }),
  )
  .extend("updateApi", async ({ route }) => route("/v1/apis.updateApi"));

describe("apis.createApi and apis.getApi", () => {
  it("creates an API with its settings and reads it back", async ({ h, t }) => {
    const res = await h.post(
      "/v1/apis.createApi",
      { name: "payments", storeEncryptedKeys: true, defaultPrefix: "pay", defaultBytes: 24, deleteProtection: true },
      t.rootKey,
    );
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ apiId: expect.stringMatching(/^api_/), name: "payments" });
    const [row] = await h.sql<any>(`select * from apis where id = '${res.body.apiId}'`);
    expect(row).toMatchObject({
      workspace_id: t.workspaceId,
      name: "payments",
      store_encrypted_keys: true,
      default_prefix: "pay",
      default_bytes: 24,
      delete_protection: true,
      deleted_at_m: null,
    });
    const got = await h.get("/v1/apis.getApi", { apiId: res.body.apiId }, t.rootKey);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ id: res.body.apiId, workspaceId: t.workspaceId, name: "payments" });
  });

  it.for<[Record<string, unknown>, string | RegExp]>([
    [{ name: "ab" }, "name: String must contain at least 3 character(s)"],
    [{ name: "okay", defaultPrefix: "123456789" }, "defaultPrefix: String must contain at most 8 character(s)"],
    [{ name: "okay", defaultBytes: 15 }, "defaultBytes: Number must be greater than or equal to 16"],
    [{ name: "okay", defaultBytes: 256 }, "defaultBytes: Number must be less than or equal to 255"],
    [{ name: "okay", storeEncryptedKeys: "yes" }, /^storeEncryptedKeys: /],
  ])("refuses %j with 400", async ([body, message], { h, t }) => {
    expectError(await h.post("/v1/apis.createApi", body, t.rootKey), 400, "BAD_REQUEST", message);
  });

  it("answers an unknown or deleted API with 404", async ({ h, t }) => {
    expectError(await h.get("/v1/apis.getApi", { apiId: "api_nope" }, t.rootKey), 404, "NOT_FOUND", "api api_nope not found");
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "to-delete" }, t.rootKey)).body;
    await h.sql(`update apis set deleted_at_m = 1 where id = '${apiId}'`);
    expectError(await h.get("/v1/apis.getApi", { apiId }, t.rootKey), 404, "NOT_FOUND");
  });

  it("accepts api.<apiId>.read_api for that API only", async ({ h, t }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "scoped" }, t.rootKey)).body;
    const scoped = await h.rootKey(t.workspaceId, [`api.${apiId}.read_api`]);
    expect((await h.get("/v1/apis.getApi", { apiId }, scoped)).status).toBe(200);
    const { apiId: other } = (await h.post("/v1/apis.createApi", { name: "other" }, t.rootKey)).body;
    expectError(await h.get("/v1/apis.getApi", { apiId: other }, scoped), 403, "INSUFFICIENT_PERMISSIONS");
  });

  it("refuses a NUL character in the query (%00) with 400, not a 500", async ({ h, t }) => {
    expectError(
      await h.get("/v1/apis.getApi", { apiId: "api_\u0000" }, t.rootKey),
      400,
      "BAD_REQUEST",
      "apiId: must not contain the NUL character or unpaired surrogates",
    );
  });

  it("requires apiId", async ({ h, t }) => {
    expectError(await h.get("/v1/apis.getApi", {}, t.rootKey), 400, "BAD_REQUEST", /^apiId: /);
  });
});

describe("IP allow-lists: apis.createApi, apis.updateApi and apis.getApi", () => {
  it("creates an API with an ipWhitelist, stores it as sent, and getApi returns it", async ({ h, t, getApi }) => {
    const list = "10.0.0.1, 2001:db8::1 ,192.168.1.20";
    const res = await h.post("/v1/apis.createApi", { name: "listed", ipWhitelist: list }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [row] = await h.sql<any>(`select ip_whitelist from apis where id = '${res.body.apiId}'`);
    expect(row.ip_whitelist).toBe(list);
    expect(await getApi(res.body.apiId)).toEqual({ id: res.body.apiId, workspaceId: t.workspaceId, name: "listed", ipWhitelist: list });
  });

  it("creates an API without a list: none is stored and getApi answers as v1 (no ipWhitelist field)", async ({ h, t, getApi }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "unlisted" }, t.rootKey)).body;
    const [row] = await h.sql<any>(`select ip_whitelist from apis where id = '${apiId}'`);
    expect(row.ip_whitelist).toBeNull();
    expect(await getApi(apiId)).toEqual({ id: apiId, workspaceId: t.workspaceId, name: "unlisted" });
  });

  it("accepts CIDR ranges, IPv4 and IPv6, on createApi and updateApi, and stores them as sent", async ({ h, t, getApi, updateApi }) => {
    const list = "10.0.0.0/8, 192.168.1.20, 2001:db8::/32,fd00::/8 , 0.0.0.0/0";
    const res = await h.post("/v1/apis.createApi", { name: "ranges", ipWhitelist: list }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await getApi(res.body.apiId)).ipWhitelist).toBe(list);
    expect((await updateApi({ apiId: res.body.apiId, ipWhitelist: "::/0,172.16.0.0/12" })).status).toBe(200);
    expect((await getApi(res.body.apiId)).ipWhitelist).toBe("::/0,172.16.0.0/12");
  });

  it.for([
    ["10.0.0.1,nope", 'ipWhitelist: "nope" is not an IPv4 or IPv6 address or CIDR range'],
    ["10.0.0.0/33", 'ipWhitelist: "10.0.0.0/33" is not a CIDR range: the prefix after "/" must be 0 to 32 bits'],
    ["2001:db8::/129", 'ipWhitelist: "2001:db8::/129" is not a CIDR range: the prefix after "/" must be 0 to 128 bits'],
    ["10.0.0.0/", 'ipWhitelist: "10.0.0.0/" is not a CIDR range: the prefix after "/" must be 0 to 32 bits'],
    ["10.0.0.0/8/8", 'ipWhitelist: "10.0.0.0/8/8" is not a CIDR range: the prefix after "/" must be 0 to 32 bits'],
    ["10.0.0.0/-1", 'ipWhitelist: "10.0.0.0/-1" is not a CIDR range: the prefix after "/" must be 0 to 32 bits'],
    ["10.0.0/8", 'ipWhitelist: "10.0.0/8" is not an IPv4 or IPv6 address or CIDR range'],
    ["10.0.0.1,,10.0.0.2", "ipWhitelist: entry 2 is empty: separate the entries with single commas"],
    ["10.0.0.1,", "ipWhitelist: entry 2 is empty: separate the entries with single commas"],
    ["256.0.0.1", 'ipWhitelist: "256.0.0.1" is not an IPv4 or IPv6 address or CIDR range'],
    ["10.0.0.1:8080", 'ipWhitelist: "10.0.0.1:8080" is not an IPv4 or IPv6 address or CIDR range'],
    ["", "ipWhitelist: must list at least one address or range (send null to apis.updateApi to remove the list)"],
  ])(
    "refuses the list %j with 400 naming the bad entry, on createApi and updateApi",
    async ([ipWhitelist, message], { h, t, getApi, updateApi }) => {
      const before = await h.sql<any>(`select count(*)::int as n from apis`);
      expectError(await h.post("/v1/apis.createApi", { name: "bad-list", ipWhitelist }, t.rootKey), 400, "BAD_REQUEST", message);
      expect(await h.sql<any>(`select count(*)::int as n from apis`)).toEqual(before);
      const { apiId } = (await h.post("/v1/apis.createApi", { name: "kept", ipWhitelist: "10.0.0.1" }, t.rootKey)).body;
      expectError(await updateApi({ apiId, ipWhitelist }), 400, "BAD_REQUEST", message);
      expect((await getApi(apiId)).ipWhitelist).toBe("10.0.0.1");
    },
  );

  it("refuses a list that is not a string, and a list longer than 4096 characters", async ({ h, t }) => {
    expectError(
      await h.post("/v1/apis.createApi", { name: "bad-list", ipWhitelist: ["10.0.0.1"] }, t.rootKey),
      400,
      "BAD_REQUEST",
      /^ipWhitelist: /,
    );
    const long = Array.from({ length: 500 }, (_, i) => `10.0.${i >> 8}.${i & 255}`).join(",");
    expect(long.length).toBeGreaterThan(4096);
    expectError(
      await h.post("/v1/apis.createApi", { name: "bad-list", ipWhitelist: long }, t.rootKey),
      400,
      "BAD_REQUEST",
      "ipWhitelist: String must contain at most 4096 character(s)",
    );
  });

  it("updateApi sets, replaces and removes (null) the list", async ({ h, t, getApi, updateApi }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "updated" }, t.rootKey)).body;
    const set = await updateApi({ apiId, ipWhitelist: "10.0.0.1" });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body).toEqual({});
    expect((await getApi(apiId)).ipWhitelist).toBe("10.0.0.1");
    expect((await updateApi({ apiId, ipWhitelist: "::1, 10.0.0.2" })).status).toBe(200);
    expect((await getApi(apiId)).ipWhitelist).toBe("::1, 10.0.0.2");
    expect((await updateApi({ apiId, ipWhitelist: null })).status).toBe(200);
    expect(await getApi(apiId)).toEqual({ id: apiId, workspaceId: t.workspaceId, name: "updated" });
    const [row] = await h.sql<any>(`select ip_whitelist, updated_at_m from apis where id = '${apiId}'`);
    expect(row.ip_whitelist).toBeNull();
    expect(Number(row.updated_at_m)).toBeGreaterThan(0);
  });

  it("updateApi requires apiId and at least one setting", async ({ h, t, updateApi }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "required" }, t.rootKey)).body;
    expectError(
      await updateApi({ apiId }),
      400,
      "BAD_REQUEST",
      "Nothing to change: give at least one of name, defaultPrefix, defaultBytes, deleteProtection, ipWhitelist.",
    );
    expectError(await updateApi({ ipWhitelist: null }), 400, "BAD_REQUEST", /^apiId: /);
  });

  it("updateApi answers 404 for an unknown, deleted or other workspace's API", async ({ h, t, updateApi }) => {
    expectError(await updateApi({ apiId: "api_nope", ipWhitelist: null }), 404, "NOT_FOUND", "api api_nope not found");
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "gone" }, t.rootKey)).body;
    expect((await h.post("/v1/apis.deleteApi", { apiId }, t.rootKey)).status).toBe(200);
    expectError(await updateApi({ apiId, ipWhitelist: "10.0.0.1" }), 404, "NOT_FOUND", `api ${apiId} not found`);
    const other = await h.tenant();
    const { apiId: theirs } = (await h.post("/v1/apis.createApi", { name: "theirs" }, other.rootKey)).body;
    expectError(await updateApi({ apiId: theirs, ipWhitelist: "10.0.0.1" }), 404, "NOT_FOUND", `api ${theirs} not found`);
    const [row] = await h.sql<any>(`select ip_whitelist from apis where id = '${theirs}'`);
    expect(row.ip_whitelist).toBeNull();
  });

  it("updateApi accepts api.<apiId>.update_api for that API only, and api.*.update_api for all", async ({ h, t, updateApi }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "scoped-update" }, t.rootKey)).body;
    const { apiId: other } = (await h.post("/v1/apis.createApi", { name: "other-update" }, t.rootKey)).body;
    const scoped = await h.rootKey(t.workspaceId, [`api.${apiId}.update_api`]);
    expect((await updateApi({ apiId, ipWhitelist: "10.0.0.1" }, scoped)).status).toBe(200);
    expectError(await updateApi({ apiId: other, ipWhitelist: "10.0.0.1" }, scoped), 403, "INSUFFICIENT_PERMISSIONS");
    const wildcard = await h.rootKey(t.workspaceId, ["api.*.update_api"]);
    expect((await updateApi({ apiId: other, ipWhitelist: "10.0.0.1" }, wildcard)).status).toBe(200);
  });
});

describe("apis.updateApi: name, key defaults and delete protection", () => {
  const rowOf = async (h: { sql: <T>(q: string) => Promise<T[]> }, apiId: string) =>
    (await h.sql<any>(`select name, default_prefix, default_bytes, delete_protection, ip_whitelist from apis where id = '${apiId}'`))[0];

  it("changes only the settings sent, and null removes the key defaults", async ({ h, t, getApi, updateApi }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "before", ipWhitelist: "10.0.0.1" }, t.rootKey)).body;
    const res = await updateApi({ apiId, name: "after", defaultPrefix: "pay", defaultBytes: 32, deleteProtection: true });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({});
    expect(await rowOf(h, apiId)).toEqual({
      name: "after",
      default_prefix: "pay",
      default_bytes: 32,
      delete_protection: true,
      ip_whitelist: "10.0.0.1",
    });
    expect((await getApi(apiId)).name).toBe("after");
    expect((await updateApi({ apiId, defaultPrefix: null, defaultBytes: null })).status).toBe(200);
    expect(await rowOf(h, apiId)).toEqual({
      name: "after",
      default_prefix: null,
      default_bytes: null,
      delete_protection: true,
      ip_whitelist: "10.0.0.1",
    });
    // Only {apiId, ipWhitelist}: as before the other fields existed.
    expect((await updateApi({ apiId, ipWhitelist: null })).status).toBe(200);
    expect(await rowOf(h, apiId)).toMatchObject({ name: "after", delete_protection: true, ip_whitelist: null });
  });

  it("a key created after the default prefix or length changed gets the new one, even when another replica changed it", async ({
    h,
    t,
    updateApi,
  }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "defaults", defaultPrefix: "old" }, t.rootKey)).body;
    const create = async () => {
      const res = await h.post("/v1/keys.createKey", { apiId }, t.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body as { keyId: string; key: string };
    };
    // Twice: the second key is made from the settings this process remembers.
    expect((await create()).key).toMatch(/^old_/);
    expect((await create()).key).toMatch(/^old_/);
    expect((await updateApi({ apiId, defaultPrefix: "new" })).status).toBe(200);
    expect((await create()).key).toMatch(/^new_/);
    // Another replica's change reaches this process only through the database: this one remembers "new" still.
    await h.sql(`update apis set default_prefix = 'other', default_bytes = 64 where id = '${apiId}'`);
    const made = await create();
    expect(made.key).toMatch(/^other_/);
    const [row] = await h.sql<any>(`select prefix from keys where id = '${made.keyId}'`);
    expect(row.prefix).toBe("other");
    // 64 random bytes and the two header bytes, in base58: far longer than a 16-byte key's 25 or so characters.
    expect(made.key.length - "other_".length).toBeGreaterThan(80);
    expect((await updateApi({ apiId, defaultPrefix: null })).status).toBe(200);
    expect((await create()).key).not.toContain("_");
  });

  it.for<[string, Record<string, unknown>, Record<string, string>]>([
    ["a key that links an identity and a role", { externalId: "user_1", roles: ["reader"] }, {}],
    ["a key made under an Idempotency-Key", {}, { "Idempotency-Key": "stale-defaults" }],
    ["a key that links an identity, under an Idempotency-Key", { externalId: "user_2" }, { "Idempotency-Key": "stale-linked" }],
  ])("%s gets the defaults another replica set since this process remembered them", async ([, fields, headers], { h, t }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "defaults-linked", defaultPrefix: "old" }, t.rootKey)).body;
    const first = await h.post("/v1/keys.createKey", { apiId }, t.rootKey);
    expect(first.body.key).toMatch(/^old_/);
    await h.sql(`update apis set default_prefix = 'other', default_bytes = 64 where id = '${apiId}'`);
    // The remembered "old" is confirmed under the API's lock, found stale, and the key made anew from "other".
    const made = await h.post("/v1/keys.createKey", { apiId, ...fields }, t.rootKey, headers);
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    expect(made.body.key).toMatch(/^other_/);
    expect(made.body.key.length - "other_".length).toBeGreaterThan(80);
    const rows = await h.sql<any>(`select id, prefix from keys where api_id = '${apiId}' order by created_at_m`);
    expect(rows.map((r: { prefix: string }) => r.prefix)).toEqual(["old", "other"]);
    expect(rows[1].id).toBe(made.body.keyId);
    const audit = await h.sql<any>(
      `select count(*)::int as n from audit_log where event = 'key.create' and targets::text like '%${made.body.keyId}%'`,
    );
    expect(audit[0].n).toBe(1);
    if (headers["Idempotency-Key"]) {
      const again = await h.post("/v1/keys.createKey", { apiId, ...fields }, t.rootKey, headers);
      expect(again.body).toEqual(made.body);
    }
  });

  it("deleteProtection: true refuses apis.deleteApi with 412 until it is set back to false", async ({ h, t, updateApi }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "protected" }, t.rootKey)).body;
    expect((await updateApi({ apiId, deleteProtection: true })).status).toBe(200);
    expectError(await h.post("/v1/apis.deleteApi", { apiId }, t.rootKey), 412, "DELETE_PROTECTED");
    expect((await updateApi({ apiId, deleteProtection: false })).status).toBe(200);
    expect((await h.post("/v1/apis.deleteApi", { apiId }, t.rootKey)).status).toBe(200);
  });

  it.for<[Record<string, unknown>, string | RegExp]>([
    [{ name: "ab" }, "name: String must contain at least 3 character(s)"],
    [{ name: "x".repeat(257) }, "name: String must contain at most 256 character(s)"],
    [{ defaultPrefix: "123456789" }, "defaultPrefix: String must contain at most 8 character(s)"],
    [{ defaultPrefix: "" }, "defaultPrefix: String must contain at least 1 character(s)"],
    [{ defaultBytes: 15 }, "defaultBytes: Number must be greater than or equal to 16"],
    [{ defaultBytes: 256 }, "defaultBytes: Number must be less than or equal to 255"],
    [{ defaultBytes: 16.5 }, /^defaultBytes: /],
    [{ deleteProtection: "yes" }, /^deleteProtection: /],
    [{ name: null }, /^name: /],
  ])("refuses %j with 400 and changes nothing", async ([body, message], { h, t, updateApi }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "bounded", defaultPrefix: "kept", defaultBytes: 20 }, t.rootKey)).body;
    expectError(await updateApi({ apiId, ...body }), 400, "BAD_REQUEST", message);
    expect(await rowOf(h, apiId)).toEqual({
      name: "bounded",
      default_prefix: "kept",
      default_bytes: 20,
      delete_protection: false,
      ip_whitelist: null,
    });
  });

  it("needs update_api: a reader is refused 403 and nothing changes", async ({ h, t, updateApi }) => {
    const { apiId } = (await h.post("/v1/apis.createApi", { name: "read-only" }, t.rootKey)).body;
    const reader = await h.rootKey(t.workspaceId, ["api.*.read_api"]);
    expectError(await updateApi({ apiId, name: "renamed", deleteProtection: true }, reader), 403, "INSUFFICIENT_PERMISSIONS");
    expect(await rowOf(h, apiId)).toMatchObject({ name: "read-only", delete_protection: false });
  });
});

describe("permissions.createPermission and permissions.createRole", () => {
  it("creates a permission whose slug defaults to its name", async ({ h, t }) => {
    const res = await h.post("/v1/permissions.createPermission", { name: "files.write", description: "Write files" }, t.rootKey);
    expect(res.status).toBe(200);
    const [row] = await h.sql<any>(`select * from permissions where id = '${res.body.permissionId}'`);
    expect(row).toMatchObject({ workspace_id: t.workspaceId, name: "files.write", slug: "files.write", description: "Write files" });
  });

  it("refuses a second permission with the same slug with 409, in v1's words naming the name", async ({ h, t }) => {
    await h.post("/v1/permissions.createPermission", { name: "dup.perm" }, t.rootKey);
    expectError(
      await h.post("/v1/permissions.createPermission", { name: "dup.perm" }, t.rootKey),
      409,
      "CONFLICT",
      'Permission with name "dup.perm" already exists in this workspace',
    );
    const other = await h.tenant();
    expect((await h.post("/v1/permissions.createPermission", { name: "dup.perm" }, other.rootKey)).status).toBe(200);
  });

  it.for<[Record<string, string>, string | RegExp]>([
    [{ name: "ab" }, "name: String must contain at least 3 character(s)"],
    [{ name: "has space" }, /^name: must contain only letters, digits/],
    [{ name: "ok.name", slug: "bad/slug" }, /^slug: /],
    [{ name: "ok.name", description: "ab" }, /^description: /],
  ])("refuses the permission %j with 400", async ([body, message], { h, t }) => {
    expectError(await h.post("/v1/permissions.createPermission", body, t.rootKey), 400, "BAD_REQUEST", message);
  });

  it("creates a role and refuses its name twice in a workspace", async ({ h, t }) => {
    const res = await h.post("/v1/permissions.createRole", { name: "billing.admin", description: "" }, t.rootKey);
    expect(res.status).toBe(200);
    const [row] = await h.sql<any>(`select * from roles where id = '${res.body.roleId}'`);
    expect(row).toMatchObject({ workspace_id: t.workspaceId, name: "billing.admin", description: null });
    expectError(
      await h.post("/v1/permissions.createRole", { name: "billing.admin" }, t.rootKey),
      409,
      "CONFLICT",
      'Role with name "billing.admin" already exists in this workspace',
    );
  });
});
