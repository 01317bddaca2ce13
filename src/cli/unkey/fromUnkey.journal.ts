/**
 * The journal of `keyhaven import --from-unkey` (not --dry-run, not --check): what a run has copied, so that a run
 * stopped by kill -9 or an outage of either side resumes without reading or sending again the pages it finished.
 *
 * A file of JSON lines, each fsynced before the run goes on: a header (the Unkey and keyhaven URLs it copies
 * between, and a random `nonce`), then one line per batch keyhaven confirmed: `{ pass, stream, start, next, counts }`.
 * A stream is one list read from Unkey (`apis:<the --api ids>`, `permissions`, `roles`, `identities`, `keys:<apiId>`,
 * `overrides:<namespace>`), read by cursor: `start` is the cursor the batch's first page was read from (`""` for the
 * first page), `next` the one after its last page (absent: the stream ended there). A resumed run that reaches a
 * cursor some batch started at goes on from that batch's `next` without reading it again.
 *
 * Passes: a run that finishes writes `{ pass, finished: true }`. The next run starts a new pass, which reads and
 * sends everything again (idempotent on keyhaven's side: what changed upstream is updated, nothing is created twice).
 *
 * The nonce makes each batch's Idempotency-Key (see fromUnkey.copy.ts) unguessable and different per journal.
 */
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, truncateSync, writeSync } from "node:fs";
import { JournalMismatch } from "../import/import.journal.js";
import type { Section } from "./fromUnkey.map.js";

/** A section's counts as keyhaven answers them; a skipped item with `local` was left out by this command (never sent). */
export type Counts = { created: number; updated: number; unchanged: number; skipped: { id: string; reason: string; local?: true }[] };
export type BatchCounts = Partial<Record<Section, Counts>> & { verifiable?: number; pending?: number };

type Header = { journal: "keyhaven-from-unkey"; version: 1; unkeyUrl: string; keyhavenUrl: string; nonce: string; createdAt: string };
type BatchLine = { pass: number; stream: string; start: string; next?: string; items: number; counts: BatchCounts; at: string };
type FinishedLine = { pass: number; finished: true; at: string };

export class CopyJournal {
  private constructor(
    readonly path: string,
    private readonly fd: number,
    readonly nonce: string,
    readonly pass: number,
    /** This pass's confirmed batches: stream → start cursor → the batch. */
    private readonly done: Map<string, Map<string, BatchLine>>,
  ) {
    for (const s of done.values()) this.resumedBatches += s.size;
  }

  /** Batches of this pass an earlier run confirmed. */
  readonly resumedBatches: number = 0;

  static open(path: string, target: { unkeyUrl: string; keyhavenUrl: string }): CopyJournal {
    const done = new Map<string, Map<string, BatchLine>>();
    let header: Header | undefined;
    let pass = 1;
    if (existsSync(path)) {
      const bytes = readFileSync(path);
      const lines = bytes.toString("utf8").split("\n");
      // A last line without its newline was cut short by a crash while appending: it confirmed nothing.
      const complete = lines.slice(0, -1).filter((l) => l.trim() !== "");
      if (complete.length > 0) {
        const notOurs = () =>
          new JournalMismatch(`${path} is not a journal of keyhaven import --from-unkey; move it away or pass another --journal`);
        try {
          header = JSON.parse(complete[0]!) as Header;
        } catch {
          throw notOurs();
        }
        if (header.journal !== "keyhaven-from-unkey" || header.version !== 1 || typeof header.nonce !== "string") throw notOurs();
        if (header.unkeyUrl !== target.unkeyUrl || header.keyhavenUrl !== target.keyhavenUrl) {
          throw new JournalMismatch(
            `${path} is the journal of a copy from ${header.unkeyUrl} into ${header.keyhavenUrl}; pass another --journal for this one`,
          );
        }
        let finished = 0;
        const batches: BatchLine[] = [];
        complete.slice(1).forEach((line, i) => {
          let entry: BatchLine | FinishedLine;
          try {
            entry = JSON.parse(line) as BatchLine | FinishedLine;
          } catch {
            throw new JournalMismatch(`${path}: line ${i + 2} is damaged`);
          }
          pass = Math.max(pass, entry.pass);
          if ("finished" in entry) finished = Math.max(finished, entry.pass);
          else batches.push(entry);
        });
        if (finished === pass) pass += 1;
        for (const b of batches) {
          if (b.pass !== pass) continue;
          let stream = done.get(b.stream);
          if (!stream) done.set(b.stream, (stream = new Map()));
          stream.set(b.start, b);
        }
      }
      const end = bytes.lastIndexOf(10) + 1;
      if (end < bytes.length) truncateSync(path, end);
    }
    const fd = openSync(path, "a", 0o600);
    const nonce = header?.nonce ?? randomBytes(16).toString("hex");
    const journal = new CopyJournal(path, fd, nonce, pass, done);
    if (!header) {
      journal.append({
        journal: "keyhaven-from-unkey",
        version: 1,
        unkeyUrl: target.unkeyUrl,
        keyhavenUrl: target.keyhavenUrl,
        nonce,
        createdAt: new Date().toISOString(),
      } satisfies Header);
    }
    return journal;
  }

  /** The batch of `stream` this pass confirmed that started at `start`, if any. */
  doneAt(stream: string, start: string): { next: string | undefined; items: number } | undefined {
    const b = this.done.get(stream)?.get(start);
    return b ? { next: b.next, items: b.items } : undefined;
  }

  /**
   * Every batch of `streams` this pass confirmed (earlier runs' included), for the summary; a stream an earlier run
   * of the pass read that this one does not (another set of --api) is left out, so nothing is counted twice.
   */
  confirmed(streams: ReadonlySet<string>): BatchCounts[] {
    return [...this.done.entries()].filter(([name]) => streams.has(name)).flatMap(([, s]) => [...s.values()].map((b) => b.counts));
  }

  record(stream: string, start: string, next: string | undefined, items: number, counts: BatchCounts): void {
    const line: BatchLine = {
      pass: this.pass,
      stream,
      start,
      ...(next !== undefined && { next }),
      items,
      counts,
      at: new Date().toISOString(),
    };
    this.append(line);
    let s = this.done.get(stream);
    if (!s) this.done.set(stream, (s = new Map()));
    s.set(start, line);
  }

  finish(): void {
    this.append({ pass: this.pass, finished: true, at: new Date().toISOString() } satisfies FinishedLine);
  }

  private append(entry: object): void {
    writeSync(this.fd, `${JSON.stringify(entry)}\n`);
    fsyncSync(this.fd);
  }

  close(): void {
    closeSync(this.fd);
  }
}
