import { createHash, randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { completeKeyMigration } from "../src/core/import/import.migrate.js";
import { verifyKey } from "../src/core/verification/verification.verify.js";
import { V1_VERIFY_RULES } from "../src/wire/v1/keys/v1.keys.verifyKey.js";
import { InvalidInputError } from "../src/errors.js";
import { v2ErrorOf } from "../src/wire/v2/errors.js";
import { countIn, test } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
import { expectV2Error } from "./v2-errors.js";

// v2's keys.migrateKeys (contract §6) over the import core, keyhaven's createMigration extension, and the first
// verification of a prefixed-api-key key (§6.3) through the verification core (v2's verifyKey route threads
// `migrationId` into the same core input).

const unique = (name: string) => `${name}_${randomBytes(4).toString("hex")}`;
const sha256Base64 = (key: string) => createHash("sha256").update(key).digest("base64");
const sha256Hex = (text: string) => createHash("sha256").update(text).digest("hex");
const API_NOT_FOUND = "The requested API does not exist or has been deleted.";

const migrate = (h: Harness, rootKey: string, body: unknown) => h.post("/v2/keys.migrateKeys", body, rootKey);

async function migrateOk(h: Harness, rootKey: string, body: unknown) {
  const res = await migrate(h, rootKey, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { migrated: { hash: string; keyId: string }[]; failed: string[] };
}

/** A migration of `t`'s workspace, made through keyhaven's extension. */
async function createMigration(h: Harness, t: Tenant, algorithm: string) {
  const migrationId = unique("mig");
  const res = await h.post("/v2/keyhaven.createMigration", { migrationId, algorithm }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.data).toEqual({ migrationId, algorithm });
  return migrationId;
}

/** A key of github.com/seamapi/prefixed-api-key's shape, and the hash a migration gives for it. */
function prefixedKey(prefix: string) {
  const shortToken = randomBytes(6).toString("hex");
  const longToken = randomBytes(16).toString("hex");
  return { key: `${prefix}_${shortToken}_${longToken}`, hash: sha256Hex(longToken) };
}

describe("v2 keys.migrateKeys", () => {
  test("migrates a key with every field: stored hash, empty start, pending migration, identity, roles, permissions, credits, rate limits", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const migrationId = unique("mig");
    const key = `sk_${randomBytes(16).toString("hex")}`;
    const hash = sha256Base64(key);
    const externalId = unique("user");
    const role = unique("role");
    const data = await migrateOk(h, t.rootKey, {
      migrationId,
      apiId,
      keys: [
        {
          hash,
          name: "migrated",
          externalId,
          meta: { plan: "pro" },
          roles: [role],
          permissions: ["docs.read"],
          expires: 4_000_000_000_000,
          enabled: false,
          credits: { remaining: 10, refill: { interval: "monthly", amount: 20, refillDay: 3 } },
          ratelimits: [{ name: "tokens", limit: 5, duration: 60_000, autoApply: true }],
        },
      ],
    });
    expect(data).toEqual({ migrated: [{ hash, keyId: expect.stringMatching(/^key_/) }], failed: [] });
    const keyId = data.migrated[0]!.keyId;

    const got = await h.post("/v2/keys.getKey", { keyId }, t.rootKey);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body.data).toEqual({
      keyId,
      start: "",
      enabled: false,
      createdAt: expect.any(Number),
      name: "migrated",
      meta: { plan: "pro" },
      expires: 4_000_000_000_000,
      permissions: ["docs.read"],
      roles: [role],
      credits: { remaining: 10, refill: { interval: "monthly", amount: 20, refillDay: 3 } },
      identity: { id: expect.stringMatching(/^id_/), externalId },
      ratelimits: [{ id: expect.stringMatching(/^rl_/), name: "tokens", limit: 5, duration: 60_000, autoApply: true }],
    });
    const [row] = await h.sql<any>(`select hash, start, pending_migration_id from keys where id = '${keyId}'`);
    expect(row).toEqual({ hash, start: "", pending_migration_id: migrationId });
    // v2 creates identities with meta {} (v1's import stores null); the unknown migration was created for the workspace.
    const [identity] = await h.sql<any>(`select meta from identities where external_id = '${externalId}'`);
    expect(identity.meta).toEqual({});
    const [migration] = await h.sql<any>(`select workspace_id, algorithm from key_migrations where id = '${migrationId}'`);
    expect(migration).toEqual({ workspace_id: t.workspaceId, algorithm: "sha256" });
    // The missing permission was created with name = slug, the role by name.
    expect(await countIn(h, `permissions where workspace_id = '${t.workspaceId}' and slug = 'docs.read' and name = 'docs.read'`)).toBe(1);
    expect(await countIn(h, `roles where workspace_id = '${t.workspaceId}' and name = '${role}'`)).toBe(1);
  });

  test("a sha256 migration's key verifies at once by its own hash; the pending migration stays", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const key = `sk_${randomBytes(16).toString("hex")}`;
    const migrationId = await createMigration(h, t, "sha256");
    const data = await migrateOk(h, t.rootKey, { migrationId, apiId, keys: [{ hash: sha256Base64(key) }] });
    const verified = await h.post("/v1/keys.verifyKey", { key, apiId });
    expect(verified.body).toMatchObject({ valid: true, code: "VALID", keyId: data.migrated[0]!.keyId });
    const [row] = await h.sql<any>(`select pending_migration_id from keys where id = '${data.migrated[0]!.keyId}'`);
    expect(row.pending_migration_id).toBe(migrationId);
  });

  test("reuses the identity, role and permission a second key names, creating none twice", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const migrationId = unique("mig");
    const externalId = unique("user");
    const role = unique("role");
    const slug = unique("perm");
    const fields = { externalId, roles: [role], permissions: [slug] };
    const first = await migrateOk(h, t.rootKey, {
      migrationId,
      apiId,
      keys: [
        { hash: unique("h1"), ...fields },
        { hash: unique("h2"), ...fields },
      ],
    });
    const second = await migrateOk(h, t.rootKey, { migrationId, apiId, keys: [{ hash: unique("h3"), ...fields }] });
    expect(first.migrated).toHaveLength(2);
    expect(second.migrated).toHaveLength(1);
    expect(await countIn(h, `identities where workspace_id = '${t.workspaceId}' and external_id = '${externalId}'`)).toBe(1);
    expect(await countIn(h, `roles where workspace_id = '${t.workspaceId}' and name = '${role}'`)).toBe(1);
    expect(await countIn(h, `permissions where workspace_id = '${t.workspaceId}' and slug = '${slug}'`)).toBe(1);
    const keyIds = [...first.migrated, ...second.migrated].map((m) => `'${m.keyId}'`).join(",");
    expect(await countIn(h, `keys_roles where key_id in (${keyIds})`)).toBe(3);
    expect(await countIn(h, `keys_permissions where key_id in (${keyIds})`)).toBe(3);
  });

  test("partial success: hashes that exist (in any workspace, deleted ones too) are reported in failed, the others migrated", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const other = await h.tenant();
    const otherApi = await h.createApi(other);
    const otherHash = unique("other");
    await migrateOk(h, other.rootKey, { migrationId: unique("mig"), apiId: otherApi, keys: [{ hash: otherHash }] });
    const deleted = await h.importKey(t, apiId);
    await h.post("/v2/keys.deleteKey", { keyId: deleted.keyId }, t.rootKey);
    const fresh = unique("fresh");
    const data = await migrateOk(h, t.rootKey, {
      migrationId: unique("mig"),
      apiId,
      keys: [{ hash: otherHash }, { hash: fresh }, { hash: sha256Base64(deleted.key) }],
    });
    expect(data.migrated).toEqual([{ hash: fresh, keyId: expect.stringMatching(/^key_/) }]);
    expect(data.failed).toEqual([otherHash, sha256Base64(deleted.key)]);
    // The other workspace's key is untouched.
    expect(await countIn(h, `keys where hash = '${otherHash}' and workspace_id = '${other.workspaceId}'`)).toBe(1);
  });

  test("every hash existing already: nothing migrated, all failed", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const hash = unique("h");
    await migrateOk(h, t.rootKey, { migrationId: unique("mig"), apiId, keys: [{ hash }] });
    expect(await migrateOk(h, t.rootKey, { migrationId: unique("mig"), apiId, keys: [{ hash }] })).toEqual({
      migrated: [],
      failed: [hash],
    });
  });

  test("a hash repeated within the request is a 400 naming both keys, and nothing is written", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const hash = unique("dup");
    const migrationId = unique("mig");
    const res = await migrate(h, t.rootKey, { migrationId, apiId, keys: [{ hash }, { hash: unique("x") }, { hash }] });
    expectV2Error(
      res,
      400,
      "unkey/application/invalid_input",
      "keys[2].hash is the same as keys[0].hash: each hash can be migrated once per request.",
    );
    expect(await countIn(h, `keys where api_id = '${apiId}'`)).toBe(0);
    expect(await countIn(h, `key_migrations where id = '${migrationId}'`)).toBe(0);
  });

  test("credits.remaining null makes an unlimited key (no credits shown)", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const data = await migrateOk(h, t.rootKey, {
      migrationId: unique("mig"),
      apiId,
      keys: [{ hash: unique("h"), credits: { remaining: null } }],
    });
    const got = await h.post("/v2/keys.getKey", { keyId: data.migrated[0]!.keyId }, t.rootKey);
    expect(got.status).toBe(200);
    expect(got.body.data.credits).toBeUndefined();
  });

  test("a monthly refill without refillDay is a 400 for the whole request, nothing written", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const res = await migrate(h, t.rootKey, {
      migrationId: unique("mig"),
      apiId,
      keys: [{ hash: unique("ok") }, { hash: unique("h"), credits: { remaining: 5, refill: { interval: "monthly", amount: 5 } } }],
    });
    expectV2Error(res, 400, "unkey/application/invalid_input");
    expect(JSON.stringify(res.body.error.errors)).toContain("refillDay");
    expect(await countIn(h, `keys where api_id = '${apiId}'`)).toBe(0);
  });

  test("a refill of unlimited credits, and a rate-limit name given twice in a key, are 400s", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const refill = await migrate(h, t.rootKey, {
      migrationId: unique("mig"),
      apiId,
      keys: [{ hash: unique("h"), credits: { remaining: null, refill: { interval: "daily", amount: 5 } } }],
    });
    expectV2Error(refill, 400, "unkey/application/invalid_input");
    const limit = { name: "twice", limit: 1, duration: 1000, autoApply: false };
    const twice = await migrate(h, t.rootKey, {
      migrationId: unique("mig"),
      apiId,
      keys: [{ hash: unique("h"), ratelimits: [limit, limit] }],
    });
    expectV2Error(twice, 400, "unkey/application/invalid_input", "Ratelimit with name 'twice' is already defined in the request");
    expect(await countIn(h, `keys where api_id = '${apiId}'`)).toBe(0);
  });

  test("refuses bodies that break the schema (400)", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const ok = { migrationId: "mig_ok", apiId, keys: [{ hash: "abc" }] };
    const bodies: unknown[] = [
      {},
      { ...ok, apiId: "" },
      { ...ok, migrationId: "" },
      { ...ok, keys: [] },
      { ...ok, keys: [{ hash: "" }] },
      { ...ok, keys: [{ hash: "abc", expires: -1 }] },
      { ...ok, keys: [{ hash: "abc", permissions: [""] }] },
      { ...ok, keys: [{ hash: "abc", permissions: ["p".repeat(129)] }] },
      { ...ok, keys: [{ hash: "abc", roles: [""] }] },
      { ...ok, keys: [{ hash: "abc", roles: ["r".repeat(129)] }] },
      { ...ok, keys: [{ hash: "abc", plaintext: "sk_x" }] },
      { ...ok, extra: true },
    ];
    for (const body of bodies) expectV2Error(await migrate(h, t.rootKey, body), 400, "unkey/application/invalid_input");
    expect(await countIn(h, `keys where api_id = '${apiId}'`)).toBe(0);
  });

  test("an unknown root key is a 401", async ({ h, apiId }) => {
    const res = await migrate(h, "unknown_root_key", { migrationId: "mig_x", apiId, keys: [{ hash: "abc" }] });
    expectV2Error(res, 401, "unkey/authentication/key_not_found");
  });

  test("needs api.*.create_key or api.<apiId>.create_key, checked before the API is looked up (403)", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const otherApi = await h.createApi(t);
    const body = (api: string) => ({ migrationId: unique("mig"), apiId: api, keys: [{ hash: unique("h") }] });
    for (const perms of [
      [],
      [`api.${apiId}.read_key`, "api.*.read_api"],
      [`api.${otherApi}.create_key`],
      ["workspace.read", "api.create"],
    ]) {
      const key = await h.rootKey(t.workspaceId, perms);
      expectV2Error(await migrate(h, key, body(apiId)), 403, "unkey/authorization/insufficient_permissions", /create_key/);
    }
    // Before the lookup: a missing API is a 403 too for a key without the permission.
    const none = await h.rootKey(t.workspaceId, []);
    expectV2Error(await migrate(h, none, body("api_does_not_exist")), 403, "unkey/authorization/insufficient_permissions");
    expect(await countIn(h, `keys where api_id = '${apiId}'`)).toBe(0);
    for (const perms of [[`api.${apiId}.create_key`], ["api.*.create_key"]]) {
      expect((await migrate(h, await h.rootKey(t.workspaceId, perms), body(apiId))).status).toBe(200);
    }
  });

  test("an API that is missing, deleted or of another workspace is a 404", async ({ h, t }) => {
    const other = await h.tenant();
    const otherApi = await h.createApi(other);
    const deletedApi = await h.createApi(t);
    await h.post("/v2/apis.deleteApi", { apiId: deletedApi }, t.rootKey);
    for (const apiId of ["api_does_not_exist", otherApi, deletedApi]) {
      const res = await migrate(h, t.rootKey, { migrationId: unique("mig"), apiId, keys: [{ hash: unique("h") }] });
      expectV2Error(res, 404, "unkey/data/api_not_found", API_NOT_FOUND);
    }
    expect(await countIn(h, `keys where api_id = '${otherApi}'`)).toBe(0);
  });

  test("migration ids are per workspace: another workspace's id is the caller's own migration, and tells nothing of theirs", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const other = await h.tenant();
    const theirs = await createMigration(h, other, "github.com/seamapi/prefixed-api-key");
    const key = `sk_${randomBytes(16).toString("hex")}`;
    // The same answer whether another workspace has the id or nobody has.
    for (const migrationId of [theirs, unique("mig")]) {
      const data = await migrateOk(h, t.rootKey, { migrationId, apiId, keys: [{ hash: sha256Base64(`${key}${migrationId}`) }] });
      expect(data.failed).toEqual([]);
      const [row] = await h.sql<any>(
        `select workspace_id, algorithm from key_migrations where id = '${migrationId}' and workspace_id = '${t.workspaceId}'`,
      );
      expect(row).toEqual({ workspace_id: t.workspaceId, algorithm: "sha256" });
    }
    // Theirs is untouched, and the caller's key is pending in the caller's own migration of that id.
    const [row] = await h.sql<any>(`select algorithm from key_migrations where id = '${theirs}' and workspace_id = '${other.workspaceId}'`);
    expect(row).toEqual({ algorithm: "github.com/seamapi/prefixed-api-key" });
    expect(await countIn(h, `keys where pending_migration_id = '${theirs}'`)).toBe(1);
    expect(await countIn(h, `keys where pending_migration_id = '${theirs}' and workspace_id = '${t.workspaceId}'`)).toBe(1);
  });
});

