import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { errorFields } from "../src/cli/http.js";
import type { Journal } from "../src/cli/import/import.journal.js";
import { CSV_COLUMNS } from "../src/cli/import/import.parse.js";
import type { Progress } from "../src/cli/import/import.progress.js";
import { explainFailure, ImportRunner } from "../src/cli/import/import.runner.js";
import type { Batch, ValidKey } from "../src/cli/import/import.validate.js";
import { type Cli, keyhaven, killAll, PROJECT_ROOT, spawnProcess, started, withinSeconds } from "./cli-process.js";
import { notPrivateUnder } from "./file-modes.js";
import { freePort, waitFor } from "./wait.js";

// A child that opens a store runs initdb (3-5 s of CPU): on a loaded 2-core machine that is 20-40 s of wall time.
const TIMEOUT = 120_000;

/** Every regular file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name));
}

function filesContaining(dir: string, secret: string): string[] {
  const needle = Buffer.from(secret, "utf8");
  return filesUnder(dir).filter((file) => readFileSync(file).includes(needle));
}

const ROOT_KEY_PATTERN = /\bkhroot_[1-9A-HJ-NP-Za-km-z]{20,}\b/g;

describe("keyhaven serve with the embedded store", () => {
  let dataDir: string;
  let port: number;
  let base: string;
  let env: Record<string, string>;
  let server: Cli;
  let banner: string;
  let rootKey: string;
  let apiCreatedDuringShutdown: string | undefined;

  beforeAll(async () => {
    // Not created beforehand, as `./.keyhaven` on a fresh clone: keyhaven must make it.
    dataDir = path.join(mkdtempSync(path.join(os.tmpdir(), "keyhaven-cli-")), "fresh", ".keyhaven");
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
    env = { PORT: String(port), HOST: "127.0.0.1", KEYHAVEN_DATA_DIR: dataDir, LOG_LEVEL: "warn" };
    server = keyhaven(["serve"], env);
    banner = await started(server);
    rootKey = banner.match(ROOT_KEY_PATTERN)?.[0] ?? "";
  }, TIMEOUT);

  afterAll(() => {
    killAll();
    rmSync(path.dirname(path.dirname(dataDir)), { recursive: true, force: true });
  });

  const createApi = (key: string, name: string) =>
    fetch(`${base}/v1/apis.createApi`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ name }),
    });

  // The tests below run in order against one data directory: first start, shutdown, restart.

  it("prints a generated root key and the URL it listens on, once", () => {
    expect(rootKey).not.toBe("");
    expect(banner).toContain(`keyhaven is listening on http://127.0.0.1:${port}`);
    expect(banner).toContain("A root key was generated for the default workspace");
    expect(banner).toContain(`curl -X POST http://127.0.0.1:${port}/v1/apis.createApi -H "Authorization: Bearer $ROOT_KEY"`);
    // Exactly once in everything printed: container logs keep stdout.
    expect(banner.match(ROOT_KEY_PATTERN)).toEqual([rootKey]);
    expect(banner.split(rootKey)).toHaveLength(2);
    expect(banner).toContain(path.resolve(dataDir));
    expect(server.stderr()).not.toContain(rootKey);
  });

  it("answers GET /v1/liveness with 200", async () => {
    const res = await fetch(`${base}/v1/liveness`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { status: string }).status).toBeTypeOf("string");
  });

  it("accepts the printed root key: it creates an API", async () => {
    const res = await createApi(rootKey, "from-the-banner");
    const body = (await res.json()) as { apiId: string; name: string };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body).toEqual({ apiId: expect.stringMatching(/^api_/), name: "from-the-banner" });
  });

  it("refuses a key that was not printed", async () => {
    const res = await createApi("khroot_notthekeythatwasprinted", "nope");
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("UNAUTHORIZED");
  });

  it("keeps the generated encryption key in the data directory with mode 0600", () => {
    const file = path.join(dataDir, "encryption.key");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(Buffer.from(readFileSync(file, "utf8").trim(), "base64")).toHaveLength(32);
  });

  it("writes the root key's plaintext to no file under the data directory", () => {
    expect(filesUnder(dataDir).length).toBeGreaterThan(1);
    expect(filesContaining(dataDir, rootKey)).toEqual([]);
  });

  it(
    "on SIGTERM finishes the request in flight with 200, refuses new connections, and exits 0",
    async () => {
      const body = JSON.stringify({ name: "in-flight-at-shutdown" });
      const socket = net.connect(port, "127.0.0.1");
      await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
      let response = "";
      socket.setEncoding("utf8").on("data", (d: string) => (response += d));
      const ended = new Promise<void>((resolve, reject) => socket.once("end", resolve).once("error", reject));
      // Headers and half of the body: the server has started this request but cannot answer it yet. Its interim
      // "100 Continue" (Expect: 100-continue) is the sign that it has read the headers: the request is in flight.
      socket.write(
        `POST /v1/apis.createApi HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${rootKey}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n` +
          body.slice(0, 10),
      );
      await waitFor("the request started", () => response.startsWith("HTTP/1.1 100 Continue\r\n\r\n"));

      server.child.kill("SIGTERM");
      // The server has taken the signal once it refuses new connections.
      await waitFor("refusing new connections", () =>
        fetch(`${base}/v1/liveness`).then(
          () => false,
          () => true,
        ),
      );
      expect(server.child.exitCode, "exited with a request in flight").toBeNull();
      await expect(fetch(`${base}/v1/liveness`)).rejects.toThrow();

      socket.end(body.slice(10));
      await withinSeconds(ended, 5);
      const [head, payload] = response.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, "").split("\r\n\r\n");
      expect(head, response).toMatch(/^HTTP\/1\.1 200 /);
      const created = JSON.parse(payload!) as { apiId: string; name: string };
      expect(created.name).toBe("in-flight-at-shutdown");
      apiCreatedDuringShutdown = created.apiId;

      expect(await withinSeconds(server.exited, 5)).toEqual({ code: 0, signal: null });
    },
    TIMEOUT,
  );

  it("has still written the root key's plaintext to no file once stopped", () => {
    expect(server.child.exitCode).toBe(0);
    expect(filesContaining(dataDir, rootKey)).toEqual([]);
  });

  it(
    "prints no new root key on restart with the same data directory, and the earlier key still works",
    async () => {
      const restarted = keyhaven(["serve"], env);
      const secondBanner = await started(restarted);

      expect(secondBanner.match(ROOT_KEY_PATTERN)).toBeNull();
      expect(secondBanner).not.toContain("A root key was generated");
      expect(secondBanner).not.toContain("(created now)");
      expect(secondBanner).toContain(`keyhaven is listening on http://127.0.0.1:${port}`);
      expect((await createApi(rootKey, "after-restart")).status).toBe(200);

      // The API created by the request that was in flight at shutdown was kept.
      const res = await fetch(`${base}/v1/apis.getApi?apiId=${apiCreatedDuringShutdown}`, {
        headers: { authorization: `Bearer ${rootKey}` },
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { name: string }).name).toBe("in-flight-at-shutdown");

      restarted.child.kill("SIGTERM");
      expect(await withinSeconds(restarted.exited, 5)).toEqual({ code: 0, signal: null });
    },
    TIMEOUT,
  );
});

/** The packages under node_modules that ran `keyhaven <args>` imported, and the project's own files, from the root. */
async function modulesLoadedBy(args: string[], env: Record<string, string> = {}): Promise<{ packages: Set<string>; files: string[] }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-cli-modules-"));
  try {
    const record = path.join(dir, "modules.txt");
    const cli = spawnProcess(process.execPath, ["--import", "./test/fixtures/record-modules.mjs", "bin/keyhaven.mjs", ...args], {
      RECORD_MODULES_TO: record,
      ...env,
    });
    expect(await withinSeconds(cli.exited, 40), cli.stderr()).toEqual({ code: 0, signal: null });
    const urls = readFileSync(record, "utf8")
      .split("\n")
      .filter((u) => u.startsWith("file:"));
    const packages = new Set(urls.flatMap((u) => u.match(/\/node_modules\/((?:@[^/]+\/)?[^/]+)\/(?!.*\/node_modules\/)/)?.[1] ?? []));
    const root = pathToFileURL(PROJECT_ROOT).href;
    const files = urls.filter((u) => u.startsWith(root) && !u.includes("/node_modules/")).map((u) => u.slice(root.length));
    return { packages, files };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What serves HTTP or opens a store, and the TypeScript loader that production no longer runs. */
const SERVER_AND_STORE = ["fastify", "@fastify/swagger", "@electric-sql/pglite", "postgres", "drizzle-orm", "ioredis", "pino", "tsx"];

describe("what the keyhaven command loads", () => {
  afterEach(killAll);

  it(
    "`keyhaven migrate` runs the compiled dist/ and loads the store (the recorder sees what it must)",
    async () => {
      const { packages, files } = await modulesLoadedBy(["migrate"], { KEYHAVEN_DATA_DIR: "memory://", LOG_LEVEL: "warn" });
      expect(files).toContain("dist/cli/main.js");
      expect(files.filter((f) => f.startsWith("src/"))).toEqual([]);
      expect(packages).toContain("@electric-sql/pglite");
      expect(packages).toContain("drizzle-orm");
      expect(packages).not.toContain("tsx");
    },
    TIMEOUT,
  );

  it.each(["help", "import --help", "admin --help", "audit --help"])(
    "`keyhaven %s` loads neither the server nor the store",
    async (argline) => {
      const { packages, files } = await modulesLoadedBy(argline.split(" "));
      expect(files).toContain("dist/cli/main.js");
      expect(SERVER_AND_STORE.filter((name) => packages.has(name))).toEqual([]);
      expect(files.filter((f) => /^dist\/(main|app|db\/client)\.js$/.test(f))).toEqual([]);
    },
    TIMEOUT,
  );
});

describe("bin/keyhaven.mjs", () => {
  it(
    "without a dist/ beside it, says in one line to run `npm run build`, and exits 1",
    async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-cli-nodist-"));
      try {
        mkdirSync(path.join(dir, "bin"));
        copyFileSync(path.join(PROJECT_ROOT, "bin/keyhaven.mjs"), path.join(dir, "bin/keyhaven.mjs"));
        const cli = spawnProcess(process.execPath, [path.join(dir, "bin/keyhaven.mjs"), "help"]);
        expect(await withinSeconds(cli.exited, 20)).toEqual({ code: 1, signal: null });
        expect(cli.stderr()).toBe("keyhaven: dist/cli/main.js is missing: run `npm run build` first (`npm ci` runs it).\n");
        expect(cli.stdout()).toBe("");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    TIMEOUT,
  );
});

describe("the keyhaven command line", () => {
  afterEach(killAll);

  it(
    "`keyhaven migrate` on a fresh store prints its generated root key once; `serve` then prints none and the key works",
    async () => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-cli-migrate-"));
      try {
        const port = await freePort();
        const env = { PORT: String(port), HOST: "127.0.0.1", KEYHAVEN_DATA_DIR: dataDir, LOG_LEVEL: "warn" };
        const migrate = keyhaven(["migrate"], env);
        expect(await withinSeconds(migrate.exited, 100), migrate.stderr()).toEqual({ code: 0, signal: null });
        // Started under this process's umask (022): every file it made, the migrations' tables too, is its user's alone.
        expect(process.umask() & 0o077).not.toBe(0o077);
        expect(notPrivateUnder(dataDir)).toEqual([]);
        const printed = (migrate.stdout() + migrate.stderr()).match(ROOT_KEY_PATTERN) ?? [];
        expect(printed).toHaveLength(1);
        const rootKey = printed[0]!;
        expect(migrate.stdout().split(rootKey)).toHaveLength(2);

        const server = keyhaven(["serve"], env);
        const banner = await started(server);
        expect(banner.match(ROOT_KEY_PATTERN)).toBeNull();
        expect(banner).toContain("printed once when the store was created, by `keyhaven migrate`");
        const res = await fetch(`http://127.0.0.1:${port}/v1/apis.createApi`, {
          method: "POST",
          headers: { authorization: `Bearer ${rootKey}`, "content-type": "application/json" },
          body: JSON.stringify({ name: "after-migrate" }),
        });
        expect(res.status).toBe(200);
        server.child.kill("SIGTERM");
        expect(await withinSeconds(server.exited, 10)).toEqual({ code: 0, signal: null });
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
    // Two processes one after the other, on a machine that may be loaded.
    3 * TIMEOUT,
  );

  it.each(["help", "--help", "-h", "serve --help"])(
    "prints the usage and exits 0 for `keyhaven %s`",
    async (argline) => {
      const cli = keyhaven(argline.split(" "));
      expect(await withinSeconds(cli.exited, 20)).toEqual({ code: 0, signal: null });
      expect(cli.stdout()).toContain("Usage: keyhaven <command> [options]");
      for (const command of ["serve", "migrate", "import", "admin", "help"]) {
        expect(cli.stdout()).toMatch(new RegExp(`^  ${command} `, "m"));
      }
      expect(cli.stderr()).toBe("");
    },
    TIMEOUT,
  );

  it(
    "the usage names every admin command `keyhaven admin --help` describes, and no outdated import text",
    async () => {
      const usage = keyhaven(["help"]);
      const admin = keyhaven(["admin", "--help"]);
      expect(await withinSeconds(usage.exited, 20)).toEqual({ code: 0, signal: null });
      expect(await withinSeconds(admin.exited, 20)).toEqual({ code: 0, signal: null });
      const commands = [...admin.stdout().matchAll(/^ {2}(workspace|root-key|migration) ([a-z]+)/gm)].map((m) => `${m[1]} ${m[2]}`);
      expect(new Set(commands)).toEqual(
        new Set(
          ["workspace create", "workspace list", "workspace disable", "workspace enable"].concat([
            "root-key create",
            "root-key list",
            "root-key delete",
            "migration retry",
          ]),
        ),
      );
      for (const command of commands) expect(usage.stdout()).toContain(command);
      expect(usage.stdout()).not.toContain("issue 36");
    },
    TIMEOUT,
  );

  it(
    "exits 2 with the usage on stderr for an unknown command",
    async () => {
      const cli = keyhaven(["frobnicate"]);
      expect(await withinSeconds(cli.exited, 20)).toEqual({ code: 2, signal: null });
      expect(cli.stderr()).toContain("unknown command: frobnicate");
      expect(cli.stderr()).toContain("Usage: keyhaven <command> [options]");
      expect(cli.stdout()).toBe("");
    },
    TIMEOUT,
  );

  it(
    "exits 2 naming an unknown option instead of ignoring it",
    async () => {
      const cli = keyhaven(["serve", "--port", "3000"]);
      expect(await withinSeconds(cli.exited, 20)).toEqual({ code: 2, signal: null });
      expect(cli.stderr()).toMatch(/^keyhaven: Unknown option '--port'/);
      expect(cli.stdout()).toBe("");
    },
    TIMEOUT,
  );

  it(
    "exits 1 with one line naming the cause when the port is taken",
    async () => {
      const blocker = net.createServer();
      await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
      const { port } = blocker.address() as net.AddressInfo;
      try {
        const cli = keyhaven(["serve"], { PORT: String(port), HOST: "127.0.0.1", KEYHAVEN_DATA_DIR: "memory://", LOG_LEVEL: "silent" });
        expect(await withinSeconds(cli.exited, 100)).toEqual({ code: 1, signal: null });
        expect(cli.stderr()).toMatch(/^keyhaven: .*EADDRINUSE/);
        expect(cli.stderr()).not.toMatch(/^\s+at /m);
      } finally {
        await new Promise((resolve) => blocker.close(resolve));
      }
    },
    TIMEOUT,
  );

  it(
    "exits 1 on a bad environment, naming the variable, without a stack trace",
    async () => {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-cli-bad-env-"));
      try {
        const cli = keyhaven(["serve"], { PORT: "abc", KEYHAVEN_DATA_DIR: dataDir });
        expect(await withinSeconds(cli.exited, 20)).toEqual({ code: 1, signal: null });
        expect(cli.stderr()).toMatch(/^keyhaven: invalid environment:\n\s+PORT: /);
        expect(cli.stderr()).not.toMatch(/^\s+at /m);
        expect(cli.stderr()).not.toContain("ConfigError");
        expect(cli.stdout()).toBe("");
        expect(readdirSync(dataDir)).toEqual([]);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
    TIMEOUT,
  );
});

describe("keyhaven import reads the server's refusals from the envelope's fields, not its wording", () => {
  type Sent = { hash: { value: string } }[];
  const keyOn = (line: number): ValidKey => ({
    line,
    key: { apiId: "api_x", hash: { value: `hash-${line}`, variant: "sha256_base64" }, roles: [], permissions: [] } as never,
  });

  /** A stand-in for migrations.createKeys: answers each request with the next of `answers`, and records the bodies. */
  async function fakeServer(answers: { status: number; body: unknown }[]) {
    const requests: Sent[] = [];
    const server = http.createServer((req, res) => {
      let text = "";
      req.setEncoding("utf8").on("data", (d: string) => (text += d));
      req.on("end", () => {
        requests.push(JSON.parse(text) as Sent);
        const answer = answers.shift() ?? { status: 500, body: { error: { code: "INTERNAL_SERVER_ERROR", message: "no answer left" } } };
        res.writeHead(answer.status, { "content-type": "application/json" }).end(JSON.stringify(answer.body));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    return { url, requests, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
  }

  async function runOne(url: string, keys: ValidKey[], skipExisting: boolean) {
    const options = {
      baseUrl: url,
      rootKey: "root",
      attempts: 1,
      timeoutMs: 10_000,
      concurrency: 1,
      continueOnError: true,
      skipExisting,
      backoffMs: 1,
    };
    const journal = { states: new Map(), record: () => {} } as unknown as Journal;
    const progress = { start: () => {}, advance: () => {}, note: () => {}, finish: () => {} } as unknown as Progress;
    const batch: Batch = { index: 0, keys, body: JSON.stringify(keys.map((k) => k.key)), digest: "d" };
    async function* batches() {
      yield batch;
    }
    return new ImportRunner(options, journal, progress).run(batches(), keys.length, 0);
  }

  it("sets a key the server reports as existing aside (--skip-existing), whatever the 409's message says", async () => {
    const reworded = { code: "CONFLICT", message: "Schlüssel Nummer zwei gibt es schon", reason: "KEY_EXISTS", keyIndex: 1 };
    const server = await fakeServer([
      { status: 409, body: { error: reworded } },
      { status: 200, body: { keyIds: ["key_a", "key_c"] } },
    ]);
    try {
      const outcome = await runOne(server.url, [keyOn(3), keyOn(4), keyOn(5)], true);
      expect(outcome).toMatchObject({ imported: 2, alreadyPresent: [4], failures: [], failedKeys: 0 });
      expect(server.requests[1]!.map((k) => k.hash.value)).toEqual(["hash-3", "hash-5"]);
    } finally {
      await server.close();
    }
  });

  it("takes a 409 without reason KEY_EXISTS as a refusal, even worded as v1's 'already exists'", async () => {
    const message = "the key at index 1 already exists; no key of this request was created";
    const server = await fakeServer([{ status: 409, body: { error: { code: "CONFLICT", message } } }]);
    try {
      const outcome = await runOne(server.url, [keyOn(3), keyOn(4)], true);
      expect(outcome).toMatchObject({ imported: 0, alreadyPresent: [], failedKeys: 2 });
      expect(server.requests).toHaveLength(1);
    } finally {
      await server.close();
    }
  });

  it("names the lines a refusal is about from keyIndex, sameAsKeyIndex and the missing names", () => {
    const keys = [keyOn(10), keyOn(11), { ...keyOn(12), key: { ...keyOn(12).key, roles: ["gone"] } }, keyOn(13)];
    // Messages reworded: the lines still come from the fields.
    expect(explainFailure(0, keys, 409, "CONFLICT", "already there", { reason: "KEY_EXISTS", keyIndex: 3 }).lines).toEqual([13]);
    expect(
      explainFailure(0, keys, 409, "CONFLICT", "twice", { reason: "DUPLICATE_IN_REQUEST", keyIndex: 3, sameAsKeyIndex: 1 }).lines,
    ).toEqual([11, 13]);
    expect(explainFailure(0, keys, 412, "PRECONDITION_FAILED", "no such roles", { missingRoles: ["gone"] }).lines).toEqual([12]);
    expect(explainFailure(0, keys, 400, "BAD_REQUEST", "bad", { keyIndex: 2 }).lines).toEqual([12]);
    expect(explainFailure(0, keys, 500, "INTERNAL_SERVER_ERROR", "the key at index 2 broke", {}).lines).toEqual([10, 11, 12, 13]);
    // Today's wording is still shown with lines in place of indexes, and a validation path loses its index.
    expect(
      explainFailure(0, keys, 409, "CONFLICT", "the key at index 3 is the same key as the one at index 1", {
        reason: "DUPLICATE_IN_REQUEST",
        keyIndex: 3,
        sameAsKeyIndex: 1,
      }).message,
    ).toBe("the key on line 13 is the same key as the key on line 11");
    expect(explainFailure(0, keys, 400, "BAD_REQUEST", "2.remaining: too small", { keyIndex: 2 }).message).toBe("remaining: too small");
  });

  it("keeps only the envelope fields that have their documented type", () => {
    expect(errorFields({ code: "CONFLICT", keyIndex: 2, reason: "KEY_EXISTS", sameAsKeyIndex: 0, missingRoles: ["a"] })).toEqual({
      keyIndex: 2,
      reason: "KEY_EXISTS",
      sameAsKeyIndex: 0,
      missingRoles: ["a"],
    });
    expect(errorFields({ keyIndex: "2", reason: "SOMETHING", sameAsKeyIndex: -1, missingPermissions: [1] })).toEqual({});
    expect(errorFields(undefined)).toEqual({});
  });
});

describe("keyhaven import's CSV columns", () => {
  it("are derived from the server's item schema: every field of a key, objects as dotted columns", () => {
    // The list as it was written by hand; a field added to migrations.schemas.ts must show up here too.
    expect(CSV_COLUMNS).toEqual({
      apiId: "string",
      prefix: "string",
      name: "string",
      plaintext: "string",
      "hash.value": "string",
      "hash.variant": "string",
      start: "string",
      ownerId: "string",
      externalId: "string",
      meta: "json",
      roles: "json",
      permissions: "json",
      expires: "integer",
      remaining: "integer",
      "refill.interval": "string",
      "refill.amount": "integer",
      "refill.refillDay": "integer",
      "ratelimit.async": "boolean",
      "ratelimit.type": "string",
      "ratelimit.limit": "integer",
      "ratelimit.refillRate": "integer",
      "ratelimit.refillInterval": "integer",
      enabled: "boolean",
      environment: "string",
    });
  });
});
