import { refuseQuery, type SqlNode } from "./analytics.sql.parse.js";
import { PUBLIC_TABLES, type PublicTable, type SqlKind, type TableScope, tableSql } from "./analytics.sql.tables.js";

/**
 * v2's analytics.getVerifications, step two: the parsed ClickHouse query, checked against the subset keyhaven
 * answers and written anew as PostgreSQL by the visitors below. Nothing of the caller's text reaches the SQL but
 * what a visitor re-emits: identifiers only from the public tables' column lists (and internal names `t1`, `c1`,
 * `w1`), string literals quoted by sqlString, numbers re-printed from their parsed value. Every public table is
 * read through tableSql, whose subquery carries the caller's workspace, APIs and retention.
 */

/** Upstream's bound on projected columns. */
export const MAX_COLUMNS = 64;
/** The rows a query may answer at most: its LIMIT is capped to this, and one is added when it has none. */
export const MAX_ROWS = 10_000;

export type TranslateOptions = {
  workspaceId: string;
  /** `undefined`: every API of the workspace (`api.*.read_analytics`); else only these. */
  keySpaceIds: readonly string[] | undefined;
  /** Business time: `now()`, `today()` and the retention windows. */
  nowMs: number;
  /** What the verification log keeps (key_verifications_v1, …_per_minute_v1). */
  logRetentionDays: number;
  /** What the hourly counts keep (…_per_hour_v1, …_per_day_v1, …_per_month_v1). */
  aggregateRetentionDays: number;
  maxRows: number;
};

export type AnalyticsColumn = { name: string; kind: SqlKind };
/** The PostgreSQL query (its columns are `c1`…`cN`, answered as `columns` names them) and its output columns. */
export type TranslatedQuery = { sql: string; columns: AnalyticsColumn[] };

type Expr = { sql: string; kind: SqlKind };

type SourceColumn = { sql: string; kind: SqlKind };
type Source = {
  /** The name a query qualifies its columns with: its alias, else the table's or CTE's name. */
  label: string;
  sql: string;
  columns: Map<string, SourceColumn>;
  /** The public table read directly, if it is one (for `time`'s retention check and the refused columns). */
  table?: PublicTable;
};

type Cte = { sqlName: string; columns: AnalyticsColumn[] };

type Scope = {
  sources: Source[];
  aliases: Map<string, SqlNode>;
  expanding: Set<string>;
  lambdas: Map<string, Expr>;
  /** arrayJoin(x) as a lateral unnest, one per distinct argument (ClickHouse expands equal ones once). */
  laterals: Map<string, { alias: string; sql: string }>;
};

const DAY_MS = 86_400_000;

export function translateAnalyticsQuery(statement: SqlNode, options: TranslateOptions): TranslatedQuery {
  return new Translator(options).translateTop(statement);
}

/** A string literal for PostgreSQL (standard_conforming_strings on, which the repository sets). */
export function sqlString(value: string): string {
  if (value.includes("\u0000")) refuseQuery("analyticsUnsupported", { construct: "a string with a NUL character" });
  return `'${value.replaceAll("'", "''")}'`;
}

function tagOf(node: unknown): [string, SqlNode] {
  if (node === null || typeof node !== "object" || Array.isArray(node)) refuseQuery("analyticsUnsupported", { construct: "an expression" });
  const keys = Object.keys(node);
  if (keys.length !== 1) refuseQuery("analyticsUnsupported", { construct: "an expression" });
  const body = (node as SqlNode)[keys[0]!];
  return [keys[0]!, (body ?? {}) as SqlNode];
}

const nodes = (value: unknown): SqlNode[] => (Array.isArray(value) ? (value as SqlNode[]) : []);
const nameOfIdentifier = (value: unknown): string => String((value as { name?: unknown } | null)?.name ?? "");
const present = (value: unknown) =>
  value !== null && value !== undefined && value !== false && !(Array.isArray(value) && value.length === 0);

/** The fields of a SELECT the subset has; any other that is set is refused by name. */
const SELECT_FIELDS = new Set([
  "expressions",
  "from",
  "joins",
  "where_clause",
  "group_by",
  "having",
  "order_by",
  "limit",
  "offset",
  "distinct",
  "with",
  "leading_comments",
  "post_select_comments",
]);
const CLAUSE_NAMES: Record<string, string> = {
  settings: "SETTINGS",
  format: "FORMAT",
  limit_by: "LIMIT BY",
  sample: "SAMPLE",
  qualify: "QUALIFY",
  windows: "WINDOW",
  prewhere: "PREWHERE",
  distinct_on: "DISTINCT ON",
  into: "INTO",
  lateral_views: "ARRAY JOIN",
};

const JOIN_FIELDS = new Set(["this", "on", "kind", "use_inner_keyword", "use_outer_keyword", "nesting_group"]);
const COMPARISONS: Record<string, string> = { eq: "=", neq: "<>", lt: "<", lte: "<=", gt: ">", gte: ">=" };
const TRUNC_UNITS: Record<string, string> = {
  toStartOfMinute: "minute",
  toStartOfHour: "hour",
  toStartOfDay: "day",
  toStartOfMonth: "month",
  toStartOfYear: "year",
};
const INTERVAL_UNITS: Record<string, string> = { Minute: "minute", Hour: "hour", Day: "day", Week: "week", Month: "month", Year: "year" };
/** Syntax that is no function (refused as unsupported SQL, not as a function that is not allowed). */
const SYNTAX_TAGS = new Set([
  "alias",
  "cast",
  "case",
  "subscript",
  "tuple",
  "like",
  "ilike",
  "exists",
  "subquery",
  "dot",
  "window_function",
  "star",
]);

class Translator {
  private next = 0;

  constructor(private readonly options: TranslateOptions) {}

  private scopeOfTables(): TableScope {
    const { workspaceId, keySpaceIds, nowMs, logRetentionDays, aggregateRetentionDays } = this.options;
    return {
      workspaceId: sqlString(workspaceId),
      keySpaceIds: keySpaceIds?.map(sqlString),
      logFromMs: nowMs - logRetentionDays * DAY_MS,
      aggregateFromMs: nowMs - aggregateRetentionDays * DAY_MS,
    };
  }

