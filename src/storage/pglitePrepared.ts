import { performance } from "node:perf_hooks";
import type { PGlite } from "@electric-sql/pglite";
import { type Column, is, type SQL } from "drizzle-orm";
import { PgliteDatabase } from "drizzle-orm/pglite";
import { type Db, hasSqlState } from "./client.js";
import { decodeJsonValues, jsonFieldsOf } from "./jsonValues.js";

/** Whether `db` is a handle on the embedded store. */
export function isPglite(db: Db): boolean {
  return is(db, PgliteDatabase);
}

const SQLSTATE_DUPLICATE_PREPARED = "42P05";
const SQLSTATE_UNKNOWN_PREPARED = "26000";

/** How old a prepared statement's plan gets on PGlite before it is planned again (see preparePgliteSelect). */
export const PGLITE_REPLAN_AFTER_MS = 60_000;

export type PgliteSelectOptions = {
  /** The plan's age at which the next execution plans it again (default PGLITE_REPLAN_AFTER_MS). */
  replanAfterMs?: number;
  /** The clock that age is read from, in ms (default performance.now). */
  now?: () => number;
};

/** Swallows a failure with this SQLSTATE; throws any other. */
function ignoreSqlState(err: unknown, sqlState: string): void {
  if (!hasSqlState(err, sqlState)) throw err;
}

/** A text[] as an SQL literal: `'{"a","b"}'::text[]` (standard_conforming_strings is on, PostgreSQL's default). */
export function textArrayLiteral(values: readonly string[]): string {
  const array = `{${values.map((v) => `"${v.replace(/[\\"]/g, "\\$&")}"`).join(",")}}`;
  return `'${array.replace(/'/g, "''")}'::text[]`;
}

/**
 * A select of one text[] parameter run on PGlite as a server-side prepared statement: PREPARE once per session, then
 * EXECUTE with the argument as a literal (EXECUTE takes expressions, not bind parameters).
 *
 * Why: drizzle's "prepared" statements are not prepared on PGlite. Its driver sends every execution as an unnamed
 * statement, so PostgreSQL parses and plans it each time, and PGlite runs on keyhaven's own thread: for the
 * verification lookup (joins and five correlated subqueries) planning took about 1 ms of the ~3 ms a batch of 36
 * misses cost. A prepared statement is planned once (generic plans are chosen after five runs when they cost no
 * more; the lookup's shape makes that plan the hash index, lookup.plan.test.ts). On PostgreSQL, postgres.js already
 * names and reuses its statements.
 *
 * The statement answers all its rows as one JSON value (`json_agg(row(…))`), which the caller parses once, instead
 * of rows of fields: PGlite's JavaScript reads each field of each row out of the answer on its own (a copy and a
 * decode per field), which cost the verification lookup about a third of its time per batch on the embedded store
 * (issue 13 §2, docs/benchmarks.md). Values arrive as PostgreSQL writes them in JSON: text, numbers, booleans,
 * arrays, json and jsonb as they are, timestamps in ISO 8601 (jsonValues.ts); cast an int8 that may pass 2^53 to text (the
 * epoch is).
 *
 * `text` must be the select's own SQL with `$1` where the text[] goes, and `selection` the select's fields in order:
 * rows are decoded column by column as drizzle decodes them. A statement deallocated behind our back (DISCARD ALL)
 * is prepared again, once.
 *
 * The plan is made afresh once it is `replanAfterMs` old (PGLITE_REPLAN_AFTER_MS): a prepared statement keeps its
 * plan until a table it reads is analysed, and PGlite analyses nothing by itself (statistics.ts analyses after
 * imports only). A plan made while `keys_roles` was empty reads it whole (a sequential scan is the cheapest way to
 * read an empty table), and went on reading it whole after roles were granted to 300,000 keys: 42.5 ms a lookup
 * instead of 1.95 (issue 13 §2, docs/benchmarks.md). Planned again, it reads the tables' index, since the planner
 * estimates a table's rows from its size now, analysed or not.
 */
export function preparePgliteSelect<Row>(
  db: Db,
  name: string,
  text: string,
  selection: Record<string, Column | SQL>,
  { replanAfterMs = PGLITE_REPLAN_AFTER_MS, now = () => performance.now() }: PgliteSelectOptions = {},
): { sql: string; execute(values: readonly string[]): Promise<Row[]> } {
  // The store counts EXECUTE as a statement that cannot write (client.ts, Store.writes): only selects are prepared.
  if (!/^\s*select\b/i.test(text)) throw new Error(`preparePgliteSelect prepares selects only: ${name}`);
  const client = (db as unknown as { $client: PGlite }).$client;
  const fields = jsonFieldsOf(selection);
  const definition = `prepare ${name}(text[]) as select json_agg(row(q.*)) from (${text}) q`;
  let prepared: Promise<void> | undefined;
  let plannedAt = 0;
  const prepare = () => {
    const replan = prepared !== undefined && now() - plannedAt >= replanAfterMs;
    if (replan) prepared = undefined;
    prepared ??= (async () => {
      plannedAt = now();
      // Gone already (DISCARD ALL, or another handle on the same session replanned it): nothing to deallocate.
      if (replan) await client.query(`deallocate ${name}`).catch((err: unknown) => ignoreSqlState(err, SQLSTATE_UNKNOWN_PREPARED));
      // Another handle on the same PGlite session prepared it already: the same text, since the name is ours.
      await client.query(definition).catch((err: unknown) => ignoreSqlState(err, SQLSTATE_DUPLICATE_PREPARED));
    })().catch((err: unknown) => {
      prepared = undefined;
      throw err;
    });
    return prepared;
  };
  const run = async (values: readonly string[]) => {
    await prepare();
    // `exec`, PostgreSQL's simple protocol: one message, where `query` sends a parse, a describe, a bind and an execute
    // (0.17–0.19 against 0.38–0.40 ms per statement on the slow machine of docs/benchmarks.md). The argument is a
    // literal in the text either way.
    const [result] = await client.exec(`execute ${name}(${textArrayLiteral(values)})`, { rowMode: "array" });
    // One row, one json: an array of records, each an object of fields f1, f2, … in the select's order (null: no rows).
    const records = (result?.rows[0]?.[0] ?? null) as Record<string, unknown>[] | null;
    return (records ?? []).map((record) => decodeJsonValues<Row>(fields, Object.values(record), name));
  };
  return {
    sql: text,
    async execute(values) {
      try {
        return await run(values);
      } catch (err) {
        if (!hasSqlState(err, SQLSTATE_UNKNOWN_PREPARED)) throw err;
        prepared = undefined;
        return run(values);
      }
    },
  };
}