describe("keyhaven.createMigration (keyhaven extension)", () => {
  test("creates a migration with either algorithm; an id the workspace has already is a 409", async ({ h, t }) => {
    const id = await createMigration(h, t, "github.com/seamapi/prefixed-api-key");
    const [row] = await h.sql<any>(`select workspace_id, algorithm from key_migrations where id = '${id}'`);
    expect(row).toEqual({ workspace_id: t.workspaceId, algorithm: "github.com/seamapi/prefixed-api-key" });
    const again = await h.post("/v2/keyhaven.createMigration", { migrationId: id, algorithm: "sha256" }, t.rootKey);
    expectV2Error(again, 409, "unkey/data/migration_already_exists", `A migration with id '${id}' already exists.`);
  });

  test("ids are per workspace: another workspace creates the same id (200), neither learns nor claims the other's", async ({ h, t }) => {
    const id = await createMigration(h, t, "github.com/seamapi/prefixed-api-key");
    const other = await h.tenant();
    const theirs = await h.post("/v2/keyhaven.createMigration", { migrationId: id, algorithm: "sha256" }, other.rootKey);
    expect(theirs.status, JSON.stringify(theirs.body)).toBe(200);
    const rows = await h.sql<any>(`select workspace_id, algorithm from key_migrations where id = '${id}' order by algorithm`);
    expect(rows).toEqual([
      { workspace_id: t.workspaceId, algorithm: "github.com/seamapi/prefixed-api-key" },
      { workspace_id: other.workspaceId, algorithm: "sha256" },
    ]);
  });

  test("needs api.*.create_key (403) and a known algorithm (400)", async ({ h, t }) => {
    const reader = await h.rootKey(t.workspaceId, ["api.*.read_key"]);
    const denied = await h.post("/v2/keyhaven.createMigration", { migrationId: unique("mig"), algorithm: "sha256" }, reader);
    expectV2Error(denied, 403, "unkey/authorization/insufficient_permissions", "Missing permission: 'api.*.create_key'");
    const bad = await h.post("/v2/keyhaven.createMigration", { migrationId: unique("mig"), algorithm: "md5" }, t.rootKey);
    expectV2Error(bad, 400, "unkey/application/invalid_input");
    const creator = await h.rootKey(t.workspaceId, ["api.*.create_key"]);
    expect((await h.post("/v2/keyhaven.createMigration", { migrationId: unique("mig"), algorithm: "sha256" }, creator)).status).toBe(200);
  });
});