  private id(prefix: string): string {
    this.next++;
    return `${prefix}${this.next}`;
  }

  translateTop(statement: SqlNode): TranslatedQuery {
    const out = this.query(statement, new Map(), true);
    return { sql: out.sql, columns: out.columns };
  }

  /** A SELECT or a UNION ALL of them; `top`: the outermost, whose values are converted for the answer and capped. */
  private query(node: SqlNode, ctes: Map<string, Cte>, top: boolean): { sql: string; columns: AnalyticsColumn[] } {
    const [tag, body] = tagOf(node);
    if (tag === "select") return this.select(body, ctes, top);
    if (tag === "subquery") return this.query(body.this as SqlNode, ctes, top);
    if (tag === "paren") return this.query(body.this as SqlNode, ctes, top);
    if (tag === "union") {
      if (body.all !== true) refuseQuery("analyticsUnsupported", { construct: "UNION without ALL (use UNION ALL)" });
      if (body.by_name === true || body.corresponding === true) refuseQuery("analyticsUnsupported", { construct: "this form of UNION" });
      const scoped = this.withClause(body.with, ctes);
      const left = this.query(body.left as SqlNode, scoped.ctes, top);
      const right = this.query(body.right as SqlNode, scoped.ctes, top);
      if (left.columns.length !== right.columns.length) {
        refuseQuery("analyticsQueryFailed", { problem: "each side of UNION ALL must select the same number of columns" });
      }
      const columns = left.columns.map((c, i) => (c.kind === "null" ? { name: c.name, kind: right.columns[i]!.kind } : c));
      let sql = `${scoped.sql}(${left.sql}) union all (${right.sql})`;
      const order = nodes((body.order_by as SqlNode | null)?.expressions);
      if (order.length > 0) {
        sql += ` order by ${order.map((o) => this.unionOrder(o, columns)).join(", ")}`;
      }
      sql += this.limitClause(body.limit as SqlNode | null, body.offset as SqlNode | null, top);
      return { sql, columns };
    }
    if (tag === "except" || tag === "intersect") refuseQuery("analyticsUnsupported", { construct: tag.toUpperCase() });
    return refuseQuery("analyticsNotSelect", {});
  }

  private unionOrder(item: SqlNode, columns: AnalyticsColumn[]): string {
    const target = item.this as SqlNode;
    const [tag, body] = tagOf(target);
    let position: number | undefined;
    if (tag === "literal" && body.literal_type === "number") position = Number(body.value);
    if (tag === "column" && !present(body.table)) {
      const name = nameOfIdentifier(body.name);
      const found = columns.findIndex((c) => c.name === name);
      if (found < 0) refuseQuery("analyticsUnknownColumn", { column: name, table: null });
      position = found + 1;
    }
    if (position === undefined || !Number.isInteger(position) || position < 1 || position > columns.length) {
      refuseQuery("analyticsUnsupported", { construct: "ORDER BY of a UNION ALL by anything but a selected column" });
    }
    return `"c${position}"${orderDirection(item)}`;
  }

  private limitClause(limit: SqlNode | null, offset: SqlNode | null, top: boolean): string {
    // A SELECT's LIMIT is `{ this: <literal> }`, a UNION's the literal itself.
    const unwrap = (n: SqlNode | null): SqlNode | null => {
      if (!n || "literal" in n) return n;
      for (const [field, value] of Object.entries(n)) {
        if (field !== "this" && present(value)) refuseQuery("analyticsUnsupported", { construct: `LIMIT ${field.toUpperCase()}` });
      }
      return (n.this as SqlNode | undefined) ?? null;
    };
    let rows = top ? this.options.maxRows : undefined;
    const given = unwrap(limit);
    if (given) {
      const n = integerLiteral(given, "LIMIT");
      rows = rows === undefined ? n : Math.min(n, rows);
    }
    let sql = rows === undefined ? "" : ` limit ${rows}`;
    const skip = unwrap(offset);
    if (skip) sql += ` offset ${integerLiteral(skip, "OFFSET")}`;
    return sql;
  }

