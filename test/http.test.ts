import http from "node:http";
import { describe, expect } from "vitest";
import { BULK_BODY_LIMIT, DEFAULT_BODY_LIMIT } from "../src/wire/v1/rpc.js";
import { test } from "./fixtures.js";
import { createHarness, expectError } from "./helper.js";

// The file's harness and tenant (`h`, `t` of test/fixtures.ts), and two helpers over them.
const it = test
  .extend(
    "rawPost",
    async ({ h, t }) =>
      (url: string, payload: string | Buffer, headers: Record<string, string> = {}) =>
        h.app
          .inject({ method: "POST", url, payload, headers: { authorization: `Bearer ${t.rootKey}`, ...headers } })
          .then((r) => ({ status: r.statusCode, body: JSON.parse(r.body), headers: r.headers })),
  )
  .extend(
    "countApis",
    async ({ h }) =>
      async () =>
        Number((await h.sql<{ n: string }>("select count(*) as n from apis"))[0]!.n),
  );

describe("the call convention", () => {
  it("answers liveness without authentication", async ({ h }) => {
    const res = await h.get("/v1/liveness", {});
    expect(res.status).toBe(200);
    expect(res.body.status).toBeTypeOf("string");
    expect(res.headers["unkey-request-id"]).toMatch(/^req_/);
  });

  it("gives every response its own Unkey-Request-Id and ignores one sent by the client", async ({ h, t }) => {
    const a = await h.post("/v1/apis.createApi", { name: "first" }, t.rootKey, { "unkey-request-id": "req_mine" });
    const b = await h.post("/v1/apis.createApi", { name: "x" }, t.rootKey);
    expect(a.headers["unkey-request-id"]).toMatch(/^req_/);
    expect(a.headers["unkey-request-id"]).not.toBe("req_mine");
    expect(b.headers["unkey-request-id"]).toMatch(/^req_/);
    expect(b.headers["unkey-request-id"]).not.toBe(a.headers["unkey-request-id"]);
  });

  it("answers an unknown path with 404 in the envelope", async ({ h, t }) => {
    expectError(await h.post("/v1/apis.nope", {}, t.rootKey), 404, "NOT_FOUND", "no route POST /v1/apis.nope");
    expectError(await h.get("/", {}), 404, "NOT_FOUND");
  });

  it.for(["GET", "PUT", "DELETE", "PATCH"] as const)("answers %s on a POST route with 405 in the envelope", async (method, { h }) => {
    const res = await h.app.inject({ method, url: "/v1/migrations.createKeys" });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe("POST");
    expectError(
      { status: res.statusCode, body: JSON.parse(res.body), headers: res.headers },
      405,
      "METHOD_NOT_ALLOWED",
      `${method} is not allowed on /v1/migrations.createKeys; use POST`,
    );
  });

  it("answers POST on a GET route with 405", async ({ h, t }) => {
    expectError(await h.post("/v1/apis.getApi", { apiId: "x" }, t.rootKey), 405, "METHOD_NOT_ALLOWED");
  });

  it("points error.docs at this server's error reference, ending in the code, whatever the Host header says", async ({ h }) => {
    const res = await h.post("/v1/apis.createApi", { name: "ok-name" }, undefined, { host: "attacker.example" });
    // Not listening (app.inject): the configured HOST and PORT.
    expect(res.body.error.docs).toBe(`http://${h.config.host}:${h.config.port}/docs/errors/UNAUTHORIZED`);
  });

  it("builds error.docs from the address it listens on, never from the Host header", async () => {
    const own = await createHarness();
    try {
      const url = await own.app.listen({ port: 0, host: "127.0.0.1" });
      const body = await new Promise<string>((resolve, reject) => {
        const req = http.request(`${url}/v1/apis.createApi`, {
          method: "POST",
          headers: { host: "attacker.example:8443", "content-type": "application/json" },
        });
        req.on("response", (res) => {
          let text = "";
          res
            .setEncoding("utf8")
            .on("data", (d: string) => (text += d))
            .on("end", () => resolve(text));
        });
        req.on("error", reject);
        req.end(JSON.stringify({ name: "ok-name" }));
      });
      expect(JSON.parse(body).error.docs).toBe(`${url}/docs/errors/UNAUTHORIZED`);
      expect(body).not.toContain("attacker");
    } finally {
      await own.close();
    }
  });

  it("uses KEYHAVEN_PUBLIC_URL for error.docs when it is set", async () => {
    const own = await createHarness({ KEYHAVEN_PUBLIC_URL: "https://keys.example.com/" });
    try {
      const res = await own.post("/v1/apis.createApi", { name: "ok-name" }, undefined, { host: "attacker.example" });
      expect(res.body.error.docs).toBe("https://keys.example.com/docs/errors/UNAUTHORIZED");
    } finally {
      await own.close();
    }
  });
});

