import { existsSync, readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { differingFields } from "../src/cli/unkey/fromUnkey.check.js";
import { byBytes, COPY_REQUEST_BYTES } from "../src/cli/unkey/fromUnkey.copy.js";
import { toCopyKey } from "../src/cli/unkey/fromUnkey.map.js";
import { keySchema } from "../src/unkey/unkey.schemas.js";
import { commandSuite, keyhaven, killAll } from "./cli-process.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { waitFor } from "./wait.js";

/**
 * `keyhaven import --from-unkey` writing (issue 36 §1), run as a user runs it: the "hosted Unkey" is a real keyhaven
 * serving its v2 routes over a port, seeded through them; the target a second keyhaven (another harness, its own
 * database) serving POST /v2/keyhaven.copyFromUnkey. A pass-through proxy (node:http) in front of either side counts
 * requests, answers a 429 where told, or holds requests (to kill -9 the CLI with a batch in flight).
 */

type Proxy = {
  url: string;
  /** Paths of the requests that reached the proxy. */
  requests: string[];
  /** Answer n requests to `route`, after the next `after` of them, with 429 and Retry-After: 0. */
  throttle(route: string, n: number, after?: number): void;
  /** After `n` more requests to `route`, hold the following ones: forwarded, their answers never returned. */
  holdAfter(route: string, n: number): void;
  release(): void;
  close(): Promise<void>;
};

async function proxyTo(target: string): Promise<Proxy> {
  const requests: string[] = [];
  const throttled = new Map<string, { after: number; n: number }>();
  let hold: { route: string; after: number } | undefined;
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const url = req.url ?? "";
      requests.push(url);
      const route = url.replace(/^\/v2\//, "");
      const throttle = throttled.get(route);
      if (throttle && throttle.after > 0) throttle.after -= 1;
      else if (throttle && throttle.n > 0) {
        throttle.n -= 1;
        res.writeHead(429, { "content-type": "application/json", "retry-after": "0" });
        res.end(
          JSON.stringify({
            meta: { requestId: "req_429" },
            error: {
              type: "https://unkey.com/docs/errors/unkey/application/rate_limited",
              detail: "slow down",
              status: 429,
              title: "Too Many Requests",
            },
          }),
        );
        return;
      }
      let holdThis = false;
      if (hold && hold.route === route) {
        if (hold.after > 0) hold.after -= 1;
        else holdThis = true;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string" && k !== "host" && k !== "content-length") headers[k] = v;
      try {
        const answer = await fetch(`${target}${url}`, { method: req.method ?? "POST", headers, body: Buffer.concat(chunks) });
        const text = await answer.text();
        if (holdThis) {
          held.push(res);
          return;
        }
        res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
        res.end(text);
      } catch {
        res.destroy();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    throttle: (route, n, after = 0) => throttled.set(route, { after, n }),
    holdAfter: (route, n) => {
      hold = { route, after: n };
    },
    release: () => {
      hold = undefined;
      for (const res of held.splice(0)) res.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held.splice(0)) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("keyhaven import --from-unkey (writing into keyhaven)", () => {
  const { run, dir } = commandSuite("import", "keyhaven-fromunkey-write-");
  let source: Harness;
  let target: Harness;
  let s: Tenant;
  let t: Tenant;
  let sourceUrl: string;
  let targetUrl: string;
  let apiId: string;
  let rec: { keyId: string; key: string };
  let plain: { keyId: string; key: string };
  let disabled: { keyId: string; key: string };

  const v2 = async (h: Harness, rootKey: string, route: string, body: unknown) => {
    const res = await h.post(`/v2/${route}`, body, rootKey);
    expect(res.status, `${route}: ${JSON.stringify(res.body)}`).toBe(200);
    return res.body.data;
  };
  const up = (route: string, body: unknown) => v2(source, s.rootKey, route, body);
  const down = (route: string, body: unknown) => v2(target, t.rootKey, route, body);
  const env = () => ({ UNKEY_ROOT_KEY: s.rootKey, KEYHAVEN_ROOT_KEY: t.rootKey });
  const copy = (args: string[], extra: { unkeyUrl?: string; url?: string; env?: Record<string, string> } = {}) =>
    run(
      ["--from-unkey", "--unkey-url", extra.unkeyUrl ?? sourceUrl, "--url", extra.url ?? targetUrl, "--quiet", ...args],
      extra.env ?? env(),
    );
  const journal = (name: string) => path.join(dir(), `${name}.journal`);

  /** Nothing secret in what a run printed: both root keys, the plaintexts, meta values. */
  const expectNoSecrets = (text: string) => {
    for (const secret of [s.rootKey, t.rootKey, rec.key, plain.key, disabled.key, "secret-meta-value", "secret-plan-value"]) {
      expect(text).not.toContain(secret);
    }
  };

  /**
   * keys.getKey on both sides, without what only use changes (lastUsedAt, updatedAt) and the ids of rate limits
   * (the copy upserts a key's and an identity's limits by name; their ids are keyhaven's own).
   */
  const keyOn = async (side: "source" | "target", keyId: string) => {
    const data = side === "source" ? await up("keys.getKey", { keyId }) : await down("keys.getKey", { keyId });
    const { updatedAt: _u, lastUsedAt: _l, ...rest } = data;
    const noIds = (limits: { id?: string }[] | undefined) => limits?.map(({ id: _id, ...r }) => r);
    if (rest.ratelimits) rest.ratelimits = noIds(rest.ratelimits);
    if (rest.identity?.ratelimits) rest.identity = { ...rest.identity, ratelimits: noIds(rest.identity.ratelimits) };
    return rest;
  };

  beforeAll(async () => {
    source = await createHarness();
    target = await createHarness();
    s = await source.tenant();
    t = await target.tenant();
    sourceUrl = await source.app.listen({ port: 0, host: "127.0.0.1" });
    targetUrl = await target.app.listen({ port: 0, host: "127.0.0.1" });
    apiId = await source.createApi(s, { storeEncryptedKeys: true });
    for (const slug of ["docs.read", "docs.write", "billing.read"]) await up("permissions.createPermission", { name: slug, slug });
    await up("permissions.createRole", { name: "reader", description: "reads docs", permissions: ["docs.read"] });
    await up("identities.createIdentity", {
      externalId: "acme",
      meta: { plan: "secret-plan-value" },
      ratelimits: [{ name: "tokens", limit: 100, duration: 60_000, autoApply: false }],
    });
    rec = await up("keys.createKey", {
      apiId,
      name: "rec",
      recoverable: true,
      roles: ["reader"],
      permissions: ["docs.write"],
      externalId: "acme",
      meta: { tier: "gold" },
      expires: 4_000_000_000_000,
      credits: { remaining: 50, refill: { interval: "monthly", amount: 100, refillDay: 5 } },
      ratelimits: [{ name: "burst", limit: 10, duration: 60_000, autoApply: true }],
    });
    plain = await up("keys.createKey", { apiId, name: "plain", meta: { note: "secret-meta-value" }, permissions: ["billing.read"] });
    disabled = await up("keys.createKey", {
      apiId,
      name: "off",
      enabled: false,
      credits: { remaining: 3, refill: { interval: "daily", amount: 3 } },
    });
    await up("ratelimit.limit", { namespace: "api-calls", identifier: "warmup", limit: 10, duration: 1000 });
    await up("ratelimit.setOverride", { namespace: "api-calls", identifier: "vip", limit: 500, duration: 60_000 });
  });
  afterAll(async () => {
    killAll();
    await source?.close();
    await target?.close();
  });

  it("copies everything, ids kept: every field equal through keys.getKey; the recoverable key verifies at once, the other is pending", async () => {
    const { code, out, err } = await copy(["--api", apiId, "--ratelimit-namespace", "api-calls", "--journal", journal("first"), "--json"]);
    expect(code, err).toBe(0);
    const summary = JSON.parse(out);
    expect(summary).toMatchObject({
      complete: true,
      counts: {
        apis: { created: 1, updated: 0, unchanged: 0, skipped: 0 },
        permissions: { created: 3, skipped: 0 },
        roles: { created: 1, skipped: 0 },
        identities: { created: 1, skipped: 0 },
        keys: { created: 3, updated: 0, unchanged: 0, skipped: 0 },
        overrides: { created: 1, skipped: 0 },
        verifiable: 1,
        pending: 2,
      },
      skipped: [],
    });
    expectNoSecrets(out + err);

    for (const keyId of [rec.keyId, plain.keyId, disabled.keyId]) {
      expect(await keyOn("target", keyId), keyId).toEqual(await keyOn("source", keyId));
    }
    expect((await down("keys.getKey", { keyId: rec.keyId, decrypt: true })).plaintext).toBe(rec.key);
    // At no cost: a credit spent here would be a difference from upstream that the next run puts back.
    expect(await down("keys.verifyKey", { key: rec.key, credits: { cost: 0 } })).toMatchObject({ valid: true, keyId: rec.keyId });
    expect(await down("keys.verifyKey", { key: plain.key })).toMatchObject({ valid: false, code: "NOT_FOUND" });
    const identity = await down("identities.getIdentity", { identity: "acme" });
    expect(identity).toMatchObject({ externalId: "acme", meta: { plan: "secret-plan-value" } });
    expect(identity.ratelimits).toEqual([expect.objectContaining({ name: "tokens", limit: 100, duration: 60_000, autoApply: false })]);
    const overrides = await down("ratelimit.listOverrides", { namespace: "api-calls" });
    expect(overrides).toEqual([expect.objectContaining({ identifier: "vip", limit: 500, duration: 60_000 })]);
    const role = await down("permissions.getRole", { role: "reader" });
    expect(role.permissions.map((p: { slug: string }) => p.slug)).toEqual(["docs.read"]);
  });

  it("running it again creates nothing: every record unchanged", async () => {
    const { code, out, err } = await copy(["--api", apiId, "--ratelimit-namespace", "api-calls", "--journal", journal("first"), "--json"]);
    expect(code, err).toBe(0);
    const { counts } = JSON.parse(out);
    for (const section of ["apis", "permissions", "roles", "identities", "keys", "overrides"]) {
      expect(counts[section], section).toMatchObject({ created: 0, updated: 0 });
    }
    expect(counts.keys.unchanged).toBe(3);
    expect(counts.apis.unchanged).toBe(1);
  });

  it("--check: equal (exit 0), then a key changed upstream is named with its field (exit 1), and a re-run updates it", async () => {
    const equal = await copy(["--api", apiId, "--check"]);
    expect(equal.code, equal.out + equal.err).toBe(0);
    expect(equal.out).toContain(`${apiId}: 3 keys upstream, 3 in keyhaven (verifiable 1, pending 2, adopted 0)`);
    expectNoSecrets(equal.out + equal.err);

    await up("keys.updateKey", { keyId: plain.keyId, name: "renamed", meta: { note: "secret-meta-value", more: 1 } });
    const differs = await copy(["--api", apiId, "--check"]);
    expect(differs.code).toBe(1);
    expect(differs.out).toContain(`${plain.keyId} differs: name, meta`);
    expectNoSecrets(differs.out + differs.err);
    const json = JSON.parse((await copy(["--api", apiId, "--check", "--json"])).out);
    expect(json.equal).toBe(false);
    expect(json.apis[0].differing).toEqual([{ keyId: plain.keyId, fields: ["name", "meta"] }]);

    const again = await copy(["--api", apiId, "--journal", journal("first"), "--json"]);
    expect(again.code, again.err).toBe(0);
    expect(JSON.parse(again.out).counts.keys).toMatchObject({ created: 0, updated: 1, unchanged: 2 });
    expect((await copy(["--api", apiId, "--check"])).code).toBe(0);
  });

  it("the human summary prints counts per kind and where the keys stand", async () => {
    const { code, out, err } = await copy(["--api", apiId, "--journal", journal("human")]);
    expect(code, err).toBe(0);
    expect(out).toMatch(/^keys: +3 \(created 0, updated 0, unchanged 3, skipped 0\): verifiable now 1, pending 2$/m);
    expect(out).toMatch(/^apis: +1 \(created 0, updated 0, unchanged 1, skipped 0\)$/m);
    expectNoSecrets(out + err);
  });

  it("kill -9 mid-run, then the same command resumes: exact counts, no duplicates, finished batches not sent again", async () => {
    const bulk = await source.createApi(s, { storeEncryptedKeys: true });
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) ids.push((await up("keys.createKey", { apiId: bulk, name: `bulk${i}`, recoverable: i % 2 === 0 })).keyId);
    const proxy = await proxyTo(targetUrl);
    try {
      const file = journal("killed");
      proxy.holdAfter("keyhaven.copyFromUnkey", 4);
      const args = ["import", "--from-unkey", "--unkey-url", sourceUrl, "--url", proxy.url, "--api", bulk, "--journal", file];
      const cli = keyhaven([...args, "--batch-size", "5", "--concurrency", "1", "--quiet"], env());
      const confirmed = () =>
        existsSync(file)
          ? readFileSync(file, "utf8")
              .split("\n")
              .filter((l) => l.includes('"stream"')).length
          : 0;
      // apis (1 batch) + permissions, roles, identities (1 each) confirmed; the fifth request is held with its answer.
      await waitFor(
        "four batches confirmed and the fifth held",
        () => proxy.requests.filter((r) => r.endsWith("copyFromUnkey")).length === 5 && confirmed() === 4,
        {
          timeoutMs: 60_000,
          detail: () => cli.stderr(),
        },
      );
      cli.child.kill("SIGKILL");
      await cli.exited;
      proxy.release();
      const before = confirmed();
      const sentBefore = proxy.requests.length;

      const resumed = await run(
        ["--from-unkey", "--unkey-url", sourceUrl, "--url", proxy.url, "--api", bulk, "--journal", file, "--batch-size", "5", "--json"],
        env(),
      );
      expect(resumed.code, resumed.err).toBe(0);
      expect(resumed.err).toContain(`resuming: ${before} batches confirmed by an earlier run`);
      // The progress display (not a terminal: plain lines on stderr).
      expect(resumed.err).toMatch(/^\d+ records, \d+ records\/s$/m);
      const summary = JSON.parse(resumed.out);
      // The held batch was applied but never confirmed: sent again with its Idempotency-Key, it is answered as the
      // first time, so the counts are exact.
      expect(summary.counts.keys).toMatchObject({ created: 60, updated: 0, unchanged: 0, skipped: 0 });
      expect(summary.counts.verifiable).toBe(30);
      expect(summary.counts.pending).toBe(30);
      expect(summary.resumedBatches).toBe(before);
      // Only the 12 batches of keys (60 in fives) went again: the apis, permissions, roles and identities were not.
      expect(proxy.requests.slice(sentBefore).filter((r) => r.endsWith("copyFromUnkey")).length).toBe(12);
      const status = await down("keyhaven.getCopyStatus", { apiIds: [bulk] });
      expect(status).toEqual([{ apiId: bulk, found: true, keys: 60, verifiable: 30, pending: 30, adopted: 0 }]);
      const listed = [];
      let cursor: string | undefined;
      do {
        const res = await target.post("/v2/apis.listKeys", { apiId: bulk, limit: 100, ...(cursor && { cursor }) }, t.rootKey);
        listed.push(...res.body.data.map((k: { keyId: string }) => k.keyId));
        cursor = res.body.pagination?.hasMore ? res.body.pagination.cursor : undefined;
      } while (cursor);
      expect(listed.sort()).toEqual([...ids].sort());
    } finally {
      await proxy.close();
    }
  });

  it("a batch past keyhaven's 1 MiB per request goes as several requests: every key copied, none twice", async () => {
    const big = await source.createApi(s, {});
    // 24 keys of about 60 KB of meta each: 1.4 MB in one batch of keys, more than one request may carry.
    const filler = "m".repeat(60_000);
    const ids: string[] = [];
    for (let i = 0; i < 24; i++) ids.push((await up("keys.createKey", { apiId: big, name: `big ${i}`, meta: { filler, i } })).keyId);
    const { code, out, err } = await copy(["--api", big, "--journal", journal("big"), "--json"]);
    expect(code, err).toBe(0);
    expect(JSON.parse(out).counts.keys).toMatchObject({ created: 24, updated: 0, unchanged: 0 });
    const status = await down("keyhaven.getCopyStatus", { apiIds: [big] });
    expect(status).toEqual([{ apiId: big, found: true, keys: 24, verifiable: 0, pending: 24, adopted: 0 }]);
    const copied = await down("keys.getKey", { keyId: ids[23] });
    expect(copied.meta).toEqual({ filler, i: 23 });
  });

  it("records keyhaven cannot hold (ids another workspace has) are skipped with why: exit 1, the rest copied", async () => {
    const taken = await source.createApi(s, {});
    const key = await up("keys.createKey", { apiId: taken, name: "taken" });
    const other = await target.tenant();
    // Into another workspace first: its key and API are copied there (the permissions, roles and identity the
    // first test copied into this one are skipped there: their ids are taken).
    const first = await copy(["--api", taken, "--journal", journal("other"), "--json"], {
      env: { UNKEY_ROOT_KEY: s.rootKey, KEYHAVEN_ROOT_KEY: other.rootKey },
    });
    expect(first.code, first.err).toBe(1);
    expect(JSON.parse(first.out).counts).toMatchObject({ apis: { created: 1 }, keys: { created: 1 } });
    const { code, out, err } = await copy(["--api", taken, "--api", apiId, "--journal", journal("taken")]);
    expect(code, err).toBe(1);
    expect(out).toContain(`skipped api ${taken} (by keyhaven): `);
    expect(out).toContain(`skipped key ${key.keyId} (by keyhaven): `);
    expect(out).toMatch(/^keys: +3 \(created 0, updated 0, unchanged 3, skipped 1\)/m);
    expectNoSecrets(out + err);
  });

  it("an Unkey root key that may not decrypt: said once, the keys read without plaintexts; a verifiable key stays verifiable", async () => {
    const reader = await source.rootKey(s.workspaceId, [
      "api.*.read_api",
      "api.*.read_key",
      "identity.*.read_identity",
      "rbac.*.read_role",
      "rbac.*.read_permission",
    ]);
    const { code, out, err } = await copy(["--api", apiId, "--journal", journal("reader"), "--json"], {
      env: { UNKEY_ROOT_KEY: reader, KEYHAVEN_ROOT_KEY: t.rootKey },
    });
    expect(code, err).toBe(0);
    expect(err.match(/may not decrypt/g)?.length).toBe(1);
    const summary = JSON.parse(out);
    expect(summary.decryptRefused).toEqual({ forbidden: [apiId], unavailable: [] });
    expect(summary.counts.keys).toMatchObject({ created: 0, updated: 0, unchanged: 3 });
    expect(await down("keys.verifyKey", { key: rec.key, credits: { cost: 0 } })).toMatchObject({ valid: true });
    expect(out + err).not.toContain(reader);
  });

  it("a run stopped by an outage, resumed naming one more --api: that API is read and copied too", async () => {
    const later = await source.createApi(s, { storeEncryptedKeys: true });
    const laterKey = await up("keys.createKey", { apiId: later, name: "later", recoverable: true });
    const proxy = await proxyTo(targetUrl);
    try {
      const file = journal("grown");
      // The APIs, permissions, roles and identities are confirmed; the keys' batch meets a keyhaven that stays at 429.
      proxy.throttle("keyhaven.copyFromUnkey", 1000, 4);
      const stopped = await copy(["--api", apiId, "--journal", file, "--attempts", "1"], { url: proxy.url });
      expect(stopped.code, stopped.err).toBe(3);
      expect(stopped.err).toContain("resume with the same command");
      proxy.throttle("keyhaven.copyFromUnkey", 0);
      const resumed = await copy(["--api", apiId, "--api", later, "--journal", file, "--json"], { url: proxy.url });
      expect(resumed.code, resumed.err).toBe(0);
      expect(JSON.parse(resumed.out).counts.apis).toMatchObject({ created: 1, unchanged: 1 });
      expect(await down("keys.verifyKey", { key: laterKey.key, credits: { cost: 0 } })).toMatchObject({
        valid: true,
        keyId: laterKey.keyId,
      });
    } finally {
      await proxy.close();
    }
  });

  it("a keyhaven refusing a batch and quoting its body: exit 1, the refusal shown without any plaintext or root key", async () => {
    const echo = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString()));
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        // Every other section is taken (with no counts: the command's schema allows an absent section); the keys refused.
        if (!body.startsWith('{"keys"')) {
          res.end(JSON.stringify({ meta: { requestId: "req_ok" }, data: {} }));
          return;
        }
        res.statusCode = 400;
        // What a careless server might quote: the secrets of the request (its plaintexts, its Authorization).
        const plaintexts = (JSON.parse(body).keys as { plaintext?: string }[]).flatMap((k) => (k.plaintext ? [k.plaintext] : []));
        const detail = `keys[1].plaintext ${plaintexts.join(" ")} is refused; ${req.headers.authorization ?? ""}`;
        res.end(
          JSON.stringify({
            meta: { requestId: "req_echo" },
            error: { type: "https://unkey.com/docs/errors/unkey/application/invalid_input", detail, status: 400, title: "Bad Request" },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
      const { code, out, err } = await copy(["--api", apiId, "--journal", journal("echo")], { url });
      expect(code).toBe(1);
      expect(err).toContain("keyhaven keyhaven.copyFromUnkey answered 400");
      expect(err).toContain("keys[1].plaintext [a key's plaintext] is refused; Bearer [the keyhaven root key]");
      expect(err).toContain(`a batch of 3 keys of keys:${apiId}`);
      expectNoSecrets(out + err);
    } finally {
      await new Promise<void>((resolve) => echo.close(() => resolve()));
    }
  });

  it("429s from keyhaven and from Unkey are waited out and retried", async () => {
    const unkeyProxy = await proxyTo(sourceUrl);
    const keyhavenProxy = await proxyTo(targetUrl);
    try {
      unkeyProxy.throttle("apis.listKeys", 2);
      keyhavenProxy.throttle("keyhaven.copyFromUnkey", 2);
      const { code, out, err } = await run(
        [
          "--from-unkey",
          "--unkey-url",
          unkeyProxy.url,
          "--url",
          keyhavenProxy.url,
          "--api",
          apiId,
          "--journal",
          journal("throttled"),
          "--json",
        ],
        env(),
      );
      expect(code, err).toBe(0);
      expect(JSON.parse(out).counts.keys).toMatchObject({ created: 0, unchanged: 3 });
      expect(err).toMatch(/Unkey apis\.listKeys: 429/);
      expect(err).toMatch(/keyhaven keyhaven\.copyFromUnkey: 429/);
      expectNoSecrets(out + err);
    } finally {
      await unkeyProxy.close();
      await keyhavenProxy.close();
    }
  });

  it("a keyhaven down: exit 3, resumable, nothing secret printed", async () => {
    const { code, out, err } = await copy(["--api", apiId, "--journal", journal("down"), "--attempts", "1"], { url: "http://127.0.0.1:9" });
    expect(code).toBe(3);
    expect(err).toContain("resume with the same command");
    expectNoSecrets(out + err);
  });

  it("usage: no keyhaven root key, --dry-run with --check, a bad --batch-size: exit 2", async () => {
    const noKey = await copy(["--api", apiId], { env: { UNKEY_ROOT_KEY: s.rootKey } });
    expect(noKey.code).toBe(2);
    expect(noKey.err).toContain("set KEYHAVEN_ROOT_KEY or pass --root-key");
    const both = await copy(["--api", apiId, "--dry-run", "--check"]);
    expect(both.code).toBe(2);
    const batch = await copy(["--api", apiId, "--batch-size", "1001"]);
    expect(batch.code).toBe(2);
    expect(batch.err).toContain("--batch-size must be an integer from 1 to 1000");
  });
});

describe("what the copy sends and compares", () => {
  const key = (fields: Record<string, unknown> = {}) =>
    keySchema.parse({ keyId: "key_123", start: "sk_1", enabled: true, createdAt: 1, ...fields });

  it("a key's permissions are sent as direct only where its roles do not give them; a plaintext makes it recoverable", () => {
    const roles = new Map([["reader", ["docs.read"]]]);
    const k = toCopyKey(key({ roles: ["reader"], permissions: ["docs.read", "docs.write"], plaintext: "sk_secret" }), "api_1", roles);
    expect(k).toMatchObject({
      id: "key_123",
      apiId: "api_1",
      roles: ["reader"],
      permissions: ["docs.write"],
      plaintext: "sk_secret",
      recoverable: true,
    });
    expect(toCopyKey(key({ identity: { id: "id_1", externalId: "acme" } }), "api_1", roles)).toMatchObject({ identityId: "id_1" });
    expect(toCopyKey(key(), "api_1", roles)).not.toHaveProperty("recoverable");
  });

  it("splits a batch by bytes, in order, under the 1 MiB keyhaven reads; an item too large alone is skipped with why", () => {
    const item = (id: string, bytes: number) => toCopyKey(key({ keyId: id, meta: { filler: "x".repeat(bytes) } }), "api_1", new Map());
    const items = [item("key_a", 400_000), item("key_b", 400_000), item("key_c", 400_000), item("key_huge", COPY_REQUEST_BYTES)];
    const { requests, tooLarge } = byBytes("keys", items);
    expect(requests.map((r) => r.map((k) => (k as { id: string }).id))).toEqual([["key_a", "key_b"], ["key_c"]]);
    for (const r of requests) expect(Buffer.byteLength(JSON.stringify({ keys: r }))).toBeLessThan(COPY_REQUEST_BYTES);
    expect(tooLarge).toEqual([{ id: "key_huge", reason: expect.stringContaining("1 MiB per request"), local: true }]);
  });

  it("fields compare regardless of order (meta keys, roles, rate limits)", () => {
    const a = key({
      meta: { a: 1, b: 2 },
      roles: ["x", "y"],
      ratelimits: [{ id: "1", name: "a", limit: 1, duration: 1000, autoApply: true }],
    });
    const b = key({
      meta: { b: 2, a: 1 },
      roles: ["y", "x"],
      ratelimits: [{ id: "2", name: "a", limit: 1, duration: 1000, autoApply: true }],
    });
    expect(differingFields(a, b)).toEqual([]);
    expect(differingFields(a, key({ ...b, name: "n", enabled: false }))).toEqual(["name", "enabled"]);
  });
});
