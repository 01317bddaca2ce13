import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { openPostgres } from "../src/storage/client.js";
import { findDependencyFailure } from "../src/storage/dependency.js";
import { emptyDatabase } from "./cli-process.js";
import { FaultProxy } from "./fault-proxy.js";

const templateUrl = inject("templateDatabaseUrl");

// A database of its own (these tests need no schema), never the run's template: while a connection to the template
// is open, every other test file's copy of it waits (CREATE DATABASE waits up to 5 s for it, then fails and is tried
// again), and this file's connections are open for up to half a minute: the first harness of a file running beside
// it took 26.6 s.
let databaseUrl: string | undefined;
let dropDatabase = async () => {};
beforeAll(async () => {
  if (!templateUrl) return;
  const db = await emptyDatabase(templateUrl, "kh_driver");
  databaseUrl = db.url;
  dropDatabase = db.drop;
});
afterAll(() => dropDatabase());
const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * postgres.js 3.4.9 buffers small writes behind a setImmediate; when the server ends the connection first, that
 * callback wrote to a null socket and threw outside any promise, ending the whole process (porsager/postgres#1154,
 * #1208). keyhaven patches the driver (patches/postgres+3.4.9.patch, applied by patch-package on install) so that the
 * pending statements fail instead, and its own per-statement deadline (src/storage/client.ts) bounds any that the driver
 * leaves unanswered. The scenario runs through keyhaven's store in a process of its own, which must survive.
 */
async function runScenario(body: string): Promise<{ code: number | null; out: string }> {
  const script = `
    import { sql as q } from "drizzle-orm";
    import postgres from "postgres";
    import { openPostgres, rowsOf } from "./src/storage/client.ts";
    const url = ${JSON.stringify(databaseUrl)};
    const store = openPostgres(url, 2, { connectTimeoutMs: 2000, statementTimeoutMs: 1000 });
    const killer = postgres(url, { max: 1, onnotice() {} });
    ${body}
    console.log("survived");
    process.exit(0);
  `;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    cwd: PROJECT_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  clearTimeout(timer);
  return { code, out };
}

describe.skipIf(!templateUrl)("the PostgreSQL driver when the server ends a connection", () => {
  it("fails the transaction instead of ending the process", { timeout: 90_000 }, async () => {
    // Whether the close arrives as FIN or RST varies from run to run; only some runs took the crashing path.
    const { code, out } = await runScenario(`
      for (let round = 0; round < 30; round++) {
        const outcome = await store.db
          .transaction(async (tx) => {
            const [{ pid }] = rowsOf(await tx.execute(q\`select pg_backend_pid() as pid\`));
            await killer\`select pg_terminate_backend(\${pid})\`;
            await tx.execute(q\`select 1\`).catch(() => {});
            await tx.execute(q\`select 1\`);
          })
          .then(() => "committed", () => "failed");
        if (outcome !== "failed") throw new Error("a transaction on a terminated connection committed");
      }
    `);
    expect(out, out).toContain("survived");
    expect(code, out).toBe(0);
  });

  it("gives up on a COMMIT that is never answered, within the statement deadline", async () => {
    const target = new URL(databaseUrl!);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
    const store = openPostgres(proxy.urlFor(databaseUrl!), 1, { connectTimeoutMs: 1000, statementTimeoutMs: 500 });
    try {
      const started = Date.now();
      const outcome = await store.db
        .transaction(async (tx) => {
          await tx.execute(sql`select 1`);
          // The connection stops answering between the last statement and the COMMIT the driver sends for it.
          proxy.freeze();
        })
        .then(
          () => "committed",
          (err: unknown) => err,
        );
      expect(findDependencyFailure(outcome)?.dependency).toBe("PostgreSQL");
      expect(Date.now() - started).toBeLessThan(15_000);
    } finally {
      await proxy.close();
      await store.close();
    }
  });
});

describe.skipIf(!templateUrl)("the PostgreSQL driver's pool after a statement gave up waiting for a connect", () => {
  it("puts the connection back in the pool once its connect succeeds", async () => {
    const target = new URL(databaseUrl!);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
    // One connection, and a connect deadline far beyond the statement's (1 s): the connect outlives the statement.
    const store = openPostgres(proxy.urlFor(databaseUrl!), 1, { connectTimeoutMs: 30_000, statementTimeoutMs: 500 });
    try {
      // The pool dials for this statement; nobody answers the connect, and the statement gives up, never sent.
      proxy.freeze();
      const gaveUp = await store.db.execute(sql`select 1`).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(findDependencyFailure(gaveUp)?.reason).toMatch(/no answer within 1000 ms/);
      // The connect is answered after all (the proxy forwards it now).
      await proxy.restore();
      // Before: the driver skipped the cancelled statement it had connected for and never put the connection back
      // in the pool; every later statement waited for it, and failed at its deadline, until the process restarted.
      const rows = await store.db.execute(sql`select 2 as two`);
      expect(rows).toEqual([{ two: 2 }]);
    } finally {
      await proxy.close();
      await store.close();
    }
  });
});
