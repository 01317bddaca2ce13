import type { ErrorFields } from "../../http/errors.js";
import { backoffDelay, isTransientStatus, postJson } from "../http.js";
import type { Journal } from "./import.journal.js";
import type { Progress } from "./import.progress.js";
import { type Batch, describeLines, type ValidKey } from "./import.validate.js";

export type RunnerOptions = {
  baseUrl: string;
  rootKey: string;
  /** Attempts per request for transient failures (connection errors, timeouts, 429, 5xx) before the run stops. */
  attempts: number;
  timeoutMs: number;
  concurrency: number;
  continueOnError: boolean;
  /** --skip-existing: a key the server reports as already existing is set aside as present, not a refusal. */
  skipExisting: boolean;
  /** First backoff delay; doubles per attempt up to 10 s, with full jitter. */
  backoffMs: number;
};

export type BatchFailure = { batch: number; lines: number[]; code: string; status: number; message: string };

export type RunOutcome = {
  imported: number;
  /** Keys of batches a previous run had already imported. */
  doneEarlier: number;
  /** Lines whose key the server already had when an unconfirmed batch was resolved (see the journal rule). */
  alreadyPresent: number[];
  failures: BatchFailure[];
  failedKeys: number;
  /** Keys of batches not finished because the run stopped (interrupt or transient failures). */
  notImported: number;
  stop: { reason: StopReason; message: string } | undefined;
};

/** `changed`: the file no longer matches what was validated; nothing of it past that point was sent. */
export type StopReason = "interrupted" | "unavailable" | "failed" | "changed";

/** Thrown by the batch source when the file differs from what phase 1 validated. */
export class SourceChanged extends Error {}

/** Refusals about the credentials or the API rather than a batch: every other batch would get the same answer. */
const RUN_WIDE = new Set(["UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND", "INSUFFICIENT_PERMISSIONS"]);

export class ImportRunner {
  private stop: RunOutcome["stop"];
  private finishedKeys = 0;
  private readonly wake = new AbortController();
  private readonly outcome: RunOutcome = {
    imported: 0,
    doneEarlier: 0,
    alreadyPresent: [],
    failures: [],
    failedKeys: 0,
    notImported: 0,
    stop: undefined,
  };

  constructor(
    private readonly options: RunnerOptions,
    private readonly journal: Journal,
    private readonly progress: Progress,
  ) {}

  /** The first Ctrl-C: start no new batch, cut backoff waits short, let the requests in flight finish. */
  requestStop(reason: StopReason, message: string): void {
    if (this.stop) return;
    this.stop = { reason, message };
    this.wake.abort();
  }

