import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";
import { createServices } from "../src/services.js";
import { loadConfig } from "../src/config.js";
import { startServer } from "../src/main.js";
import { Keyring } from "../src/keyring/keyring.js";
import { RotationError, rotateMasterKey } from "../src/keyring/masterKey.rotate.js";
import { fingerprint } from "../src/crypto/vault.js";
import { migrateAndRun, openPglite } from "../src/storage/client.js";
import { insertWorkspace } from "../src/storage/workspaces/workspaces.repository.js";
import { runKeyhaven } from "./cli-process.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";

let h: Harness;
let tenants: Tenant[];
let apis: string[];
const plaintexts: string[] = [];
let oldKey: Buffer;
const newKey = randomBytes(32);

/** An app on the harness's database whose keyring holds `master` (and nothing cached). */
async function appWithMaster(master: Buffer): Promise<FastifyInstance> {
  const config = loadConfig({ ...envOf(h), KEYHAVEN_ENCRYPTION_KEY: master.toString("base64") });
  return buildApp({ deps: await createServices(config, h.store, { masterKey: master, ratelimiter: h.ratelimiter }) });
}
const envOf = (harness: Harness): Record<string, string> => (harness.databaseUrl ? { DATABASE_URL: harness.databaseUrl } : {});

async function decryptedPlaintexts(app: FastifyInstance, t: Tenant, apiId: string) {
  const res = await app.inject({
    method: "GET",
    url: `/v1/apis.listKeys?apiId=${apiId}&decrypt=true`,
    headers: { authorization: `Bearer ${t.rootKey}` },
  });
  return { status: res.statusCode, body: JSON.parse(res.body) };
}

const fingerprints = async () =>
  await h.sql<{ id: string; f: string; wrapped: string }>(
    "select id, master_key_fingerprint as f, wrapped from encryption_keys order by id",
  );

beforeAll(async () => {
  h = await createHarness();
  oldKey = h.config.encryptionKey!;
  tenants = [await h.tenant(), await h.tenant()];
  apis = [];
  for (const t of tenants) {
    const apiId = await h.createApi(t);
    apis.push(apiId);
    plaintexts.push((await h.importKey(t, apiId)).key);
  }
});
afterAll(() => h.close());

describe("rotateMasterKey", () => {
  it("re-wraps every workspace's data keys; stored plaintext decrypts under the new key, and not under the old", async () => {
    const before = await fingerprints();
    expect(before.length).toBe(2);
    expect(before.every((r) => r.f === fingerprint(oldKey))).toBe(true);

    expect(await rotateMasterKey(h.db, oldKey, newKey)).toEqual({ rewrapped: 2, alreadyRotated: 0 });
    const after = await fingerprints();
    expect(after.every((r) => r.f === fingerprint(newKey))).toBe(true);
    expect(after.map((r) => r.wrapped)).not.toEqual(before.map((r) => r.wrapped));
    // The ciphertexts of the keys themselves are untouched.
    expect((await h.sql("select count(*)::int as n from encrypted_keys"))[0]).toEqual({ n: 2 });

    const rotated = await appWithMaster(newKey);
    const stale = await appWithMaster(oldKey);
    try {
      for (const [i, t] of tenants.entries()) {
        const res = await decryptedPlaintexts(rotated, t, apis[i]!);
        expect(res.status).toBe(200);
        expect(res.body.keys.map((k: { plaintext?: string }) => k.plaintext)).toEqual([plaintexts[i]]);
        const refused = await decryptedPlaintexts(stale, t, apis[i]!);
        expect(refused.status).toBe(412);
        expect(refused.body.error.message).toMatch(/KEYHAVEN_ENCRYPTION_KEY is not the key/);
      }
      // Verification never needed the encryption key.
      const verified = await rotated.inject({ method: "POST", url: "/v1/keys.verifyKey", payload: { key: plaintexts[0] } });
      expect(JSON.parse(verified.body).code).toBe("VALID");
    } finally {
      await rotated.close();
      await stale.close();
    }
  });

  it("can run again: rows already under the new key are skipped, one a stale replica created meanwhile is re-wrapped", async () => {
    // A replica still on the old key creates a data key for a workspace that had none.
    const stale = await appWithMaster(oldKey);
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const res = await stale.inject({
      method: "POST",
      url: "/v1/migrations.createKeys",
      headers: { authorization: `Bearer ${t.rootKey}`, "content-type": "application/json" },
      payload: JSON.stringify([{ apiId, plaintext: "sk_created_by_a_stale_replica" }]),
    });
    expect(res.statusCode).toBe(200);
    await stale.close();

    expect(await rotateMasterKey(h.db, oldKey, newKey)).toEqual({ rewrapped: 1, alreadyRotated: 2 });
    expect(await rotateMasterKey(h.db, oldKey, newKey)).toEqual({ rewrapped: 0, alreadyRotated: 3 });
    const rotated = await appWithMaster(newKey);
    try {
      const listed = await decryptedPlaintexts(rotated, t, apiId);
      expect(listed.body.keys.map((k: { plaintext?: string }) => k.plaintext)).toEqual(["sk_created_by_a_stale_replica"]);
    } finally {
      await rotated.close();
    }
  });

  it("changes nothing when a data key is under neither key, or when the new key is the current one", async () => {
    const before = await fingerprints();
    const stranger = randomBytes(32);
    await expect(rotateMasterKey(h.db, stranger, randomBytes(32))).rejects.toThrow(RotationError);
    await expect(rotateMasterKey(h.db, stranger, randomBytes(32))).rejects.toThrow(/wrapped by neither the current nor the new/);
    await expect(rotateMasterKey(h.db, newKey, newKey)).rejects.toThrow("the new encryption key is the current one");
    expect(await fingerprints()).toEqual(before);
  });
});

