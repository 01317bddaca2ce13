import { closeSync, existsSync, fsyncSync, openSync, readFileSync, truncateSync, unlinkSync, writeSync } from "node:fs";

/**
 * The resume journal: an append-only JSON-lines file. The first line binds it to one import (the file's SHA-256,
 * the API id, the batch size); then one line per batch event. A batch is written `sent` (and synced to disk)
 * before its request, then `done` after the server's 200, or `failed` after a refusal that retrying cannot fix.
 * It holds line numbers, counts, digests and server messages: never a key's plaintext, never a root key.
 */
export type JournalHeader = {
  journal: "keyhaven-import";
  version: 1;
  file: string;
  fileSha256: string;
  apiId: string;
  batchSize: number;
  batches: number;
  keys: number;
  createdAt: string;
};

export type BatchEvent =
  | { batch: number; lines: [number, number]; digest: string; state: "sent"; at: string }
  | { batch: number; lines: [number, number]; digest: string; state: "done"; imported: number; alreadyPresent: number[]; at: string }
  | {
      batch: number;
      lines: [number, number];
      digest: string;
      state: "failed";
      code: string;
      message: string;
      inDoubt: boolean;
      at: string;
    };

export type BatchState = { state: "sent" | "done" | "failed"; digest: string; event: BatchEvent };

export class JournalMismatch extends Error {}

export class Journal {
  private constructor(
    readonly path: string,
    private readonly fd: number,
    readonly states: Map<number, BatchState>,
    readonly resumed: boolean,
  ) {}

  /**
   * Opens (or creates) the journal for this import. A journal of another file content, API or batch size is
   * refused: resuming it would skip or repeat the wrong lines.
   */
  static open(path: string, header: Omit<JournalHeader, "journal" | "version" | "createdAt">): Journal {
    const states = new Map<number, BatchState>();
    let resumed = false;
    if (existsSync(path)) {
      const bytes = readFileSync(path);
      const text = bytes.toString("utf8");
      const lines = text.split("\n").filter((l) => l.trim() !== "");
      if (lines.length > 0) {
        let existing: JournalHeader;
        try {
          existing = JSON.parse(lines[0]!) as JournalHeader;
        } catch {
          throw new JournalMismatch(`${path} is not a keyhaven import journal; move it away or pass another --journal`);
        }
        if (existing.journal !== "keyhaven-import" || existing.version !== 1) {
          throw new JournalMismatch(`${path} is not a keyhaven import journal; move it away or pass another --journal`);
        }
        if (existing.fileSha256 !== header.fileSha256) {
          throw new JournalMismatch(
            `${path} belongs to a different version of the import file (its content changed since that run). ` +
              "Resuming could skip or repeat keys: restore the original file, or pass a new --journal to import this one as a new run",
          );
        }
        if (existing.apiId !== header.apiId) {
          throw new JournalMismatch(`${path} is the journal of an import into ${existing.apiId}, not ${header.apiId}`);
        }
        if (existing.batchSize !== header.batchSize) {
          throw new JournalMismatch(`${path} was written with --batch-size ${existing.batchSize}; resume with that size`);
        }
        resumed = true;
        lines.slice(1).forEach((line, i) => {
          let event: BatchEvent;
          try {
            event = JSON.parse(line) as BatchEvent;
          } catch {
            // Only the very last line can be cut short (a crash while appending); it never confirmed anything.
            if (i === lines.length - 2) return;
            throw new JournalMismatch(`${path}: line ${i + 2} is damaged`);
          }
          states.set(event.batch, { state: event.state, digest: event.digest, event });
        });
        // A last line cut short (no final newline) is dropped, so that the next event starts on a line of its own.
        const end = bytes.lastIndexOf(10) + 1;
        if (end < bytes.length) truncateSync(path, end);
      }
    }
    const fd = openSync(path, "a", 0o600);
    const journal = new Journal(path, fd, states, resumed);
    if (!resumed) {
      journal.append({ journal: "keyhaven-import", version: 1, ...header, createdAt: new Date().toISOString() });
    }
    return journal;
  }

  record(event: BatchEvent): void {
    this.states.set(event.batch, { state: event.state, digest: event.digest, event });
    this.append(event);
  }

  private append(entry: object): void {
    writeSync(this.fd, `${JSON.stringify(entry)}\n`);
    // `sent` must be on disk before the request leaves: it is what makes a crash after the request safe.
    fsyncSync(this.fd);
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** One run at a time per journal: a lock file holding the pid, taken over when that process is gone. */
export function lockJournal(path: string): () => void {
  const lock = `${path}.lock`;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lock, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          unlinkSync(lock);
        } catch {
          // already gone
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const pid = Number(readFileSync(lock, "utf8").trim());
      if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) {
        throw new JournalMismatch(`another keyhaven import (pid ${pid}) is using ${path}`);
      }
      unlinkSync(lock);
    }
  }
  throw new JournalMismatch(`could not lock ${path}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
