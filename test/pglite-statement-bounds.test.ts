import { sql } from "drizzle-orm";
import { describe, expect } from "vitest";
import { checkDatabase } from "../src/http/health.js";
import { migrateAndRun, PGLITE_MAX_PARAMETERS, pgliteStore } from "../src/storage/client.js";
import { findDependencyFailure } from "../src/storage/dependency.js";
import { startPglite } from "../src/storage/pgliteParsers.js";
import { test } from "./fixtures.js";

// Issue 34 §1: one statement of 32,768 bind parameters leaves a PGlite 0.4 instance answering every later statement
// with no rows and no error (PGLITE_MAX_PARAMETERS says why). The embedded store refuses such a statement before
// sending it, and an instance found answering nothing fails every statement (503) and readiness until restarted.

/** A select with `n` parameters, and its values. */
const selectWith = (n: number) => ({
  text: `select count(*)::int as n from (values ${Array.from({ length: n }, (_, i) => `($${i + 1}::int)`).join(",")}) as v(x)`,
  params: Array.from({ length: n }, (_, i) => i),
});

type Client = { query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }> };

describe("the embedded store and statements PGlite cannot answer", () => {
  test.skipIf(Boolean(process.env.TEST_DATABASE_URL))(
    "a statement of 32,768 parameters is refused before it is sent, and the store answers every later statement",
    async ({ h }) => {
      const client = (h.db as unknown as { $client: Client }).$client;
      const most = selectWith(PGLITE_MAX_PARAMETERS);
      expect((await client.query(most.text, most.params)).rows).toEqual([{ n: PGLITE_MAX_PARAMETERS }]);
      const tooMany = selectWith(PGLITE_MAX_PARAMETERS + 1);
      await expect(client.query(tooMany.text, tooMany.params)).rejects.toThrow(
        `a statement of 32768 parameters was refused: the embedded store takes at most ${PGLITE_MAX_PARAMETERS}`,
      );
      expect((await h.sql<{ one: number }>("select 1 as one"))[0]).toEqual({ one: 1 });
      expect(await checkDatabase(h)).toBe("up");
    },
  );

  test("an instance broken under the store (here by its own client) fails every statement with a 503 and readiness, and stays so", async () => {
    const client = await startPglite("memory://");
    const store = pgliteStore(client, "a broken instance", () => client.close());
    try {
      // Readiness reads a table (the epoch sum), so the instance gets the schema first.
      await migrateAndRun(store, undefined, async () => {});
      expect(await checkDatabase(store)).toBe("up");
      // Sent past the store, as an unknown cause would: the instance then answers nothing.
      const tooMany = selectWith(PGLITE_MAX_PARAMETERS + 1);
      await client.query(tooMany.text, tooMany.params);
      // What app.ts answers 503 (drizzle wraps the store's error).
      const failureOf = (statement: Promise<unknown>) =>
        statement.then(
          () => undefined,
          (err: unknown) => findDependencyFailure(err)?.publicMessage,
        );
      expect(await failureOf(Promise.resolve(store.db.execute(sql`select 1 as one`)))).toBe("the embedded database stopped answering");
      expect(store.state.isDown).toBe(true);
      // Writes too are refused, not answered as if done.
      expect(await failureOf(Promise.resolve(store.db.execute(sql`create table t (x int)`)))).toBe(
        "the embedded database stopped answering",
      );
      expect(await checkDatabase(store)).toBe("down");
      expect(store.state.isDown).toBe(true);
    } finally {
      await store.close();
    }
  });
});