describe("keyhaven rotate-encryption-key", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-rotate-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const run = (args: string[], env: Record<string, string>) => runKeyhaven(["rotate-encryption-key", ...args], env);

  it("rotates an embedded store and replaces its key file", async () => {
    const dataDir = path.join(dir, "data");
    // An embedded store with one workspace data key, wrapped by the generated key file's key.
    const keyFile = path.join(dataDir, "encryption.key");
    const current = randomBytes(32);
    const store = await openPglite(dataDir);
    writeFileSync(keyFile, `${current.toString("base64")}\n`, { mode: 0o600 });
    await migrateAndRun(store, undefined, async () => {});
    const workspaceId = await insertWorkspace(store.db, "rotation", Date.now());
    const keyring = new Keyring(current);
    const dk = await keyring.dataKeyFor(store.db, workspaceId);
    const { encryptionKeys } = await import("../src/storage/schema.js");
    await store.db.insert(encryptionKeys).values(dk.newRow!);
    await store.close();

    const next = randomBytes(32);
    const newKeyFile = path.join(dir, "new.key");
    writeFileSync(newKeyFile, `${next.toString("base64")}\n`, { mode: 0o600 });
    const result = await run(["--new-key-file", newKeyFile], { KEYHAVEN_DATA_DIR: dataDir });
    expect(result.err).toBe("");
    expect(result.code).toBe(0);
    expect(result.out).toContain(`re-wrapped 1 data key(s) under the new encryption key (fingerprint ${fingerprint(next)})`);
    expect(readFileSync(keyFile, "utf8").trim()).toBe(next.toString("base64"));
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(result.out).not.toContain(next.toString("base64"));
    expect(result.out).not.toContain(current.toString("base64"));

    const reopened = await openPglite(dataDir);
    try {
      const { rowsOf } = await import("../src/storage/client.js");
      const { sql } = await import("drizzle-orm");
      const rows = rowsOf<{ f: string }>(await reopened.db.execute(sql`select master_key_fingerprint as f from encryption_keys`));
      expect(rows).toEqual([{ f: fingerprint(next) }]);
      const reread = new Keyring(next);
      expect((await reread.dataKeyFor(reopened.db, workspaceId)).key.equals(dk.key)).toBe(true);
    } finally {
      await reopened.close();
    }
  }, 60_000);

  /** A migrated embedded store in a new data directory whose key file holds `current` with `mode`. */
  async function embeddedStore(name: string, current: Buffer, mode: number) {
    const dataDir = path.join(dir, name);
    const store = await openPglite(dataDir);
    await migrateAndRun(store, undefined, async () => {});
    await store.close();
    const keyFile = path.join(dataDir, "encryption.key");
    writeFileSync(keyFile, `${current.toString("base64")}\n`);
    chmodSync(keyFile, mode);
    return { dataDir, keyFile };
  }

  it("writes the new key file with mode 0600 and never through a symlink (a stale 0644 .new, a planted .new link)", async () => {
    const current = randomBytes(32);
    const next = randomBytes(32);
    const newKeyFile = path.join(dir, "next.key");
    writeFileSync(newKeyFile, `${next.toString("base64")}\n`, { mode: 0o600 });

    // A `.new` left behind with mode 0644: the old code wrote into it, keeping 0644.
    const stale = await embeddedStore("stale-new", current, 0o644);
    writeFileSync(`${stale.keyFile}.new`, "left over\n");
    chmodSync(`${stale.keyFile}.new`, 0o644);
    // A `.new` that is a symlink to another file, and a key file that is itself a symlink.
    const linked = await embeddedStore("linked", current, 0o600);
    const victim = path.join(dir, "victim.txt");
    writeFileSync(victim, "not yours\n");
    symlinkSync(victim, `${linked.keyFile}.new`);
    const elsewhere = path.join(dir, "elsewhere.key");
    writeFileSync(elsewhere, readFileSync(linked.keyFile), { mode: 0o600 });
    rmSync(linked.keyFile);
    symlinkSync(elsewhere, linked.keyFile);

    const [a, b] = await Promise.all([
      run(["--new-key-file", newKeyFile], { KEYHAVEN_DATA_DIR: stale.dataDir }),
      run(["--new-key-file", newKeyFile], { KEYHAVEN_DATA_DIR: linked.dataDir }),
    ]);
    expect([a.code, a.err], a.out).toEqual([0, ""]);
    expect([b.code, b.err], b.out).toEqual([0, ""]);
    for (const keyFile of [stale.keyFile, linked.keyFile]) {
      expect(lstatSync(keyFile).isFile()).toBe(true);
      expect(statSync(keyFile).mode & 0o777).toBe(0o600);
      expect(readFileSync(keyFile, "utf8").trim()).toBe(next.toString("base64"));
      expect(existsSync(`${keyFile}.new`)).toBe(false);
    }
    expect(readFileSync(victim, "utf8")).toBe("not yours\n");
    expect(readFileSync(elsewhere, "utf8").trim()).toBe(current.toString("base64"));
  }, 120_000);

  it("refuses a bad new key file and a missing option, changing nothing", async () => {
    const bad = path.join(dir, "bad.key");
    writeFileSync(bad, "not base64 at all\n");
    const dataDir = path.join(dir, "data");
    const before = readFileSync(path.join(dataDir, "encryption.key"), "utf8");
    const refused = await run(["--new-key-file", bad], { KEYHAVEN_DATA_DIR: dataDir });
    expect(refused.code).toBe(2);
    expect(refused.err).toContain(`${bad}: must be 32 bytes encoded as base64`);
    const missing = await run([], { KEYHAVEN_DATA_DIR: dataDir });
    expect(missing.code).toBe(2);
    expect(missing.err).toContain("--new-key-file is required");
    expect(readFileSync(path.join(dataDir, "encryption.key"), "utf8")).toBe(before);
  }, 60_000);
});