describe("first verification of a prefixed-api-key key (contract §6.3, through the verification core)", () => {
  const scopeOf = (t: Tenant) => async () => ({ workspaceId: t.workspaceId });

  test("verifies with migrationId, rewrites the row to the key's own hash and start, then verifies without it", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const migrationId = await createMigration(h, t, "github.com/seamapi/prefixed-api-key");
    const { key, hash } = prefixedKey("re");
    const data = await migrateOk(h, t.rootKey, { migrationId, apiId, keys: [{ hash, credits: { remaining: 5 } }] });
    const keyId = data.migrated[0]!.keyId;

    // Not found by its own hash without the migration.
    expect(await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, scope: scopeOf(t) }, V1_VERIFY_RULES)).toEqual({
      valid: false,
      code: "NOT_FOUND",
    });
    const first = await verifyKey(
      h.services,
      { key, surface: "v1" as const, remainingCost: 1, scope: scopeOf(t), migrationId },
      V1_VERIFY_RULES,
    );
    expect(first).toMatchObject({ valid: true, code: "VALID", remaining: 4, key: { keyId } });
    const [row] = await h.sql<any>(`select hash, start, pending_migration_id, updated_at_m from keys where id = '${keyId}'`);
    expect(row).toMatchObject({ hash: sha256Base64(key), start: key.slice(0, 7), pending_migration_id: null });
    expect(row.updated_at_m).not.toBeNull();

    // From then on the key verifies by its own hash, with or without migrationId, on v1 too.
    expect(
      await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, scope: scopeOf(t) }, V1_VERIFY_RULES),
    ).toMatchObject({
      valid: true,
      remaining: 3,
    });
    expect(
      await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, scope: scopeOf(t), migrationId }, V1_VERIFY_RULES),
    ).toMatchObject({
      valid: true,
      remaining: 2,
    });
    expect((await h.post("/v1/keys.verifyKey", { key, apiId })).body).toMatchObject({ valid: true, keyId });
  });

  test("through POST /v2/keys.verifyKey: migrationId completes the migration, a malformed key is 400 `Invalid key format`", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const migrationId = await createMigration(h, t, "github.com/seamapi/prefixed-api-key");
    const { key, hash } = prefixedKey("re");
    const keyId = (await migrateOk(h, t.rootKey, { migrationId, apiId, keys: [{ hash, credits: { remaining: 5 } }] })).migrated[0]!.keyId;
    const verify = (body: unknown) => h.post("/v2/keys.verifyKey", body, t.rootKey);

    expect((await verify({ key })).body.data).toMatchObject({ valid: false, code: "NOT_FOUND" });
    const first = await verify({ key, migrationId });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.data).toMatchObject({ valid: true, code: "VALID", keyId, credits: 4 });
    expect((await verify({ key })).body.data).toMatchObject({ valid: true, keyId, credits: 3 });

    const malformed = await verify({ key: "no-underscores-here", migrationId });
    expectV2Error(malformed, 400, "unkey/authentication/malformed", "Invalid key format");
  });

  test("a root key without verify_key for the key's API leaves the pending key unchanged (NOT_FOUND), checked before the rewrite", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const migrationId = await createMigration(h, t, "github.com/seamapi/prefixed-api-key");
    const { key, hash } = prefixedKey("re");
    const keyId = (await migrateOk(h, t.rootKey, { migrationId, apiId, keys: [{ hash, credits: { remaining: 5 } }] })).migrated[0]!.keyId;
    const rowOf = async () =>
      (await h.sql<any>(`select hash, start, pending_migration_id, updated_at_m, remaining_requests from keys where id = '${keyId}'`))[0];
    const before = await rowOf();
    const otherApi = await h.createApi(t);
    for (const permissions of [["api.*.read_key", "api.*.create_key"], [`api.${otherApi}.verify_key`], []]) {
      const rootKey = await h.rootKey(t.workspaceId, permissions);
      const res = await h.post("/v2/keys.verifyKey", { key, migrationId }, rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data, permissions.join()).toEqual({ valid: false, code: "NOT_FOUND" });
      expect(await rowOf()).toEqual(before);
    }
    // With verify_key for the key's API the same request completes the migration.
    const verifier = await h.rootKey(t.workspaceId, [`api.${apiId}.verify_key`]);
    expect((await h.post("/v2/keys.verifyKey", { key, migrationId }, verifier)).body.data).toMatchObject({
      valid: true,
      keyId,
      credits: 4,
    });
    expect(await rowOf()).toMatchObject({ hash: sha256Base64(key), pending_migration_id: null });
  });

  test("a prefix holding underscores keeps them; start is `<prefix>_` and four characters", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const migrationId = await createMigration(h, t, "github.com/seamapi/prefixed-api-key");
    const { key, hash } = prefixedKey("my_app");
    const data = await migrateOk(h, t.rootKey, { migrationId, apiId, keys: [{ hash }] });
    expect(
      await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, scope: scopeOf(t), migrationId }, V1_VERIFY_RULES),
    ).toMatchObject({
      valid: true,
    });
    const [row] = await h.sql<any>(`select start from keys where id = '${data.migrated[0]!.keyId}'`);
    expect(row.start).toBe(key.slice(0, "my_app_".length + 4));
  });

  test("a key that does not split into three parts is InvalidInputError, answered by v2 as 400 `Invalid key format`", async ({ h, t }) => {
    const migrationId = await createMigration(h, t, "github.com/seamapi/prefixed-api-key");
    const bad = verifyKey(
      h.services,
      { key: "no-underscores-here", surface: "v1" as const, remainingCost: 1, scope: scopeOf(t), migrationId },
      V1_VERIFY_RULES,
    );
    await expect(bad).rejects.toBeInstanceOf(InvalidInputError);
    const err = await bad.catch((e) => e);
    const v2 = v2ErrorOf(err);
    expect([v2.status, v2.code, v2.detail]).toEqual([400, "unkey/authentication/malformed", "Invalid key format"]);
  });

  test("stays NOT_FOUND for a migration of another workspace, an unknown one, a sha256 one, or another migration's key", async ({
    h,
    t,
  }) => {
    const apiId = await h.createApi(t);
    const migrationId = await createMigration(h, t, "github.com/seamapi/prefixed-api-key");
    const { key, hash } = prefixedKey("re");
    const data = await migrateOk(h, t.rootKey, { migrationId, apiId, keys: [{ hash }] });
    const other = await h.tenant();
    const otherMigration = await createMigration(h, other, "github.com/seamapi/prefixed-api-key");
    const mine2 = await createMigration(h, t, "github.com/seamapi/prefixed-api-key");
    const sha = await createMigration(h, t, "sha256");
    const notFound = { valid: false, code: "NOT_FOUND" };
    // The caller of another workspace, even naming the right migration.
    expect(
      await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, scope: scopeOf(other), migrationId }, V1_VERIFY_RULES),
    ).toEqual(notFound);
    expect(
      await verifyKey(
        h.services,
        { key, surface: "v1" as const, remainingCost: 1, scope: scopeOf(other), migrationId: otherMigration },
        V1_VERIFY_RULES,
      ),
    ).toEqual(notFound);
    for (const id of ["mig_unknown", mine2, sha]) {
      expect(
        await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, scope: scopeOf(t), migrationId: id }, V1_VERIFY_RULES),
      ).toEqual(notFound);
    }
    // Without a scope there is no workspace to look the migration up in.
    expect(await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, migrationId }, V1_VERIFY_RULES)).toEqual(notFound);
    const [row] = await h.sql<any>(`select hash, pending_migration_id from keys where id = '${data.migrated[0]!.keyId}'`);
    expect(row).toEqual({ hash, pending_migration_id: migrationId });
  });

  test("completeKeyMigration rewrites a deleted key never, and only once", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const migrationId = await createMigration(h, t, "github.com/seamapi/prefixed-api-key");
    const a = prefixedKey("re");
    const b = prefixedKey("re");
    const data = await migrateOk(h, t.rootKey, { migrationId, apiId, keys: [{ hash: a.hash }, { hash: b.hash }] });
    await h.post("/v2/keys.deleteKey", { keyId: data.migrated[1]!.keyId }, t.rootKey);
    const request = (key: string) => ({ key, migrationId, workspaceId: t.workspaceId });
    expect(await completeKeyMigration(h.db, request(b.key), h.clock.now())).toBe(false);
    expect(await completeKeyMigration(h.db, request(a.key), h.clock.now())).toBe(true);
    expect(await completeKeyMigration(h.db, request(a.key), h.clock.now())).toBe(false);
  });
});
