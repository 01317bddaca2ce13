import type { Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { isUtf8 } from "node:buffer";
import { CsvError, parse as parseCsv } from "csv-parse";
import { z } from "zod";
import { importKeySchema } from "../../wire/v1/migrations/migrations.schemas.js";

/** What reading the import file yields, in file order: a record to validate, a bad line, or a fatal file error. */
export type SourceItem =
  | { kind: "record"; line: number; value: unknown }
  | { kind: "error"; line: number; message: string }
  | { kind: "file"; message: string };

export type LineError = { line: number; message: string };

export type FileFormat = "jsonl" | "csv";

/** `.csv` is CSV; anything else (`.jsonl`, `.ndjson`, `.json`, …) is one JSON object per line. */
export function formatOf(path: string): FileFormat {
  return /\.csv$/i.test(path) ? "csv" : "jsonl";
}

/**
 * Streams the import file: memory stays flat whatever its size, so files of any number of keys can be imported.
 * `sha256`, when given, is fed every byte of the file as it is read (the resume journal binds itself to it).
 * A file that cannot be read throws (the caller reports it); a bad line is an `error` item, never a throw.
 */
export function readSource(path: string, format: FileFormat, sha256?: Hash): AsyncGenerator<SourceItem> {
  const chunks = createReadStream(path, { highWaterMark: 256 * 1024 });
  return format === "csv" ? readCsv(chunks, sha256) : readJsonl(chunks, sha256);
}

/** One JSON object per line; blank lines are skipped but counted, so line numbers match an editor's. */
async function* readJsonl(chunks: AsyncIterable<Buffer>, sha256?: Hash): AsyncGenerator<SourceItem> {
  // Lines are cut on the bytes (0x0A never occurs inside a UTF-8 sequence), then each is decoded strictly: a line
  // that is not UTF-8 is reported, never imported with its bytes replaced.
  let pending: Buffer[] = [];
  let line = 0;
  const item = (bytes: Buffer): SourceItem | undefined => {
    line += 1;
    if (!isUtf8(bytes)) return { kind: "error", line, message: "not valid UTF-8 (the file must be UTF-8 encoded)" };
    let text = bytes.toString("utf8");
    if (text.endsWith("\r")) text = text.slice(0, -1);
    if (line === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    if (text.trim() === "") return undefined;
    try {
      return { kind: "record", line, value: JSON.parse(text) };
    } catch (err) {
      return { kind: "error", line, message: `not valid JSON: ${jsonErrorText(err)}` };
    }
  };
  for await (const chunk of chunks) {
    sha256?.update(chunk);
    let from = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, from)) {
      const piece = chunk.subarray(from, nl);
      const next = item(pending.length === 0 ? piece : Buffer.concat([...pending, piece]));
      pending = [];
      if (next) yield next;
      from = nl + 1;
    }
    if (from < chunk.length) pending.push(chunk.subarray(from));
  }
  const last = item(Buffer.concat(pending));
  if (last) yield last;
}

/**
 * A JSON.parse error without the input: V8's messages quote the text around the error (`"sk_live_…" is not valid
 * JSON`), which can be a plaintext key. Only the kind of error and its position are kept.
 */
export function jsonErrorText(err: unknown): string {
  const message = err instanceof Error ? err.message : "";
  if (/^Unexpected end of JSON input/.test(message)) return "the text ends too early";
  const at = /\bJSON at position (\d+)/.exec(message);
  const where = at ? ` at column ${Number(at[1]) + 1}` : "";
  const what = at ? message.slice(0, at.index + 4).replace(/ in JSON$/, "") : message;
  // Messages like "Unterminated string" or "Expected ',' or '}' after property value" quote no input.
  const safe = at && !/^Unexpected token/.test(what) && /^[A-Za-z -]*$/.test(what.replaceAll(/'[{}[\],:]'/g, ""));
  return `${safe ? what : "unexpected character"}${where}`;
}

type CellType = "string" | "integer" | "boolean" | "json";

/**
 * CSV columns are the field names of a key. Scalars are plain cells; `hash`, `refill` and `ratelimit` use dotted
 * columns (`hash.value`, `refill.amount`, …); `meta`, `roles` and `permissions` are JSON text in their cell.
 * An empty cell means the field is absent. Derived from the server's own item schema (migrations.schemas.ts), so
 * a field added there is a column here.
 */
export const CSV_COLUMNS: Record<string, CellType> = csvColumns(
  z.toJSONSchema(importKeySchema, { io: "input", unrepresentable: "any" }) as JsonSchemaNode,
);

type JsonSchemaNode = { type?: string; properties?: Record<string, JsonSchemaNode> };