  private select(body: SqlNode, outerCtes: Map<string, Cte>, top: boolean): { sql: string; columns: AnalyticsColumn[] } {
    for (const [field, value] of Object.entries(body)) {
      if (SELECT_FIELDS.has(field) || !present(value)) continue;
      refuseQuery("analyticsUnsupported", { construct: CLAUSE_NAMES[field] ?? field });
    }
    const { ctes, sql: withSql } = this.withClause(body.with, outerCtes);

    const scope: Scope = { sources: [], aliases: new Map(), expanding: new Set(), lambdas: new Map(), laterals: new Map() };
    const fromParts: string[] = [];
    const from = nodes((body.from as SqlNode | null)?.expressions);
    if (from.length > 1) refuseQuery("analyticsUnsupported", { construct: "several tables in FROM (join them with JOIN … ON)" });
    if (from.length === 1) {
      const source = this.source(from[0]!, ctes);
      scope.sources.push(source);
      fromParts.push(source.sql);
    }
    for (const join of nodes(body.joins)) {
      if (from.length === 0) refuseQuery("analyticsUnsupported", { construct: "JOIN without FROM" });
      const kind = String(join.kind ?? "");
      const keyword = (
        { Inner: "join", Left: "left join", Right: "right join", Full: "full join", Cross: "cross join" } as Record<string, string>
      )[kind];
      if (!keyword) refuseQuery("analyticsUnsupported", { construct: `${kind.toUpperCase()} JOIN` });
      for (const [field, value] of Object.entries(join)) {
        if (JOIN_FIELDS.has(field) || field.endsWith("comments") || !present(value)) continue;
        refuseQuery("analyticsUnsupported", { construct: field === "using" ? "JOIN … USING (use ON)" : `JOIN ${field}` });
      }
      const source = this.source(join.this as SqlNode, ctes);
      scope.sources.push(source);
      if (keyword === "cross join") {
        fromParts.push(` cross join ${source.sql}`);
      } else {
        if (!present(join.on)) refuseQuery("analyticsUnsupported", { construct: "JOIN without ON" });
        fromParts.push(` ${keyword} ${source.sql} on ${this.expr(join.on as SqlNode, scope).sql}`);
      }
    }

    // The select list: stars expanded, aliases known to every clause (ClickHouse lets WHERE and GROUP BY use them).
    const items: { node: SqlNode; name: string }[] = [];
    for (const item of nodes(body.expressions)) {
      const [tag, inner] = tagOf(item);
      if (tag === "star") {
        if (present(inner.except) || present(inner.replace) || present(inner.rename))
          refuseQuery("analyticsUnsupported", { construct: "* EXCEPT/REPLACE" });
        const qualifier = present(inner.table) ? nameOfIdentifier(inner.table) : undefined;
        const sources = qualifier === undefined ? scope.sources : scope.sources.filter((s) => s.label === qualifier);
        if (qualifier !== undefined && sources.length === 0)
          refuseQuery("analyticsUnknownColumn", { column: `${qualifier}.*`, table: null });
        if (sources.length === 0) refuseQuery("analyticsUnsupported", { construct: "* without FROM" });
        for (const source of sources) {
          for (const name of source.columns.keys()) {
            items.push({ node: { column: { name: { name }, table: { name: source.label } } }, name });
          }
        }
        continue;
      }
      if (tag === "alias") {
        const name = nameOfIdentifier(inner.alias);
        if (present(inner.column_aliases)) refuseQuery("analyticsUnsupported", { construct: "column aliases" });
        items.push({ node: inner.this as SqlNode, name });
        if (!scope.aliases.has(name)) scope.aliases.set(name, inner.this as SqlNode);
        continue;
      }
      items.push({ node: item, name: displayName(item) });
    }
    if (items.length === 0) refuseQuery("analyticsNoStatement", {});
    if (items.length > MAX_COLUMNS) refuseQuery("analyticsTooManyColumns", { max: MAX_COLUMNS });

    const projected = items.map((item) => {
      // An alias is not looked up inside its own definition (`sum(count) AS count` sums the column).
      const ownAlias = scope.aliases.get(item.name) === item.node ? item.name : undefined;
      if (ownAlias) scope.expanding.add(ownAlias);
      const e = this.expr(item.node, scope);
      if (ownAlias) scope.expanding.delete(ownAlias);
      return e;
    });

    let where = "";
    if (present(body.where_clause)) {
      const condition = (body.where_clause as SqlNode).this as SqlNode;
      this.checkRetention(condition, scope);
      where = ` where ${this.expr(condition, scope).sql}`;
    }
    let groupBy = "";
    if (present(body.group_by)) {
      const group = body.group_by as SqlNode;
      for (const [field, value] of Object.entries(group)) {
        if (field !== "expressions" && present(value) && !field.endsWith("comments")) {
          refuseQuery("analyticsUnsupported", { construct: `GROUP BY ${field.toUpperCase()}` });
        }
      }
      groupBy = ` group by ${nodes(group.expressions)
        .map((g) => this.positionOr(g, items.length) ?? this.expr(g, scope).sql)
        .join(", ")}`;
    }
    const having = present(body.having) ? ` having ${this.expr((body.having as SqlNode).this as SqlNode, scope).sql}` : "";
    let orderBy = "";
    const order = nodes((body.order_by as SqlNode | null)?.expressions);
    if (order.length > 0) {
      orderBy = ` order by ${order
        .map((o) => `${this.positionOr(o.this as SqlNode, items.length) ?? this.expr(o.this as SqlNode, scope).sql}${orderDirection(o)}`)
        .join(", ")}`;
    }
    const limit = this.limitClause(body.limit as SqlNode | null, body.offset as SqlNode | null, top);

    let fromSql = fromParts.join("");
    if (scope.laterals.size > 0) {
      if (fromSql === "") fromSql = "(select 1) as t0";
      for (const lateral of scope.laterals.values()) fromSql += ` cross join lateral ${lateral.sql}`;
    }
    const columns = items.map((item, i) => ({ name: item.name, kind: projected[i]!.kind }));
    const list = projected.map((e, i) => `${top ? answerValue(e) : e.sql} as "c${i + 1}"`).join(", ");
    const distinct = body.distinct === true ? "distinct " : "";
    const sql = `${withSql}select ${distinct}${list}${fromSql === "" ? "" : ` from ${fromSql}`}${where}${groupBy}${having}${orderBy}${limit}`;
    return { sql, columns };
  }

  /** `WITH name AS (SELECT …), …`: each CTE translated with the ones before it in scope (none is recursive). */
  private withClause(withValue: unknown, outerCtes: Map<string, Cte>): { ctes: Map<string, Cte>; sql: string } {
    const ctes = new Map(outerCtes);
    if (!present(withValue)) return { ctes, sql: "" };
    const withNode = withValue as SqlNode;
    if (withNode.recursive === true) refuseQuery("analyticsUnsupported", { construct: "WITH RECURSIVE" });
    const parts: string[] = [];
    for (const cte of nodes(withNode.ctes)) {
      if (present(cte.columns) || present(cte.materialized)) refuseQuery("analyticsUnsupported", { construct: "this form of WITH" });
      // ClickHouse's `WITH <expression> AS name` (a named constant) has no query: not in the subset.
      const [cteTag] = tagOf(cte.this);
      if (!["select", "union", "subquery", "paren"].includes(cteTag)) {
        refuseQuery("analyticsUnsupported", { construct: "WITH <expression> AS <name>" });
      }
      const out = this.query(cte.this as SqlNode, ctes, false);
      const sqlName = this.id("w");
      parts.push(`${sqlName} as (${out.sql})`);
      ctes.set(nameOfIdentifier(cte.alias), { sqlName, columns: out.columns });
    }
    return { ctes, sql: parts.length > 0 ? `with ${parts.join(", ")} ` : "" };
  }

  /** `GROUP BY 1` / `ORDER BY 2`: a position in the select list, as ClickHouse reads it. */
  private positionOr(node: SqlNode, count: number): string | undefined {
    const [tag, body] = tagOf(node);
    if (tag !== "literal" || body.literal_type !== "number") return undefined;
    const n = Number(body.value);
    if (!Number.isInteger(n) || n < 1 || n > count) refuseQuery("analyticsUnsupported", { construct: `position ${String(body.value)}` });
    return String(n);
  }

