import { createHash, randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { cliCaller } from "../src/cli/cli.caller.js";
import { WriteGate } from "../src/core/changes.js";
import { resetEncryptionKey, rotateEncryptionKey } from "../src/core/encryptionKey/encryptionKey.core.js";
import { importKeys } from "../src/core/import/import.keys.js";
import { MigrationWorker } from "../src/core/import/import.worker.js";
import { fingerprint } from "../src/crypto/vault.js";
import { RotationError } from "../src/keyring/masterKey.rotate.js";
import { hashKey } from "../src/crypto/hash.js";
import { auditEntries } from "./audit-entries.js";
import { callerOf } from "./caller-of.js";
import { harnessWith, testWith } from "./fixtures.js";
import { ADMIN_TOKEN, type Harness, type Response } from "./helper.js";
import { installKeyInsertFault, keyInsertFault } from "./key-insert-fault.js";

// Issue 35 §2: root keys (operator), apis.deleteKeys and the imports record their audit entries through the write
// gate, in the change's own transaction: the event, the actor, the targets, the workspace, the surface and the
// request id; a refused call records nothing, and no entry holds a secret.

const requestIdOf = (res: Response) => (res.body?.meta?.requestId as string | undefined) ?? (res.headers["unkey-request-id"] as string);

const OPERATOR = { actorKind: "operator", actorId: "admin", actorName: "operator", surface: "operator" };

// No worker of the app's own: the tests drive one (processNext), so each batch's entry is awaited, not polled for.
const test = testWith(
  harnessWith({}, { migrationWorker: false }, async (h) => {
    // Inserting a key named `fail:<SQLSTATE>` fails with that SQLSTATE while the fault is switched on (as in
    // test/migration-worker.test.ts): a batch that fails as a whole.
    await installKeyInsertFault(h);
  }),
);

describe("audit: operator root keys", () => {
  test("rootKeys.createRootKey and deleteRootKey record rootKey.create / rootKey.delete in the key's workspace", async ({ h }) => {
    const t = await h.tenant();
    const created = await h.post(
      "/v1/rootKeys.createRootKey",
      { workspaceId: t.workspaceId, name: "ci", permissions: ["api.*.create_api", "api.*.read_api", "api.*.create_api"] },
      ADMIN_TOKEN,
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const { keyId, key } = created.body as { keyId: string; key: string };
    const deleted = await h.post("/v1/rootKeys.deleteRootKey", { keyId }, ADMIN_TOKEN);
    expect(deleted.status).toBe(200);
    const unnamed = await h.post("/v1/rootKeys.createRootKey", { workspaceId: t.workspaceId, permissions: [] }, ADMIN_TOKEN);
    expect(unnamed.status).toBe(200);

    const entries = await auditEntries(h, { workspaceId: t.workspaceId });
    expect(entries).toEqual([
      expect.objectContaining({
        ...OPERATOR,
        workspaceId: t.workspaceId,
        event: "rootKey.create",
        targets: [{ type: "rootKey", id: keyId, name: "ci" }],
        details: { permissions: ["api.*.create_api", "api.*.read_api"] },
        requestId: requestIdOf(created),
      }),
      expect.objectContaining({
        ...OPERATOR,
        workspaceId: t.workspaceId,
        event: "rootKey.delete",
        targets: [{ type: "rootKey", id: keyId, name: "ci" }],
        details: { permissions: ["api.*.create_api", "api.*.read_api"] },
        requestId: requestIdOf(deleted),
      }),
      expect.objectContaining({
        ...OPERATOR,
        event: "rootKey.create",
        targets: [{ type: "rootKey", id: unnamed.body.keyId }],
        details: { permissions: [] },
        requestId: requestIdOf(unnamed),
      }),
    ]);
    const stored = JSON.stringify(await auditEntries(h));
    for (const secret of [key, hashKey(key), unnamed.body.key, hashKey(unnamed.body.key), ADMIN_TOKEN])
      expect(stored).not.toContain(secret);
  });

  test("a refused root-key call (404 workspace, 404 key, 400) records nothing and creates nothing", async ({ h }) => {
    const before = await auditEntries(h);
    const keysBefore = await h.sql("select id from root_keys order by id");
    const refused = [
      await h.post("/v1/rootKeys.createRootKey", { workspaceId: "ws_missing", permissions: ["*"] }, ADMIN_TOKEN),
      await h.post("/v1/rootKeys.deleteRootKey", { keyId: "rk_missing" }, ADMIN_TOKEN),
      await h.post("/v1/rootKeys.createRootKey", { workspaceId: "ws_missing", permissions: "*" }, ADMIN_TOKEN),
    ];
    expect(refused.map((r) => r.status)).toEqual([404, 404, 400]);
    expect(await auditEntries(h)).toEqual(before);
    expect(await h.sql("select id from root_keys order by id")).toEqual(keysBefore);
  });
});

describe("audit: v1 apis.deleteKeys", () => {
  test("one key.delete entry per request naming the API and every key deleted, with its count", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const keyIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await h.post("/v1/keys.createKey", { apiId }, t.rootKey);
      expect(res.status).toBe(200);
      keyIds.push(res.body.keyId as string);
    }
    // One already deleted: a soft deleteKeys leaves it out, a permanent one removes its row too.
    expect((await h.post("/v1/keys.deleteKey", { keyId: keyIds[0] }, t.rootKey)).status).toBe(200);

    const soft = await h.post("/v1/apis.deleteKeys", { apiId }, t.rootKey);
    expect(soft.body).toEqual({ deletedKeys: 2 });
    const permanent = await h.post("/v1/apis.deleteKeys", { apiId, permanent: true }, t.rootKey);
    expect(permanent.body).toEqual({ deletedKeys: 3 });
    // Nothing left to delete: nothing changed, nothing recorded.
    const empty = await h.post("/v1/apis.deleteKeys", { apiId }, t.rootKey);
    expect(empty.body).toEqual({ deletedKeys: 0 });

    const byId = (a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id);
    const entries = (await auditEntries(h, { workspaceId: t.workspaceId, event: "key.delete" })).filter(
      (e) => e.requestId !== null && [requestIdOf(soft), requestIdOf(permanent), requestIdOf(empty)].includes(e.requestId),
    );
    expect(entries).toHaveLength(2);
    const [first, second] = entries;
    expect(first).toMatchObject({
      workspaceId: t.workspaceId,
      actorKind: "root_key",
      actorId: t.rootKeyId,
      surface: "v1",
      requestId: requestIdOf(soft),
      details: { count: 2, permanent: false },
    });
    expect(first!.targets[0]).toEqual({ type: "api", id: apiId });
    expect(first!.targets.slice(1).sort(byId)).toEqual(
      keyIds
        .slice(1)
        .map((id) => ({ type: "key", id }))
        .sort(byId),
    );
    expect(second).toMatchObject({ requestId: requestIdOf(permanent), details: { count: 3, permanent: true } });
    expect(second!.targets[0]).toEqual({ type: "api", id: apiId });
    expect(second!.targets.slice(1).sort(byId)).toEqual(keyIds.map((id) => ({ type: "key", id })).sort(byId));
  });

  test("a refused deleteKeys (403, 404, 400) records nothing and deletes nothing", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { keyId } = await h.importKey(t, apiId);
    const reader = await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]);
    const before = await auditEntries(h, { workspaceId: t.workspaceId });
    const refused = [
      await h.post("/v1/apis.deleteKeys", { apiId }, reader),
      await h.post("/v1/apis.deleteKeys", { apiId: "api_missing" }, t.rootKey),
      await h.post("/v1/apis.deleteKeys", { apiId, permanent: "yes" }, t.rootKey),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 404, 400]);
    expect(await auditEntries(h, { workspaceId: t.workspaceId })).toEqual(before);
    expect(await h.sql(`select deleted_at_m from keys where id = '${keyId}'`)).toEqual([{ deleted_at_m: null }]);
  });
});

