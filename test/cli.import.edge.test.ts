import { createHash, randomBytes } from "node:crypto";
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keyhaven, killAll, until } from "./cli-process.js";

// Edge cases of `keyhaven import`, as real processes. Most of them need no keyhaven server: `fakeCreateKeys` stands
// in for POST /v1/migrations.createKeys (all or nothing, 409 `reason: KEY_EXISTS, keyIndex: N` for a known hash),
// records what it was sent, and can hold its first request (to change the file while the import is under way).

const ROOT_KEY = `root-${randomBytes(12).toString("hex")}`;
const TIMEOUT = 30_000;

const hashOf = (key: string) => createHash("sha256").update(key).digest("base64");
const jsonl = (items: unknown[]) => `${items.map((i) => JSON.stringify(i)).join("\n")}\n`;

type SentKey = { plaintext?: string; hash?: { value: string }; name?: string };

type FakeServer = {
  url: string;
  /** Every request body, in arrival order. */
  requests: SentKey[][];
  /** Hashes of the keys created, each once. */
  created: Set<string>;
  /** Resolves when the first request has arrived (and, with `holdFirst`, is being held). */
  firstRequest: Promise<void>;
  releaseFirst(): void;
  close(): Promise<void>;
};

async function fakeCreateKeys(options: { holdFirst?: boolean; delayMs?: number } = {}): Promise<FakeServer> {
  const requests: SentKey[][] = [];
  const created = new Set<string>();
  let releaseFirst!: () => void;
  const held = new Promise<void>((resolve) => (releaseFirst = resolve));
  let arrived!: () => void;
  const firstRequest = new Promise<void>((resolve) => (arrived = resolve));
  const server = http.createServer((req, res) => {
    let text = "";
    req.setEncoding("utf8").on("data", (d: string) => (text += d));
    req.on("end", async () => {
      const keys = JSON.parse(text) as SentKey[];
      const first = requests.length === 0;
      requests.push(keys);
      arrived();
      if (first && options.holdFirst) await held;
      // A real delay: the scenario is a slow server, so that a run is still under way when the test kills it.
      if (options.delayMs) await new Promise((r) => setTimeout(r, options.delayMs));
      const hashes = keys.map((k) => (k.plaintext !== undefined ? hashOf(k.plaintext) : k.hash!.value));
      const existing = hashes.findIndex((h) => created.has(h));
      if (existing !== -1) {
        res.writeHead(409, { "content-type": "application/json" });
        const message = `the key at index ${existing} already exists; no key of this request was created`;
        res.end(JSON.stringify({ error: { code: "CONFLICT", message, reason: "KEY_EXISTS", keyIndex: existing } }));
        return;
      }
      for (const h of hashes) created.add(h);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ keyIds: keys.map((_, i) => `key_${created.size}_${i}`) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    created,
    firstRequest,
    releaseFirst,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The keys done so far, from the last plain progress line ("1,300/6,000 keys (21%), …"). */
function progressOf(stderr: string): number {
  const all = [...stderr.matchAll(/^([\d,]+)\/[\d,]+ keys/gm)];
  return all.length === 0 ? 0 : Number(all[all.length - 1]![1]!.replaceAll(",", ""));
}

const reportedLines = (stderr: string) => [...stderr.matchAll(/^ {2}line (\d+):/gm)].map((m) => Number(m[1]));

describe("keyhaven import: edge cases", () => {
  let workDir: string;

  const write = (name: string, content: string | Buffer) => {
    const file = path.join(workDir, name);
    writeFileSync(file, content);
    return file;
  };
  const importer = (file: string, url: string, extra: string[] = [], env: Record<string, string> = {}) =>
    keyhaven(["import", file, "--api", "api_edge", "--url", url, ...extra], { KEYHAVEN_ROOT_KEY: ROOT_KEY, ...env });
  const dryRun = (file: string) => keyhaven(["import", file, "--api", "api_edge", "--dry-run"]);

  beforeAll(() => {
    workDir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-import-edge-"));
  });

  afterAll(() => {
    killAll();
    rmSync(workDir, { recursive: true, force: true });
  });

  describe("the file changes between validation and sending", () => {
    // 2,000 keys of about 1 KB: the sending pass has read the first few hundred KB when its first request leaves.
    const pad = "p".repeat(1000);
    const lines = (prefix: string, n: number) =>
      Array.from({ length: n }, (_, i) => JSON.stringify({ plaintext: `${prefix}_${String(i).padStart(5, "0")}`, name: pad }));

    it(
      "a line edited while the first batch is in flight is never sent",
      async () => {
        const server = await fakeCreateKeys({ holdFirst: true });
        const content = lines("sk_edit", 2000);
        const file = write("edited.jsonl", `${content.join("\n")}\n`);
        const cli = importer(file, server.url);
        await server.firstRequest;
        content[1949] = JSON.stringify({ plaintext: "sk_NOT_VALIDATED", name: pad }); // same length, line 1950
        writeFileSync(file, `${content.join("\n")}\n`);
        server.releaseFirst();
        const exit = await cli.exited;
        await server.close();

        expect(cli.stderr()).toContain("changed while it was being imported");
        expect(exit.code).not.toBe(0);
        expect(exit.code).toBe(2);
        expect(cli.stderr()).not.toContain("re-run to retry the refused batches");
        const sent = server.requests.flat().map((k) => k.plaintext);
        expect(sent).not.toContain("sk_NOT_VALIDATED");
      },
      TIMEOUT,
    );

    it(
      "lines appended while the first batch is in flight are never sent",
      async () => {
        const server = await fakeCreateKeys({ holdFirst: true });
        const file = write("appended.jsonl", `${lines("sk_app", 1950).join("\n")}\n`);
        const cli = importer(file, server.url);
        await server.firstRequest;
        appendFileSync(file, jsonl([{ plaintext: "sk_APPENDED_1" }, { plaintext: "sk_APPENDED_2" }]));
        server.releaseFirst();
        const exit = await cli.exited;
        await server.close();

        expect(cli.stderr()).toContain("changed while it was being imported");
        expect(exit.code).not.toBe(0);
        expect(exit.code).toBe(2);
        expect(cli.stderr()).not.toContain("re-run to retry the refused batches");
        const sent = server.requests.flat().map((k) => k.plaintext);
        expect(sent.filter((p) => p?.startsWith("sk_APPENDED"))).toEqual([]);
        expect(sent.length).toBeLessThanOrEqual(1950);
      },
      TIMEOUT,
    );
  });

  it(
    "a journal whose last event was cut short (a crash while appending) stays usable after the resume",
    async () => {
      const server = await fakeCreateKeys();
      const file = write("cut.jsonl", jsonl(Array.from({ length: 30 }, (_, i) => ({ plaintext: `sk_cut_${i}` }))));
      const journal = path.join(workDir, "cut.journal");
      const run = () => importer(file, server.url, ["--journal", journal, "--batch-size", "10", "--quiet"]);

      expect((await run().exited).code).toBe(0);
      const events = readFileSync(journal, "utf8").trimEnd().split("\n");
      const last = events.pop()!;
      writeFileSync(journal, `${events.join("\n")}\n${last.slice(0, 20)}`); // no newline: cut in the middle

      const resumed = run();
      expect(await resumed.exited, resumed.stderr()).toEqual({ code: 0, signal: null });
      const again = run();
      const exit = await again.exited;
      await server.close();
      expect(again.stderr()).not.toContain("is damaged");
      expect(exit).toEqual({ code: 0, signal: null });
      expect(server.created.size).toBe(30);
    },
    TIMEOUT,
  );

  it(
    "keys the server already has: refused with a hint to --skip-existing and a new journal; with it, skipped and counted",
    async () => {
      const server = await fakeCreateKeys();
      const keys = Array.from({ length: 6 }, (_, i) => `sk_exists_${i}`);
      for (const k of [keys[1]!, keys[4]!]) server.created.add(hashOf(k));
      const file = write("existing.jsonl", jsonl(keys.map((plaintext) => ({ plaintext }))));

      const refused = importer(file, server.url, ["--journal", path.join(workDir, "existing.1.journal"), "--quiet"]);
      expect((await refused.exited).code).toBe(1);
      expect(refused.stderr()).toContain("re-run with --skip-existing");
      expect(refused.stderr()).toContain("start a new journal");
      expect(refused.stderr()).not.toMatch(/after fixing the cause/);
      expect(server.created.size).toBe(2);

      const requestsBefore = server.requests.length;
      const skipping = importer(file, server.url, ["--journal", path.join(workDir, "existing.1.journal"), "--quiet", "--skip-existing"]);
      const exit = await skipping.exited;
      await server.close();
      expect(exit, skipping.stderr()).toEqual({ code: 0, signal: null });
      expect(skipping.stdout()).toMatch(/^imported: 4$/m);
      expect(skipping.stdout()).toMatch(/^skipped: {2}2 \(0 imported by an earlier run, 2 already on the server\)$/m);
      expect([...server.created].sort()).toEqual(keys.map(hashOf).sort());
      // Each existing key was sent once more (refused, all or nothing) and then set aside: 3 requests for one batch.
      expect(server.requests.length - requestsBefore).toBe(3);
    },
    TIMEOUT,
  );

  describe("validation agrees with the server, before anything is sent", () => {
    it(
      "refuses what createKeys refuses: NUL, a lone surrogate, JSON nested over 64 levels, a key over the batch byte limit",
      async () => {
        let deep: Record<string, unknown> = {};
        const meta = deep;
        for (let i = 0; i < 70; i++) deep = deep.a = {} as Record<string, unknown>;
        const file = write(
          "server-refuses.jsonl",
          jsonl([
            { plaintext: "sk_fine" }, // 1
            { plaintext: "sk_nul", name: "a\u0000b" }, // 2: the server answers 400
            { plaintext: "sk_surrogate_\ud800" }, // 3: 400
            { plaintext: "sk_deep", meta }, // 4: 400
            { plaintext: "sk_big", meta: { blob: "x".repeat(1_100_000) } }, // 5: 413 whatever the batch
          ]),
        );
        const csv = write("server-refuses.csv", Buffer.from("plaintext,name\nsk_csv_fine,a\nsk_csv_nul,a\u0000b\n"));
        const [cli, cliCsv] = [dryRun(file), dryRun(csv)];
        expect(await cli.exited).toEqual({ code: 2, signal: null });
        expect(reportedLines(cli.stderr())).toEqual([2, 3, 4, 5]);
        expect(await cliCsv.exited).toEqual({ code: 2, signal: null });
        expect(reportedLines(cliCsv.stderr())).toEqual([3]);
      },
      TIMEOUT,
    );

    it(
      "reports bytes that are not UTF-8 as a bad line instead of importing an altered key",
      async () => {
        // Two different keys, each with invalid UTF-8: decoded leniently they become the same string.
        const file = write(
          "latin1.jsonl",
          Buffer.concat([
            Buffer.from('{"plaintext":"sk_'),
            Buffer.from([0xff, 0xfe]),
            Buffer.from('"}\n{"plaintext":"sk_'),
            Buffer.from([0xff, 0xfd]),
            Buffer.from('"}\n'),
          ]),
        );
        const cli = dryRun(file);
        expect(await cli.exited).toEqual({ code: 2, signal: null });
        expect(cli.stderr()).not.toContain("the same key as line 1");
        expect(reportedLines(cli.stderr())).toEqual([1, 2]);
        // CSV: the file is refused, naming the first line that is not UTF-8.
        const csv = write(
          "latin1.csv",
          Buffer.concat([Buffer.from("plaintext,name\nsk_a,a\nsk_b,b"), Buffer.from([0xe9]), Buffer.from("\nsk_c,c\n")]),
        );
        const cliCsv = dryRun(csv);
        expect(await cliCsv.exited).toEqual({ code: 2, signal: null });
        expect(cliCsv.stderr()).toContain("line 3 is not valid UTF-8");
      },
      TIMEOUT,
    );
  });

  describe("secrets never reach the output", () => {
    it(
      "a validation error never quotes a plaintext key (a file of bare keys; a CSV cell with a stray quote)",
      async () => {
        const bare = write("bare-keys.jsonl", "sk_9f8e7d6c5b4a\nsk_live_0123456789abcdef0123456789\n");
        const csv = write("stray-quote.csv", 'plaintext,name\nsk_ok_1,a\nsk_live_CSVSECRET"x,b\n');
        const [a, b] = [dryRun(bare), dryRun(csv)];
        expect(await a.exited).toEqual({ code: 2, signal: null });
        expect(reportedLines(a.stderr())).toEqual([1, 2]);
        for (const secret of ["sk_9f8e7d6c5b4a", "sk_live_01"]) expect(a.stderr()).not.toContain(secret);
        expect(await b.exited).toEqual({ code: 2, signal: null });
        expect(reportedLines(b.stderr())).toEqual([3]);
        expect(b.stderr()).not.toContain("CSVSECRET");
      },
      TIMEOUT,
    );

    it(
      "a headerless CSV, a shifted row or a wrong apiId is reported by line and column, never by its cells",
      async () => {
        const secrets = ["sk_live_HEADERKEY1", "sk_live_HEADERKEY2", "sk_live_SHIFTED1", "sk_live_SHIFTED2", "sk_live_APIID"];
        // No header: the first key's cells would be taken for column names.
        const headerless = write("headerless.csv", `${secrets[0]},${secrets[1]}\nsk_live_other,3\n`);
        // A row shifted by one cell: plaintexts land in the integer and boolean columns.
        const shifted = write("shifted.csv", `plaintext,remaining,enabled\nsk_ok,5,true\n,${secrets[2]},${secrets[3]}\n`);
        const wrongApi = write("wrong-api.jsonl", jsonl([{ plaintext: "sk_fine_1" }, { apiId: secrets[4], plaintext: "sk_fine_2" }]));
        const [a, b, c] = [dryRun(headerless), dryRun(shifted), dryRun(wrongApi)];
        for (const cli of [a, b, c]) expect(await cli.exited).toEqual({ code: 2, signal: null });

        expect(a.stderr()).toContain("columns 1, 2 of it are not a column name");
        expect(b.stderr()).toMatch(/^ {2}line 3: remaining: not an integer/m);
        expect(b.stderr()).toMatch(/^ {2}line 3: enabled: not true or false/m);
        expect(c.stderr()).toMatch(/^ {2}line 2: apiId differs from --api api_edge$/m);
        const output = [a, b, c].map((cli) => cli.stdout() + cli.stderr()).join("\n");
        for (const secret of secrets) expect(output).not.toContain(secret);
      },
      TIMEOUT,
    );

    it(
      "a root key that cannot be sent (a line break inside) is a usage error, and is never printed",
      async () => {
        const server = await fakeCreateKeys();
        const file = write("rootkey.jsonl", jsonl([{ plaintext: "sk_rootkey_1" }]));
        const secret = `khroot_${randomBytes(8).toString("hex")}`;
        const cli = importer(file, server.url, ["--attempts", "2"], { KEYHAVEN_ROOT_KEY: `${secret}\nsecond-line` });
        const exit = await cli.exited;
        await server.close();
        expect(cli.stdout() + cli.stderr()).not.toContain(secret);
        expect(exit).toEqual({ code: 2, signal: null });
        expect(server.requests).toEqual([]);
      },
      TIMEOUT,
    );
  });

  it(
    "CSV: a record with a stray quote is reported on its own line, not the one before",
    async () => {
      const file = write("quote-line.csv", 'plaintext,name\nk1,n1\nk2,n2\nk4,n4\nk5"x,n5\nk6,n6\n');
      const cli = dryRun(file);
      expect(await cli.exited).toEqual({ code: 2, signal: null });
      expect(reportedLines(cli.stderr())).toEqual([5]);
    },
    TIMEOUT,
  );

  it(
    "--journal naming a directory or a path in a missing directory: exit 2 (usage), naming the path",
    async () => {
      const server = await fakeCreateKeys();
      const file = write("journal-path.jsonl", jsonl([{ plaintext: "sk_journal_path" }]));
      const dir = path.join(workDir, "a-directory");
      mkdirSync(dir);
      const [a, b] = [
        importer(file, server.url, ["--journal", dir]),
        importer(file, server.url, ["--journal", path.join(workDir, "missing", "j")]),
      ];
      const [exitA, exitB] = [await a.exited, await b.exited];
      await server.close();
      expect(server.requests).toEqual([]);
      for (const [exit, cli, given] of [
        [exitA, a, dir],
        [exitB, b, path.join(workDir, "missing", "j")],
      ] as const) {
        expect(exit, cli.stderr()).toEqual({ code: 2, signal: null });
        expect(cli.stderr()).toContain(given);
      }
    },
    TIMEOUT,
  );

  // Guards for what works.

  it(
    "JSON lines: a BOM, CRLF, blank and whitespace lines, a \\r\\n escape, no final newline: an editor's line numbers",
    async () => {
      const file = write(
        "editor.jsonl",
        `\ufeff{"plaintext":"sk_e1"}\r\n\r\n{"plaintext":"sk_e2\\r\\n"}\r\n  \t \r\n{"plaintext":"sk_e3",\r\n{"plaintext":"sk_e1"}\r\n{"name":"x"}`,
      );
      const cli = dryRun(file);
      expect(await cli.exited).toEqual({ code: 2, signal: null });
      expect(cli.stderr()).toContain("3 bad lines; nothing was sent.");
      expect(reportedLines(cli.stderr())).toEqual([5, 6, 7]);
      expect(cli.stderr()).toMatch(/^ {2}line 6: the same key as line 1$/m);
    },
    TIMEOUT,
  );

  it(
    "--concurrency 4, killed (-9) three times mid-run, then resumed: every key created exactly once",
    async () => {
      const total = 2000;
      const server = await fakeCreateKeys({ delayMs: 10 });
      const file = write(
        "killed.jsonl",
        jsonl(Array.from({ length: total }, (_, i) => ({ hash: { value: hashOf(`killed-${i}`), variant: "sha256_base64" } }))),
      );
      const args = ["--concurrency", "4", "--batch-size", "25", "--progress-every", "1"];
      for (const at of [200, 800, 1400]) {
        const run = importer(file, server.url, args);
        await until(`${at} keys`, () => progressOf(run.stderr()) >= at, run);
        run.child.kill("SIGKILL");
        expect((await run.exited).signal).toBe("SIGKILL");
      }
      const last = importer(file, server.url, args);
      const exit = await last.exited;
      await server.close();
      expect(exit, last.stderr()).toEqual({ code: 0, signal: null });
      expect(last.stderr()).not.toMatch(/refused/);
      expect(server.created.size).toBe(total);
      // The journal stays valid JSON lines through every kill.
      for (const line of readFileSync(`${file}.keyhaven-journal`, "utf8").trimEnd().split("\n"))
        expect(() => JSON.parse(line)).not.toThrow();
    },
    TIMEOUT,
  );
});
