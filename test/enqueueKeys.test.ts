import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { answersNotFound, describeRootKeyAuth, rowsOf } from "./auth-suite.js";
import { countIn, test } from "./fixtures.js";
import { createHarness, expectError, type Harness } from "./helper.js";
import { waitFor } from "./wait.js";

const secret = () => `sk_${randomBytes(16).toString("hex")}`;
const randomHash = () => hashKey(randomBytes(16).toString("hex"));
const byHash = (fields: Record<string, unknown> = {}) => ({ hash: { value: randomHash(), variant: "sha256_base64" }, ...fields });
const newMigrationId = () => `mig_${randomBytes(6).toString("hex")}`;

const batchesIn = (harness: Harness, migrationId: string) =>
  harness.sql<{ id: string; status: string; imported: number; failed: number; keys: unknown }>(
    `select id, status, imported, failed, keys from migration_batches where migration_id = '${migrationId}' order by id`,
  );

// The file's harness, tenant and API (`h`, `t`, `apiId` of test/fixtures.ts), and helpers over them; a test with a
// harness of its own passes it as the last argument.
const it = test
  .extend(
    "enqueue",
    async ({ h, t }) =>
      (body: unknown, rootKey = t.rootKey, harness = h) =>
        harness.post("/v1/migrations.enqueueKeys", body, rootKey),
  )
  .extend(
    "getMigration",
    async ({ h, t }) =>
      (migrationId: string, rootKey = t.rootKey, harness = h) =>
        harness.get("/v1/migrations.getMigration", { migrationId }, rootKey),
  )
  .extend(
    "batchesOf",
    async ({ h }) =>
      (migrationId: string, harness = h) =>
        batchesIn(harness, migrationId),
  )
  .extend(
    "processed",
    async ({ h }) =>
      (migrationId: string, harness = h) =>
      async () =>
        (await batchesIn(harness, migrationId)).every((b) => b.status !== "pending"),
  )
  .extend(
    "refused",
    async ({ t, count, enqueue }) =>
      async (body: unknown, status: number, code: string, message?: string | RegExp, rootKey = t.rootKey) => {
        const before = await count("migration_batches");
        const keysBefore = await count("keys");
        expectError(await enqueue(body, rootKey), status, code, message);
        expect(await count("migration_batches")).toBe(before);
        expect(await count("keys")).toBe(keysBefore);
      },
  );

