import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";
import { createServices } from "../src/services.js";
import { bootstrap } from "../src/bootstrap.js";
import { loadConfig } from "../src/config.js";
import { startServer } from "../src/main.js";
import { hashKey } from "../src/crypto/hash.js";
import { MemoryRateLimiter } from "../src/storage/ratelimits/memory.ratelimiter.js";
import { resolveMasterKey } from "../src/keyring/masterKey.js";
import { rowsOf, type Store } from "../src/storage/client.js";
import { pooledPglite } from "./pglite-pool.js";
import { deleteRootKeyById, insertRootKey } from "../src/storage/rootKeys/rootKeys.repository.js";

type RootKeyRow = { id: string; workspace_id: string; hash: string; start: string; permissions: string[] };

describe("bootstrap", () => {
  let store: Store;

  beforeEach(async () => {
    store = await pooledPglite();
  });
  afterEach(() => store.close());

  const config = (env: Record<string, string> = {}) => loadConfig({ KEYHAVEN_DATA_DIR: "memory://", ...env });
  const query = async <T>(text: string) => rowsOf<T>(await store.db.execute(sql.raw(text)));
  const workspaces = () => query<{ id: string; name: string; enabled: boolean }>("select * from workspaces");
  const rootKeys = () => query<RootKeyRow>("select * from root_keys order by created_at_m");

  /** Creates an API through HTTP with `rootKey`, as a client would after reading the start-up banner. */
  async function createApiWith(rootKey: string) {
    const app = await buildApp({
      deps: await createServices(config(), store, { masterKey: randomBytes(32), ratelimiter: new MemoryRateLimiter() }),
    });
    try {
      const res = await app.inject({
        method: "POST",
        url: "/v1/apis.createApi",
        headers: { authorization: `Bearer ${rootKey}`, "content-type": "application/json" },
        payload: JSON.stringify({ name: "bootstrapped" }),
      });
      return { status: res.statusCode, body: JSON.parse(res.body) };
    } finally {
      await app.close();
    }
  }

  /** Every value in every table of the public schema, as one string. */
  async function everythingStored(): Promise<string> {
    const tables = await query<{ table_name: string }>("select table_name from information_schema.tables where table_schema = 'public'");
    const dumps = await Promise.all(tables.map(async (t) => JSON.stringify(await query(`select * from "${t.table_name}"`))));
    return dumps.join("\n");
  }

  it("creates the default workspace and a root key with * on first start", async () => {
    const result = await bootstrap(store.db, config());

    expect(result.createdWorkspace).toBe(true);
    expect(result.generatedRootKey).toMatch(/^khroot_[1-9A-HJ-NP-Za-km-z]+$/);
    const ws = await workspaces();
    expect(ws).toHaveLength(1);
    expect(ws[0]).toMatchObject({ id: result.workspaceId, name: "default", enabled: true });
    const keys = await rootKeys();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ workspace_id: result.workspaceId, permissions: ["*"] });
  });

  it("generates a root key that creates an API in the default workspace", async () => {
    const { generatedRootKey, workspaceId } = await bootstrap(store.db, config());

    const res = await createApiWith(generatedRootKey!);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const apis = await query<{ workspace_id: string; name: string }>(`select * from apis where id = '${res.body.apiId}'`);
    expect(apis).toEqual([expect.objectContaining({ workspace_id: workspaceId, name: "bootstrapped" })]);
  });

  it("stores only the SHA-256 hash of the generated root key, never its plaintext", async () => {
    const { generatedRootKey } = await bootstrap(store.db, config());
    const key = generatedRootKey!;

    const [row] = await rootKeys();
    expect(row!.hash).toBe(hashKey(key));
    expect(row!.hash).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    expect(key.startsWith(row!.start)).toBe(true);
    expect(row!.start.length).toBeLessThan(key.length / 2);
    expect(await everythingStored()).not.toContain(key);
  });

  it("creates no workspace and generates no key on the next start", async () => {
    const first = await bootstrap(store.db, config());
    const second = await bootstrap(store.db, config());

    expect(second).toEqual({ workspaceId: first.workspaceId, createdWorkspace: false });
    expect(second.generatedRootKey).toBeUndefined();
    expect(await workspaces()).toHaveLength(1);
    expect(await rootKeys()).toHaveLength(1);
    const res = await createApiWith(first.generatedRootKey!);
    expect(res.status).toBe(200);
  });

  it("makes KEYHAVEN_ROOT_KEY a root key with * in the default workspace, instead of generating one", async () => {
    const rootKey = `my-operator-secret-${randomBytes(8).toString("hex")}`;
    const result = await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: rootKey }));

    expect(result.createdWorkspace).toBe(true);
    expect(result.generatedRootKey).toBeUndefined();
    const keys = await rootKeys();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ workspace_id: result.workspaceId, hash: hashKey(rootKey), permissions: ["*"] });
    expect(await everythingStored()).not.toContain(rootKey);
    const res = await createApiWith(rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });

  it("keeps KEYHAVEN_ROOT_KEY as one root key across restarts, without a duplicate row", async () => {
    const rootKey = `my-operator-secret-${randomBytes(8).toString("hex")}`;
    const first = await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: rootKey }));
    const second = await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: rootKey }));

    expect(second).toEqual({ workspaceId: first.workspaceId, createdWorkspace: false });
    const keys = await rootKeys();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatchObject({ workspace_id: first.workspaceId, hash: hashKey(rootKey), permissions: ["*"] });
    expect((await createApiWith(rootKey)).status).toBe(200);
  });

  it("adds KEYHAVEN_ROOT_KEY to a store that was first started without it, next to the generated key", async () => {
    const first = await bootstrap(store.db, config());
    const rootKey = `recovery-secret-${randomBytes(8).toString("hex")}`;
    const second = await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: rootKey }));

    expect(second.workspaceId).toBe(first.workspaceId);
    expect(second.generatedRootKey).toBeUndefined();
    expect(await workspaces()).toHaveLength(1);
    expect((await rootKeys()).map((k) => k.hash).sort()).toEqual([hashKey(first.generatedRootKey!), hashKey(rootKey)].sort());
    expect((await createApiWith(rootKey)).status).toBe(200);
    expect((await createApiWith(first.generatedRootKey!)).status).toBe(200);
  });

  it("restores KEYHAVEN_ROOT_KEY with * on the next start after it was deleted", async () => {
    const rootKey = `my-operator-secret-${randomBytes(8).toString("hex")}`;
    await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: rootKey }));
    const [row] = await rootKeys();
    await deleteRootKeyById(store.db, row!.id);
    expect((await createApiWith(rootKey)).status).toBe(403);

    await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: rootKey }));
    expect(await rootKeys()).toEqual([expect.objectContaining({ hash: hashKey(rootKey), permissions: ["*"] })]);
    expect((await createApiWith(rootKey)).status).toBe(200);
  });

  it("revokes the previous KEYHAVEN_ROOT_KEY when it changes, and keeps other root keys", async () => {
    const first = `first-operator-secret-${randomBytes(8).toString("hex")}`;
    const second = `second-operator-secret-${randomBytes(8).toString("hex")}`;
    const { workspaceId } = await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: first }));
    const { key: other } = await insertRootKey(store.db, { workspaceId, name: "ci", permissions: ["*"] }, Date.now());
    expect((await createApiWith(first)).status).toBe(200);

    await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: second }));
    expect((await createApiWith(first)).status).toBe(403);
    expect((await createApiWith(second)).status).toBe(200);
    expect((await createApiWith(other)).status).toBe(200);
    expect((await rootKeys()).map((r) => r.hash).sort()).toEqual([hashKey(second), hashKey(other)].sort());
  });

  // Issue 35: what the first start creates is a change like any other, recorded as the first start's (actor kind
  // cli), and a start that changes nothing records nothing.
  type Entry = { event: string; workspace_id: string; actor_kind: string; actor_id: string; surface: string; targets: unknown };
  const entries = () =>
    query<Entry>("select event, workspace_id, actor_kind, actor_id, surface, targets from audit_log order by created_at_m, event");
  const targetsOf = (e: Entry) => (typeof e.targets === "string" ? JSON.parse(e.targets) : e.targets);

  it("records the default workspace and the generated root key as the first start's, and nothing on the next start", async () => {
    const { workspaceId, generatedRootKey } = await bootstrap(store.db, config());
    const [key] = await rootKeys();
    const first = await entries();
    expect(first.map((e) => [e.event, e.workspace_id, e.actor_kind, e.actor_id, e.surface])).toEqual([
      ["rootKey.create", workspaceId, "cli", "bootstrap", "cli"],
      ["workspace.create", workspaceId, "cli", "bootstrap", "cli"],
    ]);
    expect(first.flatMap(targetsOf)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: "workspace", id: workspaceId }),
        expect.objectContaining({ type: "rootKey", id: key!.id }),
      ]),
    );
    await bootstrap(store.db, config());
    expect(await entries()).toHaveLength(2);
    const stored = JSON.stringify(await query("select * from audit_log"));
    expect(stored).not.toContain(generatedRootKey!);
    expect(stored).not.toContain(hashKey(generatedRootKey!));
  });

  it("records KEYHAVEN_ROOT_KEY's root key once, and the revocation and the new key when it changes", async () => {
    const first = `first-operator-secret-${randomBytes(8).toString("hex")}`;
    const second = `second-operator-secret-${randomBytes(8).toString("hex")}`;
    await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: first }));
    await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: first }));
    expect((await entries()).map((e) => e.event).sort()).toEqual(["rootKey.create", "workspace.create"]);
    const [before] = await rootKeys();
    await bootstrap(store.db, config({ KEYHAVEN_ROOT_KEY: second }));
    const after = await entries();
    expect(after.map((e) => e.event).sort()).toEqual(["rootKey.create", "rootKey.create", "rootKey.delete", "workspace.create"]);
    expect(targetsOf(after.find((e) => e.event === "rootKey.delete")!)).toEqual([
      expect.objectContaining({ type: "rootKey", id: before!.id }),
    ]);
    const stored = JSON.stringify(await query("select * from audit_log"));
    for (const secret of [first, second, hashKey(first), hashKey(second)]) expect(stored).not.toContain(secret);
  });
});

