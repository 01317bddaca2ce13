import { readdirSync, readFileSync } from "node:fs";
import net from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { type Cli, killAll, processGroupAlive, spawnProcess, started, withinSeconds } from "./cli-process.js";
import { productionCommand } from "./deploy-files.js";

/**
 * SIGTERM sent to exactly the process that the production command of docs/operations.md (and `npm start`) starts, as a
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
  const sent = Date.now();
  process.kill(cli.child.pid!, "SIGTERM");
  await expectStopped(cli, url, sent);
}

async function expectStopped(cli: Cli, url: string, sent: number): Promise<void> {
  const pid = cli.child.pid!;
  expect(await withinSeconds(cli.exited, 30)).toEqual({ code: 0, signal: null });
  await expect(fetch(`${url}/v1/liveness`)).rejects.toThrow();
  await expect.poll(() => processGroupAlive(pid), { timeout: 10_000 }).toBe(false);
  console.log(`${cli.child.spawnargs.join(" ")}: exited ${Date.now() - sent} ms after SIGTERM, no process left`);
}

describe.runIf(process.platform === "linux")("stopping the production command with SIGTERM", () => {
  it(
    "the documented production command is the server itself, which on SIGTERM finishes what is in flight, ends its connections, closes its port and exits 0",
    async () => {
      const [command, ...args] = productionCommand();
      expect(command).toBe("node");
      const cli = spawnProcess(command!, args, env, { detached: true });
      const url = await listening(cli);
      // No npm, shell or tsx CLI in between: the process that gets the signal is the node that listens, and it runs
      // the compiled dist/ alone (no esbuild service compiling TypeScript beside it, as tsx's loader ran).
      const commandName = (pid: number) => readFileSync(`/proc/${pid}/comm`, "utf8").trim();
      const group = processGroup(cli.child.pid!);
      // Node 26 names its main thread, and so the process's comm, "node-MainThread".
      expect(commandName(cli.child.pid!)).toMatch(/^node(-MainThread)?$/);
      expect(group.filter((pid) => pid !== cli.child.pid).map(commandName)).toEqual([]);

      // A kept-alive connection with a request in flight at SIGTERM, and another request queued behind it: the
      // first is answered with `Connection: close`, so that a client (a load balancer) neither holds the
      // connection idle, which would keep the process from exiting, nor sends more on it. The queued one is left
      // unanswered, which tells an HTTP client it was not processed and may go elsewhere (not a 503).
      const { port, hostname } = new URL(url);
      const socket = net.connect(Number(port), hostname);
      await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
      let answers = "";
      socket.setEncoding("utf8").on("data", (d: string) => (answers += d));
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
      const body = JSON.stringify({ key: "sk_not_a_key_of_this_store" });
      socket.write(
        `POST /v1/keys.verifyKey HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`,
      );
      await expect
        .poll(() =>
          fetch(`${url}/v1/liveness`).then(
            () => "open",
            () => "closed",
          ),
        )
        .toBe("open");
      process.kill(cli.child.pid!, "SIGTERM");
      await expect
        .poll(
          () =>
            fetch(`${url}/v1/liveness`).then(
              () => "open",
              () => "closed",
            ),
          { timeout: 10_000 },
        )
        .toBe("closed");
      socket.write(`${body.slice(5)}GET /v1/liveness HTTP/1.1\r\nHost: ${hostname}\r\n\r\n`);
      await withinSeconds(closed, 10);
      expect(answers.match(/HTTP\/1\.1 \d{3} [^\r\n]*/g), answers).toEqual(["HTTP/1.1 200 OK"]);
      expect(answers).toContain('"code":"NOT_FOUND"');
      expect(answers.slice(0, answers.indexOf("\r\n\r\n"))).toMatch(/^connection: close\r?$/im);

      await expectStopped(cli, url, Date.now());
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
