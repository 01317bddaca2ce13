import { sql } from "drizzle-orm";
import { InvalidInputError } from "../../errors.js";
import { type Db, rowsOf } from "../client.js";
import { OWN_STATEMENT_TIMEOUT, OwnStatementTimeoutError } from "../dependency.js";

/**
 * Runs a query written by core/analytics/analytics.sql.translate.ts (never the caller's text) in a transaction of
 * its own that can write nothing, with a deadline, in UTC: the one place v2's SQL analytics touch the store.
 */

/**
 * PGlite runs every statement on the process's own thread, so its statement_timeout cannot interrupt one (the
 * timer that would cancel it waits for the statement to give the thread back). There the work is bounded before
 * it starts: the planner's estimated cost of the query, in PostgreSQL's cost units (a sequential scan of 1 million
 * narrow rows costs about 20,000; a join of two such without a usable condition 10^10), up to this.
 */
export const PGLITE_COST_CEILING = 5_000_000;

export type AnalyticsRunBounds = {
  /** PostgreSQL's statement_timeout for the query. */
  timeoutMs: number;
  /** The embedded store: refuse a query whose planned cost is above this (PGLITE_COST_CEILING). */
  costCeiling: number | undefined;
};

/** Rows as PostgreSQL answers them, columns named `c1`…`cN`. */
export async function runAnalyticsQuery(db: Db, query: string, bounds: AnalyticsRunBounds): Promise<Record<string, unknown>[]> {
  const timeoutMs = Math.max(1, Math.round(bounds.timeoutMs));
  try {
    return await db.transaction(async (tx) => {
      await tx.execute(sql.raw("set transaction read only"));
      await tx.execute(sql.raw(`set local statement_timeout = ${timeoutMs}`));
      // The translation's date_trunc and to_char read UTC buckets, and its string literals rely on this.
      await tx.execute(sql.raw("set local timezone = 'UTC'"));
      await tx.execute(sql.raw("set local standard_conforming_strings = on"));
      if (bounds.costCeiling !== undefined) {
        const plan = rowsOf<{ "QUERY PLAN": unknown }>(await tx.execute(sql.raw(`explain (format json) ${query}`)));
        const cost = plannedCost(plan[0]?.["QUERY PLAN"]);
        if (cost === undefined || cost > bounds.costCeiling) {
          throw new InvalidInputError({ kind: "analyticsTimeout", ms: timeoutMs });
        }
      }
      // Marked: PostgreSQL's cancelling it at the deadline above is this query's failure, too heavy for one
      // tenant's request, never an outage of the store that the other tenants' requests would be told of.
      return rowsOf<Record<string, unknown>>(await tx.execute(sql.raw(`${query}\n${OWN_STATEMENT_TIMEOUT}`)));
    });
  } catch (err) {
    if (err instanceof InvalidInputError) throw err;
    if (isOwnStatementTimeout(err)) throw new InvalidInputError({ kind: "analyticsTimeout", ms: timeoutMs });
    const problem = statementProblem(err);
    if (problem !== undefined) throw new InvalidInputError({ kind: "analyticsQueryFailed", problem });
    throw err;
  }
}

function plannedCost(plan: unknown): number | undefined {
  const parsed = typeof plan === "string" ? (JSON.parse(plan) as unknown) : plan;
  const top = Array.isArray(parsed) ? (parsed[0] as { Plan?: { "Total Cost"?: unknown } } | undefined) : undefined;
  const cost = top?.Plan?.["Total Cost"];
  return typeof cost === "number" ? cost : undefined;
}

/** PostgreSQL cancelled the query at its own deadline (the driver wrappers' OwnStatementTimeoutError, dependency.ts). */
function isOwnStatementTimeout(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof OwnStatementTimeoutError) return true;
  }
  return false;
}

/**
 * PostgreSQL's refusal of a translated query for what it says (class 42: a column neither grouped nor aggregated, a
 * type mismatch; class 22: a bad value, such as a date string that is none; class 21: a cardinality violation):
 * the caller's to fix, in PostgreSQL's words, which name only the translation's own identifiers.
 */
function statementProblem(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    const message = (e as { message?: unknown }).message;
    // 42P01 and 42703 (no such table or column) are keyhaven's, not the caller's: the translation names only what
    // the schema has, so the store lacks a migration.
    if (code === "42P01" || code === "42703") return undefined;
    if (typeof code === "string" && /^(42|22|21)/.test(code) && typeof message === "string") return message;
  }
  return undefined;
}