describe("migrations.enqueueKeys stores the batch, then the worker imports it", () => {
  it("answers 202 {} once the batch is stored, with plaintexts only encrypted, then the keys appear", async ({
    h,
    t,
    apiId,
    count,
    enqueue,
    getMigration,
    batchesOf,
    processed,
  }) => {
    const plaintext = secret();
    const hash = randomHash();
    const migrationId = newMigrationId();
    await h.post("/v1/permissions.createRole", { name: "queued.admin" }, t.rootKey);
    await h.post("/v1/permissions.createPermission", { name: "queued.read" }, t.rootKey);
    const res = await enqueue({
      migrationId,
      apiId,
      keys: [
        {
          plaintext,
          prefix: "sk",
          name: "queued plaintext",
          ownerId: "owner-1",
          meta: { plan: "pro" },
          roles: ["queued.admin"],
          permissions: ["queued.read"],
          remaining: 10,
          refill: { interval: "daily", amount: 10 },
          ratelimit: { limit: 5, duration: 60_000 },
          environment: "live",
        },
        { hash: { value: hash, variant: "sha256_base64" }, start: "abcd", enabled: false },
      ],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toEqual({});

    // Durable before the answer: the batch row is there, and nothing in it is the plaintext.
    const [batch] = await batchesOf(migrationId);
    expect(batch).toBeDefined();
    const stored = JSON.stringify(batch!.keys);
    expect(stored).not.toContain(plaintext);
    expect(stored).not.toContain(plaintext.slice(8));

    await waitFor("the batches processed", processed(migrationId));
    expect(await batchesOf(migrationId)).toMatchObject([{ status: "done", imported: 2, failed: 0, keys: null }]);

    const rows = await h.sql<any>(`select * from keys where hash in ('${hashKey(plaintext)}', '${hash}') order by name nulls last`);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({
      workspace_id: t.workspaceId,
      api_id: apiId,
      name: "queued plaintext",
      owner_id: "owner-1",
      start: `sk_${plaintext.slice(3, 7)}`,
      meta: { plan: "pro" },
      remaining_requests: 10,
      refill_amount: 10,
      environment: "live",
      enabled: true,
    });
    expect(rows[1]).toMatchObject({ api_id: apiId, start: "abcd", enabled: false });
    const keyId = rows[0].id as string;
    expect(await h.sql(`select "limit", duration::int as duration, auto_apply from ratelimits where key_id = '${keyId}'`)).toEqual([
      { limit: 5, duration: 60_000, auto_apply: true },
    ]);
    expect(await count(`keys_roles where key_id = '${keyId}'`)).toBe(1);
    expect(await count(`keys_permissions where key_id = '${keyId}'`)).toBe(1);

    // Encrypted exactly as createKeys stores it: getKey decrypts it, and the key verifies.
    const [encrypted] = await h.sql<{ encrypted: string }>(`select encrypted from encrypted_keys where key_id = '${keyId}'`);
    expect(encrypted!.encrypted).not.toContain(plaintext);
    const got = await h.get("/v1/keys.getKey", { keyId, decrypt: "true" }, t.rootKey);
    expect(got.body.plaintext).toBe(plaintext);
    expect((await h.post("/v1/keys.verifyKey", { key: plaintext })).body).toMatchObject({ valid: true, keyId, remaining: 9 });

    expect((await getMigration(migrationId)).body).toEqual({
      migrationId,
      batches: { pending: 0, done: 1, failed: 0 },
      keys: { enqueued: 2, imported: 2, failed: 0 },
      retrying: [],
      errors: [],
    });
  });

  it("records a key whose hash already exists as a failure of its index, and imports the others", async ({
    h,
    t,
    apiId,
    count,
    enqueue,
    getMigration,
    processed,
  }) => {
    const existing = await h.importKey(t, apiId);
    const migrationId = newMigrationId();
    const fresh = randomHash();
    const res = await enqueue({
      migrationId,
      apiId,
      keys: [{ hash: { value: fresh, variant: "sha256_base64" } }, { plaintext: existing.key }],
    });
    expect(res.status).toBe(202);
    await waitFor("the batches processed", processed(migrationId));

    expect(await count(`keys where hash = '${fresh}'`)).toBe(1);
    expect(await count(`keys where hash = '${hashKey(existing.key)}'`)).toBe(1);
    const body = (await getMigration(migrationId)).body;
    expect(body).toMatchObject({
      migrationId,
      batches: { pending: 0, done: 0, failed: 1 },
      keys: { enqueued: 2, imported: 1, failed: 1 },
      errors: [
        {
          batchId: expect.any(Number),
          enqueuedAt: expect.any(Number),
          index: 1,
          code: "CONFLICT",
          message: "the key at index 1 already exists",
        },
      ],
    });
    expect(JSON.stringify(body)).not.toContain(existing.key);
    expect(JSON.stringify(body)).not.toContain(hashKey(existing.key));
    const [error] = await h.sql<any>(`select * from migration_errors where migration_id = '${migrationId}'`);
    expect(JSON.stringify(error)).not.toContain(existing.key);
  });

  it("fails the whole batch when its API is deleted before the worker gets to it", async ({ enqueue, getMigration }) => {
    const harness = await createHarness({}, { migrationWorker: false });
    try {
      const tenant = await harness.tenant();
      const api = await harness.createApi(tenant);
      const migrationId = newMigrationId();
      expect((await enqueue({ migrationId, apiId: api, keys: [byHash(), byHash()] }, tenant.rootKey, harness)).status).toBe(202);
      expect((await harness.post("/v1/apis.deleteApi", { apiId: api }, tenant.rootKey)).status).toBe(200);
      expect(await harness.jobs.migrationWorker.processNext()).toBe(true);
      expect((await getMigration(migrationId, tenant.rootKey, harness)).body).toMatchObject({
        batches: { pending: 0, done: 0, failed: 1 },
        keys: { enqueued: 2, imported: 0, failed: 2 },
        errors: [{ index: null, code: "NOT_FOUND", message: `api ${api} not found` }],
      });
    } finally {
      await harness.close();
    }
  });

  it("leaves batches pending while no worker runs, and a new app's worker imports them", async ({
    enqueue,
    getMigration,
    batchesOf,
    processed,
  }) => {
    const harness = await createHarness({}, { migrationWorker: false });
    try {
      const tenant = await harness.tenant();
      const api = await harness.createApi(tenant);
      const migrationId = newMigrationId();
      const keys = [byHash(), { plaintext: secret() }];
      expect((await enqueue({ migrationId, apiId: api, keys }, tenant.rootKey, harness)).status).toBe(202);
      expect((await enqueue({ migrationId, apiId: api, keys: [byHash()] }, tenant.rootKey, harness)).status).toBe(202);
      // A real delay: time in which a worker that must not run (say, one an enqueue woke) would claim a batch. Nothing
      // happening has no event to await; the test passes as fast or slow as the machine is.
      await new Promise((r) => setTimeout(r, 300));
      expect((await batchesOf(migrationId, harness)).map((b) => b.status)).toEqual(["pending", "pending"]);
      expect((await getMigration(migrationId, tenant.rootKey, harness)).body.batches).toEqual({ pending: 2, done: 0, failed: 0 });
      expect(await countIn(harness, `keys where api_id = '${api}'`)).toBe(0);

      const replica = await harness.replica();
      try {
        await waitFor("the batches processed", processed(migrationId, harness));
      } finally {
        await replica.close();
      }
      expect((await batchesOf(migrationId, harness)).map((b) => b.status)).toEqual(["done", "done"]);
      expect(await countIn(harness, `keys where api_id = '${api}'`)).toBe(3);
    } finally {
      await harness.close();
    }
  });

  it("never imports a batch twice when several workers (replicas) run at once", async ({ enqueue, getMigration, processed }) => {
    const harness = await createHarness({}, { migrationWorker: false });
    try {
      const tenant = await harness.tenant();
      const api = await harness.createApi(tenant);
      const migrationId = newMigrationId();
      for (let i = 0; i < 12; i++) {
        const keys = Array.from({ length: 20 }, () => byHash());
        expect((await enqueue({ migrationId, apiId: api, keys }, tenant.rootKey, harness)).status).toBe(202);
      }
      const replicas = await Promise.all([harness.replica(), harness.replica(), harness.replica()]);
      try {
        await waitFor("the batches processed", processed(migrationId, harness), { timeoutMs: 30_000 });
      } finally {
        await Promise.all(replicas.map((r) => r.close()));
      }
      expect(await countIn(harness, `migration_errors where migration_id = '${migrationId}'`)).toBe(0);
      expect((await getMigration(migrationId, tenant.rootKey, harness)).body).toMatchObject({
        batches: { pending: 0, done: 12, failed: 0 },
        keys: { enqueued: 240, imported: 240, failed: 0 },
      });
      expect(await countIn(harness, `keys where api_id = '${api}'`)).toBe(240);
    } finally {
      await harness.close();
    }
  });

  it("lets the worker finish its batch when the app closes, and stop claiming", async ({ enqueue, batchesOf }) => {
    const harness = await createHarness({}, { migrationWorker: false });
    try {
      const tenant = await harness.tenant();
      const api = await harness.createApi(tenant);
      const migrationId = newMigrationId();
      for (let i = 0; i < 3; i++) {
        expect((await enqueue({ migrationId, apiId: api, keys: [byHash(), byHash()] }, tenant.rootKey, harness)).status).toBe(202);
      }
      const worker = harness.jobs.migrationWorker;
      worker.start();
      await worker.stop();
      // Whatever it claimed is complete: no batch is half-imported.
      for (const b of await batchesOf(migrationId, harness)) {
        expect(["pending", "done"]).toContain(b.status);
      }
      const imported = (await batchesOf(migrationId, harness)).filter((b) => b.status === "done").length;
      expect(await countIn(harness, `keys where api_id = '${api}'`)).toBe(imported * 2);
    } finally {
      await harness.close();
    }
  });
});

describe("migrations.enqueueKeys refuses bad batches and writes nothing", () => {
  it("refuses input that fails validation with 400 naming the field", async ({ apiId, refused }) => {
    await refused({ apiId, keys: [byHash()] }, 400, "BAD_REQUEST", /^migrationId: /);
    await refused({ migrationId: "", apiId, keys: [byHash()] }, 400, "BAD_REQUEST", /^migrationId: /);
    await refused({ migrationId: "m", keys: [byHash()] }, 400, "BAD_REQUEST", /^apiId: /);
    await refused({ migrationId: "m", apiId }, 400, "BAD_REQUEST", /^keys: /);
    await refused([byHash()], 400, "BAD_REQUEST");
    await refused({ migrationId: "m", apiId, keys: Array.from({ length: 101 }, () => byHash()) }, 400, "BAD_REQUEST", /^keys: /);
    await refused({ migrationId: "m", apiId, keys: [{}] }, 400, "BAD_REQUEST", "keys.0: provide either `hash` or `plaintext`");
    await refused(
      { migrationId: "m", apiId, keys: [{ ...byHash(), plaintext: secret() }] },
      400,
      "BAD_REQUEST",
      "keys.0: provide either `hash` or `plaintext`, not both",
    );
    await refused(
      { migrationId: "m", apiId, keys: [byHash({ ratelimit: { limit: 1 } })] },
      400,
      "BAD_REQUEST",
      /^keys\.0\.ratelimit\.duration: /,
    );
    await refused(
      { migrationId: "m", apiId, keys: [byHash({ ratelimit: { limit: 1, duration: 999 } })] },
      400,
      "BAD_REQUEST",
      /^keys\.0\.ratelimit\.duration: /,
    );
    await refused(
      { migrationId: "m", apiId, keys: [byHash({ refill: { interval: "daily", amount: 1 } })] },
      400,
      "BAD_REQUEST",
      "keys.0.refill: remaining must be set if you are using refill.",
    );
    await refused({ migrationId: "m", apiId, keys: [byHash({ remaining: 0 })] }, 400, "BAD_REQUEST", /^keys\.0\.remaining: /);
    await refused({ migrationId: "m", apiId, keys: [byHash({ prefix: "123456789" })] }, 400, "BAD_REQUEST", /^keys\.0\.prefix: /);
  });

  it("refuses a key repeated within the batch (409), roles or permissions that do not exist (412), an unknown API (404)", async ({
    apiId,
    refused,
  }) => {
    const plaintext = secret();
    await refused(
      { migrationId: "m", apiId, keys: [{ plaintext }, byHash(), { plaintext }] },
      409,
      "CONFLICT",
      "the key at index 2 is the same key as the one at index 0",
    );
    await refused(
      { migrationId: "m", apiId, keys: [byHash({ roles: ["nope"] })] },
      412,
      "PRECONDITION_FAILED",
      'Roles ["nope"] are missing, please create them first',
    );
    await refused(
      { migrationId: "m", apiId, keys: [byHash({ permissions: ["nope"] })] },
      412,
      "PRECONDITION_FAILED",
      'Permissions ["nope"] are missing, please create them first',
    );
    await refused({ migrationId: "m", apiId: "api_missing", keys: [byHash()] }, 404, "NOT_FOUND", "api api_missing not found");
  });

  it("needs create_key, which suffices for plaintext too (as createKeys); encrypt_key alone is refused", async ({
    h,
    t,
    apiId,
    enqueue,
    refused,
  }) => {
    // Refused first: the worker imports what is enqueued below in the background, which `refused`'s counts would see.
    const encryptOnly = await h.rootKey(t.workspaceId, ["api.*.encrypt_key", `api.${apiId}.encrypt_key`]);
    for (const keys of [[{ plaintext: secret() }], [byHash()]]) {
      await refused({ migrationId: "m", apiId, keys }, 403, "INSUFFICIENT_PERMISSIONS", undefined, encryptOnly);
    }
    const createOnly = await h.rootKey(t.workspaceId, [`api.${apiId}.create_key`]);
    expect((await enqueue({ migrationId: newMigrationId(), apiId, keys: [{ plaintext: secret() }] }, createOnly)).status).toBe(202);
    expect((await enqueue({ migrationId: newMigrationId(), apiId, keys: [byHash()] }, createOnly)).status).toBe(202);
  });

  it("answers an empty batch with 202 and stores nothing", async ({ apiId, count, enqueue }) => {
    const before = await count("migration_batches");
    expect((await enqueue({ migrationId: newMigrationId(), apiId, keys: [] })).status).toBe(202);
    expect(await count("migration_batches")).toBe(before);
  });

  it("refuses plaintext when no encryption key is configured (412), as createKeys does", async ({ enqueue }) => {
    const harness = await createHarness({ KEYHAVEN_ENCRYPTION_KEY: "" });
    try {
      const tenant = await harness.tenant();
      const api = await harness.createApi(tenant);
      const res = await enqueue({ migrationId: "m", apiId: api, keys: [{ plaintext: secret() }] }, tenant.rootKey, harness);
      expectError(res, 412, "PRECONDITION_FAILED");
      expect(await countIn(harness, "migration_batches")).toBe(0);
    } finally {
      await harness.close();
    }
  });
});

describe("migrations.getMigration (keyhaven extension)", () => {
  it("answers 404 for a migration the workspace has none of", async ({ getMigration }) => {
    expectError(await getMigration("never-enqueued"), 404, "NOT_FOUND", "migration never-enqueued not found");
  });

  it("needs read_api on the migration's APIs", async ({ h, t, apiId, enqueue, getMigration }) => {
    const migrationId = newMigrationId();
    expect((await enqueue({ migrationId, apiId, keys: [byHash()] })).status).toBe(202);
    const other = await h.rootKey(t.workspaceId, ["api.other.read_api", `api.${apiId}.create_key`]);
    expectError(await getMigration(migrationId, other), 403, "INSUFFICIENT_PERMISSIONS");
    const reader = await h.rootKey(t.workspaceId, [`api.${apiId}.read_api`]);
    expect((await getMigration(migrationId, reader)).status).toBe(200);
  });

  it("never names the migration's APIs to a root key that may not read them, and answers without read_api before looking", async ({
    h,
    t,
    apiId,
    enqueue,
    getMigration,
  }) => {
    const migrationId = newMigrationId();
    expect((await enqueue({ migrationId, apiId, keys: [byHash()] })).status).toBe(202);
    const other = await h.rootKey(t.workspaceId, ["api.other.read_api"]);
    const refused = await getMigration(migrationId, other);
    expectError(refused, 403, "INSUFFICIENT_PERMISSIONS", /for every API of the migration/);
    expect(JSON.stringify(refused.body)).not.toContain(apiId);
    // Without any read_api, a migration that exists and one that does not are answered alike.
    const none = await h.rootKey(t.workspaceId, ["api.*.create_key"]);
    const existing = await getMigration(migrationId, none);
    expectError(existing, 403, "INSUFFICIENT_PERMISSIONS");
    expect(JSON.stringify(existing.body)).not.toContain(apiId);
    expectError(await getMigration("never-enqueued", none), 403, "INSUFFICIENT_PERMISSIONS", existing.body.error.message);
  });
});

describeRootKeyAuth(it, {
  method: "POST",
  path: "/v1/migrations.enqueueKeys",
  async validRequest(h, owner) {
    return { body: { migrationId: newMigrationId(), apiId: await h.createApi(owner), keys: [byHash()] } };
  },
  insufficientPermissions: ["api.*.read_api", "api.*.encrypt_key", "api.other.create_key"],
  countRows: rowsOf("migration_batches"),
  successStatus: 202,
  async expectForOtherWorkspace(res, h) {
    expectError(res, 404, "NOT_FOUND", /^api api_\w+ not found$/);
    expect(await countIn(h, "migration_batches")).toBeGreaterThanOrEqual(0);
  },
});

describeRootKeyAuth(it, {
  method: "GET",
  path: "/v1/migrations.getMigration",
  async validRequest(h, owner) {
    const migrationId = newMigrationId();
    const res = await h.post(
      "/v1/migrations.enqueueKeys",
      { migrationId, apiId: await h.createApi(owner), keys: [byHash()] },
      owner.rootKey,
    );
    expect(res.status).toBe(202);
    return { query: { migrationId } };
  },
  insufficientPermissions: ["api.*.create_key", "api.other.read_api"],
  countRows: rowsOf("migration_batches"),
  expectForOtherWorkspace: answersNotFound(/^migration mig_\w+ not found$/),
});
