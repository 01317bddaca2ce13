import { parse as parseCsv } from "csv-parse/sync";

/** One record of the import file: the line it starts on and the value to validate (a JSON object, or not). */
export type SourceRecord = { line: number; value: unknown };
export type LineError = { line: number; message: string };
export type ParsedFile = { records: SourceRecord[]; errors: LineError[]; fileErrors: string[] };

export type FileFormat = "jsonl" | "csv";

/** `.csv` is CSV; anything else (`.jsonl`, `.ndjson`, `.json`, …) is one JSON object per line. */
export function formatOf(path: string): FileFormat {
  return /\.csv$/i.test(path) ? "csv" : "jsonl";
}

export function parseFile(content: Buffer, format: FileFormat): ParsedFile {
  return format === "csv" ? parseCsvFile(content) : parseJsonl(content);
}

/** One JSON object per line; blank lines are skipped but counted, so line numbers match an editor's. */
export function parseJsonl(content: Buffer): ParsedFile {
  const records: SourceRecord[] = [];
  const errors: LineError[] = [];
  const lines = stripBom(content.toString("utf8")).split("\n");
  lines.forEach((raw, i) => {
    const text = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (text.trim() === "") return;
    try {
      records.push({ line: i + 1, value: JSON.parse(text) });
    } catch (err) {
      errors.push({ line: i + 1, message: `not valid JSON: ${(err as Error).message}` });
    }
  });
  return { records, errors, fileErrors: [] };
}

type CellType = "string" | "integer" | "boolean" | "json";

/**
 * CSV columns are the field names of a key. Scalars are plain cells; `hash`, `refill` and `ratelimit` use dotted
 * columns (`hash.value`, `refill.amount`, …); `meta`, `roles` and `permissions` are JSON text in their cell.
 * An empty cell means the field is absent.
 */
export const CSV_COLUMNS: Record<string, CellType> = {
  apiId: "string",
  prefix: "string",
  name: "string",
  plaintext: "string",
  "hash.value": "string",
  "hash.variant": "string",
  start: "string",
  ownerId: "string",
  externalId: "string",
  meta: "json",
  roles: "json",
  permissions: "json",
  expires: "integer",
  remaining: "integer",
  "refill.interval": "string",
  "refill.amount": "integer",
  "refill.refillDay": "integer",
  "ratelimit.async": "boolean",
  "ratelimit.type": "string",
  "ratelimit.limit": "integer",
  "ratelimit.refillRate": "integer",
  "ratelimit.refillInterval": "integer",
  enabled: "boolean",
  environment: "string",
};

export function parseCsvFile(content: Buffer): ParsedFile {
  const errors: LineError[] = [];
  const fileErrors: string[] = [];
  let header: string[] = [];
  let rows: { record: Record<string, string>; info: { bytes: number } }[];
  const newlines = newlineOffsets(content);
  try {
    rows = parseCsv(content, {
      bom: true,
      columns: (names: string[]) => {
        header = names.map((n) => n.trim());
        return header;
      },
      info: true,
      skip_empty_lines: true,
      skip_records_with_error: true,
      on_skip: (err) => {
        if (!err) return undefined;
        const fields = Array.isArray(err.record) ? (err.record as unknown[]) : [];
        const line = typeof err.bytes === "number" ? lineOf(newlines, err.bytes, fields) : Number(err.lines);
        errors.push({ line, message: `not valid CSV: ${err.message}` });
        return undefined;
      },
    }) as unknown as { record: Record<string, string>; info: { bytes: number } }[];
  } catch (err) {
    return { records: [], errors, fileErrors: [`not valid CSV: ${(err as Error).message}`] };
  }

  const unknown = header.filter((name) => !Object.hasOwn(CSV_COLUMNS, name));
  if (unknown.length > 0) {
    fileErrors.push(
      `unknown CSV column${unknown.length > 1 ? "s" : ""} ${unknown.map((n) => JSON.stringify(n)).join(", ")}; ` +
        `the columns are: ${Object.keys(CSV_COLUMNS).join(", ")}`,
    );
  }
  const duplicates = header.filter((name, i) => header.indexOf(name) !== i);
  if (duplicates.length > 0) fileErrors.push(`CSV column ${JSON.stringify(duplicates[0])} appears twice`);
  if (fileErrors.length > 0) return { records: [], errors, fileErrors };

  const records: SourceRecord[] = [];
  for (const { record, info } of rows) {
    const line = lineOf(newlines, info.bytes, Object.values(record));
    const problems: string[] = [];
    const value: Record<string, unknown> = {};
    for (const [column, cell] of Object.entries(record)) {
      if (cell === "") continue;
      const converted = convertCell(CSV_COLUMNS[column]!, cell);
      if ("error" in converted) {
        problems.push(`${column}: ${converted.error}`);
        continue;
      }
      const [field, sub] = column.split(".") as [string, string | undefined];
      if (sub === undefined) value[field] = converted.value;
      else ((value[field] ??= {}) as Record<string, unknown>)[sub] = converted.value;
    }
    if (problems.length > 0) errors.push(...problems.map((message) => ({ line, message })));
    else records.push({ line, value });
  }
  return { records, errors, fileErrors };
}

function convertCell(type: CellType, cell: string): { value: unknown } | { error: string } {
  switch (type) {
    case "string":
      return { value: cell };
    case "integer":
      return /^\s*-?\d+\s*$/.test(cell) ? { value: Number(cell) } : { error: `not an integer: ${JSON.stringify(cell)}` };
    case "boolean": {
      const v = cell.trim().toLowerCase();
      if (v === "true") return { value: true };
      if (v === "false") return { value: false };
      return { error: `not true or false: ${JSON.stringify(cell)}` };
    }
    case "json":
      try {
        return { value: JSON.parse(cell) };
      } catch (err) {
        return { error: `not valid JSON: ${(err as Error).message}` };
      }
  }
}

/**
 * The line a record starts on, from the byte offset where it ends (csv-parse's own line count drifts on CRLF
 * inside quoted cells): the line of its last byte, less the line breaks inside its cells.
 */
function lineOf(newlines: number[], endOffset: number, fields: unknown[]): number {
  const endLine = 1 + countBelow(newlines, endOffset - 1);
  const inner = fields.reduce<number>((n, v) => n + (typeof v === "string" ? (v.match(/\n/g)?.length ?? 0) : 0), 0);
  return endLine - inner;
}

function stripBom(text: string): string {
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function newlineOffsets(content: Buffer): number[] {
  const offsets: number[] = [];
  for (let i = content.indexOf(10); i !== -1; i = content.indexOf(10, i + 1)) offsets.push(i);
  return offsets;
}

/** How many of the sorted offsets are below `limit`. */
function countBelow(sorted: number[], limit: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! < limit) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
