import { existsSync, linkSync, mkdirSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/** A data directory that cannot be used, said in words (the CLI prints the message alone, exit 1). */
export class DataDirError extends Error {}

export const LOCK_FILE_NAME = "keyhaven.lock";

/** Who holds a data directory: what the lock file says. */
export type LockHolder = { pid: number; host: string; since: string; command: string };

export type DataDirLock = { file: string; release(): void };

const WORDS: Record<string, string> = {
  EROFS: "read-only file system",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
  ENOTDIR: "a part of the path is not a directory",
};

const inWords = (err: unknown) => {
  const code = (err as NodeJS.ErrnoException).code ?? "";
  return WORDS[code] ?? (err as Error).message;
};

/**
 * Creates KEYHAVEN_DATA_DIR and the directories above it that are missing, one level at a time: a recursive
 * mkdir reports ENOENT for the path asked for, not why its first missing level could not be made.
 */
export function prepareDataDir(dataDir: string): string {
  const dir = path.resolve(dataDir);
  const missing: string[] = [];
  let existing = dir;
  while (!existsSync(existing)) {
    missing.unshift(existing);
    existing = path.dirname(existing);
  }
  if (!statSync(existing).isDirectory()) {
    throw new DataDirError(
      missing.length === 0
        ? `KEYHAVEN_DATA_DIR ${dir} is not a directory`
        : `cannot create KEYHAVEN_DATA_DIR ${dir}: ${existing} is not a directory`,
    );
  }
  for (const level of missing) {
    try {
      mkdirSync(level);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST" && statSync(level).isDirectory()) continue;
      throw new DataDirError(`cannot create KEYHAVEN_DATA_DIR ${dir}: cannot create ${level}: ${inWords(err)}`);
    }
  }
  return dir;
}

// The data directories this process holds: a second store on one of them would be a second writer too.
const heldHere = new Set<string>();

/**
 * Takes the exclusive lock on an embedded store's data directory: `<dir>/keyhaven.lock`, holding the holder's pid,
 * host and start time. The file appears whole or not at all (written aside, then hard-linked, which fails if it
 * exists). A lock whose process no longer runs on this host is taken over with a warning; any other is refused,
 * naming the holder. Released by `release()`, and on any exit of the process that runs exit handlers.
 */
export function lockDataDir(dataDir: string, warn: (message: string) => void): DataDirLock {
  const dir = prepareDataDir(dataDir);
  const file = path.join(dir, LOCK_FILE_NAME);
  if (heldHere.has(dir)) throw new DataDirError(`KEYHAVEN_DATA_DIR ${dir} is already open in this process`);
  const mine: LockHolder = {
    pid: process.pid,
    host: os.hostname(),
    since: new Date().toISOString(),
    // The command only, never its options (a path, but one day maybe a secret).
    command: process.argv[2] ?? "",
  };
  const content = `${JSON.stringify(mine)}\n`;
  const aside = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(aside, content, { mode: 0o644 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    throw new DataDirError(`KEYHAVEN_DATA_DIR ${dir} is not writable (${code}): ${inWords(err)}`);
  }
  try {
    // Three rounds: a stale lock taken over in one round is ours in the next, unless another process won it.
    for (let round = 0; round < 3; round++) {
      try {
        linkSync(aside, file);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") {
          throw new DataDirError(`KEYHAVEN_DATA_DIR ${dir} is not writable (${(err as NodeJS.ErrnoException).code}): ${inWords(err)}`);
        }
        const seen = readLockFile(file);
        if (seen === undefined) continue; // released between our link and our read
        // A file that is not a lock of ours is never removed by guesswork.
        if (seen.holder === undefined || isRunning(seen.holder)) throw new DataDirError(heldMessage(dir, file, seen.holder));
        if (takeOverStaleLock(file, seen.text)) {
          warn(`took over the lock of ${describeHolder(seen.holder)} on KEYHAVEN_DATA_DIR ${dir}: that process no longer runs`);
        }
        continue;
      }
      heldHere.add(dir);
      const release = () => {
        process.removeListener("exit", release);
        heldHere.delete(dir);
        // Only our own lock: never one another process took over after ours was (wrongly) thought stale.
        if (readLockFile(file)?.text === content) unlinkQuietly(file);
      };
      process.on("exit", release);
      return { file, release };
    }
    throw new DataDirError(`KEYHAVEN_DATA_DIR ${dir}: could not take ${file}: other processes keep taking it`);
  } finally {
    unlinkQuietly(aside);
  }
}

function readLockFile(file: string): { text: string; holder: LockHolder | undefined } | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  try {
    const parsed = JSON.parse(text) as Partial<LockHolder>;
    if (Number.isInteger(parsed.pid) && typeof parsed.host === "string") {
      return {
        text,
        holder: { pid: parsed.pid!, host: parsed.host, since: String(parsed.since ?? "?"), command: String(parsed.command ?? "") },
      };
    }
  } catch {}
  return { text, holder: undefined };
}

/** Whether the holder may still run. Only a process on this host can be checked; any other counts as running. */
function isRunning(holder: LockHolder): boolean {
  if (holder.host !== os.hostname()) return true;
  // Our own pid in a lock we do not hold: an earlier process with our pid (a restarted container's pid 1).
  if (holder.pid === process.pid) return false;
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Removes a stale lock, atomically: renamed aside first, so that only one of several processes gets it; if what
 * was renamed is no longer the stale lock (another process took it over in between), it is put back.
 */
function takeOverStaleLock(file: string, staleText: string): boolean {
  const aside = `${file}.${process.pid}.stale`;
  try {
    renameSync(file, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
  const renamed = readFileSync(aside, "utf8");
  if (renamed !== staleText) {
    try {
      linkSync(aside, file);
    } catch {}
  }
  unlinkQuietly(aside);
  return renamed === staleText;
}

function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {}
}

function describeHolder(holder: LockHolder): string {
  return `keyhaven${holder.command ? ` ${holder.command}` : ""} (pid ${holder.pid} on ${holder.host}, since ${holder.since})`;
}

function heldMessage(dir: string, file: string, holder: LockHolder | undefined): string {
  if (holder === undefined) {
    return `KEYHAVEN_DATA_DIR ${dir} is locked: ${file} exists but is not a keyhaven lock; remove it if no keyhaven uses this directory`;
  }
  const elsewhere = holder.host !== os.hostname();
  return (
    `KEYHAVEN_DATA_DIR ${dir} is in use by ${describeHolder(holder)}: one process at a time may open the embedded store. ` +
    (elsewhere
      ? `It cannot be checked from this host (${os.hostname()}); if that process no longer runs, remove ${file}.`
      : "Stop it first, or use another KEYHAVEN_DATA_DIR.")
  );
}