const randomHash = () => hashKey(randomBytes(16).toString("hex"));
const byHash = (fields: Record<string, unknown> = {}) => ({ hash: { value: randomHash(), variant: "sha256_base64" }, ...fields });
const newMigrationId = () => `mig_${randomBytes(6).toString("hex")}`;
const keyTargets = (ids: readonly string[]) => ids.map((id) => ({ type: "key", id }));
async function keyIdsOfHashes(h: Harness, hashes: string[]): Promise<string[]> {
  const rows = await h.sql<{ id: string; hash: string }>(
    `select id, hash from keys where hash in (${hashes.map((x) => `'${x}'`).join(", ")})`,
  );
  return hashes.map((x) => rows.find((r) => r.hash === x)!.id);
}
const byRequest = async (h: Harness, workspaceId: string, res: Response) =>
  (await auditEntries(h, { workspaceId })).filter((e) => e.requestId === requestIdOf(res));

describe("audit: v1 migrations.createKeys", () => {
  test("one import.create_keys entry per request naming every API and every key created, with the count", async ({ h, t }) => {
    const [a, b] = [await h.createApi(t), await h.createApi(t)];
    const plaintext = `sk_${randomBytes(16).toString("hex")}`;
    const hashed = byHash();
    const res = await h.post(
      "/v1/migrations.createKeys",
      [
        { apiId: a, plaintext },
        { apiId: b, ...hashed },
        { apiId: a, ...byHash({ meta: { plan: "secret-plan" } }) },
      ],
      t.rootKey,
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const keyIds = res.body.keyIds as string[];
    expect(await byRequest(h, t.workspaceId, res)).toEqual([
      expect.objectContaining({
        workspaceId: t.workspaceId,
        event: "import.create_keys",
        actorKind: "root_key",
        actorId: t.rootKeyId,
        surface: "v1",
        targets: [{ type: "api", id: a }, { type: "api", id: b }, ...keyTargets(keyIds)],
        details: { count: 3 },
      }),
    ]);
    const stored = JSON.stringify(await auditEntries(h, { workspaceId: t.workspaceId }));
    for (const secret of [plaintext, hashKey(plaintext), hashed.hash.value, "secret-plan"]) expect(stored).not.toContain(secret);
  });

  test("an import of more keys than one statement carries still records one entry, naming them all", async ({ h }) => {
    // 1,001 keys through the core (the v1 route takes 100 a request; the core has no such bound): the keys' insert
    // takes two statements (MAX_ROWS_PER_STATEMENT), and the entry rides on the first.
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const caller = callerOf({ workspaceId: t.workspaceId, permissions: new Set(["*"]) });
    const items = Array.from({ length: 1001 }, () => ({ apiId, hash: { value: randomHash(), variant: "sha256_base64" as const } }));
    const keyIds = await importKeys(h.services, caller, items, h.clock.now());
    const entries = await auditEntries(h, { workspaceId: t.workspaceId, event: "import.create_keys" });
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ actorKind: "cli", actorId: "test", details: { count: 1001 } });
    expect(entries[0]!.targets).toEqual([{ type: "api", id: apiId }, ...keyTargets(keyIds)]);
  });

  test("a refused import (403, 404, 409, 412, 400) records nothing", async ({ h, t, apiId }) => {
    const { key } = await h.importKey(t, apiId);
    const reader = await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]);
    const before = await auditEntries(h, { workspaceId: t.workspaceId });
    const refused = [
      await h.post("/v1/migrations.createKeys", [{ apiId, ...byHash() }], reader),
      await h.post("/v1/migrations.createKeys", [{ apiId: "api_missing", ...byHash() }], t.rootKey),
      await h.post(
        "/v1/migrations.createKeys",
        [
          { apiId, ...byHash() },
          { apiId, plaintext: key },
        ],
        t.rootKey,
      ),
      await h.post("/v1/migrations.createKeys", [{ apiId, ...byHash({ roles: ["no-such-role"] }) }], t.rootKey),
      await h.post("/v1/migrations.createKeys", [{ apiId }], t.rootKey),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 404, 409, 412, 400]);
    expect(await auditEntries(h, { workspaceId: t.workspaceId })).toEqual(before);
  });
});

