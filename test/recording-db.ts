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

/**
 * Counts the statements the harness's app sends from now on, whatever sends them (lookups, epoch reads, spends,
 * reads): a spy on its driver's entry point (PGlite's `query` and `exec`, postgres.js's `unsafe`), which still runs
 * every call. `stop()` ends the count and answers it.
 */
export function countStatements(h: Harness): { readonly count: number; stop(): number } {
  const client = (h.db as unknown as { $client: Record<string, (...args: unknown[]) => unknown> }).$client;
  // The proxy (client.ts) forwards assignments and deletions to the driver; its `get` wraps these methods.
  const methods = h.onPostgres ? ["unsafe"] : ["query", "exec"];
  const counter = { count: 0 };
  // The driver's own methods, not what its proxy in client.ts answers for them (a wrapper around them): read as
  // property descriptors, which the proxy passes through.
  const rawMethod = (name: string) => {
    for (let o: object | null = client; o !== null; o = Object.getPrototypeOf(o)) {
      const found = Object.getOwnPropertyDescriptor(o, name);
      if (found) return found.value as (...args: unknown[]) => unknown;
    }
    throw new Error(`the driver has no ${name}`);
  };
  const originals = methods.map((name) => [name, rawMethod(name), Object.hasOwn(client, name)] as const);
  for (const [name, original] of originals) {
    client[name] = function (this: unknown, ...args: unknown[]) {
      counter.count++;
      return original.apply(this, args);
    };
  }
  return {
    get count() {
      return counter.count;
    },
    stop() {
      for (const [name, original, own] of originals) {
        if (own) client[name] = original;
        else delete client[name];
      }
      return counter.count;
    },
  };
}
