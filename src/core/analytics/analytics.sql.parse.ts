import { InvalidInputError, type RefusalFacts } from "../../errors.js";

/**
 * v2's analytics.getVerifications, step one (contract §10): the caller's ClickHouse SQL parsed by a real
 * ClickHouse-dialect parser (@polyglot-sql/sdk, docs/analytics.md says why this one), bounded before and after
 * parsing. The text is never passed on: analytics.sql.translate.ts walks the tree this returns.
 */

/** Upstream's bounds: the query's length in bytes and its syntax nodes. */
export const MAX_QUERY_BYTES = 16 * 1024;
export const MAX_SYNTAX_NODES = 2000;

/** A node of polyglot's tree: an externally tagged enum, `{ "<type>": { …fields } }`, or a plain record of fields. */
export type SqlNode = { readonly [field: string]: unknown };

type Polyglot = typeof import("@polyglot-sql/sdk");
/** Loaded on the first query: its 22 MB WebAssembly module costs ~200 ms and ~100 MB, which nobody else should pay. */
let polyglot: Promise<Polyglot> | undefined;
const loadParser = (): Promise<Polyglot> => {
  polyglot ??= import("@polyglot-sql/sdk");
  return polyglot;
};

/** A refusal of the query itself (400 invalid_analytics_query and its siblings, by kind). */
export function refuseQuery<K extends AnalyticsRefusalKind>(kind: K, facts: RefusalFacts[K]): never {
  throw new InvalidInputError(Object.assign({ kind }, facts) as never);
}

export type AnalyticsRefusalKind = Extract<keyof RefusalFacts, `analytics${string}`>;

/** The tags polyglot gives statements other than SELECT (the rest of its top-level tags are expressions). */
const STATEMENT_KINDS =
  /^(insert|update|delete|drop|create|alter|truncate|command|merge|grant|revoke|set|use|show|describe|explain|attach|detach|rename|optimize|system|kill|exchange|check|begin|commit|rollback|transaction|copy|call|pragma|values|with|cache|uncache|load|analyze|vacuum|comment|refresh|execute|prepare|deallocate|lock|unlock)/;

/** The one statement of the query, parsed: a SELECT, or a UNION/EXCEPT/INTERSECT of them. */
export async function parseAnalyticsQuery(query: string): Promise<SqlNode> {
  if (Buffer.byteLength(query, "utf8") > MAX_QUERY_BYTES) refuseQuery("analyticsQueryTooLong", { max: MAX_QUERY_BYTES });
  if (query.trim() === "") refuseQuery("analyticsNoStatement", {});
  const { parse, tokenize } = await loadParser();
  const parsed = parse(query, "clickhouse" as Parameters<Polyglot["parse"]>[1]) as { success: boolean; ast?: unknown; error?: unknown };
  if (!parsed.success) {
    const problem = String(parsed.error ?? "unknown error");
    // The parser's own guard against deep nesting (512 levels): a bound of the work, not a typo.
    if (problem.includes("NESTING_DEPTH")) refuseQuery("analyticsQueryTooComplex", { max: MAX_SYNTAX_NODES });
    refuseQuery("analyticsSyntax", { problem });
  }
  const statements = (parsed.ast ?? []) as SqlNode[];
  if (statements.length === 0) refuseQuery("analyticsNoStatement", {});
  if (statements.length > 1) refuseQuery("analyticsMultipleStatements", {});
  const statement = statements[0]!;
  const type = Object.keys(statement)[0];
  if (type !== "select" && type !== "union" && type !== "except" && type !== "intersect") {
    // polyglot reads a bare expression (`SELEC count(*) …`, a typo) as a statement of its own: that is no statement.
    if (!STATEMENT_KINDS.test(type ?? "")) refuseQuery("analyticsSyntax", { problem: "expected a statement such as SELECT" });
    refuseQuery("analyticsNotSelect", {});
  }
  // polyglot keeps no trace of ClickHouse's `INTO OUTFILE` in its tree, so the tokens are asked: a query that writes
  // anywhere is no SELECT. (Nothing is ever run as written; this only refuses what the tree would hide.)
  const tokens = tokenize(query, "clickhouse" as Parameters<Polyglot["tokenize"]>[1]);
  // The package's types say `tokenType`; its tokens carry `token_type` (0.12.1): both are read.
  const typeOf = (t: unknown) => {
    const token = t as { token_type?: unknown; tokenType?: unknown };
    return token.token_type ?? token.tokenType;
  };
  if (!tokens.success) refuseQuery("analyticsSyntax", { problem: String(tokens.error ?? "unknown error") });
  if ((tokens.tokens ?? []).some((t) => typeOf(t) === "INTO")) refuseQuery("analyticsNotSelect", {});
  if (countNodes(statement, MAX_SYNTAX_NODES + 1) > MAX_SYNTAX_NODES) refuseQuery("analyticsQueryTooComplex", { max: MAX_SYNTAX_NODES });
  return statement;
}

/** The tree's nodes (objects other than source positions), counted up to `stop`. */
function countNodes(root: unknown, stop: number): number {
  let count = 0;
  const stack: unknown[] = [root];
  while (stack.length > 0 && count < stop) {
    const value = stack.pop();
    if (Array.isArray(value)) {
      for (const v of value) stack.push(v);
    } else if (value !== null && typeof value === "object") {
      count++;
      for (const [k, v] of Object.entries(value)) if (k !== "span") stack.push(v);
    }
  }
  return count;
}