describe("audit: v1 migrations.enqueueKeys and the import worker", () => {
  const WORKER = { actorKind: "worker", actorId: "import-worker", actorName: "import worker", surface: "worker", requestId: null };

  test("enqueueKeys records import.enqueue; the worker records import.apply_batch per batch, naming the keys imported", async ({
    h,
    t,
    apiId,
  }) => {
    const migrationId = newMigrationId();
    const { key: existing } = await h.importKey(t, apiId);
    const fresh = [byHash(), byHash()];
    const plaintext = `sk_${randomBytes(16).toString("hex")}`;
    const enqueued = await h.post(
      "/v1/migrations.enqueueKeys",
      { migrationId, apiId, keys: [fresh[0], { plaintext }, fresh[1], { plaintext: existing }] },
      t.rootKey,
    );
    expect(enqueued.status, JSON.stringify(enqueued.body)).toBe(202);
    expect(await byRequest(h, t.workspaceId, enqueued)).toEqual([
      expect.objectContaining({
        workspaceId: t.workspaceId,
        event: "import.enqueue",
        actorKind: "root_key",
        actorId: t.rootKeyId,
        surface: "v1",
        targets: [
          { type: "migration", id: migrationId },
          { type: "api", id: apiId },
        ],
        details: { count: 4 },
      }),
    ]);
    expect(await auditEntries(h, { event: "import.apply_batch" })).toEqual([]);

    const worker = new MigrationWorker(h.db, { changes: h.services.changes });
    expect(await worker.processNext()).toBe(true);
    const imported = await keyIdsOfHashes(h, [fresh[0]!.hash.value, hashKey(plaintext), fresh[1]!.hash.value]);
    const [applied, ...more] = await auditEntries(h, { event: "import.apply_batch" });
    expect(more).toEqual([]);
    expect(applied).toMatchObject({
      ...WORKER,
      workspaceId: t.workspaceId,
      targets: [{ type: "migration", id: migrationId }, { type: "api", id: apiId }, ...keyTargets(imported)],
      details: { count: 3, failed: 1 },
    });
    expect(applied!.details).toEqual({ batchId: expect.any(Number), count: 3, failed: 1 });
    expect(await worker.processNext()).toBe(false);
    const stored = JSON.stringify(await auditEntries(h, { workspaceId: t.workspaceId }));
    for (const secret of [plaintext, existing, hashKey(plaintext), fresh[0]!.hash.value]) expect(stored).not.toContain(secret);
  });

  test("a batch that fails as a whole records import.apply_batch with nothing imported; the operator's retry records import.retry", async ({
    h,
    t,
    apiId,
  }) => {
    const migrationId = newMigrationId();
    const worker = new MigrationWorker(h.db, { changes: h.services.changes });
    await keyInsertFault(h, true);
    try {
      const enqueued = await h.post(
        "/v1/migrations.enqueueKeys",
        { migrationId, apiId, keys: [byHash({ name: "fail:P0001" }), byHash({ name: "fail:P0001" })] },
        t.rootKey,
      );
      expect(enqueued.status).toBe(202);
      expect(await worker.processNext()).toBe(true);
    } finally {
      await keyInsertFault(h, false);
    }
    const failed = (await auditEntries(h, { event: "import.apply_batch" })).filter((e) => e.targets[0]!.id === migrationId);
    expect(failed).toEqual([
      expect.objectContaining({
        ...WORKER,
        workspaceId: t.workspaceId,
        targets: [
          { type: "migration", id: migrationId },
          { type: "api", id: apiId },
        ],
        details: { batchId: expect.any(Number), count: 0, failed: 2 },
      }),
    ]);

    const retried = await h.post("/v1/migrations.retryMigration", { workspaceId: t.workspaceId, migrationId }, ADMIN_TOKEN);
    expect(retried.body).toEqual({ batches: 1 });
    expect(await auditEntries(h, { workspaceId: t.workspaceId, event: "import.retry" })).toEqual([
      expect.objectContaining({
        ...OPERATOR,
        workspaceId: t.workspaceId,
        targets: [{ type: "migration", id: migrationId }],
        details: { batches: 1, count: 2 },
        requestId: requestIdOf(retried),
      }),
    ]);
    expect(await worker.processNext()).toBe(true);
    const applied = (await auditEntries(h, { event: "import.apply_batch" })).filter((e) => e.targets[0]!.id === migrationId);
    expect(applied).toHaveLength(2);
    expect(applied[1]).toMatchObject({ details: { count: 2, failed: 0 } });
    expect(applied[1]!.targets).toHaveLength(4);

    // Nothing left to retry (nothing changed), an unknown migration (404), no admin token (403): no entry.
    const before = await auditEntries(h);
    const again = await h.post("/v1/migrations.retryMigration", { workspaceId: t.workspaceId, migrationId }, ADMIN_TOKEN);
    expect(again.body).toEqual({ batches: 0 });
    const unknown = await h.post("/v1/migrations.retryMigration", { workspaceId: t.workspaceId, migrationId: "mig_none" }, ADMIN_TOKEN);
    expect(unknown.status).toBe(404);
    const asRootKey = await h.post("/v1/migrations.retryMigration", { workspaceId: t.workspaceId, migrationId }, t.rootKey);
    expect(asRootKey.status).toBe(403);
    expect(await auditEntries(h)).toEqual(before);
  });

  test("a refused enqueue (403, 404, 412, 400) records nothing, nor does an empty one (no batch)", async ({ h, t, apiId }) => {
    const reader = await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]);
    const before = await auditEntries(h, { workspaceId: t.workspaceId });
    const migrationId = newMigrationId();
    const refused = [
      await h.post("/v1/migrations.enqueueKeys", { migrationId, apiId, keys: [byHash()] }, reader),
      await h.post("/v1/migrations.enqueueKeys", { migrationId, apiId: "api_missing", keys: [byHash()] }, t.rootKey),
      await h.post("/v1/migrations.enqueueKeys", { migrationId, apiId, keys: [byHash({ permissions: ["no.such"] })] }, t.rootKey),
      await h.post("/v1/migrations.enqueueKeys", { migrationId, apiId, keys: [{}] }, t.rootKey),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 404, 412, 400]);
    const empty = await h.post("/v1/migrations.enqueueKeys", { migrationId, apiId, keys: [] }, t.rootKey);
    expect(empty.status).toBe(202);
    expect(await auditEntries(h, { workspaceId: t.workspaceId })).toEqual(before);
  });
});