  private source(node: SqlNode, ctes: Map<string, Cte>): Source {
    const [tag, body] = tagOf(node);
    const sqlAlias = this.id("t");
    const alias = present(body.alias) ? nameOfIdentifier(body.alias) : undefined;
    if (tag === "table") {
      const name = nameOfIdentifier(body.name);
      if (present(body.schema) || present(body.catalog)) {
        const full = [body.catalog, body.schema, body.name].filter(present).map(nameOfIdentifier).join(".");
        refuseQuery("analyticsTableNotAllowed", { table: full });
      }
      if (present(body.column_aliases) || present(body.when) || present(body.hints)) {
        refuseQuery("analyticsUnsupported", { construct: "this form of table reference" });
      }
      const cte = ctes.get(name);
      if (cte) {
        const columns = new Map<string, SourceColumn>();
        cte.columns.forEach((c, i) => {
          if (!columns.has(c.name)) columns.set(c.name, { sql: `${sqlAlias}."c${i + 1}"`, kind: c.kind });
        });
        return { label: alias ?? name, sql: `${cte.sqlName} as ${sqlAlias}`, columns };
      }
      const table = PUBLIC_TABLES.get(name);
      if (!table) refuseQuery("analyticsTableNotAllowed", { table: name });
      const columns = new Map<string, SourceColumn>();
      for (const [column, kind] of table.columns) {
        if (!table.unavailable.has(column)) columns.set(column, { sql: `${sqlAlias}."${column}"`, kind });
      }
      return { label: alias ?? name, sql: `${tableSql(table, this.scopeOfTables())} as ${sqlAlias}`, columns, table };
    }
    if (tag === "subquery") {
      const out = this.query(body.this as SqlNode, ctes, false);
      const columns = new Map<string, SourceColumn>();
      out.columns.forEach((c, i) => {
        if (!columns.has(c.name)) columns.set(c.name, { sql: `${sqlAlias}."c${i + 1}"`, kind: c.kind });
      });
      return { label: alias ?? sqlAlias, sql: `(${out.sql}) as ${sqlAlias}`, columns };
    }
    if (tag === "function") refuseQuery("analyticsTableNotAllowed", { table: String(body.name) });
    return refuseQuery("analyticsUnsupported", { construct: `FROM ${tag}` });
  }

  private column(body: SqlNode, scope: Scope): Expr {
    const name = nameOfIdentifier(body.name);
    const qualifier = present(body.table) ? nameOfIdentifier(body.table) : undefined;
    if (qualifier === undefined) {
      const lambda = scope.lambdas.get(name);
      if (lambda) return lambda;
      const aliased = scope.aliases.get(name);
      if (aliased && !scope.expanding.has(name)) {
        scope.expanding.add(name);
        try {
          return this.expr(aliased, scope);
        } finally {
          scope.expanding.delete(name);
        }
      }
    }
    const sources = qualifier === undefined ? scope.sources : scope.sources.filter((s) => s.label === qualifier);
    if (qualifier !== undefined && sources.length === 0)
      refuseQuery("analyticsUnknownColumn", { column: `${qualifier}.${name}`, table: null });
    const found = sources.filter((s) => s.columns.has(name));
    if (found.length > 1) refuseQuery("analyticsAmbiguousColumn", { column: name });
    if (found.length === 0) {
      const table = sources.length === 1 ? sources[0]!.table : undefined;
      if (table?.unavailable.has(name)) refuseQuery("analyticsColumnUnavailable", { column: name, table: table.name });
      refuseQuery("analyticsUnknownColumn", { column: name, table: table?.name ?? null });
    }
    return found[0]!.columns.get(name)!;
  }

  /**
   * A query that asks for data older than retention is refused (upstream's query_range_exceeds_retention): the
   * bounds on `time` of the tables read directly, among the WHERE's top-level ANDs, that are constants (now(),
   * today(), INTERVAL arithmetic, numbers, date strings). Whatever is not found here is still bounded: every table
   * subquery reads only rows within retention.
   */
  private checkRetention(condition: SqlNode, scope: Scope): void {
    const tables = scope.sources.filter((s) => s.table);
    if (tables.length === 0) return;
    const conjuncts: SqlNode[] = [];
    const collect = (n: SqlNode) => {
      const [tag, body] = tagOf(n);
      if (tag === "and") {
        collect(body.left as SqlNode);
        collect(body.right as SqlNode);
      } else if (tag === "paren") collect(body.this as SqlNode);
      else conjuncts.push(n);
    };
    collect(condition);
    for (const conjunct of conjuncts) {
      const [tag, body] = tagOf(conjunct);
      const bounds: { side: "low" | "high"; value: SqlNode; column: SqlNode }[] = [];
      if (tag === "between" && body.not !== true) {
        bounds.push({ side: "low", value: body.low as SqlNode, column: body.this as SqlNode });
        bounds.push({ side: "high", value: body.high as SqlNode, column: body.this as SqlNode });
      } else if (tag in COMPARISONS && tag !== "neq") {
        const left = body.left as SqlNode;
        const right = body.right as SqlNode;
        const flip: Record<string, string> = { lt: "gt", lte: "gte", gt: "lt", gte: "lte", eq: "eq" };
        const asBound = (op: string, column: SqlNode, value: SqlNode) => {
          if (op === "gt" || op === "gte" || op === "eq") bounds.push({ side: "low", value, column });
          if (op === "lt" || op === "lte") bounds.push({ side: "high", value, column });
        };
        asBound(tag, left, right);
        asBound(flip[tag]!, right, left);
      }
      for (const bound of bounds) {
        const table = this.timeColumnTable(bound.column, tables);
        if (!table) continue;
        const ms = constantTime(bound.value, table.columns.get("time") === "ms" ? "ms" : "seconds", this.options.nowMs);
        if (ms === undefined) continue;
        const days = table.retention === "log" ? this.options.logRetentionDays : this.options.aggregateRetentionDays;
        const oldest = bucketStart(table, this.options.nowMs - days * DAY_MS);
        if ((bound.side === "low" && ms < oldest) || (bound.side === "high" && ms < oldest)) {
          refuseQuery("analyticsRangeExceedsRetention", { days });
        }
      }
    }
  }

