import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { drizzle as drizzlePostgres } from "drizzle-orm/postgres-js";
import type { Db } from "../src/storage/client.js";
import * as schema from "../src/storage/schema.js";
import type { Harness } from "./helper.js";

export type Captured = { query: string; params: unknown[] };

/**
 * A drizzle handle on the harness's own connection(s) that keeps the statements it sent: the repositories'
 * functions run on it unchanged, and the test then reads (or explains) exactly what they sent.
 */
export function recordingDb(h: Harness): { db: Db; sent: readonly Captured[]; last(): Captured } {
  const sent: Captured[] = [];
  const logger = { logQuery: (query: string, params: unknown[]) => void sent.push({ query, params }) };
  const client = (h.db as unknown as { $client: never }).$client;
  const db = (h.onPostgres ? drizzlePostgres({ client, schema, logger }) : drizzlePglite({ client, schema, logger })) as unknown as Db;
  return {
    db,
    sent,
    last: () => {
      const last = sent.at(-1);
      if (!last) throw new Error("no statement was sent");
      return last;
    },
  };
}
