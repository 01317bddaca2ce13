import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, inject, it } from "vitest";
import { sql as raw } from "drizzle-orm";
import { openPglite, rowsOf } from "../src/storage/client.js";
import { emptyDatabase, keyhaven, killAll, started } from "./cli-process.js";
import { freePort } from "./wait.js";

/**
 * kill -9 during concurrent writes (issue 35, "Done when"): a change and its audit entry commit together or not at
 * all, on both stores. A server takes creates (some with roles: a transaction; some without: the one-statement fast
 * path), updates and deletes of keys from 12 concurrent clients and is killed with SIGKILL mid-flight; then every key
 * row has its key.create entry and every key.create entry its key, every deleted key its key.delete entry and every
 * key.delete entry a deleted key, and every write that was acknowledged is there.
 */
const TIMEOUT = 240_000;
const ROOT_KEY = "khroot_crash_test_root_key_0123456789";
const templateUrl = inject("templateDatabaseUrl");

let tmp = "";
afterAll(() => {
  killAll();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

type Row = Record<string, unknown>;

async function writeUntilKilled(base: string, kill: () => void) {
  const post = async (route: string, body: unknown) => {
    const res = await fetch(`${base}/v1/${route}`, {
      method: "POST",
      headers: { authorization: `Bearer ${ROOT_KEY}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Row };
  };
  const api = await post("apis.createApi", { name: "crash" });
  expect(api.status).toBe(200);
  const apiId = api.body.apiId as string;
  const created: string[] = [];
  const deleted: string[] = [];
  let n = 0;
  let stop = false;
  const client = async (c: number) => {
    while (!stop) {
      const i = n++;
      try {
        if (i % 5 === 4 && created.length > 0) {
          const keyId = created[Math.floor(Math.random() * created.length)]!;
          const res = await post("keys.deleteKey", { keyId });
          if (res.status === 200) deleted.push(keyId);
        } else if (i % 5 === 3 && created.length > 0) {
          await post("keys.updateKey", { keyId: created[created.length - 1]!, name: `updated-${i}`, meta: { i } });
        } else {
          const res = await post("keys.createKey", { apiId, ...(i % 2 === 0 && { roles: [`role-${c}`] }), meta: { secretish: `m-${i}` } });
          if (res.status === 200) created.push(res.body.keyId as string);
        }
      } catch {
        return; // the server is gone
      }
    }
  };
  const clients = Array.from({ length: 12 }, (_, c) => client(c));
  // Killed once writes are well under way: after 150 acknowledged creates.
  await expect.poll(() => created.length, { timeout: 120_000, interval: 20 }).toBeGreaterThanOrEqual(150);
  kill();
  stop = true;
  await Promise.all(clients);
  return { apiId, created, deleted };
}

async function expectEveryChangeWithItsEntry(
  query: (text: string) => Promise<Row[]>,
  acknowledged: { apiId: string; created: string[]; deleted: string[] },
) {
  const keys = await query(`select id, deleted_at_m from keys where api_id = '${acknowledged.apiId}'`);
  const entries = await query(`select event, targets::text as targets from audit_log where event in ('key.create', 'key.delete')`);
  const targetsOf = (event: string) =>
    new Set(
      entries
        .filter((e) => e.event === event)
        .flatMap((e) =>
          (JSON.parse(e.targets as string) as { type: string; id: string }[]).filter((t) => t.type === "key").map((t) => t.id),
        ),
    );
  const createdEntries = targetsOf("key.create");
  const deletedEntries = targetsOf("key.delete");
  const keyIds = new Set(keys.map((k) => k.id as string));
  const deletedKeys = new Set(keys.filter((k) => k.deleted_at_m !== null).map((k) => k.id as string));
  expect(
    [...keyIds].filter((id) => !createdEntries.has(id)),
    "keys without their key.create entry",
  ).toEqual([]);
  expect(
    [...createdEntries].filter((id) => !keyIds.has(id)),
    "key.create entries without their key",
  ).toEqual([]);
  expect(
    [...deletedKeys].filter((id) => !deletedEntries.has(id)),
    "deleted keys without their key.delete entry",
  ).toEqual([]);
  expect(
    [...deletedEntries].filter((id) => !deletedKeys.has(id)),
    "key.delete entries of keys not deleted",
  ).toEqual([]);
  expect(
    acknowledged.created.filter((id) => !keyIds.has(id)),
    "acknowledged creates lost",
  ).toEqual([]);
  expect(
    acknowledged.deleted.filter((id) => !deletedKeys.has(id)),
    "acknowledged deletes lost",
  ).toEqual([]);
  console.log(
    `after kill -9: ${keyIds.size} keys (${acknowledged.created.length} creates acknowledged), ${deletedKeys.size} deleted, every one with its entry`,
  );
}

describe.runIf(process.platform === "linux")("kill -9 during concurrent writes", () => {
  it(
    "embedded store: no change without its audit entry, no entry without its change",
    async () => {
      tmp = mkdtempSync(path.join(os.tmpdir(), "keyhaven-crash-"));
      const dataDir = path.join(tmp, "data");
      const port = await freePort();
      const server = keyhaven(["serve"], {
        KEYHAVEN_DATA_DIR: dataDir,
        KEYHAVEN_ROOT_KEY: ROOT_KEY,
        HOST: "127.0.0.1",
        PORT: String(port),
        LOG_LEVEL: "warn",
      });
      await started(server);
      const acknowledged = await writeUntilKilled(`http://127.0.0.1:${port}`, () => server.child.kill("SIGKILL"));
      await server.exited;
      const store = await openPglite(dataDir);
      try {
        await expectEveryChangeWithItsEntry(async (text) => rowsOf<Row>(await store.db.execute(raw.raw(text))), acknowledged);
      } finally {
        await store.close();
      }
    },
    TIMEOUT,
  );

  it.runIf(templateUrl !== undefined)(
    "PostgreSQL: no change without its audit entry, no entry without its change",
    async () => {
      const database = await emptyDatabase(templateUrl!, "keyhaven_crash");
      const port = await freePort();
      const server = keyhaven(["serve"], {
        DATABASE_URL: database.url,
        KEYHAVEN_ROOT_KEY: ROOT_KEY,
        KEYHAVEN_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString("base64"),
        HOST: "127.0.0.1",
        PORT: String(port),
        LOG_LEVEL: "warn",
      });
      await started(server);
      const acknowledged = await writeUntilKilled(`http://127.0.0.1:${port}`, () => server.child.kill("SIGKILL"));
      await server.exited;
      const sql = postgres(database.url, { max: 1, onnotice: () => {} });
      try {
        await expectEveryChangeWithItsEntry(async (text) => (await sql.unsafe(text)) as unknown as Row[], acknowledged);
      } finally {
        await sql.end();
        await database.drop();
      }
    },
    TIMEOUT,
  );
});