describe("audit: v2 keys.migrateKeys", () => {
  const sha256Base64 = (key: string) => createHash("sha256").update(key).digest("base64");

  test("one import.create_keys per request naming the API and the keys created; migration.create when it made the migration", async ({
    h,
    t,
    apiId,
  }) => {
    const migrationId = newMigrationId();
    const hashes = [sha256Base64(randomBytes(16).toString("hex")), sha256Base64(randomBytes(16).toString("hex"))];
    const first = await h.post("/v2/keys.migrateKeys", { migrationId, apiId, keys: [{ hash: hashes[0] }] }, t.rootKey);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const firstIds = (first.body.data.migrated as { keyId: string }[]).map((m) => m.keyId);
    const v2 = { workspaceId: t.workspaceId, actorKind: "root_key", actorId: t.rootKeyId, surface: "v2" };
    const entries = await byRequest(h, t.workspaceId, first);
    expect(entries.map((e) => e.event).sort()).toEqual(["import.create_keys", "migration.create"]);
    expect(entries.find((e) => e.event === "migration.create")).toMatchObject({
      ...v2,
      targets: [{ type: "migration", id: migrationId }],
      details: { algorithm: "sha256" },
    });
    expect(entries.find((e) => e.event === "import.create_keys")).toMatchObject({
      ...v2,
      targets: [{ type: "api", id: apiId }, ...keyTargets(firstIds)],
      details: { count: 1 },
    });

    // The same migration again, one hash existing: only the key created is named, and no migration.create.
    const second = await h.post(
      "/v2/keys.migrateKeys",
      { migrationId, apiId, keys: [{ hash: hashes[0] }, { hash: hashes[1] }] },
      t.rootKey,
    );
    expect(second.body.data.failed).toEqual([hashes[0]]);
    const secondIds = (second.body.data.migrated as { keyId: string }[]).map((m) => m.keyId);
    expect(await byRequest(h, t.workspaceId, second)).toEqual([
      expect.objectContaining({ ...v2, event: "import.create_keys", targets: [{ type: "api", id: apiId }, ...keyTargets(secondIds)] }),
    ]);
    // Every hash existing: nothing created, nothing recorded.
    const none = await h.post("/v2/keys.migrateKeys", { migrationId, apiId, keys: [{ hash: hashes[1] }] }, t.rootKey);
    expect(none.body.data).toEqual({ migrated: [], failed: [hashes[1]] });
    expect(await byRequest(h, t.workspaceId, none)).toEqual([]);
    expect(JSON.stringify(await auditEntries(h, { workspaceId: t.workspaceId }))).not.toContain(hashes[0]);
  });

  test("the roles and permissions it creates on the way are recorded as role.create / permission.create", async ({ h, t, apiId }) => {
    const tag = randomBytes(4).toString("hex");
    const existingRole = `mig-role-old-${tag}`;
    expect((await h.post("/v1/permissions.createRole", { name: existingRole }, t.rootKey)).status).toBe(200);
    const res = await h.post(
      "/v2/keys.migrateKeys",
      {
        migrationId: newMigrationId(),
        apiId,
        keys: [
          {
            hash: sha256Base64(randomBytes(16).toString("hex")),
            roles: [existingRole, `mig-role-new-${tag}`],
            permissions: [`mig.perm.${tag}`],
          },
        ],
      },
      t.rootKey,
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const ids = async (table: string, column: string, value: string) =>
      (await h.sql<{ id: string }>(`select id from ${table} where workspace_id = '${t.workspaceId}' and ${column} = '${value}'`))[0]!.id;
    const entries = await byRequest(h, t.workspaceId, res);
    expect(entries.map((e) => e.event).sort()).toEqual(["import.create_keys", "migration.create", "permission.create", "role.create"]);
    expect(entries.find((e) => e.event === "role.create")!.targets).toEqual([
      { type: "role", id: await ids("roles", "name", `mig-role-new-${tag}`), name: `mig-role-new-${tag}` },
    ]);
    expect(entries.find((e) => e.event === "permission.create")!.targets).toEqual([
      { type: "permission", id: await ids("permissions", "slug", `mig.perm.${tag}`), name: `mig.perm.${tag}` },
    ]);
    for (const e of entries) expect(e).toMatchObject({ actorKind: "root_key", actorId: t.rootKeyId, surface: "v2" });
  });

  test("a refused migrateKeys (403, 404, 400) records nothing and creates no migration", async ({ h, t, apiId }) => {
    const reader = await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]);
    const before = await auditEntries(h, { workspaceId: t.workspaceId });
    const hash = sha256Base64(randomBytes(16).toString("hex"));
    const migrationId = newMigrationId();
    const refused = [
      await h.post("/v2/keys.migrateKeys", { migrationId, apiId, keys: [{ hash }] }, reader),
      await h.post("/v2/keys.migrateKeys", { migrationId, apiId: "api_missing", keys: [{ hash }] }, t.rootKey),
      await h.post(
        "/v2/keys.migrateKeys",
        { migrationId, apiId, keys: [{ hash, credits: { remaining: null, refill: { interval: "daily", amount: 1 } } }] },
        t.rootKey,
      ),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 404, 400]);
    expect(await auditEntries(h, { workspaceId: t.workspaceId })).toEqual(before);
    expect(await h.sql(`select id from key_migrations where id = '${migrationId}'`)).toEqual([]);
  });
});

