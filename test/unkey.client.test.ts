import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type UnkeyClientOptions, UnkeyClient, UnkeyDecryptRefused, UnkeyError, type UnkeyPage } from "../src/cli/unkey/unkey.client.js";
import { resolveUnkeyRootKey, UnkeyRootKeyError } from "../src/cli/unkey/unkey.rootKey.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { freePort } from "./wait.js";

/**
 * The reading half of `keyhaven import --from-unkey` (issue 36 §1): the Unkey v2 client against a real keyhaven
 * serving its v2 routes over a port as the "hosted Unkey" (seeded through those routes), and against a small
 * stand-in (node:http) for what keyhaven-as-Unkey does not do: 429s with Retry-After, hanging answers, malformed
 * bodies, servers that echo the root key.
 */

/** Every item of every page, and the pages themselves. */
async function collect<T>(pages: AsyncIterable<UnkeyPage<T>>) {
  const all: UnkeyPage<T>[] = [];
  for await (const page of pages) all.push(page);
  return { pages: all, items: all.flatMap((p) => p.items) };
}

/** The error a promise rejects with (fails if it resolves). */
async function failure(promise: Promise<unknown>): Promise<UnkeyError> {
  const err = await promise.then(
    (v) => new Error(`expected a rejection, got ${JSON.stringify(v)}`),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UnkeyError);
  return err as UnkeyError;
}

/** Every way an error is shown: message, stack, inspect, JSON (its fields). */
const shown = (err: unknown) => [String(err), (err as Error).stack ?? "", inspect(err, { depth: 5 }), JSON.stringify(err)].join("\n");