describe("resolveMasterKey", () => {
  let dataDir: string;

  beforeEach(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-master-key-"));
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  const keyFile = () => path.join(dataDir, "encryption.key");

  it("creates <dataDir>/encryption.key with mode 0600 in embedded mode without KEYHAVEN_ENCRYPTION_KEY", () => {
    const master = resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: dataDir }));

    expect(master.key).toHaveLength(32);
    expect(existsSync(keyFile())).toBe(true);
    expect(statSync(keyFile()).mode & 0o777).toBe(0o600);
    expect(Buffer.from(readFileSync(keyFile(), "utf8").trim(), "base64").equals(master.key!)).toBe(true);
    expect(master.source).toContain(path.resolve(keyFile()));
  });

  it("reuses the key in encryption.key on the next start", () => {
    const first = resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: dataDir }));
    const fileBefore = readFileSync(keyFile(), "utf8");
    const second = resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: dataDir }));

    expect(second.key!.equals(first.key!)).toBe(true);
    expect(readFileSync(keyFile(), "utf8")).toBe(fileBefore);
    expect(statSync(keyFile()).mode & 0o777).toBe(0o600);
  });

  it("refuses to start on an encryption.key that does not hold 32 bytes, naming the file", () => {
    writeFileSync(keyFile(), "c2hvcnQ=\n", { mode: 0o600 });
    expect(() => resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: dataDir }))).toThrow(keyFile());
  });

  it("has no key, and writes no file, with DATABASE_URL set and no KEYHAVEN_ENCRYPTION_KEY", () => {
    const master = resolveMasterKey(
      loadConfig({ KEYHAVEN_DATA_DIR: dataDir, DATABASE_URL: "postgres://postgres@127.0.0.1:5432/keyhaven" }),
    );

    expect(master.key).toBeUndefined();
    expect(master.source).toContain("KEYHAVEN_ENCRYPTION_KEY is not set");
    expect(existsSync(keyFile())).toBe(false);
  });

  it("uses KEYHAVEN_ENCRYPTION_KEY when set, in either mode, and writes no file", () => {
    const encryptionKey = randomBytes(32);
    const env = { KEYHAVEN_DATA_DIR: dataDir, KEYHAVEN_ENCRYPTION_KEY: encryptionKey.toString("base64") };

    const embedded = resolveMasterKey(loadConfig(env));
    const postgres = resolveMasterKey(loadConfig({ ...env, DATABASE_URL: "postgres://postgres@127.0.0.1:5432/x" }));

    expect(embedded.key!.equals(encryptionKey)).toBe(true);
    expect(postgres.key!.equals(encryptionKey)).toBe(true);
    expect(embedded.source).toBe("KEYHAVEN_ENCRYPTION_KEY");
    expect(existsSync(keyFile())).toBe(false);
  });

  it("prefers KEYHAVEN_ENCRYPTION_KEY over an existing encryption.key", () => {
    const fromFile = resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: dataDir })).key!;
    const encryptionKey = randomBytes(32);
    const master = resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: dataDir, KEYHAVEN_ENCRYPTION_KEY: encryptionKey.toString("base64") }));

    expect(master.key!.equals(encryptionKey)).toBe(true);
    expect(master.key!.equals(fromFile)).toBe(false);
  });

  it("uses a key of this process only for an in-memory store", () => {
    const a = resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: "memory://" }));
    const b = resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: "memory://" }));
    expect(a.key).toHaveLength(32);
    expect(a.key!.equals(b.key!)).toBe(false);
  });

  it("warns, at start, about a key file that group or others can read, and not about a 0600 one", async () => {
    const exposed = path.join(dataDir, "exposed.key");
    writeFileSync(exposed, `${randomBytes(32).toString("base64")}\n`);
    chmodSync(exposed, 0o644);
    const warnings: string[] = [];
    const server = await startServer(
      loadConfig({ KEYHAVEN_DATA_DIR: "memory://", KEYHAVEN_ENCRYPTION_KEY_FILE: exposed, PORT: "0", LOG_LEVEL: "silent" }),
      () => {},
      (line) => warnings.push(line),
    );
    await server.close();
    expect(warnings).toEqual([
      `the encryption key file ${exposed} can be read by other users (mode 0644); restrict it with: chmod 600 ${exposed}`,
    ]);

    // The embedded store's own key file, too.
    resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: dataDir }));
    expect(resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: dataDir })).warnings).toEqual([]);
    chmodSync(keyFile(), 0o640);
    expect(resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: dataDir })).warnings).toEqual([
      expect.stringContaining(`${keyFile()} can be read by other users (mode 0640)`),
    ]);
  }, 120_000); // a whole start of an embedded store, on a machine that may be loaded

  it("uses KEYHAVEN_ENCRYPTION_KEY_FILE in either mode, naming the file as the source, and writes no key file", () => {
    const key = randomBytes(32);
    const secretFile = path.join(dataDir, "secret.key");
    writeFileSync(secretFile, `${key.toString("base64")}\n`, { mode: 0o600 });
    const embedded = resolveMasterKey(loadConfig({ KEYHAVEN_DATA_DIR: dataDir, KEYHAVEN_ENCRYPTION_KEY_FILE: secretFile }));
    const postgres = resolveMasterKey(
      loadConfig({ KEYHAVEN_ENCRYPTION_KEY_FILE: secretFile, DATABASE_URL: "postgres://postgres@127.0.0.1:5432/x" }),
    );
    for (const master of [embedded, postgres]) {
      expect(master.key!.equals(key)).toBe(true);
      expect(master.source).toBe(`KEYHAVEN_ENCRYPTION_KEY_FILE (${secretFile})`);
      expect(master.warnings).toEqual([]);
    }
    expect(existsSync(keyFile())).toBe(false);
  });
});
