import { createHash } from "node:crypto";
import { statSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { loadCliEnv } from "../../config.js";
import { MAX_KEYS_PER_IMPORT } from "../../wire/v1/migrations/migrations.schemas.js";
import { DEFAULT_URL, isHeaderSafe, parseBaseUrl } from "../http.js";
import { Journal, JournalMismatch, lockJournal } from "./import.journal.js";
import { type FileFormat, formatOf, type LineError, readSource } from "./import.parse.js";
import { duration, fmt, Progress } from "./import.progress.js";
import { type BatchFailure, formatFailure, ImportRunner, SourceChanged } from "./import.runner.js";
import { type Batch, BatchPlanner, batchDigest, KeyValidator, makeBatch, type ValidKey } from "./import.validate.js";

export const EXIT = { ok: 0, failed: 1, usage: 2, interrupted: 3 } as const;

export const IMPORT_HELP = `Usage: keyhaven import FILE --api <apiId> [options]

Imports existing keys into an API through POST /v1/migrations.createKeys. FILE holds one key per line in the
createKeys shape: JSON lines (.jsonl, or any name not ending in .csv) or CSV (.csv, columns named after the fields).
Every line is validated first; if any is bad, all bad lines are reported with their numbers and nothing is sent.

Options:
  --api <apiId>            The API to import into (required). Lines may omit apiId; a line naming another API is an error.
  --root-key <key>         Root key to send. Default: the KEYHAVEN_ROOT_KEY environment variable (preferred: a
                           command-line argument is visible to other users of the machine).
  --url <url>              The keyhaven server. Default: ${DEFAULT_URL}
  --format <jsonl|csv>     File format. Default: csv for a name ending in .csv, else jsonl.
  --dry-run                Validate the file and show the batches, then stop: nothing is sent.
  --continue-on-error      Go on with the other batches after a batch is refused (a duplicate, a missing role…).
  --skip-existing          A key the server already has (409) is skipped and counted as "already on the server"
                           instead of refusing its batch; the batch's other keys are sent again without it.
  --journal <path>         Resume journal. Default: FILE.keyhaven-journal. Re-running the same command resumes.
  --batch-size <n>         Keys per request, 1–${MAX_KEYS_PER_IMPORT}. Default: ${MAX_KEYS_PER_IMPORT}.
  --concurrency <n>        Requests in flight at once, 1–16. Default: 1.
  --attempts <n>           Attempts per request on transient failures (connection errors, timeouts, 429, 5xx)
                           before the run stops, resumable. Default: 8 (backoff 250 ms doubling to 10 s, jittered).
  --timeout <seconds>      Per-request timeout. Default: 60.
  --progress-every <n>     Without a terminal, print a progress line every n batches. Default: 10.
  --quiet                  No progress output; the summary and errors only.
  -h, --help               Show this help.

Exit codes: 0 every key imported (or already imported by an earlier run), 1 some batches were refused,
2 usage or validation error (nothing sent), or FILE changed during the import (no line that was not validated is
sent), 3 interrupted or server unavailable: re-run the same command to resume.

keyhaven import --from-unkey --api <apiId> [--api <apiId>…] [--ratelimit-namespace <name>…] [--unkey-url <url>]
    [--unkey-root-key-file <path>] [--url <url>] [--root-key <key>] [--journal <path>] [--dry-run | --check] [--json]
  Copies a hosted Unkey workspace (the APIs, their keys, identities, permissions, roles, overrides; ids kept) into
  keyhaven, read through Unkey's v2 API with UNKEY_ROOT_KEY (or the file; never on the command line): keys whose
  plaintext Unkey returns verify at once, the others are pending until adopted on first use. Resumable, idempotent;
  --dry-run shows what it would copy, --check compares both sides. \`keyhaven import --from-unkey --help\` describes
  every option.
`;

const OPTIONS = {
  api: { type: "string" },
  "root-key": { type: "string" },
  url: { type: "string" },
  format: { type: "string" },
  "dry-run": { type: "boolean" },
  "continue-on-error": { type: "boolean" },
  "skip-existing": { type: "boolean" },
  journal: { type: "string" },
  "batch-size": { type: "string" },
  concurrency: { type: "string" },
  attempts: { type: "string" },
  timeout: { type: "string" },
  "progress-every": { type: "string" },
  quiet: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

class UsageError extends Error {}

const parseImportArgs = (argv: string[]) => parseArgs({ args: argv, options: OPTIONS, allowPositionals: true });
type ImportValues = ReturnType<typeof parseImportArgs>["values"];

function intOption(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return Number(value);
}

/** `keyhaven import …`; returns the exit code. */
export async function importCommand(argv: string[]): Promise<number> {
  // Reading a hosted Unkey workspace is its own command with its own options (src/cli/unkey/fromUnkey.command.ts).
  if (argv.includes("--from-unkey")) {
    const { fromUnkeyCommand } = await import("../unkey/fromUnkey.command.js");
    return fromUnkeyCommand(argv);
  }
  let args: ReturnType<typeof parseImportArgs>;
  try {
    args = parseImportArgs(argv);
  } catch (err) {
    console.error(`keyhaven import: ${(err as Error).message}\n\n${IMPORT_HELP}`);
    return EXIT.usage;
  }
  const { values, positionals } = args;
  if (values.help) {
    console.log(IMPORT_HELP);
    return EXIT.ok;
  }
  try {
    return await runImport(values, positionals);
  } catch (err) {
    if (err instanceof UsageError || err instanceof JournalMismatch) {
      console.error(`keyhaven import: ${err.message}`);
      return EXIT.usage;
    }
    throw err;
  }
}

async function runImport(values: ImportValues, positionals: string[]): Promise<number> {
  if (positionals.length !== 1) {
    throw new UsageError(
      positionals.length === 0 ? "FILE is required (see keyhaven import --help)" : `one FILE only, got ${positionals.length}`,
    );
  }
  const file = positionals[0]!;
  const apiId = values.api?.trim();
  if (!apiId) throw new UsageError("--api <apiId> is required");
  const format = (values.format ?? formatOf(file)) as FileFormat;
  if (format !== "jsonl" && format !== "csv") throw new UsageError(`--format must be jsonl or csv, got ${JSON.stringify(values.format)}`);
  const batchSize = intOption("batch-size", values["batch-size"], MAX_KEYS_PER_IMPORT, 1, MAX_KEYS_PER_IMPORT);
  const concurrency = intOption("concurrency", values.concurrency, 1, 1, 16);
  const attempts = intOption("attempts", values.attempts, 8, 1, 100);
  const timeoutSeconds = intOption("timeout", values.timeout, 60, 1, 3600);
  const every = intOption("progress-every", values["progress-every"], 10, 1, 1_000_000);
  const baseUrl = (() => {
    try {
      return parseBaseUrl(values.url ?? DEFAULT_URL);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  })();
  const rootKey = values["root-key"]?.trim() || loadCliEnv().rootKey;
  if (!values["dry-run"] && !rootKey) {
    throw new UsageError("a root key is required: set KEYHAVEN_ROOT_KEY or pass --root-key");
  }
  if (rootKey && !isHeaderSafe(rootKey)) {
    // Never printed: it is a secret, and a pasted value with a line break may hold more than the key.
    throw new UsageError(
      "the root key contains a line break, a control character or a character outside Latin-1, so it cannot be " +
        "sent in an HTTP header; check KEYHAVEN_ROOT_KEY or --root-key (the value is not shown)",
    );
  }

  // Phase 1: every line, before anything is sent. The file is streamed (memory stays flat but for one hash per key,
  // to find duplicates); only the batch sizes are kept, and the file is read again to send it.
  const fileSha256 = createHash("sha256");
  const validator = new KeyValidator(apiId, true);
  const planner = new BatchPlanner(batchSize);
  const batchSizes: number[] = [];
  // Each planned batch's digest (64 characters per batch): phase 2 sends a batch only if it is the same one.
  const digests: string[] = [];
  const errors: LineError[] = [];
  let keyCount = 0;
  try {
    for await (const item of readSource(file, format, fileSha256)) {
      if (item.kind === "file") {
        console.error(`keyhaven import: ${file}: ${item.message}. Nothing was sent.`);
        return EXIT.usage;
      }
      if (item.kind === "error") {
        errors.push(item);
        continue;
      }
      const checked = validator.check(item.line, item.value);
      if (Array.isArray(checked)) {
        errors.push(...checked);
        continue;
      }
      keyCount += 1;
      const closed = planner.add(checked);
      if (closed) {
        batchSizes.push(closed.length);
        digests.push(batchDigest(closed));
      }
    }
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const last = planner.finish();
  if (last) {
    batchSizes.push(last.length);
    digests.push(batchDigest(last));
  }

  if (errors.length > 0) {
    errors.sort((a, b) => a.line - b.line);
    const badLines = new Set(errors.map((e) => e.line)).size;
    console.error(`keyhaven import: ${file}: ${badLines} bad line${badLines === 1 ? "" : "s"}; nothing was sent.`);
    for (const e of errors) console.error(`  line ${e.line}: ${e.message}`);
    return EXIT.usage;
  }
  if (keyCount === 0) {
    console.error(`keyhaven import: ${file} holds no keys; nothing was sent.`);
    return EXIT.usage;
  }
  if (values["dry-run"]) {
    console.log(
      `${file}: ${fmt(keyCount)} keys are valid, in ${fmt(batchSizes.length)} batch${batchSizes.length === 1 ? "" : "es"} ` +
        `for ${apiId}. Dry run: nothing was sent.`,
    );
    return EXIT.ok;
  }
  const sha256 = fileSha256.digest("hex");

  // Phase 2: the batches, with the journal.
  const journalPath = values.journal ?? `${file}.keyhaven-journal`;
  checkJournalPath(journalPath);
  const unlock = journalCall(journalPath, () => lockJournal(journalPath));
  let journal: Journal | undefined;
  try {
    journal = journalCall(journalPath, () =>
      Journal.open(journalPath, {
        file: path.resolve(file),
        fileSha256: sha256,
        apiId,
        batchSize,
        batches: batchSizes.length,
        keys: keyCount,
      }),
    );
    let doneEarlier = 0;
    for (const [index, state] of journal.states) if (state.state === "done") doneEarlier += batchSizes[index] ?? 0;
    const quiet = values.quiet === true;
    const progress = new Progress(keyCount, process.stderr, { tty: process.stderr.isTTY === true, every, enabled: !quiet });
    const runner = new ImportRunner(
      {
        baseUrl,
        rootKey: rootKey!,
        attempts,
        timeoutMs: timeoutSeconds * 1000,
        concurrency,
        continueOnError: values["continue-on-error"] === true,
        skipExisting: values["skip-existing"] === true,
        backoffMs: 250,
      },
      journal,
      progress,
    );

    let signals = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      signals += 1;
      if (signals === 1) {
        console.error(`\n${signal}: finishing the request in flight, then stopping (again to stop at once)`);
        runner.requestStop("interrupted", `stopped by ${signal}`);
      } else {
        // The journal already says `sent` for the batch in flight: the next run checks whether it landed.
        console.error(`${signal} again: stopping now. Re-run the same command to resume.`);
        process.exit(EXIT.interrupted);
      }
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);

    const startedAt = Date.now();
    let outcome;
    try {
      const batches = readBatches({ file, format, apiId, batchSize, sha256, digests });
      outcome = await runner.run(batches, keyCount, doneEarlier);
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
    const seconds = (Date.now() - startedAt) / 1000;

    for (const f of outcome.failures) console.error(`refused: ${formatFailure(f)}`);
    const skipped = outcome.doneEarlier + outcome.alreadyPresent.length;
    const summary = [
      `imported: ${fmt(outcome.imported)}`,
      `skipped:  ${fmt(skipped)}` +
        (skipped > 0
          ? ` (${fmt(outcome.doneEarlier)} imported by an earlier run, ${fmt(outcome.alreadyPresent.length)} already on the server)`
          : ""),
      `failed:   ${fmt(outcome.failedKeys)}${outcome.failures.length > 0 ? ` (${outcome.failures.length} batch${outcome.failures.length === 1 ? "" : "es"} refused)` : ""}`,
    ];
    if (outcome.notImported > 0 || outcome.stop?.reason !== undefined) summary.push(`not yet:  ${fmt(outcome.notImported)}`);
    summary.push(`time:     ${duration(seconds)}`, `rate:     ${fmt(Math.round(seconds > 0 ? outcome.imported / seconds : 0))} keys/s`);
    console.log(summary.join("\n"));

    const resume = resumeCommand(file, apiId, values);
    if (outcome.stop?.reason === "changed") {
      console.error(
        `stopped: ${outcome.stop.message}; nothing that was not validated was sent. ` +
          "Restore the file and re-run the same command to resume, or import the new version with a new --journal.",
      );
      return EXIT.usage;
    }
    if (outcome.stop?.reason === "interrupted" || outcome.stop?.reason === "unavailable") {
      console.error(`stopped: ${outcome.stop.message}\nresume with: ${resume}`);
      return EXIT.interrupted;
    }
    if (outcome.failures.length > 0 || outcome.stop) {
      if (outcome.stop) console.error(`stopped: ${outcome.stop.message}`);
      console.error(refusalHint(outcome.failures, resume, values["skip-existing"] === true));
      return EXIT.failed;
    }
    return EXIT.ok;
  } finally {
    journal?.close();
    unlock();
  }
}

/**
 * The file's batches for sending, read from the file again: the same batches phase 1 planned, built as the
 * runner asks for them. A file that no longer matches what phase 1 checked stops the run.
 */
async function* readBatches(plan: {
  file: string;
  format: FileFormat;
  apiId: string;
  batchSize: number;
  sha256: string;
  /** The digest of every batch phase 1 planned, in order. */
  digests: string[];
}): AsyncGenerator<Batch> {
  const changed = () => new SourceChanged(`${plan.file} changed while it was being imported`);
  const validator = new KeyValidator(plan.apiId, false);
  const planner = new BatchPlanner(plan.batchSize);
  const sha256 = createHash("sha256");
  let index = 0;
  // A batch leaves only if phase 1 planned that very batch (same lines, same keys): a line edited or appended
  // since is never sent, even before the whole-file check at the end can run.
  const checked = (keys: ValidKey[]): Batch => {
    const digest = batchDigest(keys);
    if (index >= plan.digests.length || digest !== plan.digests[index]) throw changed();
    return makeBatch(index++, keys, digest);
  };
  for await (const item of readSource(plan.file, plan.format, sha256)) {
    if (item.kind !== "record") throw changed();
    const valid = validator.check(item.line, item.value);
    if (Array.isArray(valid)) throw changed();
    const closed = planner.add(valid);
    if (closed) yield checked(closed);
  }
  const last = planner.finish();
  if (last) yield checked(last);
  if (index !== plan.digests.length || sha256.digest("hex") !== plan.sha256) throw changed();
}

/** The journal must be a regular file, or a new one in an existing directory: checked before anything is sent. */
function checkJournalPath(journalPath: string): void {
  let stats;
  try {
    stats = statSync(journalPath);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "ENOENT") throw new UsageError(`journal ${journalPath}: cannot use it (${code ?? (err as Error).message})`);
    const dir = path.dirname(path.resolve(journalPath));
    let isDir = false;
    try {
      isDir = statSync(dir).isDirectory();
    } catch {
      // reported below
    }
    if (!isDir) throw new UsageError(`journal ${journalPath}: the directory ${dir} does not exist; create it or pass another --journal`);
    return;
  }
  if (!stats.isFile()) throw new UsageError(`journal ${journalPath}: not a regular file (a directory?); pass a file path to --journal`);
}

/** A file-system error on the journal (permissions, a full disk…) is a usage error naming it, not a crash. */
function journalCall<T>(journalPath: string, open: () => T): T {
  try {
    return open();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (err instanceof JournalMismatch || typeof code !== "string") throw err;
    throw new UsageError(`journal ${journalPath}: cannot use it (${code})`);
  }
}

/**
 * What to do about refused batches. The journal belongs to the file as it was validated, so editing the file and
 * re-running the same command is refused: keys that already exist are skipped with --skip-existing instead, and an
 * edited file is imported with a new journal.
 */
function refusalHint(failures: BatchFailure[], resume: string, skipping: boolean): string {
  const conflicts = !skipping && failures.some((f) => f.code === "CONFLICT");
  return [
    conflicts
      ? `keys the server already has: re-run with --skip-existing to skip them (counted, never created twice): ${resume} --skip-existing`
      : `once the cause is fixed on the server (a missing role or permission…), re-run to retry the refused batches: ${resume}`,
    "do not edit the file for a re-run (its journal refuses a changed file); to import an edited copy, start a new " +
      `journal: add --journal <new path>${conflicts ? " and --skip-existing (so keys imported before are skipped)" : ""}`,
  ].join("\n");
}

/** The command line that resumes this import: every option that matters, never a secret. */
function resumeCommand(file: string, apiId: string, values: Record<string, unknown>): string {
  const parts = ["keyhaven", "import", quote(file), "--api", quote(apiId)];
  for (const name of ["url", "format", "journal", "batch-size", "concurrency"]) {
    if (typeof values[name] === "string") parts.push(`--${name}`, quote(values[name] as string));
  }
  if (values["continue-on-error"]) parts.push("--continue-on-error");
  if (values["skip-existing"]) parts.push("--skip-existing");
  return parts.join(" ");
}

/** `s` as one POSIX shell word: as it is when safe, else in single quotes, each ' in it written '\'' (close, escaped quote, reopen). */
function quote(s: string): string {
  if (/^[\w@%+=:,./-]+$/.test(s)) return s;
  const escaped = s.replaceAll("'", "'\\''");
  return `'${escaped}'`;
}