  private timeColumnTable(node: SqlNode, tables: Source[]): PublicTable | undefined {
    const [tag, body] = tagOf(node);
    if (tag !== "column" || nameOfIdentifier(body.name) !== "time") return undefined;
    const qualifier = present(body.table) ? nameOfIdentifier(body.table) : undefined;
    const matching = qualifier === undefined ? tables : tables.filter((s) => s.label === qualifier);
    return matching.length === 1 ? matching[0]!.table : undefined;
  }

  expr(node: SqlNode, scope: Scope): Expr {
    const [tag, body] = tagOf(node);
    switch (tag) {
      case "column":
        return this.column(body, scope);
      case "literal":
        return literal(body);
      case "boolean":
        return { sql: body.value === true ? "true" : "false", kind: "bool" };
      case "null":
        return { sql: "null", kind: "null" };
      case "paren":
        return this.expr(body.this as SqlNode, scope);
      case "neg": {
        const e = this.expr(body.this as SqlNode, scope);
        if (e.kind !== "int" && e.kind !== "float")
          refuseQuery("analyticsUnsupported", { construct: "minus of a value that is not a number" });
        return { sql: `(- ${e.sql})`, kind: e.kind };
      }
      case "not":
        return { sql: `(not ${this.expr(body.this as SqlNode, scope).sql})`, kind: "bool" };
      case "and":
      case "or":
        return {
          sql: `(${this.expr(body.left as SqlNode, scope).sql} ${tag} ${this.expr(body.right as SqlNode, scope).sql})`,
          kind: "bool",
        };
      case "eq":
      case "neq":
      case "lt":
      case "lte":
      case "gt":
      case "gte": {
        const [l, r] = comparable(this.expr(body.left as SqlNode, scope), this.expr(body.right as SqlNode, scope));
        return { sql: `(${l} ${COMPARISONS[tag]} ${r})`, kind: "bool" };
      }
      case "add":
      case "sub":
      case "mul":
      case "div":
      case "mod":
        return arithmetic(tag, this.expr(body.left as SqlNode, scope), this.expr(body.right as SqlNode, scope));
      case "in": {
        if (present(body.query) || present(body.unnest))
          refuseQuery("analyticsUnsupported", { construct: "IN with a subquery or a table" });
        const subject = this.expr(body.this as SqlNode, scope);
        const list = nodes(body.expressions).map((e) => comparable(subject, this.expr(e, scope))[1]);
        if (list.length === 0) refuseQuery("analyticsUnsupported", { construct: "IN ()" });
        return { sql: `(${subject.sql} ${body.not === true ? "not in" : "in"} (${list.join(", ")}))`, kind: "bool" };
      }
      case "between": {
        const subject = this.expr(body.this as SqlNode, scope);
        const [s, low] = comparable(subject, this.expr(body.low as SqlNode, scope));
        const high = comparable(subject, this.expr(body.high as SqlNode, scope))[1];
        return { sql: `(${s} ${body.not === true ? "not between" : "between"} ${low} and ${high})`, kind: "bool" };
      }
      case "is_null":
        return { sql: `(${this.expr(body.this as SqlNode, scope).sql} is ${body.not === true ? "not " : ""}null)`, kind: "bool" };
      case "interval":
        return interval(body);
      case "array_func":
        return this.array(nodes(body.expressions), scope);
      case "count": {
        if (present(body.filter)) refuseQuery("analyticsUnsupported", { construct: "FILTER (use countIf)" });
        if (body.star === true || !present(body.this)) return { sql: "count(*)", kind: "int" };
        const e = this.expr(body.this as SqlNode, scope);
        return { sql: `count(${body.distinct === true ? "distinct " : ""}${e.sql})`, kind: "int" };
      }
      case "sum":
      case "avg":
      case "min":
      case "max": {
        if (present(body.filter) || present(body.order_by))
          refuseQuery("analyticsUnsupported", { construct: `${tag} with FILTER or ORDER BY` });
        return aggregate(tag, this.expr(body.this as SqlNode, scope), body.distinct === true);
      }
      case "count_if":
        return { sql: `count(*) filter (where ${this.expr(body.this as SqlNode, scope).sql})`, kind: "int" };
      case "length":
        return length(this.expr(body.this as SqlNode, scope));
      case "starts_with":
        return this.call("startsWith", [body.this as SqlNode, body.expression as SqlNode], scope);
      case "aggregate_function":
      case "function": {
        if (body.distinct === true) refuseQuery("analyticsUnsupported", { construct: `${String(body.name)}(DISTINCT …)` });
        return this.call(String(body.name), nodes(body.args), scope);
      }
      case "lambda":
        return refuseQuery("analyticsUnsupported", { construct: "a lambda outside arrayFilter" });
      default: {
        if (SYNTAX_TAGS.has(tag)) refuseQuery("analyticsUnsupported", { construct: tag.toUpperCase() });
        const name = typeof body.original_name === "string" ? body.original_name : typeof body.name === "string" ? body.name : tag;
        return refuseQuery("analyticsFunctionNotAllowed", { name });
      }
    }
  }

  private array(items: SqlNode[], scope: Scope): Expr {
    const values = items.map((i) => this.expr(i, scope));
    if (values.every((v) => v.kind === "string")) {
      return { sql: values.length === 0 ? "'{}'::text[]" : `array[${values.map((v) => v.sql).join(", ")}]::text[]`, kind: "strings" };
    }
    if (values.every((v) => v.kind === "int" || v.kind === "float")) {
      return { sql: `array[${values.map((v) => v.sql).join(", ")}]::float8[]`, kind: "array" };
    }
    return refuseQuery("analyticsUnsupported", { construct: "an array of mixed types" });
  }

