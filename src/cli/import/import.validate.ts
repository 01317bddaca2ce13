import { createHash } from "node:crypto";
import { hashKey } from "../../crypto/hash.js";
import { type ImportKey, importKeySchema, MAX_KEYS_PER_IMPORT } from "../../modules/migrations/migrations.schemas.js";
import type { LineError, SourceRecord } from "./import.parse.js";

export type ValidKey = { line: number; key: ImportKey };

/**
 * Checks every record with the server's own item schema (so the CLI and the server never disagree), fills in
 * `apiId` from `--api`, refuses a line naming another API, and refuses a key that appears twice in the file.
 */
export function validateRecords(records: SourceRecord[], apiId: string): { keys: ValidKey[]; errors: LineError[] } {
  const keys: ValidKey[] = [];
  const errors: LineError[] = [];
  const lineByHash = new Map<string, number>();
  for (const { line, value } of records) {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      errors.push({ line, message: "must be a JSON object (one key per line)" });
      continue;
    }
    const given = (value as { apiId?: unknown }).apiId;
    if (given !== undefined && given !== apiId) {
      errors.push({ line, message: `apiId ${JSON.stringify(given)} differs from --api ${apiId}` });
      continue;
    }
    const parsed = importKeySchema.safeParse({ ...value, apiId });
    if (!parsed.success) {
      for (const issue of parsed.error.issues) {
        const path = issue.path.join(".");
        errors.push({ line, message: path ? `${path}: ${issue.message}` : issue.message });
      }
      continue;
    }
    const key = parsed.data;
    const hash = key.plaintext !== undefined ? hashKey(key.plaintext) : key.hash!.value;
    const earlier = lineByHash.get(hash);
    if (earlier !== undefined) {
      errors.push({ line, message: `the same key as line ${earlier}` });
      continue;
    }
    lineByHash.set(hash, line);
    keys.push({ line, key });
  }
  errors.sort((a, b) => a.line - b.line);
  return { keys, errors };
}

export type Batch = {
  index: number;
  keys: ValidKey[];
  /** The request body (a JSON array). Holds plaintext keys when the file has them: never written anywhere. */
  body: string;
  /** SHA-256 of the batch's lines and keys, with plaintexts replaced by their SHA-256: safe to write to the journal. */
  digest: string;
};

/** The server refuses bodies over 1 MiB; a batch stays well below that even with large `meta` values. */
export const MAX_BATCH_BYTES = 900 * 1024;

/** Cuts the keys, in file order, into batches of at most `batchSize` keys and MAX_BATCH_BYTES: deterministic. */
export function planBatches(keys: ValidKey[], batchSize: number): Batch[] {
  if (batchSize < 1 || batchSize > MAX_KEYS_PER_IMPORT) throw new Error(`batch size must be 1–${MAX_KEYS_PER_IMPORT}`);
  const batches: Batch[] = [];
  let current: ValidKey[] = [];
  let bytes = 2;
  const flush = () => {
    if (current.length === 0) return;
    batches.push(makeBatch(batches.length, current));
    current = [];
    bytes = 2;
  };
  for (const k of keys) {
    const size = Buffer.byteLength(JSON.stringify(k.key)) + 1;
    if (current.length === batchSize || (current.length > 0 && bytes + size > MAX_BATCH_BYTES)) flush();
    current.push(k);
    bytes += size;
  }
  flush();
  return batches;
}

export function makeBatch(index: number, keys: ValidKey[]): Batch {
  const digest = createHash("sha256");
  for (const { line, key } of keys) {
    const { plaintext, ...rest } = key;
    digest.update(JSON.stringify([line, rest, plaintext === undefined ? null : hashKey(plaintext)]));
    digest.update("\n");
  }
  return { index, keys, body: JSON.stringify(keys.map((k) => k.key)), digest: digest.digest("hex") };
}

/** "line 12", "lines 12–111". */
export function describeLines(lines: number[]): string {
  if (lines.length === 0) return "no line";
  if (lines.length === 1) return `line ${lines[0]}`;
  return `lines ${lines[0]}–${lines[lines.length - 1]}`;
}