describe("against keyhaven as hosted Unkey", () => {
  let h: Harness;
  let t: Tenant;
  let baseUrl: string;
  let apiId: string;
  let plainApiId: string;
  const keyIds: string[] = [];
  let rich: { keyId: string; key: string };
  const client = (options: Partial<UnkeyClientOptions> = {}) =>
    new UnkeyClient({ rootKey: t.rootKey, baseUrl, pageSize: 3, backoffMs: 1, timeoutMs: 10_000, ...options });

  const v2 = async (route: string, body: unknown, rootKey = t.rootKey) => {
    const res = await h.post(`/v2/${route}`, body, rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data;
  };

  beforeAll(async () => {
    h = await createHarness();
    t = await h.tenant();
    baseUrl = await h.app.listen({ port: 0, host: "127.0.0.1" });
    // An API storing keys encrypted: v2's createApi takes a name only (hosted Unkey sets this in its dashboard).
    apiId = await h.createApi(t, { storeEncryptedKeys: true });
    plainApiId = (await v2("apis.createApi", { name: "plain-api" })).apiId;
    await v2("permissions.createRole", { name: "reader", description: "reads docs", permissions: ["docs.read", "docs.list"] });
    await v2("permissions.createRole", { name: "writer", permissions: ["docs.write"] });
    await v2("identities.createIdentity", {
      externalId: "acme",
      meta: { plan: "pro" },
      ratelimits: [{ name: "requests", limit: 10, duration: 60_000, autoApply: true }],
    });
    rich = await v2("keys.createKey", {
      apiId,
      name: "rich",
      prefix: "sk",
      meta: { team: "billing" },
      roles: ["reader"],
      permissions: ["docs.extra"],
      externalId: "acme",
      expires: Date.now() + 86_400_000,
      credits: { remaining: 5, refill: { interval: "monthly", amount: 10, refillDay: 3 } },
      ratelimits: [{ name: "burst", limit: 3, duration: 1000, autoApply: false }],
      enabled: false,
      recoverable: true,
    });
    keyIds.push(rich.keyId);
    for (let i = 0; i < 7; i++) keyIds.push((await v2("keys.createKey", { apiId, name: `k${i}` })).keyId);
    await v2("ratelimit.limit", { namespace: "api-calls", identifier: "warmup", limit: 10, duration: 1000 });
    await v2("ratelimit.setOverride", { namespace: "api-calls", identifier: "user_*", limit: 50, duration: 60_000 });
    await v2("ratelimit.setOverride", { namespace: "api-calls", identifier: "vip", limit: 500, duration: 60_000 });
  });
  afterAll(() => h?.close());

  it("getApi answers the API's id and name; a missing API is refused with Unkey's code and detail", async () => {
    expect(await client().getApi(plainApiId)).toEqual({ id: plainApiId, name: "plain-api" });
    const err = await failure(client().getApi("api_missing123"));
    expect(err.kind).toBe("refused");
    expect(err.route).toBe("apis.getApi");
    expect(err.status).toBe(404);
    expect(err.code).toBe("unkey/data/api_not_found");
    expect(err.info.detail).toBe("The requested API does not exist or has been deleted.");
    expect(err.info.attempts).toBe(1);
    expect(err.message).toMatch(/^Unkey apis\.getApi answered 404 unkey\/data\/api_not_found: The requested API/);
  });

  it("listKeys pages with the cursor until hasMore is false: every key once, with the fields the contract documents", async () => {
    const { pages, items } = await collect(client().listKeys(apiId));
    expect(pages.length).toBe(3); // 8 keys, 3 a page
    expect(pages.map((p) => p.items.length)).toEqual([3, 3, 2]);
    expect(pages[0]!.cursor).toBeUndefined();
    expect(pages[1]!.cursor).toBe(pages[0]!.nextCursor);
    expect(pages[2]!.nextCursor).toBeUndefined();
    expect(items.map((k) => k.keyId).sort()).toEqual([...keyIds].sort());
    const key = items.find((k) => k.keyId === rich.keyId)!;
    expect(key).toMatchObject({
      name: "rich",
      start: rich.key.slice(0, key.start.length),
      enabled: false,
      meta: { team: "billing" },
      roles: ["reader"],
      credits: { remaining: 5, refill: { interval: "monthly", amount: 10, refillDay: 3 } },
      identity: {
        externalId: "acme",
        meta: { plan: "pro" },
        ratelimits: [{ name: "requests", limit: 10, duration: 60_000, autoApply: true }],
      },
      ratelimits: [{ name: "burst", limit: 3, duration: 1000, autoApply: false }],
    });
    expect(key.permissions?.sort()).toEqual(["docs.extra", "docs.list", "docs.read"]);
    expect(key.expires).toBeGreaterThan(Date.now());
    expect(key.plaintext).toBeUndefined();
    // `from` resumes at a page's cursor.
    const rest = await collect(client().listKeys(apiId, { from: pages[1]!.cursor }));
    expect(rest.items.map((k) => k.keyId)).toEqual(items.slice(3).map((k) => k.keyId));
  });

  it("listKeys with decrypt: true answers the plaintext of a recoverable key, and none for the others", async () => {
    const { items } = await collect(client().listKeys(apiId, { decrypt: true }));
    expect(items.length).toBe(8);
    expect(items.find((k) => k.keyId === rich.keyId)!.plaintext).toBe(rich.key);
    expect(items.filter((k) => k.plaintext !== undefined).length).toBe(1);
  });

  it("decrypt refused by a root key that may not decrypt (403) is a typed outcome; reading without decrypt then works", async () => {
    const reader = await h.rootKey(t.workspaceId, ["api.*.read_api", "api.*.read_key"]);
    const err = await failure(collect(client({ rootKey: reader }).listKeys(apiId, { decrypt: true })));
    expect(err).toBeInstanceOf(UnkeyDecryptRefused);
    expect((err as UnkeyDecryptRefused).reason).toBe("forbidden");
    expect(err.status).toBe(403);
    expect(err.info.attempts).toBe(1);
    expect(shown(err)).not.toContain(reader);
    const { items } = await collect(client({ rootKey: reader }).listKeys(apiId));
    expect(items.length).toBe(8);
  });

  it("decrypt on an API that stores no encrypted keys (412) is a typed outcome too", async () => {
    const err = await failure(collect(client().listKeys(plainApiId, { decrypt: true })));
    expect(err).toBeInstanceOf(UnkeyDecryptRefused);
    expect((err as UnkeyDecryptRefused).reason).toBe("unavailable");
    expect(err.status).toBe(412);
    // Without decrypt the same API reads (it has no keys).
    expect((await collect(client().listKeys(plainApiId))).items).toEqual([]);
  });

  it("a missing API in listKeys is refused, not a decrypt refusal", async () => {
    const err = await failure(collect(client().listKeys("api_missing123", { decrypt: true })));
    expect(err).not.toBeInstanceOf(UnkeyDecryptRefused);
    expect(err).toMatchObject({ kind: "refused", route: "apis.listKeys", status: 404, code: "unkey/data/api_not_found" });
  });

  it("listIdentities, listPermissions, listRoles (with their permissions) and listOverrides read what was seeded", async () => {
    const identities = (await collect(client({ pageSize: 1 }).listIdentities())).items;
    expect(identities).toEqual([
      expect.objectContaining({
        externalId: "acme",
        meta: { plan: "pro" },
        ratelimits: [expect.objectContaining({ name: "requests", limit: 10, duration: 60_000, autoApply: true })],
      }),
    ]);
    const permissions = await collect(client({ pageSize: 2 }).listPermissions());
    expect(permissions.pages.length).toBe(2);
    expect(permissions.items.map((p) => p.slug).sort()).toEqual(["docs.extra", "docs.list", "docs.read", "docs.write"]);
    const roles = await collect(client({ pageSize: 1 }).listRoles());
    expect(roles.pages.length).toBe(2);
    const reader = roles.items.find((r) => r.name === "reader")!;
    expect(reader.description).toBe("reads docs");
    expect(reader.permissions?.map((p) => p.slug).sort()).toEqual(["docs.list", "docs.read"]);
    expect(roles.items.find((r) => r.name === "writer")!.permissions?.map((p) => p.slug)).toEqual(["docs.write"]);
    const overrides = await collect(client({ pageSize: 1 }).listOverrides("api-calls"));
    expect(overrides.pages.length).toBe(2);
    expect(
      overrides.items.map(({ identifier, limit, duration }) => ({ identifier, limit, duration })).sort((a, b) => a.limit - b.limit),
    ).toEqual([
      { identifier: "user_*", limit: 50, duration: 60_000 },
      { identifier: "vip", limit: 500, duration: 60_000 },
    ]);
    expect(overrides.items.every((o) => o.overrideId.length > 0)).toBe(true);
    const err = await failure(collect(client().listOverrides("no-such-namespace")));
    expect(err).toMatchObject({ kind: "refused", status: 404, code: "unkey/data/ratelimit_namespace_not_found" });
  });

  it("an unknown root key is refused (401) and no error shows it", async () => {
    const wrong = `unkey_${"x".repeat(30)}`;
    const err = await failure(client({ rootKey: wrong }).getApi(apiId));
    expect(err).toMatchObject({ kind: "refused", status: 401, code: "unkey/authentication/key_not_found" });
    expect(shown(err)).not.toContain(wrong);
    expect(shown(err)).not.toContain(t.rootKey);
  });
});

/** A stand-in for hosted Unkey: each test sets `handler`; `requests` records what arrived. */
describe("against a stand-in for what keyhaven-as-Unkey does not do", () => {
  const ROOT_KEY = "unkey_standin_secret_0123456789abcdef";
  let server: http.Server;
  let baseUrl: string;
  let requests: { path: string; body: any; authorization: string | undefined; at: number }[] = [];
  let handler: (req: { path: string; body: any; n: number }, res: http.ServerResponse) => void = () => {};
  const sockets = new Set<import("node:net").Socket>();
  const client = (options: Partial<UnkeyClientOptions> = {}) =>
    new UnkeyClient({ rootKey: ROOT_KEY, baseUrl, backoffMs: 1, timeoutMs: 2000, attempts: 3, ...options });

  const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { "content-type": status >= 400 ? "application/problem+json" : "application/json", ...headers });
    res.end(JSON.stringify(body));
  };
  const problem = (res: http.ServerResponse, status: number, type: string, detail: string, headers: Record<string, string> = {}) =>
    json(
      res,
      status,
      { meta: { requestId: "req_standin1" }, error: { title: "x", status, type: `https://unkey.com/docs/errors/${type}`, detail } },
      headers,
    );
  const api = { meta: { requestId: "req_ok" }, data: { id: "api_standin", name: "stand-in" } };
  const key = (keyId: string, extra: Record<string, unknown> = {}) => ({
    keyId,
    start: "sk_ab",
    enabled: true,
    createdAt: 1_700_000_000_000,
    ...extra,
  });

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      let raw = "";
      req.on("data", (c) => {
        raw += c;
      });
      req.on("end", () => {
        const entry = {
          path: req.url ?? "",
          body: raw ? JSON.parse(raw) : undefined,
          authorization: req.headers.authorization,
          at: Date.now(),
        };
        requests.push(entry);
        handler({ path: entry.path, body: entry.body, n: requests.length }, res);
      });
    });
    server.on("connection", (s) => {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  const reset = (h: typeof handler) => {
    requests = [];
    handler = h;
  };

  it("sends POST /v2/<route> with the root key as a bearer token and the route's body", async () => {
    reset((_req, res) => json(res, 200, api));
    expect(await client().getApi("api_standin")).toEqual({ id: "api_standin", name: "stand-in" });
    expect(requests).toEqual([
      expect.objectContaining({ path: "/v2/apis.getApi", body: { apiId: "api_standin" }, authorization: `Bearer ${ROOT_KEY}` }),
    ]);
  });

  it("a 429 with Retry-After (seconds) is waited out, then the 200 is read", async () => {
    reset((req, res) =>
      req.n === 1
        ? problem(res, 429, "user/too_many_requests/workspace_rate_limited", "slow down", { "retry-after": "1" })
        : json(res, 200, api),
    );
    const retries: { delayMs: number; reason: string }[] = [];
    const started = Date.now();
    expect(await client({ onRetry: (r) => retries.push(r) }).getApi("api_standin")).toMatchObject({ id: "api_standin" });
    expect(requests.length).toBe(2);
    expect(requests[1]!.at - requests[0]!.at).toBeGreaterThanOrEqual(950);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(retries).toEqual([expect.objectContaining({ route: "apis.getApi", attempt: 1, delayMs: 1000 })]);
    expect(retries[0]!.reason).toContain("429 user/too_many_requests/workspace_rate_limited");
  });

  it("a Retry-After HTTP date is honoured, and a Retry-After longer than the cap is cut to the cap", async () => {
    const date = new Date(Date.now() + 2000).toUTCString(); // second precision: 1-2 s from now
    reset((req, res) =>
      req.n === 1
        ? problem(res, 429, "user/too_many_requests/workspace_rate_limited", "later", { "retry-after": date })
        : json(res, 200, api),
    );
    await client().getApi("api_standin");
    expect(requests[1]!.at - requests[0]!.at).toBeGreaterThanOrEqual(900);

    reset((req, res) =>
      req.n === 1
        ? problem(res, 429, "user/too_many_requests/workspace_rate_limited", "an hour", { "retry-after": "3600" })
        : json(res, 200, api),
    );
    const started = Date.now();
    await client({ maxRetryAfterMs: 200 }).getApi("api_standin");
    expect(requests.length).toBe(2);
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it("5xx answers are retried; when the attempts run out the error says what failed and how often", async () => {
    reset((req, res) => (req.n < 3 ? problem(res, 503, "unkey/application/service_unavailable", "db down") : json(res, 200, api)));
    await client().getApi("api_standin");
    expect(requests.length).toBe(3);

    reset((_req, res) => problem(res, 500, "unkey/application/unexpected_error", "boom"));
    const err = await failure(client({ attempts: 4 }).getApi("api_standin"));
    expect(requests.length).toBe(4);
    expect(err).toMatchObject({ kind: "unavailable", route: "apis.getApi", status: 500, code: "unkey/application/unexpected_error" });
    expect(err.info.attempts).toBe(4);
    expect(err.message).toBe("Unkey apis.getApi: 500 unkey/application/unexpected_error: boom (request req_standin1) (after 4 attempts)");
  });

  it("a 4xx other than 429 is not retried: the error carries Unkey's code and detail", async () => {
    reset((_req, res) =>
      problem(res, 400, "unkey/application/invalid_input", "POST request body for '/v2/apis.getApi' failed to validate schema"),
    );
    const err = await failure(client().getApi("api_standin"));
    expect(requests.length).toBe(1);
    expect(err).toMatchObject({ kind: "refused", status: 400, code: "unkey/application/invalid_input" });
    expect(err.info.detail).toBe("POST request body for '/v2/apis.getApi' failed to validate schema");
    expect(err.info.requestId).toBe("req_standin1");
  });

  it("a server's detail is shown bounded and without control characters (no terminal escapes)", async () => {
    reset((_req, res) => problem(res, 400, "unkey/application/invalid_input", `\u001b[2J\u001b]0;pwned\u0007bad${"x".repeat(2000)}`));
    const err = await failure(client().getApi("api_standin"));
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the test is that there are none
    expect(err.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    expect(err.info.detail!.length).toBe(501);
    expect(err.info.detail).toMatch(/^ \[2J ]0;pwned badx+…$/);
  });

  it("a non-JSON error answer (a proxy's page, Go's 404 page not found) is refused with its text", async () => {
    reset((_req, res) => {
      res.writeHead(404, { "content-type": "text/plain" });
      res.end("404 page not found\n");
    });
    const err = await failure(client().getApi("api_standin"));
    expect(err).toMatchObject({ kind: "refused", status: 404 });
    expect(err.code).toBeUndefined();
    expect(err.message).toContain("404 page not found");
  });

  it("a hanging answer: the deadline fires on each attempt, then a precise error", async () => {
    reset(() => {}); // never answers
    const started = Date.now();
    const err = await failure(client({ timeoutMs: 300, attempts: 2 }).getApi("api_standin"));
    expect(Date.now() - started).toBeLessThan(3000);
    expect(requests.length).toBe(2);
    expect(err.kind).toBe("unavailable");
    expect(err.message).toBe("Unkey apis.getApi: no answer before the timeout (after 2 attempts)");
  });

  it("a body that never ends is cut by the same deadline", async () => {
    reset((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"meta":{"requestId":"req_x"},"data":');
    });
    const err = await failure(client({ timeoutMs: 300, attempts: 1 }).getApi("api_standin"));
    expect(err).toMatchObject({ kind: "unavailable" });
    expect(err.message).toContain("no answer before the timeout");
  });

  it("a connection refused is retried, then reported", async () => {
    const port = await freePort();
    const err = await failure(client({ baseUrl: `http://127.0.0.1:${port}`, attempts: 2 }).getApi("api_standin"));
    expect(err.kind).toBe("unavailable");
    expect(err.message).toMatch(/^Unkey apis\.getApi: ECONNREFUSED.*\(after 2 attempts\)$/);
  });

  it("a 403 to decrypt is the typed decrypt refusal, not retried; other 403s are plain refusals", async () => {
    reset((req, res) =>
      req.body.decrypt
        ? problem(
            res,
            403,
            "unkey/authorization/insufficient_permissions",
            "Missing one of these permissions: api.*.decrypt_key or api.api_standin.decrypt_key",
          )
        : json(res, 200, { meta: {}, data: [key("key_1")], pagination: { hasMore: false } }),
    );
    const err = await failure(collect(client().listKeys("api_standin", { decrypt: true })));
    expect(err).toBeInstanceOf(UnkeyDecryptRefused);
    expect((err as UnkeyDecryptRefused).reason).toBe("forbidden");
    expect(requests.length).toBe(1);
    expect(requests[0]!.body).toEqual({ apiId: "api_standin", decrypt: true, limit: 100 });
    expect((await collect(client().listKeys("api_standin"))).items.map((k) => k.keyId)).toEqual(["key_1"]);

    reset((_req, res) =>
      problem(res, 403, "unkey/authorization/workspace_disabled", "The provided root key is invalid. The workspace is disabled."),
    );
    const disabled = await failure(collect(client().listKeys("api_standin", { decrypt: true })));
    expect(disabled).not.toBeInstanceOf(UnkeyDecryptRefused);
    expect(disabled).toMatchObject({ kind: "refused", status: 403, code: "unkey/authorization/workspace_disabled" });
  });

  it("a refusal on a later page keeps the pages already read, and says which route failed", async () => {
    reset((req, res) =>
      req.body.cursor === undefined
        ? json(res, 200, { meta: {}, data: [key("key_1")], pagination: { hasMore: true, cursor: "key_2" } })
        : problem(res, 403, "unkey/authorization/insufficient_permissions", "Missing permission"),
    );
    const seen: string[] = [];
    const err = await failure(
      (async () => {
        for await (const page of client().listKeys("api_standin", { decrypt: true })) seen.push(...page.items.map((k) => k.keyId));
      })(),
    );
    expect(seen).toEqual(["key_1"]);
    expect(err).toBeInstanceOf(UnkeyDecryptRefused);
    expect(requests.map((r) => r.body.cursor)).toEqual([undefined, "key_2"]);
  });

  it("unknown fields are ignored and null optional fields read as absent", async () => {
    reset((_req, res) =>
      json(res, 200, {
        meta: { requestId: "req_1", region: "eu" },
        data: [
          key("key_1", { name: null, permissions: null, roles: null, brandNew: { x: 1 }, credits: { remaining: null, future: true } }),
        ],
        pagination: { hasMore: false, extra: 1 },
        more: true,
      }),
    );
    const [k] = (await collect(client().listKeys("api_standin"))).items;
    expect(k).toEqual({ keyId: "key_1", start: "sk_ab", enabled: true, createdAt: 1_700_000_000_000, credits: { remaining: null } });
  });

  it("a malformed answer is an error naming the route and the field, never a crash or a value", async () => {
    const cases: [unknown, RegExp][] = [
      [
        { meta: {}, data: [key("key_1"), key("key_2", { enabled: "yes" })], pagination: { hasMore: false } },
        /^Unkey apis\.listKeys answered 200 with a body the v2 contract does not allow: data\[1\]\.enabled: expected boolean, received string \(item key_2\)$/,
      ],
      [
        { meta: {}, data: [{ ...key("key_3"), keyId: 42 }], pagination: { hasMore: false } },
        /: data\[0\]\.keyId: expected string, received integer$/,
      ],
      [
        { meta: {}, data: [key("key_4", { credits: { remaining: 1.5 } })], pagination: { hasMore: false } },
        /: data\[0\]\.credits\.remaining: expected int, received number \(item key_4\)$/,
      ],
      [
        {
          meta: {},
          data: [key("key_5", { credits: { remaining: 1, refill: { interval: "weekly", amount: 1 } } })],
          pagination: { hasMore: false },
        },
        /: data\[0\]\.credits\.refill\.interval: expected one of "daily" \| "monthly", received string \(item key_5\)$/,
      ],
      [{ meta: {}, data: { keyId: "key_6" }, pagination: { hasMore: false } }, /: data: expected array, received object$/],
      [{ meta: {}, data: [] }, /: pagination: missing$/],
      [{ meta: {}, data: [], pagination: { hasMore: true } }, /: pagination\.cursor: missing while hasMore is true$/],
      [
        { meta: {}, data: [key("key_7", { meta: "s3cr3t-meta" })], pagination: { hasMore: false } },
        /: data\[0\]\.meta: expected record, received string \(item key_7\)$/,
      ],
      [[1, 2], /: the body is not a JSON object \(received array\)$/],
    ];
    for (const [body, expected] of cases) {
      reset((_req, res) => json(res, 200, body));
      const err = await failure(collect(client().listKeys("api_standin")));
      expect(err.kind, JSON.stringify(body)).toBe("malformed");
      expect(err.route).toBe("apis.listKeys");
      expect(err.message).toMatch(expected);
      expect(err.message).not.toContain("yes");
      expect(err.message).not.toContain("weekly");
      expect(shown(err)).not.toContain("s3cr3t");
    }
    reset((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end("<html>not json</html>");
    });
    const notJson = await failure(client().getApi("api_standin"));
    expect(notJson.kind).toBe("malformed");
    expect(notJson.message).toMatch(
      /^Unkey apis\.getApi answered 200 with a body the v2 contract does not allow: the body is not a JSON object/,
    );
  });

  it("a cursor that repeats an earlier page's stops the paging instead of looping forever", async () => {
    reset((_req, res) => json(res, 200, { meta: {}, data: [key("key_1")], pagination: { hasMore: true, cursor: "key_1" } }));
    const err = await failure(collect(client().listKeys("api_standin")));
    expect(err.kind).toBe("malformed");
    expect(err.message).toMatch(/pagination\.cursor: repeats an earlier page's$/);
    expect(requests.length).toBe(2);
  });

  it("the caller's signal stops a backoff wait at once", async () => {
    reset((_req, res) => problem(res, 429, "user/too_many_requests/workspace_rate_limited", "later", { "retry-after": "20" }));
    const controller = new AbortController();
    const started = Date.now();
    const pending = failure(client({ signal: controller.signal, maxRetryAfterMs: 20_000 }).getApi("api_standin"));
    while (requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort();
    const err = await pending;
    expect(err.kind).toBe("aborted");
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("the caller's signal cuts a request in flight short", async () => {
    reset(() => {}); // never answers
    const controller = new AbortController();
    const started = Date.now();
    const pending = failure(client({ signal: controller.signal, timeoutMs: 20_000 }).getApi("api_standin"));
    while (requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort();
    const err = await pending;
    expect(err.kind).toBe("aborted");
    expect(requests.length).toBe(1);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("a 429 in the middle of paging is retried for that page: no page skipped or read twice", async () => {
    const pageOf: Record<string, { data: unknown[]; pagination: unknown }> = {
      start: { data: [key("key_1"), key("key_2")], pagination: { hasMore: true, cursor: "key_3" } },
      key_3: { data: [key("key_3"), key("key_4")], pagination: { hasMore: true, cursor: "key_5" } },
      key_5: { data: [key("key_5")], pagination: { hasMore: false } },
    };
    let limited = false;
    reset((req, res) => {
      if (req.body.cursor === "key_3" && !limited) {
        limited = true;
        return problem(res, 429, "user/too_many_requests/workspace_rate_limited", "later", { "retry-after": "0" });
      }
      json(res, 200, { meta: {}, ...pageOf[req.body.cursor ?? "start"]! });
    });
    const { pages, items } = await collect(client({ pageSize: 2 }).listKeys("api_standin"));
    expect(items.map((k) => k.keyId)).toEqual(["key_1", "key_2", "key_3", "key_4", "key_5"]);
    expect(pages.map((p) => [p.cursor, p.nextCursor])).toEqual([
      [undefined, "key_3"],
      ["key_3", "key_5"],
      ["key_5", undefined],
    ]);
    expect(requests.map((r) => r.body.cursor)).toEqual([undefined, "key_3", "key_3", "key_5"]);
    expect(requests.every((r) => r.body.limit === 2)).toBe(true);
  });

  it("no error of any kind shows the root key, even from a server that echoes it", async () => {
    const echo = (status: number) => (req: { n: number }, res: http.ServerResponse) =>
      problem(res, status, `unkey/echo/${ROOT_KEY}`, `you sent Bearer ${ROOT_KEY} (${req.n})`);
    const errors: unknown[] = [];
    const retryReasons: string[] = [];
    const onRetry = (r: { reason: string }) => retryReasons.push(r.reason);
    for (const status of [400, 401, 403, 404, 412, 500]) {
      reset(echo(status));
      errors.push(await failure(client({ attempts: 2, onRetry }).getApi("api_standin")));
      errors.push(await failure(collect(client({ attempts: 2, onRetry }).listKeys("api_standin", { decrypt: true }))));
    }
    reset((_req, res) => {
      res.writeHead(502, { "content-type": "text/plain" });
      res.end(`bad gateway for ${ROOT_KEY}`);
    });
    errors.push(await failure(client({ attempts: 2, onRetry }).getApi("api_standin")));
    reset((_req, res) => json(res, 200, { meta: {}, data: [key(ROOT_KEY, { enabled: ROOT_KEY })], pagination: { hasMore: false } }));
    errors.push(await failure(collect(client().listKeys("api_standin"))));
    reset(() => {});
    errors.push(await failure(client({ timeoutMs: 100, attempts: 1 }).getApi("api_standin")));
    errors.push(await failure(client({ baseUrl: `http://127.0.0.1:${await freePort()}`, attempts: 1 }).getApi("api_standin")));
    expect(errors.length).toBe(16);
    for (const err of errors) expect(shown(err)).not.toContain(ROOT_KEY);
    expect(retryReasons.length).toBeGreaterThan(0);
    for (const reason of retryReasons) expect(reason).not.toContain(ROOT_KEY);
    // The echoed detail is kept, with the key cut out.
    expect((errors[0] as UnkeyError).info.detail).toBe("you sent Bearer [the Unkey root key] (1)");
  });

  it("options are checked: pageSize within Unkey's 100, positive integers, an http(s) URL without credentials", () => {
    expect(() => client({ pageSize: 101 })).toThrow(/pageSize must be at most 100/);
    expect(() => client({ timeoutMs: 0 })).toThrow(/timeoutMs must be a positive integer/);
    expect(() => client({ baseUrl: "ftp://example.test" })).toThrow(/--unkey-url: must be http/);
    expect(() => client({ baseUrl: "https://user:pw@example.test" })).toThrow(/must not contain credentials/);
    expect(() => client({ rootKey: " " })).toThrow(/root key is required/);
    // A key that cannot go in a header is refused before anything is sent, and the error says nothing of it.
    let unsendable: unknown;
    try {
      client({ rootKey: `${ROOT_KEY}\u2028` });
    } catch (err) {
      unsendable = err;
    }
    expect(String(unsendable)).toMatch(/cannot be sent in an HTTP header \(the value is not shown\)/);
    expect(shown(unsendable)).not.toContain(ROOT_KEY);
    expect(new UnkeyClient({ rootKey: ROOT_KEY })).toBeInstanceOf(UnkeyClient); // default base URL
  });
});

describe("resolveUnkeyRootKey", () => {
  const SECRET = "unkey_resolve_secret_abcdef0123456789";
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "keyhaven-unkey-key-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, content: string | Buffer) => {
    const p = path.join(dir, name);
    writeFileSync(p, content);
    return p;
  };
  const refusal = (source: Parameters<typeof resolveUnkeyRootKey>[0]) => {
    let err: unknown;
    try {
      resolveUnkeyRootKey(source);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UnkeyRootKeyError);
    expect(shown(err)).not.toContain(SECRET);
    return (err as Error).message;
  };

  it("reads UNKEY_ROOT_KEY (trimmed), or the file (trimmed), the file winning", () => {
    expect(resolveUnkeyRootKey({ env: { UNKEY_ROOT_KEY: ` ${SECRET}\n` } })).toBe(SECRET);
    expect(resolveUnkeyRootKey({ env: {}, file: file("key", `\n  ${SECRET}  \r\n`) })).toBe(SECRET);
    expect(resolveUnkeyRootKey({ env: { UNKEY_ROOT_KEY: "other" }, file: file("key2", SECRET) })).toBe(SECRET);
  });

  it("refuses, without showing the key: none given, an empty or missing file, a directory, a huge file, a key that cannot be sent", () => {
    expect(refusal({ env: {} })).toBe("an Unkey root key is required: set UNKEY_ROOT_KEY or pass --unkey-root-key-file <path>");
    expect(refusal({ env: { UNKEY_ROOT_KEY: "   " } })).toMatch(/required/);
    const empty = file("empty", " \n\t\n");
    expect(refusal({ env: { UNKEY_ROOT_KEY: SECRET }, file: empty })).toBe(`--unkey-root-key-file ${empty}: the file is empty`);
    expect(refusal({ env: {}, file: path.join(dir, "nope") })).toMatch(/: cannot open it \(ENOENT\)$/);
    expect(refusal({ env: {}, file: dir })).toMatch(/: not a regular file$/);
    expect(refusal({ env: {}, file: file("huge", `${SECRET}${"x".repeat(5000)}`) })).toMatch(/larger than 4096 bytes/);
    expect(refusal({ env: {}, file: file("two-lines", `${SECRET}\n${SECRET}\n`) })).toMatch(/line break.*\(the value is not shown\)$/);
    expect(refusal({ env: { UNKEY_ROOT_KEY: `${SECRET}\u0000` } })).toMatch(/^UNKEY_ROOT_KEY: the root key contains/);
  });
});

describe("what the Unkey client loads", () => {
  it("nothing of the server or the store: only node's modules, zod and the CLI's own http.ts (import graph of src/cli/unkey)", () => {
    const root = path.resolve(import.meta.dirname, "..");
    const seen = new Set<string>();
    const packages = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const text = readFileSync(file, "utf8");
      // Type-only imports vanish at run time.
      for (const [, typeOnly, spec] of text.matchAll(/^import (type )?[^;]*? from "([^"]+)";/gms)) {
        if (typeOnly) continue;
        if (spec!.startsWith(".")) visit(path.resolve(path.dirname(file), spec!).replace(/\.js$/, ".ts"));
        else packages.add(spec!.replace(/^node:.*/, "node:"));
      }
    };
    visit(path.join(root, "src/cli/unkey/unkey.client.ts"));
    visit(path.join(root, "src/cli/unkey/unkey.rootKey.ts"));
    expect([...seen].map((f) => path.relative(root, f)).sort()).toEqual([
      "src/cli/http.ts",
      "src/cli/unkey/unkey.client.ts",
      "src/cli/unkey/unkey.rootKey.ts",
      "src/unkey/unkey.schemas.ts",
    ]);
    expect([...packages].sort()).toEqual(["node:", "zod"]);
  });
});
