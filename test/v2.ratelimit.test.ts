import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import { expectV2Error } from "./v2-errors.js";
import type { Harness, Response, Tenant } from "./helper.js";

// v2's ratelimit.* routes (contract §9.1, §9.3–9.6) over the one rate-limit core and the one limiter v1 uses: one
// `namespace` field naming the id or the name, v2's permission order and errors, v2's pages, v1 and v2 on one store.

const ns = () => `ns_${randomBytes(5).toString("hex")}`;
/** A long window, so that no test straddles two windows. */
const DAY = 86_400_000;

async function ok(res: Response) {
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

const limitV2 = (h: Harness, rootKey: string, body: Record<string, unknown>) =>
  h.post("/v2/ratelimit.limit", { limit: 100, duration: DAY, ...body }, rootKey);

/** Creates the namespace through a first limit call; answers its id. */
async function createNamespace(h: Harness, t: Tenant, name: string): Promise<string> {
  await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "seed" }));
  const [row] = await h.sql<{ id: string }>(
    `select id from ratelimit_namespaces where workspace_id = '${t.workspaceId}' and name = '${name}' and deleted_at_m is null`,
  );
  return row!.id;
}

const setOverride = async (h: Harness, t: Tenant, body: Record<string, unknown>) =>
  (await ok(await h.post("/v2/ratelimit.setOverride", { duration: DAY, ...body }, t.rootKey))).data.overrideId as string;

