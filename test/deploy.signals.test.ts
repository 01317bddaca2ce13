import { readdirSync, readFileSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { type Cli, killAll, processGroupAlive, spawnProcess, started, withinSeconds } from "./cli-process.js";
import { productionCommand } from "./deploy-files.js";

/**
 * SIGTERM sent to exactly the process that the README's production command (and `npm start`) starts, as a
 * supervisor or `docker stop` would send it: the server must get it, close its port and leave no process behind.
 * Each command runs in a process group of its own, so that a server orphaned by a dying wrapper is still found.
 */
const TIMEOUT = 240_000;
const env = { PORT: "0", HOST: "127.0.0.1", KEYHAVEN_DATA_DIR: "memory://", LOG_LEVEL: "warn" };

afterAll(() => killAll());

/** The pids in process group `pgid`, from /proc (field 5 of /proc/<pid>/stat). */
function processGroup(pgid: number): number[] {
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        // The command name (field 2) is in parentheses and may hold spaces: count fields after its ")".
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) === pgid;
      } catch {
        return false; // exited meanwhile
      }
    })
    .map(Number);
}

async function listening(cli: Cli): Promise<string> {
  const url = (await started(cli, 150)).match(/keyhaven is listening on (http:\/\/\S+)/)?.[1];
  expect(url).toBeDefined();
  expect((await fetch(`${url}/v1/liveness`)).status).toBe(200);
  return url!;
}

async function expectStopsOnSigterm(cli: Cli, url: string): Promise<void> {
  const pid = cli.child.pid!;
  const sent = Date.now();
  process.kill(pid, "SIGTERM");
  expect(await withinSeconds(cli.exited, 30)).toEqual({ code: 0, signal: null });
  await expect(fetch(`${url}/v1/liveness`)).rejects.toThrow();
  await expect.poll(() => processGroupAlive(pid), { timeout: 10_000 }).toBe(false);
  console.log(`${cli.child.spawnargs.join(" ")}: exited ${Date.now() - sent} ms after SIGTERM, no process left`);
}

describe.runIf(process.platform === "linux")("stopping the production command with SIGTERM", () => {
  it(
    "the README's command is the server itself: one process, which closes its port and exits 0 on SIGTERM",
    async () => {
      const [command, ...args] = productionCommand();
      expect(command).toBe("node");
      const cli = spawnProcess(command!, args, env, { detached: true });
      const url = await listening(cli);
      // No npm, shell or tsx CLI in between: the process that gets the signal is the one that listens.
      expect(processGroup(cli.child.pid!)).toEqual([cli.child.pid]);
      await expectStopsOnSigterm(cli, url);
    },
    TIMEOUT,
  );

  it(
    "`npm start` forwards SIGTERM to the server, which exits, and leaves no process behind",
    async () => {
      const cli = spawnProcess("npm", ["start", "--silent"], env, { detached: true });
      const url = await listening(cli);
      await expectStopsOnSigterm(cli, url);
    },
    TIMEOUT,
  );
});
