import { createHash, randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";
import { createServices } from "../src/services.js";
import { ADMIN_TOKEN, createHarness, type Harness } from "./helper.js";

describe.each(["trace", "debug"] as const)("logs at LOG_LEVEL=%s", (level) => {
  let h: Harness;
  let app: FastifyInstance;
  const lines: string[] = [];
  const requestIds: string[] = [];
  const secrets: string[] = [];

  const call = async (method: "GET" | "POST", url: string, body?: unknown, authorization?: string) => {
    const res = await app.inject({
      method,
      url,
      headers: {
        ...(body !== undefined && { "content-type": "application/json" }),
        ...(authorization && { authorization: `Bearer ${authorization}` }),
      },
      ...(body !== undefined && { payload: JSON.stringify(body) }),
    });
    requestIds.push(res.headers["unkey-request-id"] as string);
    return { status: res.statusCode, body: JSON.parse(res.body) };
  };

  beforeAll(async () => {
    h = await createHarness();
    // The same app as the harness's, on the same store, but logging into `lines` as the server would.
    app = await buildApp({
      deps: await createServices(h.config, h.store, { ratelimiter: h.ratelimiter }),
      logger: { level, stream: { write: (line: string) => lines.push(line) } },
    });
    const t = await h.tenant();
    const plaintext = `sk_live_${randomBytes(16).toString("hex")}`;
    const hashed = `sk_hash_${randomBytes(16).toString("hex")}`;
    const hash = createHash("sha256").update(hashed).digest("base64");
    secrets.push(t.rootKey, plaintext, hashed, hash, ADMIN_TOKEN, h.config.encryptionKey!.toString("base64"));

    const api = await call("POST", "/v1/apis.createApi", { name: "logged" }, t.rootKey);
    expect(api.status).toBe(200);
    const imported = await call(
      "POST",
      "/v1/migrations.createKeys",
      [
        { apiId: api.body.apiId, plaintext },
        { apiId: api.body.apiId, hash: { value: hash, variant: "sha256_base64" } },
      ],
      t.rootKey,
    );
    expect(imported.status).toBe(200);
    // The same keys again: a conflict, whose message must not carry them either.
    expect((await call("POST", "/v1/migrations.createKeys", [{ apiId: api.body.apiId, plaintext }], t.rootKey)).status).toBe(409);
    expect((await call("POST", "/v1/keys.verifyKey", { key: plaintext }, t.rootKey)).body.code).toBe("VALID");
    expect((await call("POST", "/v1/keys.verifyKey", { key: hashed })).body.code).toBe("VALID");
    expect((await call("POST", "/v1/keys.whoami", { key: plaintext }, t.rootKey)).status).toBe(200);
    const decrypted = await call("GET", `/v1/apis.listKeys?apiId=${api.body.apiId}&decrypt=true`, undefined, t.rootKey);
    expect(decrypted.body.keys.map((k: { plaintext?: string }) => k.plaintext)).toContain(plaintext);
    const created = await call("POST", "/v1/keys.createKey", { apiId: api.body.apiId }, t.rootKey);
    expect(created.status).toBe(200);
    secrets.push(created.body.key);
    const rootKey = await call("POST", "/v1/rootKeys.createRootKey", { workspaceId: t.workspaceId, permissions: ["*"] }, ADMIN_TOKEN);
    expect(rootKey.status).toBe(200);
    secrets.push(rootKey.body.key);
    // A customer portal session: its link's code is in a URL (the portal page's), its token in a cookie.
    expect(
      (await call("POST", "/v2/keyhaven.createPortal", { apiId: api.body.apiId, slug: "logged-portal", name: "Logged" }, t.rootKey)).status,
    ).toBe(200);
    const mint = async () => {
      const session = await call(
        "POST",
        "/v2/portal.createSession",
        { portal: "logged-portal", externalId: "logged_user", scopes: ["keys:read"] },
        t.rootKey,
      );
      expect(session.status).toBe(200);
      const code = new URL(session.body.data.url).searchParams.get("code")!;
      secrets.push(code);
      return code;
    };
    // The portal page exchanges a code from its URL and sets its cookie: neither may be logged.
    const page = await app.inject({ method: "GET", url: `/portal/?code=${await mint()}` });
    expect(page.statusCode).toBe(303);
    requestIds.push(page.headers["unkey-request-id"] as string);
    const pageToken = /=(pat_[A-Za-z0-9]+)/.exec(String(page.headers["set-cookie"]))?.[1];
    expect(pageToken).toBeDefined();
    secrets.push(pageToken!);
    const code = await mint();
    const exchanged = await call("POST", "/v2/portal.exchangeCode", { code });
    expect(exchanged.status).toBe(200);
    secrets.push(exchanged.body.data.accessToken);
    const listed = await app.inject({
      method: "POST",
      url: "/v2/portal.listKeys",
      headers: { "content-type": "application/json", cookie: `portal_session=${exchanged.body.data.accessToken}` },
      payload: "{}",
    });
    expect(listed.statusCode).toBe(200);
    requestIds.push(listed.headers["unkey-request-id"] as string);
    // Refusals: a wrong root key, a wrong admin token, an unknown path.
    expect((await call("POST", "/v1/apis.createApi", { name: "refused" }, `${t.rootKey}x`)).status).toBe(403);
    expect((await call("POST", "/v1/workspaces.createWorkspace", { name: "refused" }, `${ADMIN_TOKEN}x`)).status).toBe(403);
    expect((await call("GET", "/v1/nope")).status).toBe(404);
  });
  afterAll(async () => {
    await app?.close();
    await h?.close();
  });

  it("writes structured JSON lines", () => {
    expect(lines.length).toBeGreaterThanOrEqual(2 * requestIds.length);
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
  });

  it("never writes a root key, an API key, a plaintext, a hash, the admin token or the encryption key", () => {
    const all = lines.join("");
    for (const secret of secrets) expect(all.includes(secret), `a log line contains ${secret.slice(0, 6)}…`).toBe(false);
    expect(all).not.toMatch(/khroot_/);
  });

  it("puts the request id on every line about a request, the same one the client got", () => {
    const entries = lines.map((l) => JSON.parse(l));
    const aboutRequests = entries.filter((e) => e.req || e.res || e.reqId || /request/.test(e.msg ?? ""));
    expect(aboutRequests.length).toBeGreaterThanOrEqual(2 * requestIds.length);
    for (const e of aboutRequests) expect(e.reqId, JSON.stringify(e)).toMatch(/^req_/);
    const logged = new Set(aboutRequests.map((e) => e.reqId));
    expect([...logged].sort()).toEqual([...new Set(requestIds)].sort());
    // Each request: one line when it comes in, one when it is answered, with its status.
    for (const id of requestIds) {
      const own = entries.filter((e) => e.reqId === id);
      expect(own.some((e) => e.msg === "incoming request")).toBe(true);
      expect(own.some((e) => e.msg === "request completed" && typeof e.res?.statusCode === "number")).toBe(true);
    }
  });
});

describe("a failed query", () => {
  let h: Harness;
  let app: FastifyInstance;
  const lines: string[] = [];
  beforeAll(async () => {
    h = await createHarness({}, { migrationWorker: false });
    app = await buildApp({
      deps: await createServices(h.config, h.store, { ratelimiter: h.ratelimiter }),
      logger: { level: "info", stream: { write: (line: string) => lines.push(line) } },
    });
    // Every insert of a key fails inside the database, as an outage or a deadlock would.
    await h.sql(`create function keyhaven_test_refuse() returns trigger language plpgsql as $$
      begin raise exception 'refused by the test'; end $$`);
    await h.sql("create trigger keyhaven_test_refuse before insert on keys for each row execute function keyhaven_test_refuse()");
  });
  afterAll(async () => {
    await app?.close();
    await h?.close();
  });

  it("is logged with the database's message and code, never the query's parameters (key hashes)", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const hash = createHash("sha256")
      .update(`sk_${randomBytes(16).toString("hex")}`)
      .digest("base64");
    const res = await app.inject({
      method: "POST",
      url: "/v1/migrations.createKeys",
      headers: { "content-type": "application/json", authorization: `Bearer ${t.rootKey}` },
      payload: JSON.stringify([{ apiId, hash: { value: hash, variant: "sha256_base64" } }]),
    });
    expect(res.statusCode).toBe(500);
    expect(res.body).not.toContain(hash);
    const logged = lines.map((l) => JSON.parse(l)).find((e) => e.msg === "unhandled error");
    expect(logged?.err).toMatchObject({ type: "DatabaseError", message: "database query failed: refused by the test", code: "P0001" });
    expect(lines.join("")).not.toContain(hash);
  });

  it("is stored for migrations.getMigration as its SQLSTATE only", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const hash = createHash("sha256")
      .update(`sk_${randomBytes(16).toString("hex")}`)
      .digest("base64");
    const res = await h.post(
      "/v1/migrations.enqueueKeys",
      { migrationId: "m-logging", apiId, keys: [{ hash: { value: hash, variant: "sha256_base64" } }] },
      t.rootKey,
    );
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    // A failure that retrying cannot fix (not a connection, timeout, lock or serialization failure): failed at once.
    expect(await h.jobs.migrationWorker.processNext()).toBe(true);
    const [stored] = await h.sql<{ refusal: unknown }>("select refusal from migration_errors");
    expect(stored?.refusal).toEqual({ kind: "importBatchFailed", failure: "unexpected database error (SQLSTATE P0001)" });
    const shown = await h.get("/v1/migrations.getMigration", { migrationId: "m-logging" }, t.rootKey);
    expect((shown.body as { errors: { message: string }[] }).errors[0]?.message).toBe(
      "the batch could not be imported: unexpected database error (SQLSTATE P0001)",
    );
    expect(JSON.stringify(shown.body)).not.toContain(hash);
  });
});
