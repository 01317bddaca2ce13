import {
  chmodSync,
  existsSync,
  lstatSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  type Stats,
  writeFileSync,
} from "node:fs";
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
      // The data directory itself is this user's alone (restrictDataDir); the levels above it are ordinary.
      mkdirSync(level, { mode: level === dir ? PRIVATE_DIR : 0o777 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST" && statSync(level).isDirectory()) continue;
      throw new DataDirError(`cannot create KEYHAVEN_DATA_DIR ${dir}: cannot create ${level}: ${inWords(err)}`);
    }
  }
  return dir;
}

/** The modes of everything in an embedded data directory: this user's alone (the store holds key hashes and ciphertexts). */
const PRIVATE_DIR = 0o700;
const PRIVATE_FILE = 0o600;

/** What keyhaven keeps in a data directory: PGlite's files, the key file, the lock (and their temporary siblings). */
const isOurs = (name: string) =>
  name === "pgdata" || name === "encryption.key" || name === LOCK_FILE_NAME || /^(encryption\.key|keyhaven\.lock)\./.test(name);

/**
 * Makes an embedded data directory this user's alone: the directory and every directory in it 0700, every file
 * 0600, changing only what differs. Run at every open, so a directory made under umask 022 (PGlite writes its files
 * 0644, and did before this existed) is fixed at the next start. Only what keyhaven keeps there is changed (a
 * KEYHAVEN_DATA_DIR pointed by mistake at a directory holding other things keeps that directory's mode, and those
 * things theirs). Symbolic links are neither followed nor changed. What cannot be changed (another owner) is
 * counted, not fatal. Returns what was changed, what could not be, and whether the directory held other things.
 */
export function restrictDataDir(dataDir: string): { changed: number; refused: string[]; foreign: boolean } {
  const result = { changed: 0, refused: [] as string[], foreign: false };
  const restrict = (file: string, stat: Stats) => {
    const mode = stat.isDirectory() ? PRIVATE_DIR : PRIVATE_FILE;
    if ((stat.mode & 0o777) === mode) return;
    try {
      chmodSync(file, mode);
      result.changed++;
    } catch {
      result.refused.push(file);
    }
  };
  const entries = (dir: string) => {
    try {
      return readdirSync(dir);
    } catch {
      result.refused.push(dir);
      return [];
    }
  };
  const visit = (file: string) => {
    let stat: Stats;
    try {
      stat = lstatSync(file);
    } catch {
      return; // removed meanwhile
    }
    if (!stat.isDirectory() && !stat.isFile()) return;
    restrict(file, stat);
    if (stat.isDirectory()) for (const entry of entries(file)) visit(path.join(file, entry));
  };
  const dir = path.resolve(dataDir);
  const names = entries(dir);
  result.foreign = names.some((name) => !isOurs(name));
  if (!result.foreign) restrict(dir, lstatSync(dir));
  for (const name of names.filter(isOurs)) visit(path.join(dir, name));
  return result;
}

/** restrictDataDir, saying in a warning what was open to other users and what could not be closed. */
export function restrictDataDirWarning(dataDir: string, warn: (message: string) => void, { quiet = false } = {}): void {
  const { changed, refused, foreign } = restrictDataDir(dataDir);
  const dir = path.resolve(dataDir);
  if (foreign && !quiet) {
    warn(`KEYHAVEN_DATA_DIR ${dir} holds files that are not keyhaven's: its own mode is left as it is (keyhaven's files are made private)`);
  }
  if (changed > 0 && !quiet) {
    warn(`KEYHAVEN_DATA_DIR ${dir}: ${changed} files and directories were open to other users; made them this user's alone (0700/0600)`);
  }
  if (refused.length > 0) {
    warn(`KEYHAVEN_DATA_DIR ${dir}: could not make ${refused.length} entries private (another owner?), e.g. ${refused[0]}`);
  }
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
    writeFileSync(aside, content, { mode: PRIVATE_FILE });
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
