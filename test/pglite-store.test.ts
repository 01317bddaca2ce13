import { appendFileSync, chmodSync, lstatSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_PGLITE_SHARED_BUFFERS_MB, loadConfig } from "../src/config.js";
import { openStore } from "../src/main.js";
import { migrateAndRun, openPglite, rowsOf, type Store } from "../src/storage/client.js";
import { modesUnder, notPrivateUnder } from "./file-modes.js";

// How the embedded store starts PGlite (src/storage/pgliteParsers.ts, startPglite): in the database PGlite 0.3
// created keyhaven's tables in, with the buffer pool KEYHAVEN_PGLITE_SHARED_BUFFERS_MB asks for whatever the data
// directory's postgresql.conf says (PGlite's initdb writes 400kB there, which PGlite 0.4 reads).

const setting = async (store: Store, name: string) => {
  const client = (store.db as unknown as { $client: PGlite }).$client;
  const { rows } = await client.query<Record<string, string>>(`show ${name}`);
  return Object.values(rows[0]!)[0];
};

describe("the embedded store on disk", () => {
  let root: string;
  let dataDir: string;

  beforeAll(async () => {
    root = mkdtempSync(path.join(os.tmpdir(), "keyhaven-pglite-store-"));
    dataDir = path.join(root, "data");
    const store = await openPglite(dataDir);
    await migrateAndRun(store, undefined, async () => {});
    await store.close();
    // As PGlite's initdb leaves it (and in case a later initdb does not): a pool of 50 pages.
    appendFileSync(path.join(dataDir, "pgdata", "postgresql.conf"), "\nshared_buffers = 400kB\n");
  }, 120_000);
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("runs with the buffer pool asked for, not the 400kB of the data directory's postgresql.conf", async () => {
    expect(readFileSync(path.join(dataDir, "pgdata", "postgresql.conf"), "utf8")).toMatch(/^shared_buffers = 400kB$/m);
    const byDefault = await openPglite(dataDir);
    try {
      expect(await setting(byDefault, "shared_buffers")).toBe(`${DEFAULT_PGLITE_SHARED_BUFFERS_MB}MB`);
    } finally {
      await byDefault.close();
    }
    const configured = await openStore(loadConfig({ KEYHAVEN_DATA_DIR: dataDir, KEYHAVEN_PGLITE_SHARED_BUFFERS_MB: "48" }));
    try {
      expect(await setting(configured, "shared_buffers")).toBe("48MB");
    } finally {
      await configured.close();
    }
  }, 60_000);

  it("makes its data directory this user's alone at every open: 0700 directories, 0600 files, an existing 0644 install fixed", async () => {
    // An install made under umask 022 before this rule: PGlite wrote 966 of 1,092 files 0644, its directories 0755.
    for (const [file, mode] of modesUnder(dataDir)) {
      if (mode === 0o600 && !file.endsWith(".key")) chmodSync(path.join(dataDir, file), 0o644);
      if (mode === 0o700) chmodSync(path.join(dataDir, file), 0o755);
    }
    // A symbolic link is not followed: what it points to keeps its mode.
    const outside = path.join(root, "outside.txt");
    writeFileSync(outside, "not the store's\n", { mode: 0o644 });
    chmodSync(outside, 0o644);
    symlinkSync(outside, path.join(dataDir, "pgdata", "link-out"));
    const before = modesUnder(dataDir);
    const open = [...before.values()].filter((mode) => (mode & 0o077) !== 0).length;
    expect(open).toBeGreaterThan(100);

    const warnings: string[] = [];
    const store = await openPglite(dataDir, { warn: (m) => warnings.push(m) });
    try {
      expect(notPrivateUnder(dataDir)).toEqual([]);
      expect(modesUnder(dataDir).size).toBeGreaterThan(100);
      expect(warnings).toEqual([
        `KEYHAVEN_DATA_DIR ${dataDir}: ${open} files and directories were open to other users; made them this user's alone (0700/0600)`,
      ]);
      expect(lstatSync(outside).mode & 0o777).toBe(0o644);
    } finally {
      await store.close();
      rmSync(path.join(dataDir, "pgdata", "link-out"));
    }
    // Nothing left to change: no warning at the next open.
    warnings.length = 0;
    await (await openPglite(dataDir, { warn: (m) => warnings.push(m) })).close();
    expect(warnings).toEqual([]);
  }, 120_000);

  it("keeps its tables in template1, where PGlite 0.3 made them, and finds them there again", async () => {
    const store = await openPglite(dataDir);
    try {
      expect(rowsOf<{ db: string }>(await store.db.execute("select current_database() as db"))).toEqual([{ db: "template1" }]);
      const tables = rowsOf<{ n: number }>(
        await store.db.execute("select count(*)::int as n from pg_tables where schemaname = 'public' and tablename in ('keys', 'apis')"),
      );
      expect(tables).toEqual([{ n: 2 }]);
    } finally {
      await store.close();
    }
  }, 60_000);
});
