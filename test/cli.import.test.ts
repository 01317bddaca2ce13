import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { openPglite, rowsOf } from "../src/storage/client.js";
import { type Cli, keyhaven, killAll, PROJECT_ROOT, until } from "./cli-process.js";
import { freePort } from "./wait.js";

// Real processes end to end: a `keyhaven serve` child and `keyhaven import` / `keyhaven admin` children, as a user
// runs them. The store is a PGlite data directory (kept across server restarts), or with TEST_DATABASE_URL a
// PostgreSQL database of this file's own.

const ROOT_KEY = `root-${randomBytes(12).toString("hex")}`;
const ADMIN_TOKEN = `admin-${randomBytes(12).toString("hex")}`;
const TIMEOUT = 60_000;

const hashOf = (key: string) => createHash("sha256").update(key).digest("base64");
const hashItem = (key: string, extra: Record<string, unknown> = {}) => ({
  hash: { value: hashOf(key), variant: "sha256_base64" },
  ...extra,
});
const jsonl = (items: unknown[]) => `${items.map((i) => JSON.stringify(i)).join("\n")}\n`;

/** The keys done so far, from the last plain progress line ("12,300/25,000 keys (49%), …"). */
function progressOf(stderr: string): number {
  const all = [...stderr.matchAll(/^([\d,]+)\/[\d,]+ keys/gm)];
  return all.length === 0 ? 0 : Number(all[all.length - 1]![1]!.replaceAll(",", ""));
}

function summaryField(stdout: string, field: string): number {
  const m = new RegExp(`^${field}:\\s+([\\d,]+)`, "m").exec(stdout);
  if (!m) throw new Error(`no "${field}" in the summary:\n${stdout}`);
  return Number(m[1]!.replaceAll(",", ""));
}

