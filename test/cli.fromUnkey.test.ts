import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { identityProblems, keyProblems } from "../src/cli/unkey/fromUnkey.problems.js";
import { identitySchema, keySchema } from "../src/unkey/unkey.schemas.js";
import { commandSuite, spawnProcess, withinSeconds } from "./cli-process.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";

/**
 * `keyhaven import --from-unkey --dry-run` (issue 36 §1, the reading half) run as a user runs it, against a real
 * keyhaven serving its v2 routes over a port as the "hosted Unkey", and a small stand-in (node:http) for what
 * keyhaven-as-Unkey never answers: a key with a field keyhaven cannot hold, and a count of requests made.
 */

/** A route of the stand-in that answers Unkey's problem+json error. */
class Refusal {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
  ) {}
}

/** A stand-in Unkey: answers each v2 route from `routes` (an empty list by default) and counts requests. */
async function standIn(routes: Record<string, unknown>) {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req.url ?? "");
    req.resume();
    req.on("end", () => {
      const route = (req.url ?? "").replace(/^\/v2\//, "");
      const data = routes[route] ?? [];
      res.setHeader("content-type", "application/json");
      if (data instanceof Refusal) {
        res.statusCode = data.status;
        res.end(
          JSON.stringify({
            meta: { requestId: "req_2" },
            error: { type: `https://unkey.com/docs/errors/${data.code}`, detail: data.detail },
          }),
        );
        return;
      }
      res.end(JSON.stringify({ meta: { requestId: "req_1" }, data, ...(Array.isArray(data) && { pagination: { hasMore: false } }) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe("keyhaven import --from-unkey", () => {
  const { run, dir } = commandSuite("import", "keyhaven-fromunkey-");
  let h: Harness;
  let t: Tenant;
  let unkeyUrl: string;
  let apiId: string;
  let recoverable: { keyId: string; key: string };
  let plain: { keyId: string; key: string };

  const v2 = async (route: string, body: unknown) => {
    const res = await h.post(`/v2/${route}`, body, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data;
  };
  const fromUnkey = (args: string[], env: Record<string, string> = { UNKEY_ROOT_KEY: t.rootKey }) =>
    run(["--from-unkey", "--unkey-url", unkeyUrl, ...args], env);
  /** The source's keys, to show a refused run changed nothing there. */
  const sourceKeys = async () => {
    const res = await h.post("/v2/apis.listKeys", { apiId }, t.rootKey);
    return JSON.stringify(res.body.data);
  };

  beforeAll(async () => {
    h = await createHarness();
    t = await h.tenant();
    unkeyUrl = await h.app.listen({ port: 0, host: "127.0.0.1" });
    apiId = await h.createApi(t, { storeEncryptedKeys: true });
    await v2("permissions.createRole", { name: "reader", permissions: ["docs.read"] });
    await v2("identities.createIdentity", { externalId: "acme", meta: { plan: "secret-plan-value" } });
    recoverable = await v2("keys.createKey", { apiId, name: "rec", recoverable: true, roles: ["reader"], externalId: "acme" });
    plain = await v2("keys.createKey", { apiId, name: "plain", meta: { note: "secret-meta-value" } });
    await v2("ratelimit.limit", { namespace: "api-calls", identifier: "warmup", limit: 10, duration: 1000 });
    await v2("ratelimit.setOverride", { namespace: "api-calls", identifier: "vip", limit: 500, duration: 60_000 });
  });
  afterAll(() => h?.close());

  /** Nothing secret in what a run printed: the root key, a plaintext, meta values. */
  const expectNoSecrets = (text: string) => {
    for (const secret of [t.rootKey, recoverable.key, plain.key, "secret-meta-value", "secret-plan-value"]) {
      expect(text).not.toContain(secret);
    }
  };

  it("--dry-run reads everything and prints the counts: a recoverable key verifiable now, the other pending", async () => {
    const { code, out, err } = await fromUnkey(["--api", apiId, "--ratelimit-namespace", "api-calls", "--dry-run"]);
    expect(code, err).toBe(0);
    expect(out).toContain("Dry run: nothing was written.");
    expect(out).toMatch(/^apis: +1$/m);
    expect(out).toMatch(/^keys: +2 \(verifiable now: 1, pending: 1, skipped: 0\)$/m);
    expect(out).toMatch(/^identities: +1$/m);
    expect(out).toMatch(/^roles: +1$/m);
    expect(out).toMatch(/^permissions: +1$/m);
    expect(out).toMatch(/^overrides: +1 \(api-calls: 1\)$/m);
    expect(err).toBe("");
    expectNoSecrets(out + err);
  });

  it("--json prints the same summary as one JSON object", async () => {
    const { code, out, err } = await fromUnkey(["--api", apiId, "--ratelimit-namespace", "api-calls", "--dry-run", "--json"]);
    expect(code, err).toBe(0);
    const summary = JSON.parse(out);
    expect(summary).toMatchObject({
      dryRun: true,
      counts: {
        apis: 1,
        keys: 2,
        keysVerifiableNow: 1,
        keysPending: 1,
        keysSkipped: 0,
        identities: 1,
        roles: 1,
        permissions: 1,
        overrides: 1,
      },
      apis: [{ id: apiId, keys: 2, verifiable: 1, pending: 1, skipped: 0 }],
      overrides: [{ namespace: "api-calls", count: 1 }],
      skipped: [],
      decryptRefused: { forbidden: [], unavailable: [] },
    });
    expectNoSecrets(out + err);
  });

  it("a root key that may not decrypt: said once on stderr, every key read as pending", async () => {
    const reader = await h.rootKey(t.workspaceId, [
      "api.*.read_api",
      "api.*.read_key",
      "identity.*.read_identity",
      "rbac.*.read_role",
      "rbac.*.read_permission",
    ]);
    const { code, out, err } = await fromUnkey(["--api", apiId, "--dry-run"], { UNKEY_ROOT_KEY: reader });
    expect(code, err).toBe(0);
    expect(out).toMatch(/^keys: +2 \(verifiable now: 0, pending: 2, skipped: 0\)$/m);
    expect(err.match(/may not decrypt/g)?.length).toBe(1);
    const json = await fromUnkey(["--api", apiId, "--dry-run", "--json"], { UNKEY_ROOT_KEY: reader });
    expect(JSON.parse(json.out).decryptRefused).toEqual({ forbidden: [apiId], unavailable: [] });
    expect(out + err).not.toContain(reader);
    expectNoSecrets(out + err);
  });

  it("APIs that store no encrypted keys (412 to decrypt): said once on stderr naming them, their keys pending", async () => {
    const plainApis: string[] = [];
    for (const name of ["plain-one", "plain-two"]) {
      const plainApi = (await v2("apis.createApi", { name })).apiId;
      await v2("keys.createKey", { apiId: plainApi, name: "k" });
      plainApis.push(plainApi);
    }
    const { code, out, err } = await fromUnkey(["--api", plainApis[0]!, "--api", apiId, "--api", plainApis[1]!, "--dry-run"]);
    expect(code, err).toBe(0);
    expect(out).toMatch(/^keys: +4 \(verifiable now: 1, pending: 3, skipped: 0\)$/m);
    expect(out).toContain(`${plainApis[0]} (plain-one): 1 key: 0 verifiable now, 1 pending, 0 skipped`);
    expect(err.match(/412/g)?.length).toBe(1);
    expect(err).toContain(`Unkey cannot decrypt the keys of ${plainApis[0]}, ${plainApis[1]} (412`);
    expectNoSecrets(out + err);
  });

  it("the root key from --unkey-root-key-file works the same", async () => {
    const file = path.join(dir(), "unkey-root-key");
    writeFileSync(file, `${t.rootKey}\n`, { mode: 0o600 });
    const { code, out, err } = await fromUnkey(["--api", apiId, "--dry-run", "--unkey-root-key-file", file], {});
    expect(code, err).toBe(0);
    expect(out).toMatch(/^keys: +2 \(verifiable now: 1, pending: 1, skipped: 0\)$/m);
    expectNoSecrets(out + err);
  });

  it("an unknown --api is a precise error (exit 1) naming the option and Unkey's code", async () => {
    const { code, out, err } = await fromUnkey(["--api", apiId, "--api", "api_missing123", "--dry-run"]);
    expect(code).toBe(1);
    expect(out).toBe("");
    expect(err).toContain("--api api_missing123: Unkey has no such API");
    expect(err).toContain("unkey/data/api_not_found");
    expect(err).toContain("Nothing was written.");
    expectNoSecrets(out + err);
  });

  it("an unknown --ratelimit-namespace is a precise error too (exit 1)", async () => {
    const { code, err } = await fromUnkey(["--api", apiId, "--ratelimit-namespace", "no-such-namespace", "--dry-run"]);
    expect(code).toBe(1);
    expect(err).toContain("--ratelimit-namespace no-such-namespace: Unkey has no such namespace");
    expectNoSecrets(err);
  });

  it("without --dry-run and without a keyhaven root key: exit 2 before anything is read or written", async () => {
    const before = await sourceKeys();
    const unkey = await standIn({});
    try {
      const { code, out, err } = await run(["--from-unkey", "--api", apiId, "--unkey-url", unkey.url], { UNKEY_ROOT_KEY: t.rootKey });
      expect(code).toBe(2);
      expect(out).toBe("");
      expect(err).toContain("a keyhaven root key is required: set KEYHAVEN_ROOT_KEY or pass --root-key");
      expect(unkey.requests).toEqual([]);
      expectNoSecrets(out + err);
    } finally {
      await unkey.close();
    }
    expect(await sourceKeys()).toBe(before);
  });

  it("--unkey-root-key is refused, pointing to UNKEY_ROOT_KEY and the file option, and the value is never echoed", async () => {
    for (const args of [
      ["--unkey-root-key", "unkey_secretvalue123", "--api", apiId, "--dry-run"],
      [`--unkey-root-key=unkey_secretvalue123`, "--api", apiId, "--dry-run"],
    ]) {
      const { code, out, err } = await fromUnkey(args, {});
      expect(code).toBe(2);
      expect(err).toContain("UNKEY_ROOT_KEY");
      expect(err).toContain("--unkey-root-key-file");
      expect(out + err).not.toContain("unkey_secretvalue123");
    }
  });

  it("usage errors exit 2: no --api, no root key", async () => {
    const none = await fromUnkey(["--dry-run"]);
    expect(none.code).toBe(2);
    expect(none.err).toContain("--api <apiId> is required");
    const noKey = await fromUnkey(["--api", apiId, "--dry-run"], {});
    expect(noKey.code).toBe(2);
    expect(noKey.err).toContain("set UNKEY_ROOT_KEY or pass --unkey-root-key-file");
  });

  it("an Unkey that echoes the root key in a refusal: exit 1 with Unkey's code, the key cut out", async () => {
    const rootKey = "unkey_echoedroot123";
    const unkey = await standIn({ "apis.getApi": new Refusal(401, "unkey/authentication/key_not_found", `no such key: ${rootKey}`) });
    try {
      const { code, out, err } = await run(["--from-unkey", "--api", "api_standin1", "--unkey-url", unkey.url, "--dry-run"], {
        UNKEY_ROOT_KEY: rootKey,
      });
      expect(code).toBe(1);
      expect(err).toContain("unkey/authentication/key_not_found");
      expect(err).toContain("[the Unkey root key]");
      expect(out + err).not.toContain(rootKey);
    } finally {
      await unkey.close();
    }
  });

  it("an Unkey answering outside the v2 contract: exit 3 naming the route and the field", async () => {
    const unkey = await standIn({ "apis.getApi": [] });
    try {
      const { code, out, err } = await run(["--from-unkey", "--api", "api_standin1", "--unkey-url", unkey.url, "--dry-run"], {
        UNKEY_ROOT_KEY: "unkey_standinroot",
      });
      expect(code).toBe(3);
      expect(out).toBe("");
      expect(err).toContain("Unkey apis.getApi answered 200 with a body the v2 contract does not allow: data");
      expect(err).not.toContain("unkey_standinroot");
    } finally {
      await unkey.close();
    }
  });

  it("a key with a field keyhaven cannot hold is skipped with why (the field, never its value)", async () => {
    const unkey = await standIn({
      "apis.getApi": { id: "api_standin1", name: "stand-in" },
      "apis.listKeys": [
        { keyId: "key_ok1", start: "sk_ab", enabled: true, createdAt: 1, plaintext: "sk_plaintextvalue1" },
        { keyId: "key_far1", start: "sk_cd", enabled: true, createdAt: 1, expires: 5_000_000_000_000 },
        {
          keyId: "key_win1",
          start: "sk_ef",
          enabled: true,
          createdAt: 1,
          ratelimits: [{ id: "rl_1", name: "burst", limit: 1, duration: 10, autoApply: true }],
        },
        { keyId: "key_pend1", start: "sk_gh", enabled: true, createdAt: 1 },
      ],
    });
    try {
      const { code, out, err } = await run(["--from-unkey", "--api", "api_standin1", "--unkey-url", unkey.url, "--dry-run"], {
        UNKEY_ROOT_KEY: "unkey_standinroot",
      });
      expect(code, err).toBe(0);
      expect(out).toMatch(/^keys: +4 \(verifiable now: 1, pending: 1, skipped: 2\)$/m);
      expect(out).toContain("skipped key key_far1 of api_standin1: expires: after 2100-01-01");
      expect(out).toContain("skipped key key_win1 of api_standin1: ratelimits[0].duration: must be 1000 to 2592000000 ms");
      expect(out + err).not.toContain("sk_plaintextvalue1");
      expect(out + err).not.toContain("unkey_standinroot");
    } finally {
      await unkey.close();
    }
  });

  it("a dry run loads neither the server nor the store", async () => {
    const record = path.join(mkdtempSync(path.join(os.tmpdir(), "keyhaven-fromunkey-modules-")), "modules.txt");
    try {
      const cli = spawnProcess(
        process.execPath,
        [
          "--import",
          "./test/fixtures/record-modules.mjs",
          "bin/keyhaven.mjs",
          "import",
          "--from-unkey",
          "--unkey-url",
          unkeyUrl,
          "--api",
          apiId,
          "--dry-run",
        ],
        { RECORD_MODULES_TO: record, UNKEY_ROOT_KEY: t.rootKey },
      );
      expect(await withinSeconds(cli.exited, 40), cli.stderr()).toEqual({ code: 0, signal: null });
      const urls = readFileSync(record, "utf8").split("\n");
      expect(urls.some((u) => u.endsWith("/dist/cli/unkey/fromUnkey.command.js"))).toBe(true);
      for (const name of ["fastify", "@electric-sql/pglite", "postgres", "drizzle-orm", "ioredis", "pino"]) {
        expect(urls.filter((u) => u.includes(`/node_modules/${name}/`))).toEqual([]);
      }
      // The import command's own bounds (src/wire/v1 schemas) are loaded, as for any import; no server, no store.
      expect(urls.filter((u) => /\/dist\/(main|app|services|storage\/client)\.js$/.test(u))).toEqual([]);
    } finally {
      rmSync(path.dirname(record), { recursive: true, force: true });
    }
  });

  it("keyhaven import --help describes --from-unkey; --from-unkey --help every option", async () => {
    const help = await run(["--help"], {});
    expect(help.code).toBe(0);
    expect(help.out).toContain("keyhaven import --from-unkey --api <apiId>");
    const own = await run(["--from-unkey", "--help"], {});
    expect(own.code).toBe(0);
    for (const option of [
      "--api",
      "--ratelimit-namespace",
      "--unkey-url",
      "--unkey-root-key-file",
      "--url",
      "--root-key",
      "--dry-run",
      "--check",
      "--journal",
      "--batch-size",
      "--concurrency",
      "--json",
    ]) {
      expect(own.out).toContain(option);
    }
  });
});

describe("what keyhaven cannot hold (the bounds of its v2 routes)", () => {
  // Built as the client reads them (the schema's output), so a field is as the client would hand it over.
  const key = (fields: Record<string, unknown> = {}) =>
    keySchema.parse({ keyId: "key_123", start: "sk_1", enabled: true, createdAt: 1, ...fields });

  it("a key within every bound has no problem; each field out of bound is named, never its value", () => {
    expect(keyProblems(key({ name: "n", meta: { a: 1 }, roles: ["r 1"], permissions: ["docs.read"], expires: 4_102_444_800_000 }))).toEqual(
      [],
    );
    expect(keyProblems(key({ keyId: "k-1" }))).toEqual(["keyId: not 3 to 255 letters, digits and underscores"]);
    expect(keyProblems(key({ name: "x".repeat(256) }))).toEqual(["name: longer than 255 characters"]);
    const meta = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`p${i}`, "secret-value"]));
    expect(keyProblems(key({ meta }))).toEqual(["meta: more than 100 properties"]);
    expect(keyProblems(key({ expires: 4_102_444_800_001 }))).toEqual(["expires: after 2100-01-01"]);
    expect(keyProblems(key({ roles: Array.from({ length: 101 }, (_, i) => `r${i}`) }))).toEqual(["roles: more than 100"]);
    expect(keyProblems(key({ permissions: ["docs read"] }))).toEqual(["permissions: a slug not 1 to 128 letters, digits and _ : - . *"]);
    expect(keyProblems(key({ credits: { remaining: 2_147_483_648 } }))).toEqual(["credits.remaining: must be 0 to 2147483647"]);
    expect(keyProblems(key({ credits: { remaining: 1, refill: { interval: "monthly", amount: 0 } } }))).toEqual([
      "credits.refill.amount: must be 1 to 2147483647",
      "credits.refill.refillDay: a monthly refill needs a day from 1 to 31",
    ]);
    expect(keyProblems(key({ ratelimits: [{ id: "rl_1", name: "ab", limit: 0, duration: 2_592_000_001, autoApply: true }] }))).toEqual([
      "ratelimits[0].name: must be 3 to 128 characters",
      "ratelimits[0].limit: must be 1 to 2147483647",
      "ratelimits[0].duration: must be 1000 to 2592000000 ms",
    ]);
    expect(keyProblems(key({ identity: { id: "id_123", externalId: "a b" } }))).toEqual([
      "identity.externalId: not 1 to 255 letters, digits and _ . -",
    ]);
  });

  it("an identity's meta over 1 MB as JSON is named", () => {
    expect(identityProblems(identitySchema.parse({ id: "id_123", externalId: "acme", meta: { big: "x".repeat(1_000_000) } }))).toEqual([
      "identity.meta: larger than 1,000,000 bytes as JSON",
    ]);
  });
});