function csvColumns(node: JsonSchemaNode, prefix = ""): Record<string, CellType> {
  const columns: Record<string, CellType> = {};
  for (const [name, field] of Object.entries(node.properties ?? {})) {
    const column = `${prefix}${name}`;
    if (field.type === "object" && field.properties) Object.assign(columns, csvColumns(field, `${column}.`));
    else if (field.type === "object" || field.type === "array") columns[column] = "json";
    else if (field.type === "string" || field.type === "integer" || field.type === "boolean") columns[column] = field.type;
    else throw new Error(`import.parse: no CSV cell type for the key field ${column} (${field.type})`);
  }
  return columns;
}

/**
 * CSV, streamed through csv-parse. Line numbers come from byte offsets (csv-parse's own line count drifts on CRLF
 * inside quoted cells): a record starts on the line of its last byte, less the line breaks inside its cells. The
 * line breaks before an offset are counted as the bytes pass by, so only the bytes still being parsed are held.
 */
async function* readCsv(chunks: AsyncIterable<Buffer>, sha256?: Hash): AsyncGenerator<SourceItem> {
  const lines = new LineCounter();
  const errors: SourceItem[] = [];
  let header: string[] | undefined;
  let headerError: string | undefined;
  // csv-parse would decode bytes that are not UTF-8 as U+FFFD: each line is checked before it reaches it.
  let carry: Buffer[] = [];
  let lineNo = 1;
  const tap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      sha256?.update(chunk);
      let from = 0;
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, from)) {
        const piece = chunk.subarray(from, nl);
        if (!isUtf8(carry.length === 0 ? piece : Buffer.concat([...carry, piece]))) return done(new NotUtf8(lineNo));
        carry = [];
        lineNo += 1;
        from = nl + 1;
      }
      if (from < chunk.length) carry.push(chunk.subarray(from));
      lines.push(chunk);
      done(null, chunk);
    },
    flush(done) {
      done(carry.length > 0 && !isUtf8(Buffer.concat(carry)) ? new NotUtf8(lineNo) : null);
    },
  });
  const parser = parseCsv({
    bom: true,
    columns: (names: string[]) => {
      header = names.map((n) => n.trim());
      headerError = checkHeader(header);
      return header;
    },
    skip_empty_lines: true,
    skip_records_with_error: true,
    on_skip: (err) => {
      if (!err) return undefined;
      let line: number;
      if (err.code === "INVALID_OPENING_QUOTE" && typeof err.bytes === "number") {
        // Here `bytes` is where the record's current field starts (just past the record before it, or a
        // delimiter): the record starts on that byte's line, less the line breaks in its fields so far.
        const sofar = (parser as unknown as { state?: { record?: unknown } }).state?.record;
        line = lines.lineOf(err.bytes + 1, Array.isArray(sofar) ? (sofar as unknown[]) : []);
      } else {
        const fields = Array.isArray(err.record) ? (err.record as unknown[]) : [];
        line = typeof err.bytes === "number" ? lines.lineOf(err.bytes, fields) : Number(err.lines);
      }
      errors.push({ kind: "error", line, message: `not valid CSV: ${csvErrorText(err)}` });
      return undefined;
    },
    // Called as each record is parsed, in order: the line is known while its bytes are still held.
    on_record: (record: Record<string, string>, context) => ({ record, line: lines.lineOf(context.bytes, Object.values(record)) }),
  });
  const piping = pipeline(chunks, tap, parser).catch((err: unknown) => err);

  try {
    for await (const parsed of parser as AsyncIterable<{ record: Record<string, string>; line: number }>) {
      if (headerError !== undefined) break;
      yield* errors.splice(0);
      yield* convertRecord(parsed.record, parsed.line);
    }
  } catch (err) {
    if (err instanceof NotUtf8) {
      yield { kind: "file", message: err.message };
      return;
    }
    if (!(err instanceof CsvError)) throw err;
    yield { kind: "file", message: `not valid CSV: ${csvErrorText(err)}` };
    return;
  }
  if (headerError !== undefined) {
    parser.destroy();
    yield { kind: "file", message: headerError };
    return;
  }
  const failed = await piping;
  if (failed instanceof NotUtf8) {
    yield { kind: "file", message: failed.message };
    return;
  }
  if (failed instanceof CsvError) {
    yield { kind: "file", message: `not valid CSV: ${csvErrorText(failed)}` };
    return;
  }
  if (failed) throw failed;
  yield* errors.splice(0);
}

class NotUtf8 extends Error {
  constructor(line: number) {
    super(`line ${line} is not valid UTF-8 (the file must be UTF-8 encoded)`);
  }
}

/**
 * csv-parse's message without the cell text it quotes (`value is "sk_live_…"`, `got "x"`), which can be a
 * plaintext key, and without its own line count (it drifts; the line reported is ours).
 */