describe("v2 ratelimit", () => {
  test("limit counts per identifier, reports reset and cost 0 checks without counting; by name or id", async ({ h, t }) => {
    const name = ns();
    const first = await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "u1", limit: 3 }));
    expect(first).toEqual({
      meta: { requestId: expect.stringMatching(/^req_/) },
      data: { success: true, limit: 3, remaining: 2, reset: expect.any(Number) },
    });
    expect(first.data.reset).toBeGreaterThan(Date.now());
    const id = (await h.sql<{ id: string }>(`select id from ratelimit_namespaces where name = '${name}'`))[0]!.id;
    expect((await ok(await limitV2(h, t.rootKey, { namespace: id, identifier: "u1", limit: 3 }))).data.remaining).toBe(1);
    expect((await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "u1", limit: 3, cost: 0 }))).data.remaining).toBe(1);
    expect((await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "u1", limit: 3 }))).data.remaining).toBe(0);
    expect((await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "u1", limit: 3 }))).data).toMatchObject({
      success: false,
      remaining: 0,
    });
    expect((await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "u2", limit: 3 }))).data.remaining).toBe(2);
    // Only one namespace: the id named the one the name created.
    expect(await h.sql(`select id from ratelimit_namespaces where workspace_id = '${t.workspaceId}'`)).toHaveLength(1);
  });

  test("limit refuses what v2's schema refuses (unknown fields, async, limit 0, short window)", async ({ h, t }) => {
    for (const body of [
      { namespace: "n", identifier: "i", limit: 1, duration: 1000, async: true },
      { namespace: "n", identifier: "i", limit: 0, duration: 1000 },
      { namespace: "n", identifier: "i", limit: 1, duration: 999 },
      { namespace: "", identifier: "i", limit: 1, duration: 1000 },
      { namespace: "n", identifier: "i", limit: 1, duration: 1000, cost: -1 },
      { namespace: "n", limit: 1, duration: 1000 },
    ]) {
      expectV2Error(await h.post("/v2/ratelimit.limit", body, t.rootKey), 400, "unkey/application/invalid_input");
    }
  });

  test("limit on an unknown namespace: created only with ratelimit.*.create_namespace, else 403 in v2 words", async ({ h, t }) => {
    const name = ns();
    const limitOnly = await h.rootKey(t.workspaceId, ["ratelimit.*.limit"]);
    expectV2Error(
      await limitV2(h, limitOnly, { namespace: name, identifier: "u" }),
      403,
      "unkey/authorization/insufficient_permissions",
      "Missing permission: 'ratelimit.*.create_namespace'",
    );
    expect(await h.sql(`select id from ratelimit_namespaces where name = '${name}'`)).toHaveLength(0);
    const creator = await h.rootKey(t.workspaceId, ["ratelimit.*.create_namespace", "ratelimit.*.limit"]);
    await ok(await limitV2(h, creator, { namespace: name, identifier: "u" }));
    const id = (await h.sql<{ id: string }>(`select id from ratelimit_namespaces where name = '${name}'`))[0]!.id;
    // An existing namespace needs the limit permission, wildcard or its own, not create_namespace.
    await ok(await limitV2(h, limitOnly, { namespace: name, identifier: "u" }));
    const own = await h.rootKey(t.workspaceId, [`ratelimit.${id}.limit`]);
    await ok(await limitV2(h, own, { namespace: id, identifier: "u" }));
    const none = await h.rootKey(t.workspaceId, ["ratelimit.*.read_override"]);
    expectV2Error(await limitV2(h, none, { namespace: name, identifier: "u" }), 403, "unkey/authorization/insufficient_permissions");
  });

  test("limit applies the override: exact first, else the best wildcard, with overrideId; limit 0 rejects (no 500)", async ({ h, t }) => {
    const name = ns();
    await createNamespace(h, t, name);
    const exact = await setOverride(h, t, { namespace: name, identifier: "user_42", limit: 3 });
    const wild = await setOverride(h, t, { namespace: name, identifier: "user_*", limit: 5 });
    const blocked = await setOverride(h, t, { namespace: name, identifier: "blocked", limit: 0 });
    const a = await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "user_42" }));
    expect(a.data).toEqual({ success: true, limit: 3, remaining: 2, reset: expect.any(Number), overrideId: exact });
    const b = await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "user_7" }));
    expect(b.data).toEqual({ success: true, limit: 5, remaining: 4, reset: expect.any(Number), overrideId: wild });
    const c = await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "blocked" }));
    expect(c.data).toMatchObject({ success: false, limit: 0, remaining: 0, overrideId: blocked });
    const d = await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "other" }));
    expect(d.data).toEqual({ success: true, limit: 100, remaining: 99, reset: expect.any(Number) });
    // Deleting the exact override lets the wildcard apply at once.
    await ok(await h.post("/v2/ratelimit.deleteOverride", { namespace: name, identifier: "user_42" }, t.rootKey));
    expect((await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "user_42" }))).data).toMatchObject({
      limit: 5,
      overrideId: wild,
    });
  });

  test("an override set through v1 applies to v2's limit, and one set through v2 to v1's", async ({ h, t }) => {
    const name = ns();
    await createNamespace(h, t, name);
    await ok(
      await h.post("/v1/ratelimits.setOverride", { namespaceName: name, identifier: "from_v1", limit: 2, duration: DAY }, t.rootKey),
    );
    expect((await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "from_v1" }))).data).toMatchObject({
      limit: 2,
      remaining: 1,
    });
    await setOverride(h, t, { namespace: name, identifier: "from_v2", limit: 4 });
    const v1 = await h.post("/v1/ratelimits.limit", { namespace: name, identifier: "from_v2", limit: 100, duration: DAY }, t.rootKey);
    expect(v1.status).toBe(200);
    expect(v1.body).toEqual({ success: true, limit: 4, remaining: 3, reset: expect.any(Number) });
    // Each API reads the other's override.
    const read = await h.get("/v1/ratelimits.getOverride", { namespaceName: name, identifier: "from_v2" }, t.rootKey);
    expect(read.body).toMatchObject({ identifier: "from_v2", limit: 4, duration: DAY, async: false });
    const got = await ok(await h.post("/v2/ratelimit.getOverride", { namespace: name, identifier: "from_v1" }, t.rootKey));
    expect(got.data).toEqual({ overrideId: expect.stringMatching(/^rlor_/), identifier: "from_v1", limit: 2, duration: DAY });
  });

  test("a lookup by id answered from memory sees the next override at once (v1's setOverride, v2's deleteOverride)", async ({ h, t }) => {
    const name = ns();
    const id = await createNamespace(h, t, name);
    expect((await ok(await limitV2(h, t.rootKey, { namespace: id, identifier: "cached" }))).data.limit).toBe(100);
    await ok(await h.post("/v1/ratelimits.setOverride", { namespaceId: id, identifier: "cached", limit: 7, duration: DAY }, t.rootKey));
    expect((await ok(await limitV2(h, t.rootKey, { namespace: id, identifier: "cached" }))).data.limit).toBe(7);
    await ok(await h.post("/v2/ratelimit.deleteOverride", { namespace: name, identifier: "cached" }, t.rootKey));
    expect((await ok(await limitV2(h, t.rootKey, { namespace: id, identifier: "cached" }))).data.limit).toBe(100);
  });

  test("one limiter: /v1/ratelimits.limit and /v2/ratelimit.limit count against the same namespace and identifier", async ({ h, t }) => {
    const name = ns();
    const body = { namespace: name, identifier: "shared", limit: 4, duration: DAY };
    expect((await ok(await h.post("/v1/ratelimits.limit", body, t.rootKey))).remaining).toBe(3);
    expect((await ok(await h.post("/v2/ratelimit.limit", body, t.rootKey))).data.remaining).toBe(2);
    expect((await ok(await h.post("/v1/ratelimits.limit", body, t.rootKey))).remaining).toBe(1);
    expect((await ok(await h.post("/v2/ratelimit.limit", body, t.rootKey))).data.remaining).toBe(0);
    expect((await ok(await h.post("/v1/ratelimits.limit", body, t.rootKey))).success).toBe(false);
    expect((await ok(await h.post("/v2/ratelimit.limit", body, t.rootKey))).data.success).toBe(false);
  });

  test("setOverride creates then updates in place (same id); limit 0 allowed; getOverride resolves wildcards", async ({ h, t }) => {
    const name = ns();
    const id = await createNamespace(h, t, name);
    const first = await setOverride(h, t, { namespace: name, identifier: "acme_*", limit: 10 });
    expect(first).toMatch(/^rlor_/);
    expect(await setOverride(h, t, { namespace: id, identifier: "acme_*", limit: 0, duration: 5000 })).toBe(first);
    const got = await ok(await h.post("/v2/ratelimit.getOverride", { namespace: id, identifier: "acme_1" }, t.rootKey));
    expect(got.data).toEqual({ overrideId: first, identifier: "acme_*", limit: 0, duration: 5000 });
    expect(
      (await ok(await h.post("/v2/ratelimit.getOverride", { namespace: name, identifier: "acme_*" }, t.rootKey))).data.overrideId,
    ).toBe(first);
    expectV2Error(
      await h.post("/v2/ratelimit.getOverride", { namespace: name, identifier: "other" }, t.rootKey),
      404,
      "unkey/data/ratelimit_override_not_found",
      "This override does not exist.",
    );
    // A deleted override is revived by setting it again (upstream keeps it deleted).
    await ok(await h.post("/v2/ratelimit.deleteOverride", { namespace: name, identifier: "acme_*" }, t.rootKey));
    expect(await setOverride(h, t, { namespace: name, identifier: "acme_*", limit: 1 })).toBe(first);
    expect((await ok(await h.post("/v2/ratelimit.getOverride", { namespace: name, identifier: "acme_x" }, t.rootKey))).data.limit).toBe(1);
  });

  test("setOverride refuses what v2's schema refuses", async ({ h, t }) => {
    for (const body of [
      { namespace: "n", identifier: "i", limit: 1, duration: 1000, async: true },
      { namespace: "n", identifier: "i", limit: -1, duration: 1000 },
      { namespace: "n", identifier: "i", limit: 1, duration: 999 },
      { namespaceName: "n", identifier: "i", limit: 1, duration: 1000 },
    ]) {
      expectV2Error(await h.post("/v2/ratelimit.setOverride", body, t.rootKey), 400, "unkey/application/invalid_input");
    }
  });

  test("a namespace that does not exist, or is another workspace's, is 404 on every override route", async ({ h, t }) => {
    const other = await h.tenant();
    const name = ns();
    const id = await createNamespace(h, other, name);
    await setOverride(h, other, { namespace: name, identifier: "x", limit: 1 });
    for (const namespace of [name, id, "ns_missing"]) {
      for (const [path, body] of [
        ["/v2/ratelimit.setOverride", { namespace, identifier: "x", limit: 1, duration: DAY }],
        ["/v2/ratelimit.getOverride", { namespace, identifier: "x" }],
        ["/v2/ratelimit.listOverrides", { namespace }],
        ["/v2/ratelimit.deleteOverride", { namespace, identifier: "x" }],
      ] as const) {
        expectV2Error(
          await h.post(path, body, t.rootKey),
          404,
          "unkey/data/ratelimit_namespace_not_found",
          "This namespace does not exist.",
        );
      }
    }
    // limit by the other workspace's namespace id counts in a namespace of the caller's own, named by that string.
    expect((await ok(await limitV2(h, t.rootKey, { namespace: id, identifier: "x" }))).data).toMatchObject({ limit: 100 });
    expect((await h.sql<{ n: string }>(`select count(*)::int as n from ratelimit_namespaces where id = '${id}'`))[0]!.n).toBe(1);
  });

  test("override routes look the namespace up first (404), then ask for the permission, wildcard or the namespace's (403)", async ({
    h,
    t,
  }) => {
    const name = ns();
    const id = await createNamespace(h, t, name);
    const overrideId = await setOverride(h, t, { namespace: name, identifier: "x_*", limit: 1 });
    const none = await h.rootKey(t.workspaceId, ["ratelimit.*.limit"]);
    const routes = [
      ["/v2/ratelimit.setOverride", { identifier: "x_*", limit: 2, duration: DAY }, "set_override"],
      ["/v2/ratelimit.listOverrides", {}, "read_override"],
      ["/v2/ratelimit.deleteOverride", { identifier: "x_*" }, "delete_override"],
    ] as const;
    for (const [path, body, action] of routes) {
      expectV2Error(await h.post(path, { namespace: "missing", ...body }, none), 404, "unkey/data/ratelimit_namespace_not_found");
      expectV2Error(
        await h.post(path, { namespace: name, ...body }, none),
        403,
        "unkey/authorization/insufficient_permissions",
        `Missing one of these permissions: ratelimit.${id}.${action} or ratelimit.*.${action}`,
      );
    }
    // getOverride hides the override from a caller that may not read it.
    expectV2Error(
      await h.post("/v2/ratelimit.getOverride", { namespace: name, identifier: "x_1" }, none),
      404,
      "unkey/data/ratelimit_override_not_found",
      "This override does not exist.",
    );
    for (const grant of [
      `ratelimit.${id}.read_override`,
      "ratelimit.*.read_override",
      `unkey:v1:${t.workspaceId}:ratelimits/namespaces/${id}/overrides/${overrideId}#read_override`,
      // URN patterns cover it too (contract §1.5), in the one root-key check.
      `unkey:v1:${t.workspaceId}:ratelimits/namespaces/${id}/overrides/*#read_override`,
      `unkey:v1:${t.workspaceId}:ratelimits/namespaces/${id}/**#read_override`,
      `unkey:v1:${t.workspaceId}:ratelimits/**#read_override`,
      `unkey:v1:${t.workspaceId}:ratelimits/namespaces/*/overrides/*#read_override`,
      `unkey:v1:${t.workspaceId}:**#*`,
    ]) {
      const reader = await h.rootKey(t.workspaceId, [grant]);
      expect((await ok(await h.post("/v2/ratelimit.getOverride", { namespace: name, identifier: "x_1" }, reader))).data.overrideId).toBe(
        overrideId,
      );
    }
    const own = await h.rootKey(t.workspaceId, [
      `ratelimit.${id}.set_override`,
      `ratelimit.${id}.read_override`,
      `ratelimit.${id}.delete_override`,
    ]);
    for (const [path, body] of routes) await ok(await h.post(path, { namespace: id, ...body }, own));
  });

  test("listOverrides pages by id with v2's inclusive cursor, 50 by default, no total", async ({ h, t }) => {
    const name = ns();
    await createNamespace(h, t, name);
    const ids: string[] = [];
    for (let i = 0; i < 52; i++) ids.push(await setOverride(h, t, { namespace: name, identifier: `i${i}`, limit: 1 }));
    ids.sort();
    const page = await ok(await h.post("/v2/ratelimit.listOverrides", { namespace: name }, t.rootKey));
    expect(page.data.map((o: { overrideId: string }) => o.overrideId)).toEqual(ids.slice(0, 50));
    expect(page.pagination).toEqual({ hasMore: true, cursor: ids[50] });
    expect(page.data[0]).toEqual({ overrideId: ids[0], identifier: expect.any(String), limit: 1, duration: DAY });
    const next = await ok(await h.post("/v2/ratelimit.listOverrides", { namespace: name, cursor: page.pagination.cursor }, t.rootKey));
    expect(next.data.map((o: { overrideId: string }) => o.overrideId)).toEqual(ids.slice(50));
    expect(next.pagination).toEqual({ hasMore: false });
    const two = await ok(await h.post("/v2/ratelimit.listOverrides", { namespace: name, limit: 2, cursor: ids[1] }, t.rootKey));
    expect(two.data.map((o: { overrideId: string }) => o.overrideId)).toEqual(ids.slice(1, 3));
    expect(two.pagination).toEqual({ hasMore: true, cursor: ids[3] });
  });

  test("deleteOverride matches literally: the pattern deletes the pattern, an identifier it covers is not found", async ({ h, t }) => {
    const name = ns();
    await createNamespace(h, t, name);
    await setOverride(h, t, { namespace: name, identifier: "team_*", limit: 1 });
    expectV2Error(
      await h.post("/v2/ratelimit.deleteOverride", { namespace: name, identifier: "team_1" }, t.rootKey),
      404,
      "unkey/data/ratelimit_override_not_found",
      "This override does not exist.",
    );
    const deleted = await ok(await h.post("/v2/ratelimit.deleteOverride", { namespace: name, identifier: "team_*" }, t.rootKey));
    expect(deleted).toEqual({ meta: { requestId: expect.stringMatching(/^req_/) }, data: {} });
    expectV2Error(
      await h.post("/v2/ratelimit.getOverride", { namespace: name, identifier: "team_1" }, t.rootKey),
      404,
      "unkey/data/ratelimit_override_not_found",
    );
    // v1 no longer sees it either.
    expect((await h.get("/v1/ratelimits.getOverride", { namespaceName: name, identifier: "team_*" }, t.rootKey)).status).toBe(404);
  });

  test("getOverride: a URN of a sibling namespace, another action or another workspace does not cover the override (404)", async ({
    h,
    t,
  }) => {
    const name = ns();
    const id = await createNamespace(h, t, name);
    await setOverride(h, t, { namespace: name, identifier: "u_1", limit: 1 });
    for (const grant of [
      `unkey:v1:${t.workspaceId}:ratelimits/namespaces/rlns_sibling/**#read_override`,
      `unkey:v1:${t.workspaceId}:ratelimits/namespaces/${id}/**#delete_override`,
      `unkey:v1:ws_other:ratelimits/**#read_override`,
    ]) {
      const reader = await h.rootKey(t.workspaceId, [grant]);
      expectV2Error(
        await h.post("/v2/ratelimit.getOverride", { namespace: name, identifier: "u_1" }, reader),
        404,
        "unkey/data/ratelimit_override_not_found",
      );
    }
  });
});

