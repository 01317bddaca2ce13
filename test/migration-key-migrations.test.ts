import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { drizzle } from "drizzle-orm/pglite";
import { migrate } from "drizzle-orm/pglite/migrator";
import { afterAll, expect, it } from "vitest";
import { MIGRATIONS_DIR } from "../src/storage/client.js";

// Migration 0015 makes key_migrations' key (workspace_id, id) (issue 34 §2): a store migrated before it keeps its
// v2 migrations, and two workspaces may then use one id. Run on the SQL PGlite and PostgreSQL both apply.

const MIGRATION = "0015_key_migrations_per_workspace";
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The committed migrations up to, not including, `tag`: what a store migrated by an older keyhaven has applied. */
function migrationsBefore(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), "keyhaven-migrations-"));
  dirs.push(dir);
  cpSync(MIGRATIONS_DIR, dir, { recursive: true });
  const journalPath = join(dir, "meta", "_journal.json");
  const journal = JSON.parse(readFileSync(journalPath, "utf8")) as { entries: { idx: number; tag: string }[] };
  const index = journal.entries.findIndex((e) => e.tag === tag);
  expect(index).toBeGreaterThan(0);
  journal.entries = journal.entries.slice(0, index);
  writeFileSync(journalPath, JSON.stringify(journal));
  return dir;
}

it("keeps the migrations of a store migrated before it, and lets another workspace use the same id", async () => {
  const client = new PGlite();
  try {
    const db = drizzle({ client });
    await migrate(db, { migrationsFolder: migrationsBefore(MIGRATION) });
    await client.exec(`
      insert into workspaces (id, name, created_at_m) values ('ws_a', 'a', 1), ('ws_b', 'b', 1);
      insert into key_migrations (id, workspace_id, algorithm, created_at_m)
        values ('mig_1', 'ws_a', 'github.com/seamapi/prefixed-api-key', 1), ('mig_2', 'ws_b', 'sha256', 2);`);
    await expect(client.exec(`insert into key_migrations values ('mig_1', 'ws_b', 'sha256', 3)`)).rejects.toThrow(/duplicate key/);

    await migrate(db, { migrationsFolder: MIGRATIONS_DIR });
    const rows = async () =>
      (await client.query(`select workspace_id, id, algorithm from key_migrations order by workspace_id, id, created_at_m`)).rows;
    expect(await rows()).toEqual([
      { workspace_id: "ws_a", id: "mig_1", algorithm: "github.com/seamapi/prefixed-api-key" },
      { workspace_id: "ws_b", id: "mig_2", algorithm: "sha256" },
    ]);
    await client.exec(`insert into key_migrations values ('mig_1', 'ws_b', 'sha256', 3)`);
    await expect(client.exec(`insert into key_migrations values ('mig_1', 'ws_a', 'sha256', 4)`)).rejects.toThrow(/duplicate key/);
    expect(await rows()).toHaveLength(3);
  } finally {
    await client.close();
  }
});