describe("keyhaven import and keyhaven admin against a running server", () => {
  let workDir: string;
  let dataDir: string;
  let port: number;
  let url: string;
  let serverEnv: Record<string, string>;
  let server: Cli;
  let databaseUrl: string | undefined;
  let pg: postgres.Sql | undefined;
  let dropDatabase: (() => Promise<void>) | undefined;

  async function startServer() {
    server = keyhaven(["serve"], serverEnv);
    await until("listening", () => server.stdout().includes("operator routes:"), server);
  }

  async function stopServer() {
    server.child.kill("SIGTERM");
    expect(await server.exited).toEqual({ code: 0, signal: null });
  }

  async function call(method: string, body: unknown, token = ROOT_KEY) {
    const res = await fetch(`${url}/v1/${method}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  }

  async function createApi(name: string): Promise<string> {
    const res = await call("apis.createApi", { name });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.apiId;
  }

  /** Live keys of the API, counted in the database when it is reachable from here, else through listKeys' exact total. */
  async function keysIn(apiId: string): Promise<number> {
    if (pg) {
      const [row] = await pg`select count(*)::int as n from keys where api_id = ${apiId} and deleted_at_m is null`;
      return row!.n as number;
    }
    const res = await fetch(`${url}/v1/apis.listKeys?apiId=${apiId}&limit=1`, { headers: { authorization: `Bearer ${ROOT_KEY}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { total: number }).total;
  }

  function importer(file: string, apiId: string, extra: string[] = [], env: Record<string, string> = {}) {
    return keyhaven(["import", file, "--api", apiId, "--url", url, ...extra], { KEYHAVEN_ROOT_KEY: ROOT_KEY, ...env });
  }

  function write(name: string, content: string): string {
    const file = path.join(workDir, name);
    writeFileSync(file, content);
    return file;
  }

  beforeAll(async () => {
    workDir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-import-"));
    dataDir = path.join(workDir, "data");
    port = await freePort();
    url = `http://127.0.0.1:${port}`;
    serverEnv = {
      PORT: String(port),
      HOST: "127.0.0.1",
      KEYHAVEN_DATA_DIR: dataDir,
      KEYHAVEN_ROOT_KEY: ROOT_KEY,
      KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN,
      LOG_LEVEL: "warn",
    };
    const templateUrl = inject("templateDatabaseUrl");
    if (templateUrl) {
      const template = new URL(templateUrl).pathname.slice(1);
      const name = `keyhaven_cli_import_${process.pid}_${Date.now()}`;
      const admin = postgres(templateUrl.replace(`/${template}`, "/postgres"), { max: 1, onnotice: () => {} });
      await admin.unsafe(`create database ${name} template ${template}`);
      databaseUrl = templateUrl.replace(`/${template}`, `/${name}`);
      dropDatabase = async () => {
        await pg?.end();
        await admin.unsafe(`drop database if exists ${name} with (force)`);
        await admin.end();
      };
      pg = postgres(databaseUrl, { max: 1, onnotice: () => {} });
      serverEnv.DATABASE_URL = databaseUrl;
      serverEnv.KEYHAVEN_ENCRYPTION_KEY = randomBytes(32).toString("base64");
      if (process.env.TEST_REDIS_URL) serverEnv.REDIS_URL = process.env.TEST_REDIS_URL;
    }
    await startServer();
    expect((await call("permissions.createRole", { name: "admin" })).status).toBe(200);
  }, TIMEOUT);

  afterAll(async () => {
    killAll();
    await dropDatabase?.();
    rmSync(workDir, { recursive: true, force: true });
  });

  describe("usage", () => {
    it(
      "`npx keyhaven --help` lists every command, and `import --help` / `admin --help` every option",
      async () => {
        const help = spawn("npx", ["keyhaven", "--help"], { cwd: PROJECT_ROOT, stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        help.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
        expect(await new Promise((resolve) => help.on("exit", resolve))).toBe(0);
        for (const command of ["serve", "migrate", "import", "admin", "help"]) expect(out).toMatch(new RegExp(`^  ${command} `, "m"));

        const importHelp = keyhaven(["import", "--help"]);
        expect(await importHelp.exited).toEqual({ code: 0, signal: null });
        for (const option of [
          "--api",
          "--root-key",
          "--url",
          "--format",
          "--dry-run",
          "--continue-on-error",
          "--journal",
          "--batch-size",
          "--concurrency",
          "--attempts",
          "--timeout",
          "--progress-every",
          "--quiet",
          "--help",
          "KEYHAVEN_ROOT_KEY",
          "Exit codes",
        ]) {
          expect(importHelp.stdout()).toContain(option);
        }
        const adminHelp = keyhaven(["admin", "--help"]);
        expect(await adminHelp.exited).toEqual({ code: 0, signal: null });
        for (const text of [
          "workspace create",
          "workspace disable",
          "workspace enable",
          "root-key create",
          "root-key delete",
          "migration retry",
          "--admin-token",
          "--url",
          "--json",
          "--permission",
          "--workspace",
          "--name",
          "KEYHAVEN_ADMIN_TOKEN",
          "Exit codes",
        ]) {
          expect(adminHelp.stdout()).toContain(text);
        }
      },
      TIMEOUT,
    );

    it(
      "exits 2 without --api, without a root key, on a bad option value or an unknown option",
      async () => {
        const file = write("usage.jsonl", jsonl([hashItem("usage-1")]));
        const cases: [string[], Record<string, string>, RegExp][] = [
          [["import", file, "--url", url], { KEYHAVEN_ROOT_KEY: ROOT_KEY }, /--api <apiId> is required/],
          [["import", file, "--api", "api_x", "--url", url], {}, /a root key is required: set KEYHAVEN_ROOT_KEY or pass --root-key/],
          [
            ["import", file, "--api", "api_x", "--batch-size", "101"],
            { KEYHAVEN_ROOT_KEY: ROOT_KEY },
            /--batch-size must be an integer from 1 to 100/,
          ],
          [["import", file, "--api", "api_x", "--bogus"], { KEYHAVEN_ROOT_KEY: ROOT_KEY }, /Unknown option '--bogus'/],
          [["import", "--api", "api_x"], { KEYHAVEN_ROOT_KEY: ROOT_KEY }, /FILE is required/],
          [["import", path.join(workDir, "missing.jsonl"), "--api", "api_x"], { KEYHAVEN_ROOT_KEY: ROOT_KEY }, /cannot read .*ENOENT/],
        ];
        for (const [args, env, message] of cases) {
          const cli = keyhaven(args, env);
          expect(await cli.exited, args.join(" ")).toEqual({ code: 2, signal: null });
          expect(cli.stderr()).toMatch(message);
          expect(cli.stderr()).not.toContain(ROOT_KEY);
        }
        expect(existsSync(`${file}.keyhaven-journal`)).toBe(false);
      },
      TIMEOUT,
    );
  });

  describe("validation before anything is sent", () => {
    it(
      "rejects a file with bad lines with exit 2, reports every bad line by number, and writes nothing",
      async () => {
        const apiId = await createApi("bad-lines");
        const otherApi = await createApi("other-api");
        const file = write(
          "bad.jsonl",
          [
            JSON.stringify(hashItem("good-1")), // 1
            '{"hash": {"value": "abc", "variant": "sha256_base64"', // 2: cut short
            JSON.stringify(hashItem("good-2")), // 3
            JSON.stringify({ name: "neither hash nor plaintext" }), // 4
            "", // 5: blank, skipped
            JSON.stringify(hashItem("good-3", { remaining: 0 })), // 6
            JSON.stringify([hashItem("in-an-array")]), // 7
            JSON.stringify(hashItem("good-4", { apiId: otherApi })), // 8
            JSON.stringify(hashItem("good-1")), // 9: the key of line 1 again
            JSON.stringify({ plaintext: "sk_a", hash: { value: "x", variant: "md5" } }), // 10: two problems
            JSON.stringify(hashItem("good-5", { refill: { interval: "daily", amount: 5 } })), // 11: refill without remaining
            JSON.stringify(hashItem("good-6")), // 12
          ].join("\n"),
        );
        const cli = importer(file, apiId);
        expect(await cli.exited).toEqual({ code: 2, signal: null });
        const err = cli.stderr();
        expect(err).toContain("8 bad lines; nothing was sent.");
        expect(err).toMatch(/^ {2}line 2: not valid JSON: /m);
        expect(err).toMatch(/^ {2}line 4: provide either `hash` or `plaintext`$/m);
        expect(err).toMatch(/^ {2}line 6: remaining: Number must be greater than or equal to 1$/m);
        expect(err).toMatch(/^ {2}line 7: must be a JSON object \(one key per line\)$/m);
        expect(err).toContain(`  line 8: apiId differs from --api ${apiId}`);
        expect(err).toMatch(/^ {2}line 9: the same key as line 1$/m);
        expect(err).toMatch(/^ {2}line 10: hash\.variant: /m);
        expect(err).toMatch(/^ {2}line 11: refill: remaining must be set if you are using refill\.$/m);
        const reported = [...err.matchAll(/^ {2}line (\d+):/gm)].map((m) => Number(m[1]));
        expect(new Set(reported)).toEqual(new Set([2, 4, 6, 7, 8, 9, 10, 11]));
        expect(cli.stdout()).toBe("");
        expect(await keysIn(apiId)).toBe(0);
        expect(existsSync(`${file}.keyhaven-journal`)).toBe(false);
      },
      TIMEOUT,
    );

    it(
      "--dry-run validates and plans, then sends nothing and writes no journal",
      async () => {
        const apiId = await createApi("dry-run");
        const file = write("dry.jsonl", jsonl(Array.from({ length: 250 }, (_, i) => hashItem(`dry-${i}`))));
        const cli = importer(file, apiId, ["--dry-run"]);
        expect(await cli.exited).toEqual({ code: 0, signal: null });
        expect(cli.stdout()).toContain("250 keys are valid, in 3 batches");
        expect(cli.stdout()).toContain("Dry run: nothing was sent.");
        expect(await keysIn(apiId)).toBe(0);
        expect(existsSync(`${file}.keyhaven-journal`)).toBe(false);
      },
      TIMEOUT,
    );

    it("streams the file: 200,000 keys (JSON lines and CSV, about 25 MB each) validate within an 80 MB heap", async () => {
      // Reading the whole file into memory, as the importer once did, runs out of heap here well before the end.
      const count = 200_000;
      const plaintext = (i: number) => `sk_stream_${String(i).padStart(8, "0")}_${"x".repeat(40)}`;
      const lines = Array.from({ length: count }, (_, i) =>
        JSON.stringify({ plaintext: plaintext(i), name: `user ${i}`, meta: { plan: "pro" } }),
      );
      const big = write("big.jsonl", `${lines.join("\n")}\n`);
      const csv = write(
        "big.csv",
        `plaintext,name,meta\n${Array.from({ length: count }, (_, i) => `${plaintext(i)},user ${i},"{""plan"":""pro""}"`).join("\n")}\n`,
      );
      for (const file of [big, csv]) {
        const cli = importer(file, "api_stream", ["--dry-run"], { NODE_OPTIONS: "--max-old-space-size=80" });
        expect(await cli.exited, cli.stderr()).toEqual({ code: 0, signal: null });
        expect(cli.stdout()).toContain("200,000 keys are valid, in 2,000 batches");
      }
    }, 120_000);
  });

  describe("CSV", () => {
    it(
      "imports a CSV file with dotted and JSON columns, and the keys verify with their settings",
      async () => {
        const apiId = await createApi("csv-import");
        const file = write(
          "keys.csv",
          [
            "plaintext,hash.value,hash.variant,name,externalId,meta,roles,remaining,refill.interval,refill.amount,enabled,expires,ratelimit.limit,ratelimit.refillRate,ratelimit.refillInterval",
            `sk_csv_first,,,"Acme, Inc.",cust-1,"{""plan"":""pro""}","[""admin""]",100,daily,100,true,,,,`,
            `,${hashOf("sk_csv_second")},sha256_base64,"two\r\nlines",,,,,,,false,,,,`,
            "",
            `sk_csv_third,,,third,,,,,,,,${Date.now() + 86_400_000},10,10,60000`,
          ].join("\r\n"),
        );
        const cli = importer(file, apiId);
        expect(await cli.exited, cli.stderr()).toEqual({ code: 0, signal: null });
        expect(summaryField(cli.stdout(), "imported")).toBe(3);
        expect(await keysIn(apiId)).toBe(3);

        const first = await call("keys.verifyKey", { key: "sk_csv_first" });
        expect(first.body).toMatchObject({ valid: true, meta: { plan: "pro" }, roles: ["admin"], remaining: 99, ownerId: "cust-1" });
        const second = await call("keys.verifyKey", { key: "sk_csv_second" });
        expect(second.body).toMatchObject({ valid: false, code: "DISABLED" });
        const third = await call("keys.verifyKey", { key: "sk_csv_third" });
        expect(third.body).toMatchObject({ valid: true, ratelimit: { limit: 10 } });

        // The journal holds no plaintext key and no root key.
        const journal = readFileSync(`${file}.keyhaven-journal`, "utf8");
        for (const secret of ["sk_csv_first", "sk_csv_third", ROOT_KEY]) expect(journal).not.toContain(secret);
        expect(cli.stdout() + cli.stderr()).not.toContain(ROOT_KEY);
      },
      TIMEOUT,
    );

    it(
      "rejects bad CSV cells by line number and an unknown column, sending nothing",
      async () => {
        const apiId = await createApi("csv-bad");
        const file = write(
          "bad.csv",
          // CRLF line ends, and a quoted cell over two lines (3–4): line numbers are still an editor's.
          [
            "plaintext,remaining,meta,enabled",
            "sk_bad_1,abc,,",
            '"sk_multi\r\nline",1,,',
            "sk_bad_2,5,{not json},",
            "sk_bad_3,5,,maybe",
            "sk_ok,1,,",
            "sk_x,1,,,extra",
          ].join("\r\n"),
        );
        const cli = importer(file, apiId);
        expect(await cli.exited).toEqual({ code: 2, signal: null });
        expect(cli.stderr()).toContain("4 bad lines; nothing was sent.");
        expect(cli.stderr()).toMatch(/line 2: remaining: not an integer \(the cell is not shown/);
        expect(cli.stderr()).toMatch(/line 5: meta: not valid JSON: /);
        expect(cli.stderr()).toMatch(/line 6: enabled: not true or false \(the cell is not shown/);
        expect(cli.stderr()).toMatch(/line 8: not valid CSV: .*columns length is 4, got 5/);
        expect([...cli.stderr().matchAll(/^ {2}line (\d+):/gm)].map((m) => Number(m[1]))).toEqual([2, 5, 6, 8]);

        const unknown = write("unknown.csv", "plaintext,colour\nsk_u,red\n");
        const cli2 = importer(unknown, apiId);
        expect(await cli2.exited).toEqual({ code: 2, signal: null });
        expect(cli2.stderr()).toContain("column 2 of it is not a column name");
        expect(cli2.stderr()).not.toContain("colour");
        expect(await keysIn(apiId)).toBe(0);
      },
      TIMEOUT,
    );
  });

  describe("refused batches", () => {
    it(
      "reports a refused batch with its lines, stops, and with --continue-on-error goes on; a re-run retries only what failed",
      async () => {
        const apiId = await createApi("refusals");
        // Line 27 already exists on the server; line 14 needs a role that does not exist yet.
        expect((await call("migrations.createKeys", [{ apiId, ...hashItem("refuse-26") }])).status).toBe(200);
        const items = Array.from({ length: 50 }, (_, i) =>
          i === 13 ? hashItem(`refuse-${i}`, { roles: ["auditor"] }) : hashItem(`refuse-${i}`),
        );
        const file = write("refusals.jsonl", jsonl(items));
        const args = ["--batch-size", "10"];

        const first = importer(file, apiId, args);
        expect(await first.exited).toEqual({ code: 1, signal: null });
        expect(first.stderr()).toContain(
          'refused: 412 PRECONDITION_FAILED: Roles ["auditor"] are missing, please create them first [line 14]',
        );
        expect(first.stderr()).toContain(`re-run to retry the refused batches: keyhaven import ${file} --api ${apiId}`);
        expect(summaryField(first.stdout(), "imported")).toBe(10);
        expect(summaryField(first.stdout(), "failed")).toBe(10);
        expect(summaryField(first.stdout(), "not yet")).toBe(30);
        expect(await keysIn(apiId)).toBe(1 + 10);

        const second = importer(file, apiId, [...args, "--continue-on-error"]);
        expect(await second.exited).toEqual({ code: 1, signal: null });
        expect(second.stderr()).toContain("[line 14]");
        expect(second.stderr()).toContain(
          "refused: 409 CONFLICT: the key on line 27 already exists; no key of this request was created [line 27]",
        );
        expect(summaryField(second.stdout(), "imported")).toBe(20);
        expect(summaryField(second.stdout(), "skipped")).toBe(10);
        expect(summaryField(second.stdout(), "failed")).toBe(20);
        expect(await keysIn(apiId)).toBe(1 + 30);

        expect((await call("permissions.createRole", { name: "auditor" })).status).toBe(200);
        const third = importer(file, apiId, [...args, "--continue-on-error"]);
        expect(await third.exited).toEqual({ code: 1, signal: null });
        expect(summaryField(third.stdout(), "imported")).toBe(10);
        expect(summaryField(third.stdout(), "failed")).toBe(10);
        expect(third.stderr()).not.toContain("[line 14]");
        expect(await keysIn(apiId)).toBe(1 + 40);
      },
      TIMEOUT,
    );

    it(
      "stops at once, even with --continue-on-error, when the root key is refused",
      async () => {
        const apiId = await createApi("bad-root-key");
        const file = write("badkey.jsonl", jsonl(Array.from({ length: 30 }, (_, i) => hashItem(`badkey-${i}`))));
        const cli = importer(file, apiId, ["--batch-size", "10", "--continue-on-error", "--root-key", "khroot_not_a_real_key_12345"]);
        expect(await cli.exited).toEqual({ code: 1, signal: null });
        expect(cli.stderr()).toContain("stopped: UNAUTHORIZED");
        expect(summaryField(cli.stdout(), "failed")).toBe(10);
        expect(summaryField(cli.stdout(), "not yet")).toBe(20);
        expect(cli.stdout() + cli.stderr()).not.toContain("khroot_not_a_real_key_12345");
        expect(await keysIn(apiId)).toBe(0);
      },
      TIMEOUT,
    );
  });

  describe("the resume journal", () => {
    it(
      "resolves a batch that was sent but never confirmed: one that had landed is found present, nothing twice",
      async () => {
        const apiId = await createApi("in-doubt-landed");
        const file = write("landed.jsonl", jsonl(Array.from({ length: 300 }, (_, i) => hashItem(`landed-${i}`))));
        const first = importer(file, apiId);
        expect(await first.exited).toEqual({ code: 0, signal: null });
        expect(await keysIn(apiId)).toBe(300);

        // As if the process had died after the server's 200 but before writing `done`.
        const journalFile = `${file}.keyhaven-journal`;
        const lines = readFileSync(journalFile, "utf8").trimEnd().split("\n");
        expect(JSON.parse(lines.at(-1)!)).toMatchObject({ batch: 2, state: "done" });
        writeFileSync(journalFile, `${lines.slice(0, -1).join("\n")}\n`);

        const second = importer(file, apiId);
        expect(await second.exited, second.stderr()).toEqual({ code: 0, signal: null });
        expect(summaryField(second.stdout(), "imported")).toBe(0);
        expect(second.stdout()).toContain("skipped:  300 (200 imported by an earlier run, 100 already on the server)");
        expect(summaryField(second.stdout(), "failed")).toBe(0);
        expect(await keysIn(apiId)).toBe(300);
        const last = JSON.parse(readFileSync(journalFile, "utf8").trimEnd().split("\n").at(-1)!);
        expect(last).toMatchObject({ batch: 2, state: "done", imported: 0 });
        expect(last.alreadyPresent).toEqual(Array.from({ length: 100 }, (_, i) => 201 + i));
      },
      TIMEOUT,
    );

    it(
      "stops with exit 3 when the server is unreachable, and the resumed run sends what had not landed",
      async () => {
        const apiId = await createApi("in-doubt-unreachable");
        const items = Array.from({ length: 10 }, (_, i) => hashItem(`unreachable-${i}`));
        // Keys of lines 1–4 reach the server by another way meanwhile.
        expect(
          (
            await call(
              "migrations.createKeys",
              items.slice(0, 4).map((k) => ({ apiId, ...k })),
            )
          ).status,
        ).toBe(200);
        const file = write("unreachable.jsonl", jsonl(items));
        const deadPort = await freePort();
        const journal = path.join(workDir, "unreachable.journal");
        const down = keyhaven(
          ["import", file, "--api", apiId, "--url", `http://127.0.0.1:${deadPort}`, "--journal", journal, "--attempts", "2"],
          {
            KEYHAVEN_ROOT_KEY: ROOT_KEY,
          },
        );
        expect(await down.exited).toEqual({ code: 3, signal: null });
        expect(down.stderr()).toMatch(/stopped: lines 1–10: ECONNREFUSED .*\(after 2 attempts\)/);
        expect(down.stderr()).toContain(
          `resume with: keyhaven import ${file} --api ${apiId} --url http://127.0.0.1:${deadPort} --journal ${journal}`,
        );
        expect(summaryField(down.stdout(), "not yet")).toBe(10);

        const resumed = importer(file, apiId, ["--journal", journal]);
        expect(await resumed.exited, resumed.stderr()).toEqual({ code: 0, signal: null });
        expect(summaryField(resumed.stdout(), "imported")).toBe(6);
        expect(resumed.stdout()).toContain("skipped:  4 (0 imported by an earlier run, 4 already on the server)");
        expect(await keysIn(apiId)).toBe(10);
      },
      TIMEOUT,
    );

    it(
      "refuses to resume when the file changed or the API differs, with exit 2",
      async () => {
        const apiId = await createApi("journal-binding");
        const file = write("binding.jsonl", jsonl(Array.from({ length: 20 }, (_, i) => hashItem(`binding-${i}`))));
        const first = importer(file, apiId, ["--batch-size", "10"]);
        expect(await first.exited).toEqual({ code: 0, signal: null });

        writeFileSync(file, jsonl(Array.from({ length: 21 }, (_, i) => hashItem(`binding-${i}`))));
        const changed = importer(file, apiId, ["--batch-size", "10"]);
        expect(await changed.exited).toEqual({ code: 2, signal: null });
        expect(changed.stderr()).toContain("belongs to a different version of the import file");

        writeFileSync(file, jsonl(Array.from({ length: 20 }, (_, i) => hashItem(`binding-${i}`))));
        const otherApi = await createApi("journal-binding-2");
        const other = importer(file, otherApi, ["--batch-size", "10"]);
        expect(await other.exited).toEqual({ code: 2, signal: null });
        expect(other.stderr()).toContain(`is the journal of an import into ${apiId}, not ${otherApi}`);
        const size = importer(file, apiId, ["--batch-size", "20"]);
        expect(await size.exited).toEqual({ code: 2, signal: null });
        expect(size.stderr()).toContain("was written with --batch-size 10");
        expect(await keysIn(apiId)).toBe(20);
        expect(await keysIn(otherApi)).toBe(0);
      },
      TIMEOUT,
    );
  });

  // The big one (~25 s on PGlite): 25,000 keys, interrupted three ways, resumed, exactly 25,000 at the end.
  it("[25k] imports 25,000 keys through Ctrl-C, a crash of the CLI and a server restart, ending with exactly 25,000", async () => {
    const total = 25_000;
    const apiId = await createApi("twenty-five-thousand");
    const file = write("big.jsonl", jsonl(Array.from({ length: total }, (_, i) => hashItem(`big-${i}-${ROOT_KEY}`, { name: `k${i}` }))));
    const args = ["--progress-every", "1", "--attempts", "3"];
    let imported = 0;

    // 1. Ctrl-C: the batch in flight finishes, the summary is printed with how to resume, exit 3.
    const run1 = importer(file, apiId, args);
    await until("20% done", () => progressOf(run1.stderr()) >= 5_000, run1);
    run1.child.kill("SIGINT");
    expect(await run1.exited, run1.stderr()).toEqual({ code: 3, signal: null });
    expect(run1.stderr()).toContain("SIGINT: finishing the request in flight, then stopping");
    expect(run1.stderr()).toContain(`resume with: keyhaven import ${file} --api ${apiId}`);
    imported += summaryField(run1.stdout(), "imported");
    expect(imported).toBeGreaterThanOrEqual(5_000);
    expect(imported).toBeLessThan(total);
    expect(summaryField(run1.stdout(), "imported") + summaryField(run1.stdout(), "not yet")).toBe(total);
    expect(await keysIn(apiId)).toBe(imported);

    // 2. A crash (kill -9) in the middle of a batch.
    const run2 = importer(file, apiId, args);
    await until("40% done", () => progressOf(run2.stderr()) >= 10_000, run2);
    run2.child.kill("SIGKILL");
    expect((await run2.exited).signal).toBe("SIGKILL");

    // 3. The server stops during the run: retries, then exit 3, resumable.
    const run3 = importer(file, apiId, args);
    await until("60% done", () => progressOf(run3.stderr()) >= 15_000, run3);
    await stopServer();
    expect(await run3.exited, run3.stderr()).toEqual({ code: 3, signal: null });
    expect(run3.stderr()).toMatch(/retrying \(attempt 2 of 3\)/);
    expect(run3.stderr()).toMatch(/stopped: lines \d+–\d+: ECONNREFUSED/);
    await startServer();

    // 4. Resumed to the end: no duplicate error, nothing refused, exactly 25,000 keys.
    const run4 = importer(file, apiId, args);
    expect(await run4.exited, run4.stderr()).toEqual({ code: 0, signal: null });
    expect(summaryField(run4.stdout(), "failed")).toBe(0);
    expect(run4.stderr()).not.toMatch(/refused|CONFLICT/);
    expect(summaryField(run4.stdout(), "imported") + summaryField(run4.stdout(), "skipped")).toBe(total);
    expect(run4.stdout()).toMatch(/^rate: +[\d,]+ keys\/s$/m);
    expect(await keysIn(apiId)).toBe(total);

    // Counted in the database itself, the server stopped.
    if (!pg) {
      await stopServer();
      const store = await openPglite(dataDir);
      try {
        const rows = rowsOf<{ n: number }>(
          await store.db.execute(sql`select count(*)::int as n, count(distinct hash)::int as d from keys where api_id = ${apiId}`),
        );
        expect(rows[0]).toEqual({ n: total, d: total });
      } finally {
        await store.close();
      }
      await startServer();
    } else {
      const [row] = await pg`select count(*)::int as n, count(distinct hash)::int as d from keys where api_id = ${apiId}`;
      expect(row).toEqual({ n: total, d: total });
    }
  }, 120_000);

  describe("keyhaven admin", () => {
    const admin = (args: string[], env: Record<string, string> = { KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN }) =>
      keyhaven(["admin", ...args, "--url", url], env);

    it(
      "creates, disables and enables a workspace, and creates and deletes a root key",
      async () => {
        const created = admin(["workspace", "create", "--name", "cli-made"]);
        expect(await created.exited, created.stderr()).toEqual({ code: 0, signal: null });
        const workspaceId = created.stdout().trim();
        expect(workspaceId).toMatch(/^ws_\w+$/);

        const rk = admin(["root-key", "create", "--workspace", workspaceId, "--permission", "*", "--name", "cli"]);
        expect(await rk.exited, rk.stderr()).toEqual({ code: 0, signal: null });
        const keyId = /^keyId: (rk_\w+)$/m.exec(rk.stdout())?.[1];
        const key = /^key: +(khroot_\w+)$/m.exec(rk.stdout())?.[1];
        expect(keyId).toBeDefined();
        expect(key).toBeDefined();
        expect(rk.stdout()).toContain("shown only this once");
        expect((await call("apis.createApi", { name: "with-cli-key" }, key)).status).toBe(200);

        const disabled = admin(["workspace", "disable", workspaceId]);
        expect(await disabled.exited).toEqual({ code: 0, signal: null });
        expect(disabled.stdout()).toContain(`workspace ${workspaceId} disabled`);
        const refused = await call("apis.createApi", { name: "while-disabled" }, key);
        expect(refused.status).toBe(403);
        expect(refused.body.error.code).toBe("FORBIDDEN");

        const enabled = admin(["workspace", "enable", workspaceId, "--json"]);
        expect(await enabled.exited).toEqual({ code: 0, signal: null });
        expect(JSON.parse(enabled.stdout())).toEqual({});
        expect((await call("apis.createApi", { name: "enabled-again" }, key)).status).toBe(200);

        const workspaces = admin(["workspace", "list"]);
        expect(await workspaces.exited, workspaces.stderr()).toEqual({ code: 0, signal: null });
        expect(workspaces.stdout()).toMatch(new RegExp(`^${workspaceId}  enabled   cli-made$`, "m"));
        const listed = admin(["root-key", "list", "--workspace", workspaceId]);
        expect(await listed.exited, listed.stderr()).toEqual({ code: 0, signal: null });
        expect(listed.stdout()).toMatch(new RegExp(`^${keyId}  khroot_\\S*…  \\*  cli$`, "m"));
        expect(listed.stdout()).not.toContain(key);
        const listedJson = admin(["root-key", "list", "--workspace", workspaceId, "--json"]);
        expect(await listedJson.exited).toEqual({ code: 0, signal: null });
        expect(JSON.parse(listedJson.stdout())).toEqual([expect.objectContaining({ id: keyId, name: "cli", permissions: ["*"] })]);
        const unknown = admin(["root-key", "list", "--workspace", "ws_missing"]);
        expect((await unknown.exited).code).toBe(1);
        expect(unknown.stderr()).toContain("404 NOT_FOUND");

        const deleted = admin(["root-key", "delete", keyId!]);
        expect(await deleted.exited).toEqual({ code: 0, signal: null });
        expect(deleted.stdout()).toContain(`root key ${keyId} deleted`);
        const gone = await call("apis.createApi", { name: "after-delete" }, key);
        expect(gone.status).toBe(403);
        expect(gone.body.error.code).toBe("UNAUTHORIZED");

        for (const p of [created, disabled, enabled, workspaces, listed, listedJson, deleted]) {
          expect(p.stdout() + p.stderr()).not.toContain(ADMIN_TOKEN);
        }
      },
      TIMEOUT,
    );

    it(
      "creates a root key without any permission with --no-permissions: it authenticates, and is refused with 403",
      async () => {
        const created = admin(["workspace", "create", "--name", "cli-no-permissions"]);
        expect(await created.exited, created.stderr()).toEqual({ code: 0, signal: null });
        const workspaceId = created.stdout().trim();

        const rk = admin(["root-key", "create", "--workspace", workspaceId, "--no-permissions", "--json"]);
        expect(await rk.exited, rk.stderr()).toEqual({ code: 0, signal: null });
        const { key } = JSON.parse(rk.stdout());
        const refused = await call("apis.createApi", { name: "not-allowed" }, key);
        expect(refused.status).toBe(403);
        expect(refused.body.error.code).toBe("INSUFFICIENT_PERMISSIONS");

        const both = admin(["root-key", "create", "--workspace", workspaceId, "--no-permissions", "--permission", "*"]);
        expect(await both.exited).toEqual({ code: 2, signal: null });
        expect(both.stderr()).toContain("either --permission or --no-permissions, not both");
        const neither = admin(["root-key", "create", "--workspace", workspaceId]);
        expect(await neither.exited).toEqual({ code: 2, signal: null });
        expect(neither.stderr()).toContain("or --no-permissions for a key without any");

        const help = keyhaven(["admin", "--help"]);
        expect(await help.exited).toEqual({ code: 0, signal: null });
        expect(help.stdout()).toContain("--no-permissions");
      },
      TIMEOUT,
    );

    it(
      "answers the server's refusal with exit 1 and usage errors with exit 2, never printing the token",
      async () => {
        const wrong = admin(["workspace", "create", "--name", "x"], { KEYHAVEN_ADMIN_TOKEN: "not-the-admin-token-at-all" });
        expect(await wrong.exited).toEqual({ code: 1, signal: null });
        expect(wrong.stderr()).toContain("403 UNAUTHORIZED: admin token is not valid");
        expect(wrong.stderr()).not.toContain("not-the-admin-token-at-all");

        const missing = admin(["workspace", "disable", "ws_does_not_exist"]);
        expect(await missing.exited).toEqual({ code: 1, signal: null });
        expect(missing.stderr()).toMatch(/404 NOT_FOUND/);
        const noMigration = admin(["migration", "retry", "--workspace", "ws_does_not_exist", "mig_none"]);
        expect(await noMigration.exited).toEqual({ code: 1, signal: null });
        expect(noMigration.stderr()).toContain("404 NOT_FOUND: migration mig_none not found");

        const usage: [string[], RegExp][] = [
          [["workspace", "create"], /needs --name/],
          [["root-key", "create", "--workspace", "ws_x"], /at least one --permission/],
          [["root-key", "delete"], /takes one argument: <keyId>/],
          [["migration", "retry", "mig_x"], /migration retry needs --workspace/],
          [["migration", "retry", "--workspace", "ws_x"], /takes one argument: <migrationId>/],
          [["frobnicate", "it"], /unknown admin command: frobnicate it/],
        ];
        for (const [args, message] of usage) {
          const cli = admin(args);
          expect(await cli.exited, args.join(" ")).toEqual({ code: 2, signal: null });
          expect(cli.stderr()).toMatch(message);
        }
        const noToken = admin(["workspace", "create", "--name", "x"], {});
        expect(await noToken.exited).toEqual({ code: 2, signal: null });
        expect(noToken.stderr()).toContain("an admin token is required: set KEYHAVEN_ADMIN_TOKEN or pass --admin-token");
      },
      TIMEOUT,
    );
  });
});