describe("bad bodies are clean 4xx errors that change nothing", () => {
  it("refuses malformed JSON", async ({ rawPost, countApis }) => {
    const before = await countApis();
    const res = await rawPost("/v1/apis.createApi", '{"name": "abc"', { "content-type": "application/json" });
    expectError(res, 400, "BAD_REQUEST", "Malformed JSON in request body");
    expect(await countApis()).toBe(before);
  });

  it("refuses an empty body", async ({ rawPost }) => {
    expectError(
      await rawPost("/v1/apis.createApi", "", { "content-type": "application/json" }),
      400,
      "BAD_REQUEST",
      "Request body is empty; expected JSON",
    );
  });

  it("refuses a body that is not JSON by content type", async ({ rawPost }) => {
    expectError(
      await rawPost("/v1/apis.createApi", "name=abc", { "content-type": "application/x-www-form-urlencoded" }),
      400,
      "BAD_REQUEST",
      "Content-Type must be application/json, got application/x-www-form-urlencoded",
    );
    expectError(await rawPost("/v1/apis.createApi", '{"name":"abc"}', { "content-type": "text/plain" }), 400, "BAD_REQUEST");
  });

  it("refuses a POST without a body as a validation error", async ({ h, t }) => {
    const res = await h.app.inject({ method: "POST", url: "/v1/apis.createApi", headers: { authorization: `Bearer ${t.rootKey}` } });
    expectError({ status: res.statusCode, body: JSON.parse(res.body), headers: res.headers }, 400, "BAD_REQUEST", /^: /);
  });

  it("refuses a body over the route's limit with 413 in the envelope, naming that limit", async ({ rawPost, countApis }) => {
    const before = await countApis();
    const big = JSON.stringify({ name: "x".repeat(DEFAULT_BODY_LIMIT) });
    const res = await rawPost("/v1/apis.createApi", big, { "content-type": "application/json" });
    expectError(res, 413, "PAYLOAD_TOO_LARGE", `Request body is larger than ${DEFAULT_BODY_LIMIT} bytes`);
    expect(await countApis()).toBe(before);
  });

  it("reads bodies up to 1 MiB on the bulk routes only", async ({ rawPost }) => {
    const body = JSON.stringify([{ apiId: "api_missing", plaintext: "sk_0123456789", meta: { pad: "x".repeat(DEFAULT_BODY_LIMIT) } }]);
    // Past the default limit, the import route still reads the body (and finds the API missing)...
    expect((await rawPost("/v1/migrations.createKeys", body, { "content-type": "application/json" })).status).not.toBe(413);
    // ...up to its own limit.
    const huge = JSON.stringify([{ apiId: "api_missing", meta: { pad: "x".repeat(BULK_BODY_LIMIT) } }]);
    expectError(
      await rawPost("/v1/migrations.createKeys", huge, { "content-type": "application/json" }),
      413,
      "PAYLOAD_TOO_LARGE",
      `Request body is larger than ${BULK_BODY_LIMIT} bytes`,
    );
  });

  it("refuses JSON nested deeper than 64 levels", async ({ rawPost }) => {
    const deep = `[{"apiId":"a","hash":{"value":"v","variant":"sha256_base64"},"meta":{"a":${"[".repeat(5000)}${"]".repeat(5000)}}}]`;
    expectError(
      await rawPost("/v1/migrations.createKeys", deep, { "content-type": "application/json" }),
      400,
      "BAD_REQUEST",
      "JSON is nested deeper than 64 levels",
    );
  });

  it("refuses a body of more than 50,000 objects and arrays before parsing it, and takes 50,000", async ({ rawPost }) => {
    const body = (n: number) =>
      `[{"apiId":"api_missing","plaintext":"sk_0123456789","meta":{"a":[${Array(n - 4)
        .fill("[]")
        .join(",")}]}}]`;
    expectError(
      await rawPost("/v1/migrations.createKeys", body(50_001), { "content-type": "application/json" }),
      400,
      "BAD_REQUEST",
      "JSON holds more than 50000 objects and arrays",
    );
    const fits = await rawPost("/v1/migrations.createKeys", body(50_000), { "content-type": "application/json" });
    expect(fits.body.error.message).not.toMatch(/JSON holds/);
  });

  it("refuses an object of more than 1,000 properties before parsing it, and takes 1,000", async ({ rawPost }) => {
    const meta = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(",")}}`;
    const body = (n: number) => `[{"apiId":"api_missing","plaintext":"sk_0123456789","meta":${meta(n)}}]`;
    expectError(
      await rawPost("/v1/migrations.createKeys", body(1_001), { "content-type": "application/json" }),
      400,
      "BAD_REQUEST",
      "JSON has an object with more than 1000 properties",
    );
    const fits = await rawPost("/v1/migrations.createKeys", body(1_000), { "content-type": "application/json" });
    expect(fits.body.error.message).not.toMatch(/JSON has/);
  });

  it.for<[string, string]>([
    ["a NUL character in a value", '{"name":"abc\\u0000def"}'],
    ["a NUL character in a property name", '{"name":"abcdef","x\\u0000":1}'],
    ["a lone surrogate", '{"name":"abc\\ud800"}'],
    ["a lone low surrogate", '{"name":"abc\\udc00x"}'],
    ["a high surrogate followed by another escape", '{"name":"abc\\ud83d\\u0041"}'],
    ["a NUL after an escaped quote", '{"name":"a\\"b\\u0000"}'],
  ])("refuses %s, which PostgreSQL cannot store", async ([, payload], { rawPost, countApis }) => {
    const before = await countApis();
    expectError(await rawPost("/v1/apis.createApi", payload, { "content-type": "application/json" }), 400, "BAD_REQUEST", /NUL/);
    expect(await countApis()).toBe(before);
  });

  it("accepts escaped backslashes and well-formed surrogate pairs", async ({ rawPost }) => {
    const res = await rawPost("/v1/apis.createApi", '{"name":"a\\\\u0000 \\ud83d\\ude00"}', { "content-type": "application/json" });
    expect(res.status).toBe(200);
    expect(res.body.name).toBe("a\\u0000 😀");
  });

  it("names the first failing field as path: message", async ({ h, t }) => {
    const res = await h.post("/v1/migrations.createKeys", [{ apiId: "a", hash: { value: "v", variant: "md5" } }], t.rootKey);
    expectError(res, 400, "BAD_REQUEST", /^0\.hash\.variant: /);
  });

  it("validates before it authenticates, as v1 does", async ({ h }) => {
    expectError(await h.post("/v1/apis.createApi", { name: 1 }), 400, "BAD_REQUEST", /^name: /);
  });
});

describe("the error reference that error.docs points to", () => {
  it("serves a page for every code an error can carry, with its cause and fix", async ({ h }) => {
    const res = await h.post("/v1/apis.createApi", { name: "okay" });
    const docsPath = new URL(res.body.error.docs).pathname;
    const page = await h.app.inject({ method: "GET", url: docsPath });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toMatch(/text\/html/);
    expect(page.body).toContain("UNAUTHORIZED");
    expect(page.body).toContain("Cause.");
    expect(page.body).toContain("Fix.");
    const { errorCodes } = await import("../src/http/errors.js");
    const index = await h.app.inject({ method: "GET", url: "/docs/errors" });
    for (const code of errorCodes) expect(index.body).toContain(`id="${code}"`);
  });

  it("answers an unknown code with the 404 envelope", async ({ h }) => {
    expectError(await h.get("/docs/errors/NOPE", {}), 404, "NOT_FOUND");
  });
});
