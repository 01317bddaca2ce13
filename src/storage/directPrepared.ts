import { is, Placeholder } from "drizzle-orm";
import type { Db } from "./client.js";
import { isPglite } from "./pglitePrepared.js";

/** A prepared statement of drizzle's, as `.prepare(name)` makes it: what `direct` reads of it. */
type DrizzlePrepared = { execute(values: Record<string, unknown>): Promise<unknown[]> };

/**
 * A one-statement write of the hot paths (keys.createKey's insert, keys.updateKey's columns, each with its audit row),
 * run on PostgreSQL straight through the postgres.js client drizzle was given (client.ts's, with its deadlines),
 * named and reused as drizzle's own prepared statements are. Why: drizzle's executor walks every parameter through
 * its placeholder lookup and three tracing and cache wrappers per call, and the audit row added 14 parameters to
 * these statements: that walk was a measurable part of keys.updateKey's CPU (issue 35 §4, docs/benchmarks.md).
 * Here the parameters' order is read once, when the statement is made, and each call fills an array by name. Every
 * parameter must be a placeholder (its value encoded by the caller); the rows come back as postgres.js gives them.
 * On PGlite drizzle's own execute is kept (its driver differs, and the embedded store's cost is elsewhere).
 */
export function direct(db: Db, prepared: DrizzlePrepared): DrizzlePrepared {
  if (isPglite(db)) return prepared;
  const { client, queryString, params } = prepared as unknown as {
    client: { unsafe(text: string, params: unknown[], options: { prepare: boolean }): PromiseLike<unknown[]> };
    queryString: string;
    params: unknown[];
  };
  const names = params.map((p, i) => {
    if (!is(p, Placeholder)) throw new Error(`parameter ${i + 1} of a direct statement is not a placeholder`);
    return p.name;
  });
  return {
    execute: async (values) => {
      const ordered = new Array<unknown>(names.length);
      for (let i = 0; i < names.length; i++) {
        const name = names[i]!;
        if (!(name in values)) throw new Error(`no value for placeholder "${name}"`);
        ordered[i] = values[name];
      }
      return client.unsafe(queryString, ordered, { prepare: true });
    },
  };
}