const multiLimit = (h: Harness, rootKey: string, items: Record<string, unknown>[]) =>
  h.post(
    "/v2/ratelimit.multiLimit",
    items.map((item) => ({ limit: 100, duration: DAY, ...item })),
    rootKey,
  );

describe("v2 ratelimit.multiLimit", () => {
  test("answers each limit in request order and counts them all, creating unknown namespaces; applies overrides", async ({ h, t }) => {
    const [a, b] = [ns(), ns()];
    const aId = await createNamespace(h, t, a);
    const overrideId = await setOverride(h, t, { namespace: a, identifier: "vip", limit: 5 });
    const res = await ok(
      await multiLimit(h, t.rootKey, [
        { namespace: a, identifier: "u1", limit: 3 },
        { namespace: aId, identifier: "vip", limit: 3, cost: 2 },
        { namespace: b, identifier: "u1", limit: 10 },
      ]),
    );
    expect(res.data).toEqual({
      passed: true,
      limits: [
        { namespace: a, identifier: "u1", limit: 3, remaining: 2, reset: expect.any(Number), passed: true },
        { namespace: aId, identifier: "vip", limit: 5, remaining: 3, reset: expect.any(Number), passed: true, overrideId },
        { namespace: b, identifier: "u1", limit: 10, remaining: 9, reset: expect.any(Number), passed: true },
      ],
    });
    expect(await h.sql(`select 1 from ratelimit_namespaces where workspace_id = '${t.workspaceId}' and name = '${b}'`)).toHaveLength(1);
    // The same counters as ratelimit.limit's.
    expect((await ok(await limitV2(h, t.rootKey, { namespace: a, identifier: "u1", limit: 3 }))).data.remaining).toBe(1);
  });

  test("all or nothing: when one fails, none is counted; one that passed reports what remains without this request", async ({ h, t }) => {
    const name = ns();
    await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "full", limit: 1 }));
    const res = await ok(
      await multiLimit(h, t.rootKey, [
        { namespace: name, identifier: "fresh", limit: 3 },
        { namespace: name, identifier: "full", limit: 1 },
      ]),
    );
    expect(res.data.passed).toBe(false);
    expect(res.data.limits.map((l: any) => l.passed)).toEqual([true, false]);
    expect(res.data.limits[0].remaining).toBe(3);
    // "fresh" was not counted: it still has all 3.
    expect((await ok(await limitV2(h, t.rootKey, { namespace: name, identifier: "fresh", limit: 3, cost: 0 }))).data.remaining).toBe(3);
  });

  test("permissions: create_namespace for unknown ones, then ratelimit.*.limit or every namespace's own limit permission", async ({
    h,
    t,
  }) => {
    const [a, b] = [ns(), ns()];
    const [aId, bId] = [await createNamespace(h, t, a), await createNamespace(h, t, b)];
    const onlyA = await h.rootKey(t.workspaceId, [`ratelimit.${aId}.limit`]);
    expect((await multiLimit(h, onlyA, [{ namespace: a, identifier: "x" }])).status).toBe(200);
    expectV2Error(
      await multiLimit(h, onlyA, [
        { namespace: a, identifier: "x" },
        { namespace: b, identifier: "x" },
      ]),
      403,
      "unkey/authorization/insufficient_permissions",
      `Missing one of these permissions: ratelimit.*.limit or ratelimit.${aId}.limit and ratelimit.${bId}.limit`,
    );
    const both = await h.rootKey(t.workspaceId, [`ratelimit.${aId}.limit`, `ratelimit.${bId}.limit`]);
    expect(
      (
        await multiLimit(h, both, [
          { namespace: a, identifier: "x" },
          { namespace: bId, identifier: "x" },
        ])
      ).status,
    ).toBe(200);
    const fresh = ns();
    expectV2Error(
      await multiLimit(h, await h.rootKey(t.workspaceId, ["ratelimit.*.limit"]), [{ namespace: fresh, identifier: "x" }]),
      403,
      "unkey/authorization/insufficient_permissions",
      "Missing permission: 'ratelimit.*.create_namespace'",
    );
    // Another workspace's namespace is unknown here: creating it needs create_namespace too.
    const other = await h.tenant(["ratelimit.*.limit"]);
    expectV2Error(
      await multiLimit(h, other.rootKey, [{ namespace: a, identifier: "x" }]),
      403,
      "unkey/authorization/insufficient_permissions",
    );
    expect(await h.sql(`select 1 from ratelimit_namespaces where name = '${fresh}'`)).toEqual([]);
  });

  test("schema failures are 400: [], more than 100, a negative cost, a missing namespace, not an array", async ({ h, t }) => {
    const item = { namespace: ns(), identifier: "x", limit: 1, duration: 1000 };
    for (const body of [[], Array.from({ length: 101 }, () => item), [{ ...item, cost: -1 }], [{ ...item, namespace: undefined }], item]) {
      expectV2Error(await h.post("/v2/ratelimit.multiLimit", body, t.rootKey), 400, "unkey/application/invalid_input");
    }
  });
});