  private call(name: string, args: SqlNode[], scope: Scope): Expr {
    const arity = (n: number, m = n) => {
      if (args.length < n || args.length > m) refuseQuery("analyticsUnsupported", { construct: `${name} with ${args.length} arguments` });
    };
    const arg = (i: number) => this.expr(args[i]!, scope);
    switch (name) {
      case "count":
        arity(0, 1);
        return args.length === 0 ? { sql: "count(*)", kind: "int" } : { sql: `count(${arg(0).sql})`, kind: "int" };
      case "sum":
      case "avg":
      case "min":
      case "max":
        arity(1);
        return aggregate(name, arg(0), false);
      case "sumIf": {
        arity(2);
        const value = arg(0);
        if (value.kind !== "int" && value.kind !== "float")
          refuseQuery("analyticsUnsupported", { construct: "sumIf of a value that is not a number" });
        return { sql: `coalesce(sum(${value.sql}) filter (where ${arg(1).sql}), 0)`, kind: value.kind };
      }
      case "countIf":
        arity(1);
        return { sql: `count(*) filter (where ${arg(0).sql})`, kind: "int" };
      case "uniq":
      case "uniqExact":
        arity(1);
        return { sql: `count(distinct ${arg(0).sql})`, kind: "int" };
      case "groupArray": {
        arity(1);
        const value = arg(0);
        if (value.kind === "string") return { sql: `coalesce(array_agg(${value.sql}), '{}'::text[])`, kind: "strings" };
        if (value.kind === "int" || value.kind === "float")
          return { sql: `coalesce(array_agg((${value.sql})::float8), '{}'::float8[])`, kind: "array" };
        return refuseQuery("analyticsUnsupported", { construct: "groupArray of a value that is not a string or a number" });
      }
      case "round": {
        arity(1, 2);
        const value = arg(0);
        if (value.kind !== "int" && value.kind !== "float")
          refuseQuery("analyticsUnsupported", { construct: "round of a value that is not a number" });
        const digits = args.length === 2 ? integerLiteral(args[1]!, "round's digits") : 0;
        return { sql: `round((${value.sql})::numeric, ${digits})`, kind: "float" };
      }
      case "now":
        arity(0);
        return nowExpr(this.options.nowMs);
      case "today":
        arity(0);
        return { sql: `date_trunc('day', ${nowExpr(this.options.nowMs).sql})`, kind: "datetime" };
      case "toDate":
        arity(1);
        return { sql: `date_trunc('day', ${asDateTime(arg(0))})`, kind: "datetime" };
      case "toStartOfMinute":
      case "toStartOfHour":
      case "toStartOfDay":
      case "toStartOfMonth":
      case "toStartOfYear":
        arity(1);
        return { sql: `date_trunc('${TRUNC_UNITS[name]}', ${asDateTime(arg(0))})`, kind: "datetime" };
      case "toStartOfWeek": {
        // ClickHouse's default week (mode 0) starts on Sunday; PostgreSQL's date_trunc('week') on Monday.
        arity(1);
        const t = asDateTime(arg(0));
        return { sql: `(date_trunc('day', ${t}) - extract(dow from ${t})::int * interval '1 day')`, kind: "datetime" };
      }
      case "toUnixTimestamp":
        arity(1);
        return { sql: `extract(epoch from ${asDateTime(arg(0))})::bigint`, kind: "int" };
      case "fromUnixTimestamp64Milli": {
        arity(1);
        const value = arg(0);
        if (value.kind !== "int" && value.kind !== "ms" && value.kind !== "float") {
          refuseQuery("analyticsUnsupported", { construct: "fromUnixTimestamp64Milli of a value that is not a number" });
        }
        return { sql: `to_timestamp((${value.sql})::float8 / 1000)`, kind: "datetime" };
      }
      case "has": {
        arity(2);
        const list = strings(arg(0), name);
        const value = arg(1);
        if (value.kind !== "string") refuseQuery("analyticsUnsupported", { construct: "has of a value that is not a string" });
        return { sql: `(${value.sql} = any(${list}))`, kind: "bool" };
      }
      case "hasAny":
      case "hasAll": {
        arity(2);
        const op = name === "hasAny" ? "&&" : "@>";
        return { sql: `(${strings(arg(0), name)} ${op} ${strings(arg(1), name)})`, kind: "bool" };
      }
      case "arrayJoin": {
        arity(1);
        const list = strings(arg(0), name);
        let lateral = scope.laterals.get(list);
        if (lateral === undefined) {
          const alias = this.id("j");
          lateral = { alias, sql: `unnest(${list}) as ${alias}(v)` };
          scope.laterals.set(list, lateral);
        }
        return { sql: `${lateral.alias}.v`, kind: "string" };
      }
      case "arrayFilter": {
        arity(2);
        const [lambdaTag, lambda] = tagOf(args[0]);
        if (lambdaTag !== "lambda") refuseQuery("analyticsUnsupported", { construct: "arrayFilter without a lambda" });
        const params = nodes(lambda.parameters);
        if (params.length !== 1) refuseQuery("analyticsUnsupported", { construct: "a lambda of more than one parameter" });
        const list = strings(arg(1), name);
        const l = this.id("l");
        const param = nameOfIdentifier(params[0]);
        const saved = scope.lambdas.get(param);
        scope.lambdas.set(param, { sql: `${l}.v`, kind: "string" });
        try {
          const test = this.expr(lambda.body as SqlNode, scope);
          return {
            sql: `(select coalesce(array_agg(${l}.v order by ${l}.o), '{}'::text[]) from unnest(${list}) with ordinality as ${l}(v, o) where ${test.sql})`,
            kind: "strings",
          };
        } finally {
          if (saved) scope.lambdas.set(param, saved);
          else scope.lambdas.delete(param);
        }
      }
      case "startsWith": {
        arity(2);
        const [s, p] = [arg(0), arg(1)];
        if (s.kind !== "string" || p.kind !== "string")
          refuseQuery("analyticsUnsupported", { construct: "startsWith of values that are not strings" });
        return { sql: `starts_with(${s.sql}, ${p.sql})`, kind: "bool" };
      }
      case "length":
        arity(1);
        return length(arg(0));
      default:
        return refuseQuery("analyticsFunctionNotAllowed", { name });
    }
  }
}