describe("starting with another encryption key", () => {
  it("is refused, naming both fingerprints, once the store holds data keys; and the right key starts", async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-wrong-key-"));
    const right = randomBytes(32);
    const wrong = randomBytes(32);
    const env = (key: Buffer) => ({
      KEYHAVEN_DATA_DIR: dataDir,
      KEYHAVEN_ENCRYPTION_KEY: key.toString("base64"),
      PORT: "0",
      HOST: "127.0.0.1",
      KEYHAVEN_ROOT_KEY: "wrong-key-test-root-key",
    });
    try {
      // A fresh store takes any key; storing a plaintext makes the workspace's data key.
      let server = await startServer(loadConfig(env(right)), () => {});
      const api = await server.app.inject({
        method: "POST",
        url: "/v1/apis.createApi",
        headers: { authorization: "Bearer wrong-key-test-root-key", "content-type": "application/json" },
        payload: { name: "sealed" },
      });
      const imported = await server.app.inject({
        method: "POST",
        url: "/v1/migrations.createKeys",
        headers: { authorization: "Bearer wrong-key-test-root-key", "content-type": "application/json" },
        payload: [{ apiId: api.json().apiId, plaintext: "sk_sealed_0123456789" }],
      });
      expect(imported.statusCode, imported.body).toBe(200);
      await server.close();

      await expect(startServer(loadConfig(env(wrong)), () => {})).rejects.toThrow(
        new RegExp(
          `fingerprint ${fingerprint(wrong)}\\) is not the key that wrapped this store's data keys \\(fingerprint ${fingerprint(right)}\\)`,
        ),
      );
      server = await startServer(loadConfig(env(right)), () => {});
      await server.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
