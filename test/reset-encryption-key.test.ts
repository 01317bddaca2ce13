import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect } from "vitest";
import { assertMasterKeyMatches } from "../src/keyring/keyring.js";
import { WriteGate } from "../src/core/changes.js";
import { resetEncryptionKey } from "../src/core/encryptionKey/encryptionKey.core.js";
import { cliCaller } from "../src/cli/cli.caller.js";
import { systemClock } from "../src/clock.js";
import type { Db } from "../src/storage/client.js";
import { commandSuite, embeddedStore } from "./cli-process.js";
import { countIn, harnessWith, testWith } from "./fixtures.js";
import { appWithMasterKey, decryptedKeys } from "./helper.js";

// The file's harness, tenant and API (`h`, `t`, `apiId` of test/fixtures.ts), the harness made with no worker: an
// enqueued batch stays pending, as it would while every replica is stopped.
const it = testWith(harnessWith({}, { migrationWorker: false }));

/** The reset as the CLI command runs it: through the write gate on `db`, as `keyhaven reset-encryption-key`. */
const resetMasterKey = (db: Db) => resetEncryptionKey({ changes: new WriteGate(db, systemClock) }, cliCaller("reset-encryption-key"));

describe("resetMasterKey: the way out when the encryption key is lost", () => {
  it("deletes stored plaintexts and data keys, keeps verification, and lets a new key start and store plaintexts", async ({
    h,
    t,
    apiId,
  }) => {
    const imported = [await h.importKey(t, apiId), await h.importKey(t, apiId)];
    const queued = `sk_${randomBytes(16).toString("hex")}`;
    const enqueue = await h.post(
      "/v1/migrations.enqueueKeys",
      { migrationId: "mig_reset", apiId, keys: [{ plaintext: queued }] },
      t.rootKey,
    );
    expect(enqueue.status, JSON.stringify(enqueue.body)).toBe(202);
    expect(await countIn(h, "encrypted_keys")).toBe(2);

    // Before: another key is refused, and the refusal points to the way out.
    await expect(assertMasterKeyMatches(h.db, randomBytes(32))).rejects.toThrow(/keyhaven reset-encryption-key --help/);

    expect(await resetMasterKey(h.db)).toEqual({ plaintexts: 2, dataKeys: 1, queuedPlaintexts: 1, webhookSecrets: 0 });

    expect(await countIn(h, "encrypted_keys")).toBe(0);
    expect(await countIn(h, "encryption_keys")).toBe(0);
    expect(JSON.stringify(await h.sql("select keys from migration_batches"))).not.toMatch(/"encrypted":"/);
    for (const { key } of imported) {
      const res = await h.post("/v1/keys.verifyKey", { key, apiId });
      expect(res.body.valid, JSON.stringify(res.body)).toBe(true);
    }

    // Any new key is accepted now; with it, plaintexts are stored again and old keys simply have none.
    const newMaster = randomBytes(32);
    await expect(assertMasterKeyMatches(h.db, newMaster)).resolves.toBeUndefined();
    const app = await appWithMasterKey(h, newMaster);
    try {
      const fresh = `sk_${randomBytes(16).toString("hex")}`;
      const created = await app.post("/v1/migrations.createKeys", [{ apiId, plaintext: fresh }], t.rootKey);
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      const list = await decryptedKeys(app, t, apiId);
      expect(list.status, JSON.stringify(list.body)).toBe(200);
      const plaintexts = (list.body as { keys: { plaintext?: string }[] }).keys.map((k) => k.plaintext).filter(Boolean);
      expect(plaintexts).toEqual([fresh]);
    } finally {
      await app.close();
    }

    // The enqueued key is still imported (as by hash) once a worker runs, and verifies.
    const replica = await h.replica();
    try {
      await expect.poll(() => countIn(h, "migration_batches where status = 'pending'"), { timeout: 20_000 }).toBe(0);
    } finally {
      await replica.close();
    }
    expect((await h.sql<{ status: string }>("select status from migration_batches"))[0]!.status).toBe("done");
    expect((await h.post("/v1/keys.verifyKey", { key: queued, apiId })).body.valid).toBe(true);
  });
});

describe("keyhaven reset-encryption-key", () => {
  const { dir, run } = commandSuite("reset-encryption-key", "keyhaven-reset-");

  it("changes nothing without the confirmation flag; with it, forgets the lost key file's data and writes a new 0600 key", async () => {
    const { dataDir, keyFile } = await embeddedStore(path.join(dir(), "data"), "damaged\n");
    const lostKeyFile = path.join(dir(), "gone.key"); // named by KEYHAVEN_ENCRYPTION_KEY_FILE, but lost
    const env = { KEYHAVEN_DATA_DIR: dataDir, KEYHAVEN_ENCRYPTION_KEY_FILE: lostKeyFile };

    const refused = await run([], env);
    expect(refused.code).toBe(2);
    expect(refused.err).toContain("pass --delete-stored-plaintexts to confirm");
    expect(readFileSync(keyFile, "utf8")).toBe("damaged\n");

    const done = await run(["--delete-stored-plaintexts"], env);
    expect([done.code, done.err]).toEqual([0, ""]);
    expect(done.out).toContain("deleted 0 stored plaintext(s) and 0 data key(s)");
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(Buffer.from(readFileSync(keyFile, "utf8").trim(), "base64")).toHaveLength(32);
    expect(done.out).not.toContain(readFileSync(keyFile, "utf8").trim());
    expect(existsSync(lostKeyFile)).toBe(false);
  }, 120_000);
});