  /**
   * Sends the batches, in file order, `concurrency` at a time, skipping those the journal has as done and resolving
   * those it has as sent but unconfirmed. `batches` is read as the workers need it (the file is never held whole);
   * `doneEarlier` is how many of the file's `totalKeys` keys the journal's done batches hold.
   */
  async run(batches: AsyncIterable<Batch>, totalKeys: number, doneEarlier: number): Promise<RunOutcome> {
    this.outcome.doneEarlier = doneEarlier;
    this.progress.start(doneEarlier);
    const source = batches[Symbol.asyncIterator]();
    const worker = async () => {
      while (!this.stop) {
        let next: IteratorResult<Batch>;
        try {
          next = await source.next();
        } catch (err) {
          this.requestStop(err instanceof SourceChanged ? "changed" : "failed", (err as Error).message);
          return;
        }
        if (next.done) return;
        const batch = next.value;
        const state = this.journal.states.get(batch.index);
        if (state && state.digest !== batch.digest) {
          this.requestStop("failed", `the journal's batch ${batch.index} does not match the file; pass a new --journal to start over`);
          return;
        }
        if (state?.state === "done") continue;
        // Sent by an earlier run that never learned whether it landed; or refused after an attempt that may have.
        const inDoubt = state?.state === "sent" || (state?.event.state === "failed" && state.event.inDoubt);
        await this.send(batch, inDoubt);
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.max(1, this.options.concurrency) }, worker));
    } finally {
      await source.return?.(undefined);
    }

    this.outcome.notImported = totalKeys - doneEarlier - this.finishedKeys;
    this.outcome.stop = this.stop;
    this.progress.finish();
    return this.outcome;
  }

  /** A batch reached its outcome in this run (imported, found present, or refused). */
  private finished(batch: Batch, imported: number): void {
    this.finishedKeys += batch.keys.length;
    this.progress.advance(batch.keys.length, imported);
  }

  private async send(batch: Batch, inDoubtAtStart: boolean): Promise<void> {
    const lines: [number, number] = [batch.keys[0]!.line, batch.keys[batch.keys.length - 1]!.line];
    const base = { batch: batch.index, lines, digest: batch.digest };
    this.journal.record({ ...base, state: "sent", at: new Date().toISOString() });

    let remaining: ValidKey[] = batch.keys;
    const present: number[] = [];
    // In doubt: an earlier attempt may have landed (no answer, or a previous run stopped after sending it).
    let inDoubt = inDoubtAtStart;
    let attempt = 0;
    for (;;) {
      const body = remaining === batch.keys ? batch.body : JSON.stringify(remaining.map((k) => k.key));
      const res = await postJson(this.options.baseUrl, "/v1/migrations.createKeys", this.options.rootKey, body, this.options.timeoutMs);

      if (res.kind === "ok") {
        this.journal.record({ ...base, state: "done", imported: remaining.length, alreadyPresent: present, at: new Date().toISOString() });
        this.outcome.imported += remaining.length;
        this.outcome.alreadyPresent.push(...present);
        this.finished(batch, remaining.length);
        return;
      }

      if (res.kind === "network" || isTransientStatus(res.status)) {
        inDoubt = true;
        attempt += 1;
        const why = res.kind === "network" ? res.message : `${res.status} ${res.code}: ${res.message}`;
        if (attempt >= this.options.attempts) {
          this.requestStop("unavailable", `${describeLines(batch.keys.map((k) => k.line))}: ${why} (after ${attempt} attempts)`);
          return;
        }
        if (this.stop) return;
        this.progress.note(`${describeLines([lines[0], lines[1]])}: ${why}; retrying (attempt ${attempt + 1} of ${this.options.attempts})`);
        await this.sleep(this.backoff(attempt, res.kind === "error" ? res.retryAfterMs : undefined));
        if (this.stop) return;
        continue;
      }

      // createKeys is all or nothing. When an earlier attempt may have landed, a key it reports as existing is
      // set aside as already present and the rest is sent again, until the server takes the rest or every key
      // turned out to exist: a batch that had landed is found entirely present, and nothing is created twice.
      // With --skip-existing the same resolution applies to every batch: an existing key is skipped, never created.
      // Read from the envelope's fields, never from the message's wording (errors.ts ErrorFields).
      const existing = (inDoubt || this.options.skipExisting) && res.status === 409 ? existingKeyIndex(res.fields) : undefined;
      if (existing !== undefined) {
        const index = existing;
        if (index < remaining.length) {
          present.push(remaining[index]!.line);
          remaining = remaining.filter((_, i) => i !== index);
          if (remaining.length === 0) {
            this.journal.record({ ...base, state: "done", imported: 0, alreadyPresent: present, at: new Date().toISOString() });
            this.outcome.alreadyPresent.push(...present);
            this.finished(batch, 0);
            return;
          }
          continue;
        }
      }

      const failure = explainFailure(batch.index, remaining, res.status, res.code, res.message, res.fields);
      this.journal.record({ ...base, state: "failed", code: res.code, message: res.message, inDoubt, at: new Date().toISOString() });
      this.outcome.failures.push(failure);
      this.outcome.failedKeys += remaining.length;
      // Keys of this batch found present while resolving it stay counted as present.
      this.outcome.alreadyPresent.push(...present);
      this.finished(batch, 0);
      if (RUN_WIDE.has(res.code)) this.requestStop("failed", `${res.code}: ${res.message}`);
      else if (!this.options.continueOnError) this.requestStop("failed", formatFailure(failure));
      return;
    }
  }

  private backoff(attempt: number, retryAfterMs: number | undefined): number {
    return backoffDelay(attempt, this.options.backoffMs, retryAfterMs);
  }

  private sleep(ms: number): Promise<void> {
    if (this.wake.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake.signal.addEventListener("abort", done, { once: true });
    });
  }
}

/** The index of the key a 409 reports as existing already (`reason: KEY_EXISTS`), from the envelope's fields. */
export function existingKeyIndex(fields: ErrorFields): number | undefined {
  return fields.reason === "KEY_EXISTS" ? fields.keyIndex : undefined;
}

/**
 * Names the lines a refusal is about, from the envelope's fields (never from the message's wording): the keys at
 * `keyIndex` and `sameAsKeyIndex`, the keys using a missing role or permission, else all. The message's mentions of
 * those indexes are shown as lines, a cosmetic rewrite that leaves a reworded message as it is.
 */
export function explainFailure(
  batch: number,
  keys: ValidKey[],
  status: number,
  code: string,
  message: string,
  fields: ErrorFields = {},
): BatchFailure {
  let lines = keys.map((k) => k.line);
  let text = message;
  const lineOf = (i: number) => keys[i]?.line;
  const indexes = [fields.keyIndex, fields.sameAsKeyIndex].filter((i): i is number => i !== undefined && lineOf(i) !== undefined);
  if (indexes.length > 0) {
    lines = [...new Set(indexes.map((i) => lineOf(i)!))].sort((a, b) => a - b);
    const pathPrefix = `${fields.keyIndex}.`;
    if (fields.keyIndex !== undefined && text.startsWith(pathPrefix)) {
      // A validation message: `<index>.<field>: <message>`.
      text = text.slice(pathPrefix.length);
    } else {
      text = text.replace(/\b(?:the (?:key|one) at )?index (\d+)\b/g, (whole, i: string) =>
        indexes.includes(Number(i)) ? `the key on line ${lineOf(Number(i))}` : whole,
      );
    }
  } else if (fields.missingRoles || fields.missingPermissions) {
    const roles = new Set(fields.missingRoles);
    const permissions = new Set(fields.missingPermissions);
    const using = keys
      .filter((k) => (k.key.roles ?? []).some((n) => roles.has(n)) || (k.key.permissions ?? []).some((n) => permissions.has(n)))
      .map((k) => k.line);
    if (using.length > 0) lines = using;
  }
  return { batch, lines, code, status, message: text };
}

export function formatFailure(f: BatchFailure): string {
  const shown = f.lines.length <= 20 ? f.lines.join(", ") : `${f.lines.slice(0, 20).join(", ")}, … (${f.lines.length} lines)`;
  return `${f.status} ${f.code}: ${f.message} [${f.lines.length === 1 ? "line" : "lines"} ${shown}]`;
}