// Last in the file: the rotation and the reset change the store's encryption key under the harness.
describe("audit: keyhaven rotate-encryption-key and reset-encryption-key", () => {
  const CLI = { actorKind: "cli", surface: "cli", workspaceId: null, requestId: null };

  test("a rotation records encryptionKey.rotate above every workspace, naming the data keys re-wrapped; a refused or empty one nothing", async ({
    h,
    t,
    apiId,
  }) => {
    await h.importKey(t, apiId); // a plaintext import: the workspace gets a data key
    const other = await h.tenant();
    await h.importKey(other, await h.createApi(other));
    const dataKeys = (await h.sql<{ id: string }>("select id from encryption_keys order by id")).map((r) => r.id);
    expect(dataKeys.length).toBeGreaterThanOrEqual(2);
    const changes = new WriteGate(h.db, h.clock);
    const caller = cliCaller("rotate-encryption-key");
    const oldKey = h.config.encryptionKey!;
    const newKey = randomBytes(32);

    const before = await auditEntries(h);
    await expect(rotateEncryptionKey({ changes }, caller, oldKey, oldKey)).rejects.toThrow(RotationError);
    await expect(rotateEncryptionKey({ changes }, caller, randomBytes(32), newKey)).rejects.toThrow(RotationError);
    expect(await auditEntries(h)).toEqual(before);

    expect(await rotateEncryptionKey({ changes }, caller, oldKey, newKey)).toEqual({ rewrapped: dataKeys.length, alreadyRotated: 0 });
    // Again: every data key is under the new key already, nothing changes, nothing is recorded.
    expect(await rotateEncryptionKey({ changes }, caller, oldKey, newKey)).toEqual({ rewrapped: 0, alreadyRotated: dataKeys.length });
    const entries = await auditEntries(h, { event: "encryptionKey.rotate" });
    expect(entries).toEqual([
      expect.objectContaining({
        ...CLI,
        actorId: "rotate-encryption-key",
        actorName: "keyhaven rotate-encryption-key",
        targets: dataKeys.map((id) => ({ type: "dataKey", id })),
        details: { rewrapped: dataKeys.length, alreadyRotated: 0 },
      }),
    ]);
    const stored = JSON.stringify(entries);
    for (const secret of [oldKey.toString("base64"), newKey.toString("base64"), oldKey.toString("hex"), newKey.toString("hex")]) {
      expect(stored).not.toContain(secret);
    }
    expect(stored).not.toContain(fingerprint(newKey));
    expect(stored).not.toContain(fingerprint(oldKey));
  });

  test("a reset records encryptionKey.reset above every workspace with its counts; one with nothing to forget nothing", async ({ h }) => {
    const changes = new WriteGate(h.db, h.clock);
    const caller = cliCaller("reset-encryption-key");
    const plaintexts = Number((await h.sql<{ n: string }>("select count(*) as n from encrypted_keys"))[0]!.n);
    const dataKeys = Number((await h.sql<{ n: string }>("select count(*) as n from encryption_keys"))[0]!.n);
    expect(await resetEncryptionKey({ changes }, caller)).toEqual({ plaintexts, dataKeys, queuedPlaintexts: 0, webhookSecrets: 0 });
    expect(await resetEncryptionKey({ changes }, caller)).toEqual({ plaintexts: 0, dataKeys: 0, queuedPlaintexts: 0, webhookSecrets: 0 });
    expect(await auditEntries(h, { event: "encryptionKey.reset" })).toEqual([
      expect.objectContaining({
        ...CLI,
        actorId: "reset-encryption-key",
        actorName: "keyhaven reset-encryption-key",
        targets: [],
        details: { plaintexts, dataKeys, queuedPlaintexts: 0, webhookSecrets: 0 },
      }),
    ]);
  });
});
