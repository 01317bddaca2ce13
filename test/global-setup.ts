import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { MIGRATIONS_DIR } from "../src/storage/client.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** URL of a migrated template database; each test file copies it into a database of its own. */
    templateDatabaseUrl: string | undefined;
  }
}

/**
 * With TEST_DATABASE_URL (or TEST_DB=container, which starts PostgreSQL through testcontainers), migrates one
 * template database for the run. Without either, every test file uses its own in-memory PGlite instead.
 */
export default async function setup(project: TestProject) {
  buildDist();
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

let built = false;

/**
 * The processes that the CLI and deployment tests start (test/cli-process.ts) run the compiled dist/, as `npm start`
 * does: build it from the sources as they are now, once per run, before any test file starts. Incremental (`tsc -b`):
 * about a second when nothing changed. A type error does not stop the run (tsc still emits, and vitest runs the
 * sources unchecked too); `npm run typecheck` is where it fails.
 */
function buildDist(): void {
  if (built) return;
  const root = fileURLToPath(new URL("..", import.meta.url));
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const result = spawnSync(process.execPath, [tsc, "-b", "tsconfig.build.json"], { cwd: root, encoding: "utf8" });
  if (result.error) throw result.error;
  if (!existsSync(new URL("../dist/cli/main.js", import.meta.url))) {
    throw new Error(`npm run build produced no dist/cli/main.js:\n${result.stdout}${result.stderr}`);
  }
  if (result.status !== 0) console.warn(`npm run build reported errors (dist/ was written anyway):\n${result.stdout}${result.stderr}`);
  built = true;
}
