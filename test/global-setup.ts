import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { MIGRATIONS_DIR, migrateAndRun, pgliteStore } from "../src/storage/client.js";
import { startPglite } from "../src/storage/pgliteParsers.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** URL of a migrated template database; each test file copies it into a database of its own. */
    templateDatabaseUrl: string | undefined;
    /** A migrated embedded store's data directory (PGlite's dumpDataDir tarball), which test/pglite-pool.ts loads. */
    pgliteTemplateFile: string;
  }
}

/**
 * With TEST_DATABASE_URL (or TEST_DB=container, which starts PostgreSQL through testcontainers), migrates one
 * template database for the run. Without either, every test file uses its own in-memory PGlite instead.
 */
export default async function setup(project: TestProject) {
  // Both before any file starts, side by side: tsc in a process of its own, the template's PGlite in this one.
  const [, templateFile] = await Promise.all([buildDist(), pgliteTemplate()]);
  project.provide("pgliteTemplateFile", templateFile);
  let baseUrl = process.env.TEST_DATABASE_URL;
  let stopContainer: (() => Promise<unknown>) | undefined;
  if (!baseUrl && process.env.TEST_DB === "container") {
    const { PostgreSqlContainer } = await import("@testcontainers/postgresql");
    const container = await new PostgreSqlContainer("postgres:16-alpine").start();
    baseUrl = container.getConnectionUri();
    stopContainer = () => container.stop();
  }
  if (!baseUrl) {
    project.provide("templateDatabaseUrl", undefined);
    return async () => {};
  }
  const templateName = `keyhaven_template_${process.pid}`;
  const admin = postgres(baseUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${templateName} with (force)`);
  await admin.unsafe(`create database ${templateName}`);
  const templateUrl = withDatabase(baseUrl, templateName);
  const client = postgres(templateUrl, { max: 1, onnotice: () => {} });
  await migrate(drizzle({ client }), { migrationsFolder: MIGRATIONS_DIR });
  await client.end();
  project.provide("templateDatabaseUrl", templateUrl);

  return async () => {
    await admin.unsafe(`drop database if exists ${templateName} with (force)`);
    await admin.end();
    await stopContainer?.();
  };
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

let template: Promise<string> | undefined;

/**
 * Every in-memory PGlite the tests use (test/pglite-pool.ts) starts from one migrated data directory: initdb and the
 * migrations cost about 3 s of CPU per instance (5-7 s of wall time on a loaded 2-core machine, inside the timeout of
 * whichever test made the harness), loading the tarball about a third of it. Made once and kept in the temporary
 * directory under a digest of all it is made from (the migrations, the store's code that opens and migrates PGlite,
 * the versions of PGlite and drizzle-orm): a run whose inputs are unchanged skips the 5-10 s of making it, before
 * any file can start. Written to a file of its own first and renamed, so runs side by side never read half of one.
 */
function pgliteTemplate(): Promise<string> {
  template ??= (async () => {
    const file = path.join(os.tmpdir(), `keyhaven-pglite-template-${templateDigest()}.tar`);
    if (existsSync(file)) return file;
    const client = await startPglite("memory://");
    try {
      await migrateAndRun(
        pgliteStore(client, "", async () => {}),
        undefined,
        async () => {},
      );
      const partial = `${file}.${process.pid}.partial`;
      writeFileSync(partial, Buffer.from(await (await client.dumpDataDir("none")).arrayBuffer()));
      renameSync(partial, file);
      removeStaleTemplates(file);
      return file;
    } finally {
      await client.close();
    }
  })();
  return template;
}

/** Templates of other digests untouched for a day (a run reads its own all along, so a recent one may be in use). */
function removeStaleTemplates(kept: string): void {
  const dir = path.dirname(kept);
  for (const name of readdirSync(dir)) {
    const file = path.join(dir, name);
    if (!/^keyhaven-pglite-template-[0-9a-f]+\.tar$/.test(name) || file === kept) continue;
    try {
      if (Date.now() - statSync(file).mtimeMs > 86_400_000) rmSync(file, { force: true });
    } catch {
      // Removed meanwhile by another run.
    }
  }
}

/** A digest of what the template is made from: change any of it and the next run makes a new one. */
function templateDigest(): string {
  const root = fileURLToPath(new URL("..", import.meta.url));
  const hash = createHash("sha256");
  const add = (file: string) => hash.update(path.relative(root, file)).update("\0").update(readFileSync(file)).update("\0");
  const under = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? under(path.join(dir, e.name)) : [path.join(dir, e.name)]))
      .sort();
  for (const file of under(MIGRATIONS_DIR)) add(file);
  for (const name of ["client.ts", "pgliteParsers.ts", "pglitePrepared.ts", "schema.ts"]) add(path.join(root, "src/storage", name));
  for (const pkg of ["@electric-sql/pglite", "drizzle-orm"]) add(path.join(root, "node_modules", pkg, "package.json"));
  return hash.digest("hex").slice(0, 16);
}

let built: Promise<void> | undefined;

/**
 * The processes that the CLI and deployment tests start (test/cli-process.ts) run the compiled dist/, as `npm start`
 * does: build it from the sources as they are now, once per run, before any test file starts. Incremental (`tsc -b`):
 * about a second when nothing changed. A type error does not stop the run (tsc still emits, and vitest runs the
 * sources unchecked too); `npm run typecheck` is where it fails.
 */
function buildDist(): Promise<void> {
  built ??= (async () => {
    const root = fileURLToPath(new URL("..", import.meta.url));
    const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
    const result = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      execFile(
        process.execPath,
        [tsc, "-b", "tsconfig.build.json"],
        { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
        (err, stdout, stderr) => {
          // A non-zero exit is an ExecException with a numeric code; failing to start at all is another error.
          if (err && typeof err.code !== "number") reject(err);
          else resolve({ status: err ? (err.code as number) : 0, stdout, stderr });
        },
      );
    });
    if (!existsSync(new URL("../dist/cli/main.js", import.meta.url))) {
      throw new Error(`npm run build produced no dist/cli/main.js:\n${result.stdout}${result.stderr}`);
    }
    if (result.status !== 0) console.warn(`npm run build reported errors (dist/ was written anyway):\n${result.stdout}${result.stderr}`);
  })();
  return built;
}
