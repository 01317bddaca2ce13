import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../src/config.js";
import { startServer } from "../src/main.js";
import { Keyring } from "../src/keyring/keyring.js";
import { RotationError } from "../src/keyring/masterKey.rotate.js";
import { WriteGate } from "../src/core/changes.js";
import { rotateEncryptionKey } from "../src/core/encryptionKey/encryptionKey.core.js";
import { cliCaller } from "../src/cli/cli.caller.js";
import { systemClock } from "../src/clock.js";
import type { Db } from "../src/storage/client.js";
import { fingerprint } from "../src/crypto/vault.js";
import { openPglite } from "../src/storage/client.js";
import { insertWorkspace } from "../src/storage/workspaces/workspaces.repository.js";
import { commandSuite, embeddedStore } from "./cli-process.js";
import { appWithMasterKey, clientOf, createHarness, decryptedKeys, type Harness, type Tenant } from "./helper.js";

/** The rotation as the CLI command runs it: through the write gate on `db`, as `keyhaven rotate-encryption-key`. */
const rotateMasterKey = (db: Db, oldKey: Buffer, newKey: Buffer) =>
  rotateEncryptionKey({ changes: new WriteGate(db, systemClock) }, cliCaller("rotate-encryption-key"), oldKey, newKey);

let h: Harness;
let tenants: Tenant[];
let apis: string[];
const plaintexts: string[] = [];
let oldKey: Buffer;
const newKey = randomBytes(32);

/** An app on the harness's database whose keyring holds `master` (and nothing cached). */
const appWithMaster = (master: Buffer) => appWithMasterKey(h, master);

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
        const res = await decryptedKeys(rotated, t, apis[i]!);
        expect(res.status).toBe(200);
        expect(res.body.keys.map((k: { plaintext?: string }) => k.plaintext)).toEqual([plaintexts[i]]);
        const refused = await decryptedKeys(stale, t, apis[i]!);
        expect(refused.status).toBe(412);
        expect(refused.body.error.message).toMatch(/KEYHAVEN_ENCRYPTION_KEY is not the key/);
      }
      // Verification never needed the encryption key.
      const verified = await rotated.post("/v1/keys.verifyKey", { key: plaintexts[0] });
      expect(verified.body.code).toBe("VALID");
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
    const res = await stale.post("/v1/migrations.createKeys", [{ apiId, plaintext: "sk_created_by_a_stale_replica" }], t.rootKey);
    expect(res.status).toBe(200);
    await stale.close();

    expect(await rotateMasterKey(h.db, oldKey, newKey)).toEqual({ rewrapped: 1, alreadyRotated: 2 });
    expect(await rotateMasterKey(h.db, oldKey, newKey)).toEqual({ rewrapped: 0, alreadyRotated: 3 });
    const rotated = await appWithMaster(newKey);
    try {
      const listed = await decryptedKeys(rotated, t, apiId);
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
  const { dir, run } = commandSuite("rotate-encryption-key", "keyhaven-rotate-");

  it("rotates an embedded store and replaces its key file", async () => {
    // An embedded store with one workspace data key, wrapped by the generated key file's key.
    const current = randomBytes(32);
    let workspaceId = "";
    let dk!: Awaited<ReturnType<Keyring["dataKeyFor"]>>;
    const { dataDir, keyFile } = await embeddedStore(path.join(dir(), "data"), `${current.toString("base64")}\n`, 0o600, async (store) => {
      workspaceId = await insertWorkspace(store.db, "rotation", Date.now());
      dk = await new Keyring(current).dataKeyFor(store.db, workspaceId);
      const { encryptionKeys } = await import("../src/storage/schema.js");
      await store.db.insert(encryptionKeys).values(dk.newRow!);
    });

    const next = randomBytes(32);
    const newKeyFile = path.join(dir(), "new.key");
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
  const storeWithKey = (name: string, current: Buffer, mode: number) =>
    embeddedStore(path.join(dir(), name), `${current.toString("base64")}\n`, mode);

  it("writes the new key file with mode 0600 and never through a symlink (a stale 0644 .new, a planted .new link)", async () => {
    const current = randomBytes(32);
    const next = randomBytes(32);
    const newKeyFile = path.join(dir(), "next.key");
    writeFileSync(newKeyFile, `${next.toString("base64")}\n`, { mode: 0o600 });

    // A `.new` left behind with mode 0644: the old code wrote into it, keeping 0644.
    const stale = await storeWithKey("stale-new", current, 0o644);
    writeFileSync(`${stale.keyFile}.new`, "left over\n");
    chmodSync(`${stale.keyFile}.new`, 0o644);
    // A `.new` that is a symlink to another file, and a key file that is itself a symlink.
    const linked = await storeWithKey("linked", current, 0o600);
    const victim = path.join(dir(), "victim.txt");
    writeFileSync(victim, "not yours\n");
    symlinkSync(victim, `${linked.keyFile}.new`);
    const elsewhere = path.join(dir(), "elsewhere.key");
    writeFileSync(elsewhere, readFileSync(linked.keyFile), { mode: 0o600 });
    rmSync(linked.keyFile);
    symlinkSync(elsewhere, linked.keyFile);

    const [a, b] = await Promise.all([
      run(["--new-key-file", newKeyFile], { KEYHAVEN_DATA_DIR: stale.dataDir }),
      run(["--new-key-file", newKeyFile], { KEYHAVEN_DATA_DIR: linked.dataDir }),
    ]);
    // The 0644 key file and its 0644 .new were made 0600 when the store was opened, which says so.
    expect([a.code, a.err], a.out).toEqual([
      0,
      `keyhaven: KEYHAVEN_DATA_DIR ${stale.dataDir}: 2 files and directories were open to other users; made them this user's alone (0700/0600)\n`,
    ]);
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
    const bad = path.join(dir(), "bad.key");
    writeFileSync(bad, "not base64 at all\n");
    const dataDir = path.join(dir(), "data");
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
      const client = clientOf(server.app);
      const api = await client.post("/v1/apis.createApi", { name: "sealed" }, "wrong-key-test-root-key");
      const imported = await client.post(
        "/v1/migrations.createKeys",
        [{ apiId: api.body.apiId, plaintext: "sk_sealed_0123456789" }],
        "wrong-key-test-root-key",
      );
      expect(imported.status, JSON.stringify(imported.body)).toBe(200);
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
