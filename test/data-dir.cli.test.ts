import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cli, keyhaven, killAll, started, withinSeconds } from "./cli-process.js";
import { freePort } from "./wait.js";

const TIMEOUT = 90_000;

let root: string;
beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), "keyhaven-lock-"));
});
afterAll(() => {
  killAll();
  rmSync(root, { recursive: true, force: true });
});

describe("one process at a time on an embedded data directory", () => {
  let dataDir: string;
  let env: Record<string, string>;
  let first: Cli;
  let rootKey: string;
  let base: string;

  beforeAll(async () => {
    dataDir = path.join(root, "shared");
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    env = { KEYHAVEN_DATA_DIR: dataDir, HOST: "127.0.0.1", LOG_LEVEL: "warn" };
    first = keyhaven(["serve"], { ...env, PORT: String(port) });
    rootKey = (await started(first)).match(/\bkhroot_\w+/)?.[0] ?? "";
  }, TIMEOUT);

  it(
    "refuses a second serve, migrate and rotate-encryption-key: exit 1 naming the directory and the holder",
    async () => {
      const newKey = path.join(root, "new.key");
      writeFileSync(newKey, `${Buffer.alloc(32, 7).toString("base64")}\n`);
      const port = String(await freePort());
      const others = [
        keyhaven(["serve"], { ...env, PORT: port }),
        keyhaven(["migrate"], env),
        keyhaven(["rotate-encryption-key", "--new-key-file", newKey], env),
      ];
      const holder = `keyhaven serve (pid ${first.child.pid} on ${os.hostname()}, since `;
      for (const other of others) {
        expect(await withinSeconds(other.exited, 60), other.stderr()).toEqual({ code: 1, signal: null });
        expect(other.stderr()).toContain(`keyhaven: KEYHAVEN_DATA_DIR ${dataDir} is in use by ${holder}`);
        expect(other.stderr()).toContain("Stop it first, or use another KEYHAVEN_DATA_DIR.");
        expect(other.stderr()).not.toMatch(/^\s+at /m);
      }
      // The first still serves, and still holds the lock.
      const res = await fetch(`${base}/v1/apis.createApi`, {
        method: "POST",
        headers: { authorization: `Bearer ${rootKey}`, "content-type": "application/json" },
        body: JSON.stringify({ name: "still-served" }),
      });
      expect(res.status).toBe(200);
      expect(JSON.parse(readFileSync(path.join(dataDir, "keyhaven.lock"), "utf8")).pid).toBe(first.child.pid);
    },
    TIMEOUT,
  );

  it(
    "releases the lock when the holder stops on SIGTERM",
    async () => {
      first.child.kill("SIGTERM");
      expect(await withinSeconds(first.exited, 20)).toEqual({ code: 0, signal: null });
      expect(existsSync(path.join(dataDir, "keyhaven.lock"))).toBe(false);
    },
    TIMEOUT,
  );

  it(
    "takes over the lock a killed process left behind, with a warning",
    async () => {
      writeFileSync(
        path.join(dataDir, "keyhaven.lock"),
        JSON.stringify({ pid: 2 ** 22 + 1, host: os.hostname(), since: "2026-01-02T03:04:05.000Z", command: "serve" }),
      );
      const migrate = keyhaven(["migrate"], env);
      expect(await withinSeconds(migrate.exited, 60), migrate.stderr()).toEqual({ code: 0, signal: null });
      expect(migrate.stderr()).toContain(`keyhaven: took over the lock of keyhaven serve (pid ${2 ** 22 + 1} on ${os.hostname()}`);
      expect(migrate.stdout()).toContain("migrations applied to embedded PGlite in");
      expect(existsSync(path.join(dataDir, "keyhaven.lock"))).toBe(false);
    },
    TIMEOUT,
  );
});

describe("a one-shot command stopped by a signal", () => {
  it(
    "releases the lock: migrate on SIGTERM",
    async () => {
      const dataDir = path.join(root, "signalled");
      const lockFile = path.join(dataDir, "keyhaven.lock");
      const migrate = keyhaven(["migrate"], { KEYHAVEN_DATA_DIR: dataDir });
      // The lock is taken before the store opens, which takes far longer than this poll's interval.
      await expect.poll(() => existsSync(lockFile), { timeout: 60_000, interval: 10 }).toBe(true);
      migrate.child.kill("SIGTERM");
      const exit = await withinSeconds(migrate.exited, 30);
      // 143 when the signal came first, as it all but always does; 0 if migrate finished first.
      expect([
        { code: 143, signal: null },
        { code: 0, signal: null },
      ]).toContainEqual(exit);
      expect(existsSync(lockFile)).toBe(false);
    },
    TIMEOUT,
  );
});

// A read-only file system, for real: a tmpfs mounted read-only in a mount namespace of the child's own (root only;
// the machine's mounts are untouched).
const canUnshare = spawnSync("unshare", ["-m", "sh", "-c", "mount -t tmpfs -o ro tmpfs /mnt"]).status === 0;

describe.skipIf(!canUnshare)("start errors on a read-only file system, in words", () => {
  const onReadOnly = (mountPoint: string, prepare: string) => [
    "unshare",
    "-m",
    "sh",
    "-c",
    `mount -t tmpfs tmpfs "$0" && ${prepare} && mount -o remount,ro "$0" && exec "$@"`,
    mountPoint,
  ];

  it(
    "an existing data directory on it: not writable (EROFS)",
    async () => {
      const mountPoint = mkdtempSync(path.join(root, "ro-"));
      const dataDir = path.join(mountPoint, "data");
      // A data directory as a first start leaves it, with its key file, then made read-only.
      const prepare = `mkdir "$0/data" && echo ${Buffer.alloc(32, 1).toString("base64")} > "$0/data/encryption.key"`;
      for (const command of [["serve"], ["migrate"]]) {
        const cli = keyhaven(command, { KEYHAVEN_DATA_DIR: dataDir, PORT: "0" }, onReadOnly(mountPoint, prepare));
        expect(await withinSeconds(cli.exited, 60), cli.stderr()).toEqual({ code: 1, signal: null });
        expect(cli.stderr()).toBe(`keyhaven: KEYHAVEN_DATA_DIR ${dataDir} is not writable (EROFS): read-only file system\n`);
      }
    },
    TIMEOUT,
  );

  it(
    "a data directory to create on it: cannot create, read-only file system",
    async () => {
      const mountPoint = mkdtempSync(path.join(root, "ro-"));
      const dataDir = path.join(mountPoint, "new", "data");
      const cli = keyhaven(["serve"], { KEYHAVEN_DATA_DIR: dataDir, PORT: "0" }, onReadOnly(mountPoint, "true"));
      expect(await withinSeconds(cli.exited, 60), cli.stderr()).toEqual({ code: 1, signal: null });
      expect(cli.stderr()).toBe(
        `keyhaven: cannot create KEYHAVEN_DATA_DIR ${dataDir}: cannot create ${path.join(mountPoint, "new")}: read-only file system\n`,
      );
    },
    TIMEOUT,
  );
});
