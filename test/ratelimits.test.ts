import { randomBytes } from "node:crypto";
import { afterAll, describe, expect } from "vitest";
import { MAX_WINDOW_MS } from "../src/storage/ratelimits/ratelimiter.js";
import { answersEmpty, answersNotFound, answersNotFoundLeaving, describeRootKeyAuthOf } from "./auth-suite.js";
import { callRoute, test } from "./fixtures.js";
import { expectError, type Harness, type Tenant } from "./helper.js";

const HOUR = 3_600_000;
const uniq = (prefix: string) => `${prefix}-${randomBytes(5).toString("hex")}`;

/** Creates a namespace (through an auto-creating limit call on another identifier) and returns its id. */
async function createNamespaceIn(h: Harness, tenant: Tenant, name = uniq("ns")): Promise<{ name: string; id: string }> {
  const res = await h.post("/v1/ratelimits.limit", { namespace: name, identifier: "setup", limit: 1, duration: 1000 }, tenant.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const [row] = await h.sql<{ id: string }>(
    `select id from ratelimit_namespaces where workspace_id = '${tenant.workspaceId}' and name = '${name}'`,
  );
  return { name, id: row!.id };
}

async function setOverrideIn(h: Harness, tenant: Tenant, body: Record<string, unknown>) {
  const res = await h.post("/v1/ratelimits.setOverride", { duration: HOUR, ...body }, tenant.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.overrideId as string;
}

const countRowsIn = async (h: Harness) => {
  const [r] = await h.sql<{ n: number }>(
    `select (select count(*) from ratelimit_namespaces) + (select count(*) from ratelimit_overrides where deleted_at_m is null) as n`,
  );
  return Number(r!.n);
};

// The file's harness and tenant (`h`, `t` of test/fixtures.ts), and helpers over them.
const it = test
  .extend("limitCall", async ({ route }) => route("/v1/ratelimits.limit"))
  .extend(
    "createNamespace",
    async ({ h }) =>
      (tenant: Tenant, name?: string) =>
        createNamespaceIn(h, tenant, name),
  )
  .extend(
    "setOverride",
    async ({ h }) =>
      (tenant: Tenant, body: Record<string, unknown>) =>
        setOverrideIn(h, tenant, body),
  )
  .extend(
    "countRows",
    async ({ h }) =>
      () =>
        countRowsIn(h),
  )
  .extend("list", async ({ route }) => route("/v1/ratelimits.listNamespaces"));

/** Waits out the end of the current hour when fewer than 10 s are left, so a burst sees one window. */
async function awayFromHourBoundary() {
  if (HOUR - (Date.now() % HOUR) < 10_000) await new Promise((r) => setTimeout(r, HOUR - (Date.now() % HOUR) + 100));
}

describe("POST /v1/ratelimits.limit", () => {
  it("counts per fixed window and auto-creates the `default` namespace for a `*` key", async ({ h, limitCall }) => {
    await awayFromHourBoundary();
    const tenant = await h.tenant();
    const identifier = uniq("user");
    const results = [];
    for (let i = 0; i < 4; i++) results.push((await limitCall({ identifier, limit: 3, duration: HOUR }, tenant.rootKey)).body);
    expect(results.map((r) => [r.success, r.limit, r.remaining])).toEqual([
      [true, 3, 2],
      [true, 3, 1],
      [true, 3, 0],
      [false, 3, 0],
    ]);
    const reset = (Math.floor(Date.now() / HOUR) + 1) * HOUR;
    expect(results.every((r) => r.reset === reset)).toBe(true);
    expect(Object.keys(results[0]).sort()).toEqual(["limit", "remaining", "reset", "success"]);
    const rows = await h.sql<{ name: string }>(`select name from ratelimit_namespaces where workspace_id = '${tenant.workspaceId}'`);
    expect(rows).toEqual([{ name: "default" }]);
  });

  it("charges `cost` units, reads without charging at cost 0, and refuses a cost larger than what is left", async ({
    t,
    limitCall,
    createNamespace,
  }) => {
    const ns = await createNamespace(t);
    const identifier = uniq("user");
    const call = (cost: number) => limitCall({ namespace: ns.name, identifier, limit: 10, duration: HOUR, cost });
    expect((await call(4)).body).toMatchObject({ success: true, remaining: 6 });
    expect((await call(0)).body).toMatchObject({ success: true, remaining: 6 });
    expect((await call(7)).body).toMatchObject({ success: false, remaining: 6 });
    expect((await call(6)).body).toMatchObject({ success: true, remaining: 0 });
    expect((await call(1)).body).toMatchObject({ success: false, remaining: 0 });
  });

  it("accepts the largest limit, cost and window (30 days)", async ({ limitCall }) => {
    const body = { identifier: uniq("user"), limit: 2 ** 31 - 1, duration: MAX_WINDOW_MS, cost: 2 ** 31 - 1 };
    const res = await limitCall(body);
    expect(res.body).toMatchObject({ success: true, limit: 2 ** 31 - 1, remaining: 0 });
    expect(res.body.reset % MAX_WINDOW_MS).toBe(0);
    expect((await limitCall({ ...body, cost: 1 })).body).toMatchObject({ success: false, remaining: 0 });
  });

  it("accepts async, meta and resources (async answers exactly like a synchronous call)", async ({ t, limitCall, createNamespace }) => {
    const ns = await createNamespace(t);
    const identifier = uniq("user");
    const body = {
      namespace: ns.name,
      identifier,
      limit: 1,
      duration: HOUR,
      async: true,
      meta: { plan: "pro" },
      resources: [{ type: "project", id: "p_1", name: "dub", meta: { a: 1 } }],
    };
    expect((await limitCall(body)).body).toMatchObject({ success: true, remaining: 0 });
    expect((await limitCall(body)).body).toMatchObject({ success: false, remaining: 0 });
  });

  it("keeps counters apart per namespace, per workspace, and from key rate limits", async ({ h, t, limitCall, createNamespace }) => {
    const a = await createNamespace(t);
    const b = await createNamespace(t);
    const other = await h.tenant();
    await createNamespace(other, a.name);
    const identifier = uniq("user");
    const call = (ns: string, key = t.rootKey) => limitCall({ namespace: ns, identifier, limit: 1, duration: HOUR }, key);
    expect((await call(a.name)).body.success).toBe(true);
    expect((await call(a.name)).body.success).toBe(false);
    expect((await call(b.name)).body.success).toBe(true);
    expect((await call(a.name, other.rootKey)).body.success).toBe(true);

    // A key's limit counts under the key id; a standalone call with that id as identifier has a counter of its own.
    const apiId = await h.createApi(t);
    const { keyId } = await h.importKey(t, apiId, { ratelimit: { limit: 1, refillRate: 1, refillInterval: HOUR } });
    expect((await limitCall({ namespace: "default", identifier: keyId, limit: 1, duration: HOUR })).body.success).toBe(true);
    const [keyCounter] = await h.ratelimiter.check([
      { workspaceId: t.workspaceId, name: "default", identifier: keyId, limit: 1, duration: HOUR, cost: 0 },
    ]);
    expect(keyCounter).toMatchObject({ passed: true, remaining: 1 });
  });

  it("auto-creates a missing namespace only for a key that may create namespaces; else 404, nothing written", async ({
    h,
    t,
    limitCall,
  }) => {
    const name = uniq("ns");
    const body = { namespace: name, identifier: "u1", limit: 5, duration: 60_000 };
    const limitOnly = await h.rootKey(t.workspaceId, ["ratelimit.*.limit"]);
    const createOnly = await h.rootKey(t.workspaceId, ["ratelimit.*.create_namespace"]);
    const both = await h.rootKey(t.workspaceId, ["ratelimit.*.limit", "ratelimit.*.create_namespace"]);
    const rowsOf = () => h.sql(`select id from ratelimit_namespaces where workspace_id = '${t.workspaceId}' and name = '${name}'`);

    expectError(await limitCall(body, limitOnly), 404, "NOT_FOUND", `namespace ${name} not found`);
    expectError(await limitCall(body, createOnly), 403, "INSUFFICIENT_PERMISSIONS");
    expect(await rowsOf()).toHaveLength(0);

    expect((await limitCall(body, both)).body).toMatchObject({ success: true, remaining: 4 });
    expect(await rowsOf()).toHaveLength(1);
    // Once it exists, `ratelimit.*.limit` is enough, and so is the namespace's own `ratelimit.<id>.limit`.
    expect((await limitCall(body, limitOnly)).body).toMatchObject({ success: true, remaining: 3 });
    const [ns] = await rowsOf();
    const scoped = await h.rootKey(t.workspaceId, [`ratelimit.${(ns as { id: string }).id}.limit`]);
    expect((await limitCall(body, scoped)).body).toMatchObject({ success: true, remaining: 2 });
    const otherScope = await h.rootKey(t.workspaceId, ["ratelimit.rlns_other.limit"]);
    expectError(await limitCall(body, otherScope), 403, "INSUFFICIENT_PERMISSIONS");
    expect(await rowsOf()).toHaveLength(1);
  });

  it("applies the exact override first, then the most specific matching wildcard", async ({
    t,
    limitCall,
    createNamespace,
    setOverride,
  }) => {
    const ns = await createNamespace(t);
    await setOverride(t, { namespaceId: ns.id, identifier: "us*", limit: 1 });
    await setOverride(t, { namespaceId: ns.id, identifier: "user_*", limit: 2 });
    await setOverride(t, { namespaceId: ns.id, identifier: "user_*@acme.com", limit: 3 });
    await setOverride(t, { namespaceId: ns.id, identifier: "user_42@acme.com", limit: 4 });
    const limitOf = async (identifier: string) =>
      (await limitCall({ namespace: ns.name, identifier, limit: 100, duration: 60_000, cost: 0 })).body.limit;
    expect(await limitOf("user_42@acme.com")).toBe(4);
    expect(await limitOf("user_7@acme.com")).toBe(3);
    expect(await limitOf("user_7@other.com")).toBe(2);
    expect(await limitOf("user_")).toBe(2);
    expect(await limitOf("usX")).toBe(1);
    expect(await limitOf("someone")).toBe(100);
  });

  it("matches `*` against any run of characters and everything else literally", async ({ t, limitCall, createNamespace, setOverride }) => {
    const ns = await createNamespace(t);
    await setOverride(t, { namespaceId: ns.id, identifier: "a%b_*", limit: 7 });
    await setOverride(t, { namespaceId: ns.id, identifier: "*-x-*", limit: 8 });
    await setOverride(t, { namespaceId: ns.id, identifier: "back\\slash*", limit: 9 });
    const limitOf = async (identifier: string) =>
      (await limitCall({ namespace: ns.name, identifier, limit: 100, duration: 60_000, cost: 0 })).body.limit;
    expect(await limitOf("a%b_")).toBe(7);
    expect(await limitOf("a%b_anything")).toBe(7);
    expect(await limitOf("aZbZanything")).toBe(100);
    expect(await limitOf("abc")).toBe(100);
    expect(await limitOf("1-x-2")).toBe(8);
    expect(await limitOf("-x-")).toBe(8);
    expect(await limitOf("-y-")).toBe(100);
    expect(await limitOf("back\\slash-1")).toBe(9);
    expect(await limitOf("backslash-1")).toBe(100);
  });

  it("uses an override's limit and duration, sees a change on the next call, and forgets a deleted one", async ({
    h,
    t,
    limitCall,
    createNamespace,
    setOverride,
  }) => {
    await awayFromHourBoundary();
    const ns = await createNamespace(t);
    const identifier = uniq("user");
    const call = () => limitCall({ namespace: ns.name, identifier, limit: 100, duration: 60_000 });
    await setOverride(t, { namespaceName: ns.name, identifier, limit: 1, duration: HOUR });
    const first = (await call()).body;
    expect(first).toMatchObject({ success: true, limit: 1, remaining: 0, reset: (Math.floor(Date.now() / HOUR) + 1) * HOUR });
    expect((await call()).body).toMatchObject({ success: false, limit: 1 });
    await setOverride(t, { namespaceName: ns.name, identifier, limit: 3, duration: HOUR });
    expect((await call()).body).toMatchObject({ success: true, limit: 3, remaining: 1 });
    await setOverride(t, { namespaceName: ns.name, identifier, limit: 0, duration: HOUR });
    expect((await call()).body).toMatchObject({ success: false, limit: 0, remaining: 0 });
    expect((await h.post("/v1/ratelimits.deleteOverride", { namespaceId: ns.id, identifier }, t.rootKey)).status).toBe(200);
    expect((await call()).body).toMatchObject({ success: true, limit: 100, remaining: 99 });
  });

  it.for<[Record<string, unknown>, string | RegExp | undefined]>([
    [{ identifier: "" }, /^identifier: /],
    [{ identifier: "x".repeat(513) }, /^identifier: /],
    [{ limit: 0 }, /^limit: /],
    [{ limit: -1 }, /^limit: /],
    [{ limit: 1.5 }, /^limit: /],
    [{ limit: 2 ** 31 }, /^limit: /],
    [{ duration: 999 }, /^duration: /],
    [{ duration: MAX_WINDOW_MS + 1 }, "duration: must be at most 2592000000 ms (30 days)"],
    [{ duration: "60000" }, /^duration: /],
    [{ cost: -1 }, /^cost: /],
    [{ namespace: "" }, /^namespace: /],
    [{ async: "yes" }, /^async: /],
    [{ meta: [] }, /^meta: /],
    [{ resources: [{ type: "project" }] }, /^resources\.0\.id: /],
    [{ identifier: undefined }, /^identifier: /],
    [{ identifier: "a\u0000b" }, undefined],
  ])("refuses %j with 400 and writes nothing", async ([patch, message], { limitCall, countRows }) => {
    const before = await countRows();
    const body = { namespace: uniq("ns"), identifier: "u", limit: 10, duration: 60_000, ...patch };
    expectError(await limitCall(body), 400, "BAD_REQUEST", message);
    expect(await countRows()).toBe(before);
  });

  it("refuses a body over its limit with 413 and writes nothing", async ({ limitCall, countRows }) => {
    const before = await countRows();
    const res = await limitCall({
      namespace: uniq("ns"),
      identifier: "u",
      limit: 1,
      duration: 60_000,
      meta: { pad: "x".repeat(1_100_000) },
    });
    expectError(res, 413, "PAYLOAD_TOO_LARGE");
    expect(await countRows()).toBe(before);
  });
});

describe("POST /v1/ratelimits.setOverride", () => {
  it("creates an override by namespace name or id and updates it in place when set again", async ({
    h,
    t,
    createNamespace,
    setOverride,
  }) => {
    const ns = await createNamespace(t);
    const id = await setOverride(t, { namespaceName: ns.name, identifier: "user_1", limit: 5, duration: 60_000 });
    expect(id).toMatch(/^rlor_/);
    const again = await setOverride(t, { namespaceId: ns.id, identifier: "user_1", limit: 6, duration: 120_000, async: true });
    expect(again).toBe(id);
    const rows = await h.sql(
      `select id, workspace_id, identifier, "limit", duration::float8 as duration, async, deleted_at_m from ratelimit_overrides where namespace_id = '${ns.id}'`,
    );
    expect(rows).toEqual([
      { id, workspace_id: t.workspaceId, identifier: "user_1", limit: 6, duration: 120_000, async: true, deleted_at_m: null },
    ]);
  });

  it("counts an empty namespaceId or namespaceName as not given, as v1 did (its tests send `namespaceId=`)", async ({
    h,
    t,
    createNamespace,
    setOverride,
  }) => {
    const message = "You must provide a namespaceId or a namespaceName";
    const body = { identifier: "user_1", limit: 5, duration: 60_000 };
    const empties: Record<string, string>[] = [{ namespaceId: "" }, { namespaceName: "" }, { namespaceId: "", namespaceName: "" }];
    for (const empty of empties) {
      expectError(await h.post("/v1/ratelimits.setOverride", { ...body, ...empty }, t.rootKey), 400, "BAD_REQUEST", message);
      expectError(
        await h.post("/v1/ratelimits.deleteOverride", { identifier: "user_1", ...empty }, t.rootKey),
        400,
        "BAD_REQUEST",
        message,
      );
      expectError(await h.get("/v1/ratelimits.getOverride", { identifier: "user_1", ...empty }, t.rootKey), 400, "BAD_REQUEST", message);
      expectError(await h.get("/v1/ratelimits.listOverrides", empty, t.rootKey), 400, "BAD_REQUEST", message);
    }
    // An empty id next to a name: the name is used.
    const ns = await createNamespace(t);
    await setOverride(t, { namespaceId: "", namespaceName: ns.name, identifier: "user_1", limit: 3 });
    const got = await h.get("/v1/ratelimits.getOverride", { namespaceId: "", namespaceName: ns.name, identifier: "user_1" }, t.rootKey);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body).toMatchObject({ identifier: "user_1", limit: 3 });
  });

  it("refuses a request naming no namespace (400) and an unknown one (404), writing nothing", async ({ h, t, countRows }) => {
    const before = await countRows();
    const body = { identifier: "user_1", limit: 5, duration: 60_000 };
    expectError(
      await h.post("/v1/ratelimits.setOverride", body, t.rootKey),
      400,
      "BAD_REQUEST",
      "You must provide a namespaceId or a namespaceName",
    );
    // Checked before the root key, as v1 did: the same 400 without one.
    for (const [method, route] of [
      ["post", "setOverride"],
      ["post", "deleteOverride"],
      ["get", "getOverride"],
      ["get", "listOverrides"],
    ] as const) {
      const res =
        method === "post"
          ? await h.post(`/v1/ratelimits.${route}`, body)
          : await h.get(`/v1/ratelimits.${route}`, { identifier: "user_1" });
      expectError(res, 400, "BAD_REQUEST", "You must provide a namespaceId or a namespaceName");
    }
    expectError(
      await h.post("/v1/ratelimits.setOverride", { ...body, namespaceName: "nope" }, t.rootKey),
      404,
      "NOT_FOUND",
      "Namespace nope not found",
    );
    expectError(
      await h.post("/v1/ratelimits.setOverride", { ...body, namespaceId: "rlns_nope" }, t.rootKey),
      404,
      "NOT_FOUND",
      "Namespace rlns_nope not found",
    );
    expect(await countRows()).toBe(before);
  });

  it.for<[Record<string, unknown>, string | RegExp | undefined]>([
    [{ identifier: "ab" }, /^identifier: /],
    [{ identifier: "x".repeat(513) }, /^identifier: /],
    [{ limit: -1 }, /^limit: /],
    [{ limit: 2 ** 31 }, /^limit: /],
    [{ duration: 999 }, /^duration: /],
    [{ duration: MAX_WINDOW_MS + 1 }, "duration: must be at most 2592000000 ms (30 days)"],
    // An empty one counts as not given (the name is used): see above.
    [{ namespaceId: "n".repeat(257) }, "namespaceId: String must contain at most 256 character(s)"],
    [{ async: 1 }, /^async: /],
  ])("refuses %j with 400 and writes nothing", async ([patch, message], { h, t, createNamespace, countRows }) => {
    const ns = await createNamespace(t);
    const before = await countRows();
    const body = { namespaceName: ns.name, identifier: "user_1", limit: 5, duration: 60_000, ...patch };
    expectError(await h.post("/v1/ratelimits.setOverride", body, t.rootKey), 400, "BAD_REQUEST", message);
    expect(await countRows()).toBe(before);
  });
});

describe("GET /v1/ratelimits.getOverride", () => {
  it("reads an override by namespace id or name, `*` identifiers matched literally", async ({ h, t, createNamespace, setOverride }) => {
    const ns = await createNamespace(t);
    const id = await setOverride(t, { namespaceId: ns.id, identifier: "user_*", limit: 5, duration: 60_000 });
    const expected = { id, identifier: "user_*", limit: 5, duration: 60_000, async: false };
    expect((await h.get("/v1/ratelimits.getOverride", { namespaceId: ns.id, identifier: "user_*" }, t.rootKey)).body).toEqual(expected);
    expect((await h.get("/v1/ratelimits.getOverride", { namespaceName: ns.name, identifier: "user_*" }, t.rootKey)).body).toEqual(expected);
    // Given both, the id decides.
    expect(
      (await h.get("/v1/ratelimits.getOverride", { namespaceId: ns.id, namespaceName: "nope", identifier: "user_*" }, t.rootKey)).body,
    ).toEqual(expected);
    expectError(
      await h.get("/v1/ratelimits.getOverride", { namespaceId: ns.id, identifier: "user_1" }, t.rootKey),
      404,
      "NOT_FOUND",
      "Override not found",
    );
  });

  it("answers 400 without a namespace and 404 for an unknown namespace", async ({ h, t }) => {
    expectError(
      await h.get("/v1/ratelimits.getOverride", { identifier: "user_1" }, t.rootKey),
      400,
      "BAD_REQUEST",
      "You must provide a namespaceId or a namespaceName",
    );
    expectError(
      await h.get("/v1/ratelimits.getOverride", { namespaceName: "nope", identifier: "user_1" }, t.rootKey),
      404,
      "NOT_FOUND",
      "Namespace not found",
    );
    expectError(await h.get("/v1/ratelimits.getOverride", { namespaceName: "nope" }, t.rootKey), 400, "BAD_REQUEST", /^identifier: /);
  });
});

describe("GET /v1/ratelimits.listOverrides", () => {
  it("pages a namespace's live overrides by id with an exact total", async ({ h, t, createNamespace, setOverride }) => {
    const ns = await createNamespace(t);
    const ids = [];
    for (const identifier of ["aaa", "bbb", "ccc"]) ids.push(await setOverride(t, { namespaceId: ns.id, identifier, limit: 1 }));
    await setOverride(t, { namespaceId: ns.id, identifier: "ddd", limit: 1 });
    await h.post("/v1/ratelimits.deleteOverride", { namespaceId: ns.id, identifier: "ddd" }, t.rootKey);
    ids.sort();

    const first = await h.get("/v1/ratelimits.listOverrides", { namespaceName: ns.name, limit: "2" }, t.rootKey);
    expect(first.status).toBe(200);
    expect(first.body.total).toBe(3);
    expect(first.body.overrides.map((o: { id: string }) => o.id)).toEqual(ids.slice(0, 2));
    expect(first.body.overrides[0]).toEqual({ id: ids[0], identifier: expect.any(String), limit: 1, duration: HOUR, async: false });
    expect(first.body.cursor).toBe(ids[1]);
    const second = await h.get("/v1/ratelimits.listOverrides", { namespaceId: ns.id, limit: "2", cursor: first.body.cursor }, t.rootKey);
    expect(second.body.overrides.map((o: { id: string }) => o.id)).toEqual(ids.slice(2));
    expect(second.body.cursor).toBeUndefined();
    expect(second.body.total).toBe(3);
  });

  it("answers an empty namespace with no overrides, and refuses bad limits and unknown namespaces", async ({ h, t, createNamespace }) => {
    const ns = await createNamespace(t);
    expect((await h.get("/v1/ratelimits.listOverrides", { namespaceId: ns.id }, t.rootKey)).body).toEqual({ overrides: [], total: 0 });
    for (const limit of ["0", "101", "1.5", "x"]) {
      expectError(await h.get("/v1/ratelimits.listOverrides", { namespaceId: ns.id, limit }, t.rootKey), 400, "BAD_REQUEST", /^limit: /);
    }
    expectError(
      await h.get("/v1/ratelimits.listOverrides", {}, t.rootKey),
      400,
      "BAD_REQUEST",
      "You must provide a namespaceId or a namespaceName",
    );
    expectError(
      await h.get("/v1/ratelimits.listOverrides", { namespaceId: "rlns_nope" }, t.rootKey),
      404,
      "NOT_FOUND",
      "Namespace rlns_nope not found",
    );
  });
});

describe("GET /v1/ratelimits.listNamespaces (keyhaven extension)", () => {
  it("pages the workspace's live namespaces by name, with their ids and an exact total", async ({
    h,
    createNamespace,
    setOverride,
    list,
  }) => {
    const tenant = await h.tenant();
    const made = [];
    for (const name of ["ns-c", "ns-a", "ns-b"]) made.push(await createNamespace(tenant, name));
    const gone = await createNamespace(tenant, "ns-gone");
    await h.sql(`update ratelimit_namespaces set deleted_at_m = 1 where id = '${gone.id}'`);
    await createNamespace(await h.tenant(), "ns-other-workspace");
    const byName = made.sort((a, b) => a.name.localeCompare(b.name)).map(({ id, name }) => ({ id, name }));

    const first = await list({ limit: "2" }, tenant.rootKey);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toEqual({ namespaces: byName.slice(0, 2), cursor: "ns-b", total: 3 });
    const second = await list({ limit: "2", cursor: first.body.cursor }, tenant.rootKey);
    expect(second.body).toEqual({ namespaces: byName.slice(2), total: 3 });
    expect((await list({}, tenant.rootKey)).body).toEqual({ namespaces: byName, total: 3 });
    expect((await list({}, (await h.tenant()).rootKey)).body).toEqual({ namespaces: [], total: 0 });

    // The ids it answers are the ones the override routes accept.
    const [a] = byName;
    await setOverride(tenant, { namespaceId: a!.id, identifier: "user_1", limit: 2 });
    expect((await h.get("/v1/ratelimits.getOverride", { namespaceId: a!.id, identifier: "user_1" }, tenant.rootKey)).body.limit).toBe(2);
  });

  it("accepts `*` and ratelimit.*.read_namespace, and refuses bad limits and cursors with 400", async ({ h, createNamespace, list }) => {
    const tenant = await h.tenant();
    const ns = await createNamespace(tenant);
    for (const perms of [["*"], ["ratelimit.*.read_namespace"]]) {
      const res = await list({}, await h.rootKey(tenant.workspaceId, perms));
      expect(res.body.namespaces, perms[0]).toEqual([{ id: ns.id, name: ns.name }]);
    }
    expectError(
      await list({}, await h.rootKey(tenant.workspaceId, [`ratelimit.${ns.id}.read_namespace`])),
      403,
      "INSUFFICIENT_PERMISSIONS",
    );
    for (const limit of ["0", "101", "1.5", "x"]) expectError(await list({ limit }, tenant.rootKey), 400, "BAD_REQUEST", /^limit: /);
    expectError(await list({ cursor: "" }, tenant.rootKey), 400, "BAD_REQUEST", /^cursor: /);
    expectError(await list({ cursor: "x".repeat(513) }, tenant.rootKey), 400, "BAD_REQUEST", /^cursor: /);
  });
});

describe("POST /v1/ratelimits.deleteOverride", () => {
  it("soft-deletes the override; setting it again revives the same row", async ({ h, t, createNamespace, setOverride }) => {
    const ns = await createNamespace(t);
    const id = await setOverride(t, { namespaceId: ns.id, identifier: "user_1", limit: 5 });
    const res = await h.post("/v1/ratelimits.deleteOverride", { namespaceName: ns.name, identifier: "user_1" }, t.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    const [row] = await h.sql<{ deleted_at_m: number | null }>(`select deleted_at_m from ratelimit_overrides where id = '${id}'`);
    expect(Number(row!.deleted_at_m)).toBeGreaterThan(0);
    expectError(
      await h.get("/v1/ratelimits.getOverride", { namespaceId: ns.id, identifier: "user_1" }, t.rootKey),
      404,
      "NOT_FOUND",
      "Override not found",
    );
    expectError(
      await h.post("/v1/ratelimits.deleteOverride", { namespaceId: ns.id, identifier: "user_1" }, t.rootKey),
      404,
      "NOT_FOUND",
      "Override with user_1 identifier not found",
    );
    expect(await setOverride(t, { namespaceId: ns.id, identifier: "user_1", limit: 9 })).toBe(id);
    expect((await h.get("/v1/ratelimits.getOverride", { namespaceId: ns.id, identifier: "user_1" }, t.rootKey)).body.limit).toBe(9);
  });

  it("answers 400 without a namespace and 404 for an unknown namespace, changing nothing", async ({ h, t, countRows }) => {
    const before = await countRows();
    expectError(
      await h.post("/v1/ratelimits.deleteOverride", { identifier: "user_1" }, t.rootKey),
      400,
      "BAD_REQUEST",
      "You must provide a namespaceId or a namespaceName",
    );
    expectError(
      await h.post("/v1/ratelimits.deleteOverride", { namespaceName: "nope", identifier: "user_1" }, t.rootKey),
      404,
      "NOT_FOUND",
      "Namespace nope not found",
    );
    expectError(await h.post("/v1/ratelimits.deleteOverride", { namespaceName: "nope" }, t.rootKey), 400, "BAD_REQUEST", /^identifier: /);
    expect(await countRows()).toBe(before);
  });
});

describe("another workspace's namespaces and overrides", () => {
  it("are answered 404 by every override route, and changed by none", async ({ h, t, createNamespace, setOverride }) => {
    const ns = await createNamespace(t);
    const id = await setOverride(t, { namespaceId: ns.id, identifier: "user_1", limit: 5 });
    const other = await h.tenant();
    const selectors: Record<string, string>[] = [{ namespaceId: ns.id }, { namespaceName: ns.name }];
    for (const by of selectors) {
      const label = "namespaceId" in by ? ns.id : ns.name;
      expectError(
        await h.post("/v1/ratelimits.setOverride", { ...by, identifier: "user_1", limit: 1, duration: 60_000 }, other.rootKey),
        404,
        "NOT_FOUND",
        `Namespace ${label} not found`,
      );
      expectError(
        await h.get("/v1/ratelimits.getOverride", { ...by, identifier: "user_1" }, other.rootKey),
        404,
        "NOT_FOUND",
        "Namespace not found",
      );
      expectError(await h.get("/v1/ratelimits.listOverrides", by, other.rootKey), 404, "NOT_FOUND", `Namespace ${label} not found`);
      expectError(
        await h.post("/v1/ratelimits.deleteOverride", { ...by, identifier: "user_1" }, other.rootKey),
        404,
        "NOT_FOUND",
        `Namespace ${label} not found`,
      );
    }
    const [row] = await h.sql(`select "limit", deleted_at_m from ratelimit_overrides where id = '${id}'`);
    expect(row).toEqual({ limit: 5, deleted_at_m: null });
  });
});

// The shared root-key suite, once per route.
/** A new namespace of `tenant` with an override for the identifier `user_1`. */
async function namespaceWithOverrideIn(h: Harness, tenant: Tenant) {
  const ns = await createNamespaceIn(h, tenant);
  await setOverrideIn(h, tenant, { namespaceId: ns.id, identifier: "user_1", limit: 3 });
  return ns;
}

describeRootKeyAuthOf(it, { countRows: countRowsIn }, [
  {
    method: "POST",
    path: "/v1/ratelimits.limit",
    async validRequest(h, owner) {
      const ns = await createNamespaceIn(h, owner);
      return { body: { namespace: ns.name, identifier: "user_1", limit: 10, duration: HOUR } };
    },
    insufficientPermissions: ["ratelimit.*.set_override", "ratelimit.*.read_override"],
    async expectForOtherWorkspace(res, hh, owner, other) {
      // The name means the other workspace's own namespace: a `*` key creates it there, with counters of its own.
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ success: true, remaining: 9 });
      const rows = await hh.sql<{ workspace_id: string }>(
        `select workspace_id from ratelimit_namespaces where name = (select name from ratelimit_namespaces where workspace_id = '${owner.workspaceId}' order by created_at_m desc limit 1) order by created_at_m`,
      );
      expect(rows.map((r) => r.workspace_id)).toEqual([owner.workspaceId, other.workspaceId]);
      const [ownerNs] = await hh.sql<{ name: string }>(
        `select name from ratelimit_namespaces where workspace_id = '${owner.workspaceId}' order by created_at_m desc limit 1`,
      );
      const mine = await callRoute(
        hh,
        "/v1/ratelimits.limit",
        { namespace: ownerNs!.name, identifier: "user_1", limit: 10, duration: HOUR },
        owner.rootKey,
      );
      expect(mine.body).toMatchObject({ success: true, remaining: 9 });
      // Without the right to create namespaces, the other workspace gets the plain 404.
      const limitOnly = await hh.rootKey(other.workspaceId, ["ratelimit.*.limit"]);
      const name = uniq("ns");
      await createNamespaceIn(hh, owner, name);
      expectError(
        await callRoute(hh, "/v1/ratelimits.limit", { namespace: name, identifier: "u", limit: 1, duration: 1000 }, limitOnly),
        404,
        "NOT_FOUND",
        `namespace ${name} not found`,
      );
    },
  },
  {
    method: "POST",
    path: "/v1/ratelimits.setOverride",
    async validRequest(h, owner) {
      const ns = await createNamespaceIn(h, owner);
      return { body: { namespaceName: ns.name, identifier: "user_1", limit: 10, duration: HOUR } };
    },
    insufficientPermissions: ["ratelimit.*.read_override", "ratelimit.*.limit", "ratelimit.*.delete_override"],
    expectForOtherWorkspace: answersNotFound(/^Namespace .* not found$/),
  },
  {
    method: "GET",
    path: "/v1/ratelimits.getOverride",
    async validRequest(h, owner) {
      const ns = await namespaceWithOverrideIn(h, owner);
      return { query: { namespaceId: ns.id, identifier: "user_1" } };
    },
    insufficientPermissions: ["ratelimit.*.set_override", "ratelimit.*.limit"],
    expectForOtherWorkspace: answersNotFound("Namespace not found"),
  },
  {
    method: "GET",
    path: "/v1/ratelimits.listOverrides",
    async validRequest(h, owner) {
      const ns = await namespaceWithOverrideIn(h, owner);
      return { query: { namespaceId: ns.id } };
    },
    insufficientPermissions: ["ratelimit.*.set_override", "ratelimit.*.limit"],
    expectForOtherWorkspace: answersNotFound(/^Namespace rlns_\S+ not found$/),
  },
  {
    method: "GET",
    path: "/v1/ratelimits.listNamespaces",
    async validRequest(h, owner) {
      await createNamespaceIn(h, owner);
      return { query: { limit: "10" } };
    },
    insufficientPermissions: ["ratelimit.*.read_override", "ratelimit.*.limit", "ratelimit.*.create_namespace"],
    // Another workspace's key lists its own namespaces: none of the owner's.
    expectForOtherWorkspace: answersEmpty({ namespaces: [], total: 0 }),
  },
  {
    method: "POST",
    path: "/v1/ratelimits.deleteOverride",
    async validRequest(h, owner) {
      const ns = await namespaceWithOverrideIn(h, owner);
      return { body: { namespaceId: ns.id, identifier: "user_1" } };
    },
    insufficientPermissions: ["ratelimit.*.set_override", "ratelimit.*.read_override"],
    expectForOtherWorkspace: answersNotFoundLeaving(
      /^Namespace rlns_\S+ not found$/,
      "ratelimit_overrides",
      1,
      " and deleted_at_m is null",
    ),
  },
]);