export function csvErrorText(err: CsvError): string {
  switch (err.code) {
    case "INVALID_OPENING_QUOTE": {
      // The column's name only when it is one of ours: a header cell of a file without a header is data.
      const column = (err as { column?: unknown }).column;
      const named = typeof column === "string" && Object.hasOwn(CSV_COLUMNS, column) ? ` (${JSON.stringify(column)})` : "";
      return `a quote inside an unquoted field${named}; quote the whole field and double each quote in it ("")`;
    }
    case "CSV_INVALID_CLOSING_QUOTE":
      return "characters after the closing quote of a quoted field";
    default:
      return err.message
        .replace(/,? value is "(?:[^"\\]|\\.)*"/g, "")
        .replace(/,? got "(?:[^"\\]|\\.)*"/g, "")
        .replace(/ (?:at|on) line \d+/g, "")
        .trim();
  }
}

/**
 * Unknown or repeated columns make the whole file unusable. An unknown column is named by its position only: in a
 * file without a header line, the "header" is the first key's cells, which can be a plaintext key.
 */
function checkHeader(header: string[]): string | undefined {
  const problems: string[] = [];
  const unknown = header.flatMap((name, i) => (Object.hasOwn(CSV_COLUMNS, name) ? [] : [i + 1]));
  if (unknown.length > 0) {
    problems.push(
      `the first line must name the columns, but column${unknown.length > 1 ? "s" : ""} ${unknown.join(", ")} of it ` +
        `${unknown.length > 1 ? "are" : "is"} not a column name (the text is not shown: it may be a key); ` +
        `the columns are: ${Object.keys(CSV_COLUMNS).join(", ")}`,
    );
  }
  // Only known names can repeat here (an unknown one is reported above), so naming it shows no data.
  const duplicate = header.find((name, i) => Object.hasOwn(CSV_COLUMNS, name) && header.indexOf(name) !== i);
  if (duplicate !== undefined) problems.push(`CSV column ${JSON.stringify(duplicate)} appears twice`);
  return problems.length > 0 ? problems.join("; ") : undefined;
}

/** The record as a key's fields, or one error per bad cell. */
function convertRecord(record: Record<string, string>, line: number): SourceItem[] {
  const problems: SourceItem[] = [];
  const value: Record<string, unknown> = {};
  for (const [column, cell] of Object.entries(record)) {
    if (cell === "") continue;
    const converted = convertCell(CSV_COLUMNS[column]!, cell);
    if ("error" in converted) {
      problems.push({ kind: "error", line, message: `${column}: ${converted.error}` });
      continue;
    }
    const [field, sub] = column.split(".") as [string, string | undefined];
    if (sub === undefined) value[field] = converted.value;
    else ((value[field] ??= {}) as Record<string, unknown>)[sub] = converted.value;
  }
  return problems.length > 0 ? problems : [{ kind: "record", line, value }];
}

function convertCell(type: CellType, cell: string): { value: unknown } | { error: string } {
  switch (type) {
    case "string":
      return { value: cell };
    case "integer":
      return /^\s*-?\d+\s*$/.test(cell) ? { value: Number(cell) } : { error: "not an integer (the cell is not shown: it may be a key)" };
    case "boolean": {
      const v = cell.trim().toLowerCase();
      if (v === "true") return { value: true };
      if (v === "false") return { value: false };
      return { error: "not true or false (the cell is not shown: it may be a key)" };
    }
    case "json":
      try {
        return { value: JSON.parse(cell) };
      } catch (err) {
        return { error: `not valid JSON: ${jsonErrorText(err)}` };
      }
  }
}

/**
 * Counts the line breaks of a byte stream before an offset, for offsets asked in increasing order, holding only
 * the chunks not yet counted past.
 */
class LineCounter {
  private chunks: Buffer[] = [];
  /** Offset of the first held chunk's first byte. */
  private chunkStart = 0;
  /** Everything before `position` is counted into `breaks`. */
  private position = 0;
  private breaks = 0;

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
  }

  /** The line a record ending at `endOffset` starts on, given its fields (whose own line breaks are not lines). */
  lineOf(endOffset: number, fields: unknown[]): number {
    const endLine = 1 + this.breaksBefore(endOffset - 1);
    const inner = fields.reduce<number>((n, v) => n + (typeof v === "string" ? (v.match(/\n/g)?.length ?? 0) : 0), 0);
    return endLine - inner;
  }

  private breaksBefore(offset: number): number {
    while (this.position < offset && this.chunks.length > 0) {
      const chunk = this.chunks[0]!;
      const chunkEnd = this.chunkStart + chunk.length;
      const until = Math.min(offset, chunkEnd);
      for (
        let i = chunk.indexOf(10, this.position - this.chunkStart);
        i !== -1 && i < until - this.chunkStart;
        i = chunk.indexOf(10, i + 1)
      ) {
        this.breaks += 1;
      }
      this.position = until;
      if (until === chunkEnd) {
        this.chunks.shift();
        this.chunkStart = chunkEnd;
      }
    }
    return this.breaks;
  }
}
