import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { DataDirError, LOCK_FILE_NAME, lockDataDir, prepareDataDir, restrictDataDir } from "../src/storage/dataDir.js";

let root: string;
let dataDir: string;
let lockFile: string;
const warnings: string[] = [];
const warn = (m: string) => warnings.push(m);

beforeEach(() => {
  root = mkdtempSync(path.join(os.tmpdir(), "keyhaven-data-dir-"));
  dataDir = path.join(root, "data");
  lockFile = path.join(dataDir, LOCK_FILE_NAME);
  warnings.length = 0;
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** A process that runs until killed, and its pid. */
const sleepers: ReturnType<typeof spawn>[] = [];
afterAll(() => {
  for (const p of sleepers) p.kill("SIGKILL");
});
function runningPid(): number {
  const p = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
  sleepers.push(p);
  return p.pid!;
}

/** The pid of a process that has exited. */
async function deadPid(): Promise<number> {
  const p = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => p.once("exit", resolve));
  return p.pid!;
}

function writeLock(holder: Record<string, unknown>) {
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(lockFile, JSON.stringify(holder));
}

const catchError = (fn: () => unknown): Error => {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error("did not throw");
};

describe("the data directory lock", () => {
  it("creates the directory and a lock file naming this process, removed on release", () => {
    const lock = lockDataDir(dataDir, warn);
    const holder = JSON.parse(readFileSync(lockFile, "utf8"));
    expect(holder).toMatchObject({ pid: process.pid, host: os.hostname() });
    expect(Date.parse(holder.since)).not.toBeNaN();
    lock.release();
    expect(existsSync(lockFile)).toBe(false);
    expect(warnings).toEqual([]);
    // Released: it can be taken again.
    lockDataDir(dataDir, warn).release();
  });

  it("refuses a directory held by a running process, naming the directory, the pid and since when", () => {
    const pid = runningPid();
    writeLock({ pid, host: os.hostname(), since: "2026-01-02T03:04:05.000Z", command: "serve" });
    const err = catchError(() => lockDataDir(dataDir, warn));
    expect(err).toBeInstanceOf(DataDirError);
    expect(err.message).toBe(
      `KEYHAVEN_DATA_DIR ${dataDir} is in use by keyhaven serve (pid ${pid} on ${os.hostname()}, since 2026-01-02T03:04:05.000Z): ` +
        "one process at a time may open the embedded store. Stop it first, or use another KEYHAVEN_DATA_DIR.",
    );
    expect(JSON.parse(readFileSync(lockFile, "utf8")).pid).toBe(pid);
  });

  it("takes over the lock of a process that no longer runs, with a warning", async () => {
    const pid = await deadPid();
    writeLock({ pid, host: os.hostname(), since: "2026-01-02T03:04:05.000Z", command: "migrate" });
    const lock = lockDataDir(dataDir, warn);
    expect(JSON.parse(readFileSync(lockFile, "utf8")).pid).toBe(process.pid);
    expect(warnings).toEqual([
      `took over the lock of keyhaven migrate (pid ${pid} on ${os.hostname()}, since 2026-01-02T03:04:05.000Z) on KEYHAVEN_DATA_DIR ${dataDir}: that process no longer runs`,
    ]);
    lock.release();
  });

  it("takes over a lock with its own pid that it does not hold (an earlier process, such as a container's pid 1)", () => {
    writeLock({ pid: process.pid, host: os.hostname(), since: "2026-01-02T03:04:05.000Z", command: "serve" });
    lockDataDir(dataDir, warn).release();
    expect(warnings).toHaveLength(1);
  });

  it("refuses a lock held on another host, saying which file to remove once that process is gone", () => {
    writeLock({ pid: 1, host: "another-host", since: "2026-01-02T03:04:05.000Z", command: "serve" });
    const err = catchError(() => lockDataDir(dataDir, warn));
    expect(err.message).toContain(`is in use by keyhaven serve (pid 1 on another-host, since 2026-01-02T03:04:05.000Z)`);
    expect(err.message).toContain(`if that process no longer runs, remove ${lockFile}`);
  });

  it("refuses a lock file it cannot read as a lock, and leaves it", () => {
    mkdirSync(dataDir);
    writeFileSync(lockFile, "not json");
    expect(catchError(() => lockDataDir(dataDir, warn)).message).toContain(`${lockFile} exists but is not a keyhaven lock`);
    expect(readFileSync(lockFile, "utf8")).toBe("not json");
  });

  it("refuses a second store on the same directory in this process", () => {
    const lock = lockDataDir(dataDir, warn);
    try {
      expect(catchError(() => lockDataDir(dataDir, warn)).message).toBe(`KEYHAVEN_DATA_DIR ${dataDir} is already open in this process`);
    } finally {
      lock.release();
    }
  });

  it("does not remove a lock that another process holds by the time it releases", () => {
    const lock = lockDataDir(dataDir, warn);
    const other = JSON.stringify({ pid: runningPid(), host: os.hostname(), since: new Date().toISOString(), command: "serve" });
    writeFileSync(lockFile, other);
    lock.release();
    expect(readFileSync(lockFile, "utf8")).toBe(other);
  });
});

describe("the data directory's modes", () => {
  const mode = (file: string) => statSync(file).mode & 0o777;

  it("creates the directory 0700 and the lock 0600 under any umask, the levels above it as usual", () => {
    const nested = path.join(root, "above", "data");
    const lock = lockDataDir(nested, warn);
    try {
      expect(mode(nested)).toBe(0o700);
      expect(mode(path.join(nested, LOCK_FILE_NAME))).toBe(0o600);
      expect(mode(path.join(root, "above")) & 0o700).toBe(0o700);
    } finally {
      lock.release();
    }
  });

  it("leaves a directory that holds other things than keyhaven's with its mode, and those things with theirs", () => {
    mkdirSync(path.join(dataDir, "pgdata"), { recursive: true, mode: 0o755 });
    chmodSync(dataDir, 0o755);
    writeFileSync(path.join(dataDir, "pgdata", "PG_VERSION"), "17\n", { mode: 0o644 });
    writeFileSync(path.join(dataDir, "notes.txt"), "someone else's\n", { mode: 0o644 });
    chmodSync(path.join(dataDir, "notes.txt"), 0o644);
    chmodSync(path.join(dataDir, "pgdata", "PG_VERSION"), 0o644);
    expect(restrictDataDir(dataDir)).toEqual({ changed: 2, refused: [], foreign: true });
    expect([mode(dataDir), mode(path.join(dataDir, "notes.txt"))]).toEqual([0o755, 0o644]);
    expect([mode(path.join(dataDir, "pgdata")), mode(path.join(dataDir, "pgdata", "PG_VERSION"))]).toEqual([0o700, 0o600]);
  });
});

describe("data directory errors in words", () => {
  it("names a file where the data directory should be", () => {
    writeFileSync(dataDir, "");
    expect(catchError(() => prepareDataDir(dataDir)).message).toBe(`KEYHAVEN_DATA_DIR ${dataDir} is not a directory`);
  });

  it("names a file in the way of creating the data directory", () => {
    writeFileSync(dataDir, "");
    const below = path.join(dataDir, "a", "b");
    expect(catchError(() => prepareDataDir(below)).message).toBe(`cannot create KEYHAVEN_DATA_DIR ${below}: ${dataDir} is not a directory`);
  });

  it("says why a directory cannot be created where the file system refuses it", () => {
    // sysfs refuses new directories even to root (EPERM): the same path as a read-only or foreign directory.
    const below = "/sys/keyhaven-test/data";
    expect(catchError(() => prepareDataDir(below)).message).toMatch(
      /^cannot create KEYHAVEN_DATA_DIR \/sys\/keyhaven-test\/data: cannot create \/sys\/keyhaven-test: (operation not permitted|permission denied|read-only file system)$/,
    );
  });
});