describe("across two replicas over real sockets", () => {
  let urls: string[];
  let closeReplica: () => Promise<void>;
  let ownerKey: string;
  it.beforeAll(async ({ h, t }) => {
    ({ urls, closeReplica } = await h.listenWithReplica());
    ownerKey = t.rootKey;
  });
  afterAll(() => closeReplica());

  const postAt = (i: number, path: string, body: unknown, rootKey = ownerKey) =>
    fetch(`${urls[i % 2]}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${rootKey}` },
      body: JSON.stringify(body),
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));

  it("lets exactly 10 of 100 concurrent calls through a limit of 10, creating the namespace once", async ({ h }) => {
    await awayFromHourBoundary();
    const tenant = await h.tenant();
    const namespace = uniq("burst");
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        postAt(i, "/v1/ratelimits.limit", { namespace, identifier: "user_1", limit: 10, duration: HOUR }, tenant.rootKey),
      ),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(results.filter((r) => r.body.success)).toHaveLength(10);
    expect(results.filter((r) => !r.body.success)).toHaveLength(90);
    expect(
      results
        .map((r) => r.body.remaining)
        .sort((a, b) => a - b)
        .slice(0, 91)
        .every((r) => r === 0),
    ).toBe(true);
    const rows = await h.sql(`select id from ratelimit_namespaces where workspace_id = '${tenant.workspaceId}' and name = '${namespace}'`);
    expect(rows).toHaveLength(1);
  });

  it("sees an override set on one replica in the very next call on the other", async ({ t, createNamespace }) => {
    const ns = await createNamespace(t);
    const identifier = uniq("user");
    const call = (i: number) =>
      postAt(i, "/v1/ratelimits.limit", { namespace: ns.name, identifier, limit: 100, duration: 60_000, cost: 0 });
    expect((await call(1)).body.limit).toBe(100);
    expect((await postAt(0, "/v1/ratelimits.setOverride", { namespaceId: ns.id, identifier, limit: 2, duration: 60_000 })).status).toBe(
      200,
    );
    expect((await call(1)).body.limit).toBe(2);
    expect((await postAt(1, "/v1/ratelimits.deleteOverride", { namespaceId: ns.id, identifier })).status).toBe(200);
    expect((await call(0)).body.limit).toBe(100);
  });
});