function orderDirection(item: SqlNode): string {
  const desc = item.desc === true;
  // ClickHouse puts NULLs last in either direction unless told otherwise; PostgreSQL puts them first when descending.
  const nullsFirst = item.nulls_first === true;
  return `${desc ? " desc" : " asc"}${nullsFirst ? " nulls first" : " nulls last"}`;
}

function integerLiteral(node: SqlNode, what: string): number {
  const [tag, body] = tagOf(node);
  const value = tag === "literal" && body.literal_type === "number" ? String(body.value) : "";
  if (!/^\d{1,9}$/.test(value)) refuseQuery("analyticsUnsupported", { construct: `${what} that is not a whole number` });
  return Number(value);
}

function literal(body: SqlNode): Expr {
  const value = String(body.value ?? "");
  if (body.literal_type === "string") return { sql: `${sqlString(value)}::text`, kind: "string" };
  if (body.literal_type === "number") {
    if (/^\d{1,18}$/.test(value)) return { sql: String(BigInt(value)), kind: "int" };
    const n = Number(value);
    if (/^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value) && Number.isFinite(n)) return { sql: `${String(n)}::float8`, kind: "float" };
  }
  return refuseQuery("analyticsUnsupported", { construct: `the literal ${value}` });
}

function interval(body: SqlNode): Expr {
  const [tag, amount] = tagOf(body.this);
  const value = tag === "literal" ? String(amount.value) : "";
  const unit = (body.unit as SqlNode | null)?.type === "simple" ? INTERVAL_UNITS[String((body.unit as SqlNode).unit)] : undefined;
  if (!/^\d{1,6}$/.test(value) || !unit)
    refuseQuery("analyticsUnsupported", { construct: "INTERVAL other than INTERVAL <n> MINUTE|HOUR|DAY|WEEK|MONTH|YEAR" });
  return { sql: `interval '${Number(value)} ${unit}'`, kind: "interval" };
}

const nowExpr = (nowMs: number): Expr => ({ sql: `'${new Date(nowMs).toISOString()}'::timestamptz`, kind: "datetime" });

/** A value as a timestamptz: unix ms (the raw table's `time`), a DateTime, or a date string. */
function asDateTime(e: Expr): string {
  if (e.kind === "datetime") return e.sql;
  if (e.kind === "ms") return `to_timestamp((${e.sql})::float8 / 1000)`;
  if (e.kind === "string") return `(${e.sql})::timestamptz`;
  return refuseQuery("analyticsUnsupported", { construct: "a time function of a value that is not a time" });
}

function strings(e: Expr, fn: string): string {
  if (e.kind !== "strings") refuseQuery("analyticsUnsupported", { construct: `${fn} of a value that is not an array of strings` });
  return e.sql;
}

function length(e: Expr): Expr {
  if (e.kind === "strings" || e.kind === "array") return { sql: `coalesce(cardinality(${e.sql}), 0)`, kind: "int" };
  if (e.kind === "string") return { sql: `octet_length(${e.sql})`, kind: "int" };
  return refuseQuery("analyticsUnsupported", { construct: "length of a value that is not a string or an array" });
}

function aggregate(fn: "sum" | "avg" | "min" | "max", e: Expr, distinct: boolean): Expr {
  const numeric = e.kind === "int" || e.kind === "float" || e.kind === "ms";
  if ((fn === "sum" || fn === "avg") && !numeric)
    refuseQuery("analyticsUnsupported", { construct: `${fn} of a value that is not a number` });
  const inner = `${distinct ? "distinct " : ""}${e.sql}`;
  // ClickHouse's sum of no rows is 0, PostgreSQL's null.
  if (fn === "sum") return { sql: `coalesce(sum(${inner}), 0)`, kind: e.kind === "float" ? "float" : "int" };
  if (fn === "avg") return { sql: `avg(${inner})`, kind: "float" };
  return { sql: `${fn}(${inner})`, kind: e.kind };
}

/** Two sides made comparable: unix ms against a DateTime, a date string against a time, as ClickHouse converts. */
function comparable(a: Expr, b: Expr): [string, string] {
  const time = (x: Expr, other: Expr) => {
    if (other.kind === "ms" && x.kind === "datetime") return `(extract(epoch from ${x.sql}) * 1000)`;
    if (other.kind === "ms" && x.kind === "string") return `(extract(epoch from (${x.sql})::timestamptz) * 1000)`;
    if (other.kind === "datetime" && x.kind === "string") return `(${x.sql})::timestamptz`;
    if (other.kind === "datetime" && x.kind === "int") return `to_timestamp(${x.sql})`;
    return x.sql;
  };
  return [time(a, b), time(b, a)];
}

function arithmetic(op: "add" | "sub" | "mul" | "div" | "mod", a: Expr, b: Expr): Expr {
  const number = (k: SqlKind) => k === "int" || k === "float" || k === "ms";
  if (op === "add" || op === "sub") {
    const sign = op === "add" ? "+" : "-";
    if (a.kind === "datetime" && b.kind === "interval") return { sql: `(${a.sql} ${sign} ${b.sql})`, kind: "datetime" };
    if (op === "add" && a.kind === "interval" && b.kind === "datetime") return { sql: `(${b.sql} + ${a.sql})`, kind: "datetime" };
    if (a.kind === "ms" && b.kind === "interval") {
      return { sql: `(${a.sql} ${sign} (extract(epoch from ${b.sql}) * 1000)::bigint)`, kind: "ms" };
    }
    if (op === "sub" && a.kind === "datetime" && b.kind === "datetime") {
      return { sql: `extract(epoch from (${a.sql} - ${b.sql}))::bigint`, kind: "int" };
    }
  }
  if (!number(a.kind) || !number(b.kind)) refuseQuery("analyticsUnsupported", { construct: `arithmetic on ${a.kind} and ${b.kind}` });
  // ClickHouse's `/` always divides as floats; by zero it gives inf or nan, which are answered as null.
  if (op === "div") return { sql: `((${a.sql})::float8 / nullif((${b.sql})::float8, 0))`, kind: "float" };
  if (op === "mod") return { sql: `(${a.sql} % nullif(${b.sql}, 0))`, kind: a.kind === "float" || b.kind === "float" ? "float" : "int" };
  const kind: SqlKind = a.kind === "float" || b.kind === "float" ? "float" : a.kind === "ms" || b.kind === "ms" ? "ms" : "int";
  return { sql: `(${a.sql} ${{ add: "+", sub: "-", mul: "*" }[op]} ${b.sql})`, kind };
}

