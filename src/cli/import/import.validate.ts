import { createHash } from "node:crypto";
import { hashKey } from "../../crypto/hash.js";
import type { ImportKey } from "../../core/import/import.keys.types.js";
import { importKeySchema, MAX_KEYS_PER_IMPORT } from "../../wire/v1/migrations/migrations.schemas.js";
import { unstorableJsonProblem } from "../../http/jsonBody.js";
import type { LineError } from "./import.parse.js";
import { isUnprefixed } from "../../validation.messages.js";

export type ValidKey = { line: number; key: ImportKey };

/**
 * Checks records with the server's own item schema (so the CLI and the server never disagree), fills in `apiId`
 * from `--api`, and refuses a line naming another API. With `duplicates`, it also refuses a key that appeared on an
 * earlier line: for that it keeps one SHA-256 (about 100 bytes) per key it has seen.
 */
export class KeyValidator {
  private readonly lineByHash = new Map<string, number>();

  constructor(
    private readonly apiId: string,
    private readonly duplicates: boolean,
  ) {}

  check(line: number, value: unknown): ValidKey | LineError[] {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return [{ line, message: "must be a JSON object (one key per line)" }];
    }
    const given = (value as { apiId?: unknown }).apiId;
    if (given !== undefined && given !== this.apiId) {
      // The value is not shown: in a shifted CSV row or a mistyped line, it may be a key.
      return [{ line, message: `apiId differs from --api ${this.apiId}` }];
    }
    const parsed = importKeySchema.safeParse({ ...value, apiId: this.apiId });
    if (!parsed.success) {
      return parsed.error.issues.map((issue) => {
        const path = issue.path.join(".");
        const params = issue.code === "custom" ? issue.params : undefined;
        return { line, message: path && !isUnprefixed(params) ? `${path}: ${issue.message}` : issue.message };
      });
    }
    const key = parsed.data;
    // What the server's body parser refuses (NUL, unpaired surrogates, deep nesting), checked on this key as the
    // body of a one-key request; and a key too large for any batch.
    const body = `[${JSON.stringify(key)}]`;
    const unstorable = unstorableJsonProblem(body);
    if (unstorable !== undefined) return [{ line, message: unstorable }];
    const size = Buffer.byteLength(body);
    if (size > MAX_BATCH_BYTES) {
      return [{ line, message: `the key is ${size} bytes as JSON; a request holds at most ${MAX_BATCH_BYTES} bytes` }];
    }
    if (this.duplicates) {
      const hash = key.plaintext !== undefined ? hashKey(key.plaintext) : key.hash!.value;
      const earlier = this.lineByHash.get(hash);
      if (earlier !== undefined) return [{ line, message: `the same key as line ${earlier}` }];
      this.lineByHash.set(hash, line);
    }
    return { line, key };
  }
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

/**
 * Cuts keys, fed in file order, into batches of at most `batchSize` keys and MAX_BATCH_BYTES: deterministic, so
 * the same file always gives the same batches (the resume journal relies on it).
 */
export class BatchPlanner {
  private current: ValidKey[] = [];
  private bytes = 2;

  constructor(private readonly batchSize: number) {
    if (batchSize < 1 || batchSize > MAX_KEYS_PER_IMPORT) throw new Error(`batch size must be 1–${MAX_KEYS_PER_IMPORT}`);
  }

  /** Adds a key; returns the batch it closed, if any. */
  add(key: ValidKey): ValidKey[] | undefined {
    const size = Buffer.byteLength(JSON.stringify(key.key)) + 1;
    const closed =
      this.current.length === this.batchSize || (this.current.length > 0 && this.bytes + size > MAX_BATCH_BYTES)
        ? this.finish()
        : undefined;
    this.current.push(key);
    this.bytes += size;
    return closed;
  }

  /** The last, partial batch, if any. */
  finish(): ValidKey[] | undefined {
    if (this.current.length === 0) return undefined;
    const batch = this.current;
    this.current = [];
    this.bytes = 2;
    return batch;
  }
}

export function makeBatch(index: number, keys: ValidKey[], digest = batchDigest(keys)): Batch {
  return { index, keys, body: JSON.stringify(keys.map((k) => k.key)), digest };
}

/** SHA-256 of the batch's lines and keys, plaintexts replaced by their SHA-256 (see `Batch.digest`). */
export function batchDigest(keys: ValidKey[]): string {
  const digest = createHash("sha256");
  for (const { line, key } of keys) {
    const { plaintext, ...rest } = key;
    digest.update(JSON.stringify([line, rest, plaintext === undefined ? null : hashKey(plaintext)]));
    digest.update("\n");
  }
  return digest.digest("hex");
}

/** "line 12", "lines 12–111". */
export function describeLines(lines: number[]): string {
  if (lines.length === 0) return "no line";
  if (lines.length === 1) return `line ${lines[0]}`;
  return `lines ${lines[0]}–${lines[lines.length - 1]}`;
}