/** The outermost select's values as the answer carries them: numbers as float8 (JSON numbers), times as RFC 3339. */
function answerValue(e: Expr): string {
  switch (e.kind) {
    case "int":
    case "float":
    case "ms":
      return `(${e.sql})::float8`;
    case "datetime":
      return `to_char(${e.sql}, 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;
    case "interval":
      return `(extract(epoch from ${e.sql}))::float8`;
    default:
      return e.sql;
  }
}

/** The name ClickHouse gives an unaliased column: the column's name, else the expression as written (roughly). */
function displayName(node: SqlNode): string {
  const [tag, body] = tagOf(node);
  if (tag === "column") return nameOfIdentifier(body.name);
  if (tag === "literal") return String(body.value);
  if (tag === "count") return body.star === true || !present(body.this) ? "count()" : `count(${displayName(body.this as SqlNode)})`;
  if (tag === "function" || tag === "aggregate_function") return `${String(body.name)}(${nodes(body.args).map(displayName).join(", ")})`;
  if (["sum", "avg", "min", "max", "count_if", "length"].includes(tag)) {
    const fn = typeof body.name === "string" ? body.name : tag === "count_if" ? "countIf" : tag;
    return `${fn}(${present(body.this) ? displayName(body.this as SqlNode) : ""})`;
  }
  return tag;
}

/** The start of the bucket holding `ms` in the table's time (its oldest whole bucket within retention may start earlier). */
function bucketStart(table: PublicTable, ms: number): number {
  const d = new Date(ms);
  switch (table.name) {
    case "key_verifications_per_minute_v1":
      return ms - (ms % 60_000);
    case "key_verifications_per_hour_v1":
      return ms - (ms % 3_600_000);
    case "key_verifications_per_day_v1":
      return ms - (ms % DAY_MS);
    case "key_verifications_per_month_v1":
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    default:
      return ms;
  }
}

/**
 * A constant time bound in unix ms, if the expression is one this can evaluate: now(), today(), ± INTERVAL, a date
 * string, toUnixTimestamp(…), fromUnixTimestamp64Milli(n), and numbers (ms against the raw table's `time`, unix
 * seconds against a DateTime, as ClickHouse compares them).
 */
function constantTime(node: SqlNode, numbers: "ms" | "seconds", nowMs: number): number | undefined {
  const value = constant(node, nowMs);
  if (value === undefined) return undefined;
  if (value.type === "time") return value.ms;
  if (value.type === "number") return numbers === "ms" ? value.n : value.n * 1000;
  return undefined;
}

type Constant = { type: "time"; ms: number } | { type: "number"; n: number } | { type: "interval"; unit: string; n: number };

function constant(node: SqlNode, nowMs: number): Constant | undefined {
  const [tag, body] = tagOf(node);
  if (tag === "paren") return constant(body.this as SqlNode, nowMs);
  if (tag === "literal" && body.literal_type === "number") {
    const n = Number(body.value);
    return Number.isFinite(n) ? { type: "number", n } : undefined;
  }
  if (tag === "literal" && body.literal_type === "string") {
    const text = String(body.value);
    const ms = Date.parse(/^\d{4}-\d{2}-\d{2}$/.test(text) ? `${text}T00:00:00Z` : `${text.replace(" ", "T")}Z`);
    return Number.isNaN(ms) ? undefined : { type: "time", ms };
  }
  if (tag === "interval") {
    const [, amount] = tagOf(body.this);
    const unit = INTERVAL_UNITS[String((body.unit as SqlNode | null)?.unit)];
    const n = Number(amount.value);
    return unit && Number.isFinite(n) ? { type: "interval", unit, n } : undefined;
  }
  if (tag === "function") {
    const args = nodes(body.args);
    if (body.name === "now" && args.length === 0) return { type: "time", ms: nowMs };
    if (body.name === "today" && args.length === 0) return { type: "time", ms: nowMs - (nowMs % DAY_MS) };
    if (body.name === "toUnixTimestamp" && args.length === 1) {
      const inner = constant(args[0]!, nowMs);
      return inner?.type === "time" ? { type: "number", n: Math.floor(inner.ms / 1000) } : undefined;
    }
    if (body.name === "fromUnixTimestamp64Milli" && args.length === 1) {
      const inner = constant(args[0]!, nowMs);
      return inner?.type === "number" ? { type: "time", ms: inner.n } : undefined;
    }
    return undefined;
  }
  if (tag === "add" || tag === "sub" || tag === "mul" || tag === "div") {
    const a = constant(body.left as SqlNode, nowMs);
    const b = constant(body.right as SqlNode, nowMs);
    if (!a || !b) return undefined;
    const sign = tag === "sub" ? -1 : 1;
    if (a.type === "time" && b.type === "interval" && tag !== "mul" && tag !== "div") return { type: "time", ms: shift(a.ms, b, sign) };
    if (a.type === "number" && b.type === "number") {
      const n = tag === "add" ? a.n + b.n : tag === "sub" ? a.n - b.n : tag === "mul" ? a.n * b.n : a.n / b.n;
      return Number.isFinite(n) ? { type: "number", n } : undefined;
    }
  }
  return undefined;
}

function shift(ms: number, interval: { unit: string; n: number }, sign: number): number {
  const step = { minute: 60_000, hour: 3_600_000, day: DAY_MS, week: 7 * DAY_MS }[interval.unit];
  if (step !== undefined) return ms + sign * interval.n * step;
  const d = new Date(ms);
  const months = interval.unit === "year" ? 12 * interval.n : interval.n;
  d.setUTCMonth(d.getUTCMonth() + sign * months);
  return d.getTime();
}
