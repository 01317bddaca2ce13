import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { ADMIN_TOKEN, createHarness, expectError, type Harness } from "./helper.js";

const count = async (h: Harness, table: string) =>
  Number((await h.sql<{ n: string | number }>(`select count(*) as n from ${table}`))[0]!.n);

describe("operator routes with KEYHAVEN_ADMIN_TOKEN configured", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(() => h?.close());

  const admin = (path: string, body: unknown) => h.post(path, body, ADMIN_TOKEN);

  async function newWorkspace(name = "acme") {
    const res = await admin("/v1/workspaces.createWorkspace", { name });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.workspaceId as string;
  }

  async function newRootKey(workspaceId: string, permissions: string[] = ["*"]) {
    const res = await admin("/v1/rootKeys.createRootKey", { workspaceId, permissions });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as { keyId: string; key: string };
  }

  describe("workspaces.createWorkspace", () => {
    it("creates an enabled workspace and answers its id", async () => {
      const res = await admin("/v1/workspaces.createWorkspace", { name: "  Acme Corp  " });

      expect(res.status).toBe(200);
      expect(res.body).toEqual({ workspaceId: expect.stringMatching(/^ws_/) });
      const rows = await h.sql(`select name, enabled from workspaces where id = '${res.body.workspaceId}'`);
      expect(rows).toEqual([{ name: "Acme Corp", enabled: true }]);
    });

    it("refuses an empty name with 400 and creates nothing", async () => {
      const before = await count(h, "workspaces");
      expectError(await admin("/v1/workspaces.createWorkspace", { name: "   " }), 400, "BAD_REQUEST", /^name: /);
      expectError(await admin("/v1/workspaces.createWorkspace", {}), 400, "BAD_REQUEST", /^name: /);
      expect(await count(h, "workspaces")).toBe(before);
    });
  });

  describe("rootKeys.createRootKey", () => {
    it("answers a keyId and a key shown once, and stores only the key's hash", async () => {
      const workspaceId = await newWorkspace();
      const res = await admin("/v1/rootKeys.createRootKey", {
        workspaceId,
        name: "ci",
        permissions: ["api.*.create_api", "api.*.create_api"],
      });

      expect(res.status).toBe(200);
      expect(res.body).toEqual({ keyId: expect.stringMatching(/^rk_/), key: expect.stringMatching(/^khroot_/) });
      const rows = await h.sql<Record<string, unknown>>(`select * from root_keys where id = '${res.body.keyId}'`);
      expect(rows).toEqual([
        expect.objectContaining({ workspace_id: workspaceId, name: "ci", hash: hashKey(res.body.key), permissions: ["api.*.create_api"] }),
      ]);
      expect(JSON.stringify(rows)).not.toContain(res.body.key);
    });

    it("gives a key that creates APIs in its own workspace", async () => {
      const workspaceId = await newWorkspace();
      const { key } = await newRootKey(workspaceId, ["api.*.create_api"]);

      const res = await h.post("/v1/apis.createApi", { name: "payments" }, key);

      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const rows = await h.sql(`select workspace_id, name from apis where id = '${res.body.apiId}'`);
      expect(rows).toEqual([{ workspace_id: workspaceId, name: "payments" }]);
    });

    it("answers 404 NOT_FOUND for an unknown workspace and creates no key", async () => {
      const before = await count(h, "root_keys");
      expectError(
        await admin("/v1/rootKeys.createRootKey", { workspaceId: "ws_doesnotexist", permissions: ["*"] }),
        404,
        "NOT_FOUND",
        "workspace ws_doesnotexist not found",
      );
      expect(await count(h, "root_keys")).toBe(before);
    });

    it("creates a key with an empty permission list, which authenticates but may call no route needing a permission", async () => {
      const workspaceId = await newWorkspace();
      const { keyId, key } = await newRootKey(workspaceId, []);
      const rows = await h.sql<Record<string, unknown>>(`select permissions from root_keys where id = '${keyId}'`);
      expect(rows).toEqual([{ permissions: [] }]);

      // As v1's shared security suite: every such call is a 403 INSUFFICIENT_PERMISSIONS, not UNAUTHORIZED.
      const have = /have \[\]$/;
      expectError(await h.post("/v1/apis.createApi", { name: "nothing" }, key), 403, "INSUFFICIENT_PERMISSIONS", have);
      expectError(await h.get("/v1/apis.getApi", { apiId: "api_x" }, key), 403, "INSUFFICIENT_PERMISSIONS", have);
      expectError(await h.post("/v1/permissions.createRole", { name: "nothing" }, key), 403, "INSUFFICIENT_PERMISSIONS", have);
      expectError(await h.post("/v1/identities.createIdentity", { externalId: "nobody" }, key), 403, "INSUFFICIENT_PERMISSIONS", have);
      expect(await count(h, `apis where workspace_id = '${workspaceId}'`)).toBe(0);
    });

    it.each([
      ["no permission list", {}, /^permissions: /],
      ["an empty permission", { permissions: [""] }, /^permissions\.0: /],
      ["a permission that is not a string", { permissions: [42] }, /^permissions\.0: /],
    ])("refuses %s with 400 BAD_REQUEST and creates no key", async (_what, body, message) => {
      const workspaceId = await newWorkspace();
      const before = await count(h, "root_keys");
      expectError(await admin("/v1/rootKeys.createRootKey", { workspaceId, ...body }), 400, "BAD_REQUEST", message);
      expect(await count(h, "root_keys")).toBe(before);
    });

    it("refuses a missing workspaceId with 400 BAD_REQUEST", async () => {
      expectError(await admin("/v1/rootKeys.createRootKey", { permissions: ["*"] }), 400, "BAD_REQUEST", /^workspaceId: /);
    });
  });

  describe("workspaces.updateWorkspace", () => {
    it("disabling a workspace makes every root-key call of it answer 403 FORBIDDEN, and enabling restores it", async () => {
      const workspaceId = await newWorkspace();
      const { key } = await newRootKey(workspaceId, ["*"]);
      const { key: narrowKey } = await newRootKey(workspaceId, ["api.*.read_api"]);
      const created = await h.post("/v1/apis.createApi", { name: "before-disable" }, key);
      expect(created.status).toBe(200);
      const apiId = created.body.apiId as string;

      const disabled = await admin("/v1/workspaces.updateWorkspace", { workspaceId, enabled: false });
      expect(disabled.status).toBe(200);
      expect(disabled.body).toEqual({});
      expect(await h.sql(`select enabled from workspaces where id = '${workspaceId}'`)).toEqual([{ enabled: false }]);

      const apisBefore = await count(h, "apis");
      expectError(await h.post("/v1/apis.createApi", { name: "while-disabled" }, key), 403, "FORBIDDEN", "workspace is disabled");
      expectError(await h.get("/v1/apis.getApi", { apiId }, key), 403, "FORBIDDEN", "workspace is disabled");
      expectError(await h.get("/v1/apis.getApi", { apiId }, narrowKey), 403, "FORBIDDEN", "workspace is disabled");
      expect(await count(h, "apis")).toBe(apisBefore);

      const enabled = await admin("/v1/workspaces.updateWorkspace", { workspaceId, enabled: true });
      expect(enabled.status).toBe(200);
      expect((await h.get("/v1/apis.getApi", { apiId }, key)).status).toBe(200);
      expect((await h.get("/v1/apis.getApi", { apiId }, narrowKey)).status).toBe(200);
      expect((await h.post("/v1/apis.createApi", { name: "after-enable" }, key)).status).toBe(200);
    });

    it("disabling one workspace leaves the others working", async () => {
      const a = await newWorkspace("a");
      const b = await newWorkspace("b");
      const keyB = (await newRootKey(b)).key;
      await admin("/v1/workspaces.updateWorkspace", { workspaceId: a, enabled: false });

      expect((await h.post("/v1/apis.createApi", { name: "still-works" }, keyB)).status).toBe(200);
    });

    it("answers 404 NOT_FOUND for an unknown workspace", async () => {
      expectError(
        await admin("/v1/workspaces.updateWorkspace", { workspaceId: "ws_doesnotexist", enabled: false }),
        404,
        "NOT_FOUND",
        "workspace ws_doesnotexist not found",
      );
    });

    it("refuses a body without enabled with 400 BAD_REQUEST and changes nothing", async () => {
      const workspaceId = await newWorkspace();
      expectError(await admin("/v1/workspaces.updateWorkspace", { workspaceId }), 400, "BAD_REQUEST", /^enabled: /);
      expectError(await admin("/v1/workspaces.updateWorkspace", { workspaceId, enabled: "false" }), 400, "BAD_REQUEST", /^enabled: /);
      expect(await h.sql(`select enabled from workspaces where id = '${workspaceId}'`)).toEqual([{ enabled: true }]);
    });
  });

  describe("rootKeys.deleteRootKey", () => {
    it("makes the deleted key answer 403 UNAUTHORIZED key not found on its next call", async () => {
      const workspaceId = await newWorkspace();
      const { keyId, key } = await newRootKey(workspaceId);
      const other = await newRootKey(workspaceId);
      expect((await h.post("/v1/apis.createApi", { name: "before-delete" }, key)).status).toBe(200);

      const res = await admin("/v1/rootKeys.deleteRootKey", { keyId });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({});
      expect(await h.sql(`select id from root_keys where id = '${keyId}'`)).toEqual([]);

      const apisBefore = await count(h, "apis");
      expectError(await h.post("/v1/apis.createApi", { name: "after-delete" }, key), 403, "UNAUTHORIZED", "key not found");
      expect(await count(h, "apis")).toBe(apisBefore);
      expect((await h.post("/v1/apis.createApi", { name: "other-key" }, other.key)).status).toBe(200);
    });

    it("answers 404 NOT_FOUND for an unknown key, and for a key deleted already", async () => {
      const { keyId } = await newRootKey(await newWorkspace());
      expectError(
        await admin("/v1/rootKeys.deleteRootKey", { keyId: "rk_doesnotexist" }),
        404,
        "NOT_FOUND",
        "root key rk_doesnotexist not found",
      );
      expect((await admin("/v1/rootKeys.deleteRootKey", { keyId })).status).toBe(200);
      expectError(await admin("/v1/rootKeys.deleteRootKey", { keyId }), 404, "NOT_FOUND", `root key ${keyId} not found`);
    });

    it("refuses an empty keyId with 400 BAD_REQUEST", async () => {
      expectError(await admin("/v1/rootKeys.deleteRootKey", { keyId: "" }), 400, "BAD_REQUEST", /^keyId: /);
    });
  });

  describe("admin token authentication", () => {
    type Call = { path: string; body: (workspaceId: string, keyId: string) => unknown };
    const calls: Call[] = [
      { path: "/v1/workspaces.createWorkspace", body: () => ({ name: "intruder" }) },
      { path: "/v1/workspaces.updateWorkspace", body: (workspaceId) => ({ workspaceId, enabled: false }) },
      { path: "/v1/rootKeys.createRootKey", body: (workspaceId) => ({ workspaceId, permissions: ["*"] }) },
      { path: "/v1/rootKeys.deleteRootKey", body: (_w, keyId) => ({ keyId }) },
      { path: "/v1/migrations.retryMigration", body: (workspaceId) => ({ workspaceId, migrationId: "m" }) },
    ];

    const snapshot = async () =>
      JSON.stringify([
        await h.sql("select id, enabled from workspaces order by id"),
        await h.sql("select id, hash from root_keys order by id"),
      ]);

    async function expectRefused(authorization: string | undefined, message: string) {
      const workspaceId = await newWorkspace();
      const { keyId } = await newRootKey(workspaceId);
      const before = await snapshot();
      for (const call of calls) {
        const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
        const res = await h.post(call.path, call.body(workspaceId, keyId), undefined, headers);
        expectError(res, 403, "UNAUTHORIZED", message);
      }
      expect(await snapshot()).toBe(before);
    }

    it("refuses every operator route without an admin token (403 UNAUTHORIZED) and writes nothing", async () => {
      await expectRefused(undefined, "admin token required");
      await expectRefused("Bearer ", "admin token required");
    });

    it("refuses every operator route with a wrong admin token (403 UNAUTHORIZED) and writes nothing", async () => {
      await expectRefused("Bearer not-the-admin-token-at-all", "admin token is not valid");
      await expectRefused(`Bearer ${ADMIN_TOKEN}x`, "admin token is not valid");
      await expectRefused(`Bearer ${ADMIN_TOKEN.slice(0, -1)}`, "admin token is not valid");
    });

    it("refuses a root key with * used as the admin token (403 UNAUTHORIZED) and writes nothing", async () => {
      const { key } = await newRootKey(await newWorkspace(), ["*"]);
      await expectRefused(`Bearer ${key}`, "admin token is not valid");
    });

    it("does not accept the admin token as a root key", async () => {
      expectError(await h.post("/v1/apis.createApi", { name: "sneaky" }, ADMIN_TOKEN), 403, "UNAUTHORIZED", "key not found");
    });
  });

  describe("workspaces.listWorkspaces and rootKeys.listRootKeys", () => {
    const list = (path: string, query: Record<string, string>) => h.get(path, query, ADMIN_TOKEN);

    it("pages every workspace in id order, each once, with its name and state", async () => {
      const made = [await newWorkspace("list-a"), await newWorkspace("list-b"), await newWorkspace("list-c")];
      await admin("/v1/workspaces.updateWorkspace", { workspaceId: made[1], enabled: false });
      const seen: { id: string; name: string; enabled: boolean; createdAt: number }[] = [];
      let cursor: string | undefined;
      for (let pages = 0; pages < 100; pages++) {
        const res = await list("/v1/workspaces.listWorkspaces", { limit: "2", ...(cursor && { cursor }) });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(res.body.workspaces.length).toBeLessThanOrEqual(2);
        seen.push(...res.body.workspaces);
        cursor = res.body.cursor;
        if (cursor === undefined) break;
      }
      const ids = seen.map((w) => w.id);
      expect(ids).toEqual([...ids].sort());
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids.length).toBe(await count(h, "workspaces"));
      const mine = seen.filter((w) => made.includes(w.id)).sort((x, y) => x.name.localeCompare(y.name));
      expect(mine.map((w) => [w.name, w.enabled])).toEqual([
        ["list-a", true],
        ["list-b", false],
        ["list-c", true],
      ]);
    });

    it("lists a workspace's root keys without their secret or hash; a deleted one is gone", async () => {
      const workspaceId = await newWorkspace("keys");
      const a = (await admin("/v1/rootKeys.createRootKey", { workspaceId, name: "ci", permissions: ["api.*.create_key"] })).body;
      const b = await newRootKey(workspaceId, ["*"]);
      const gone = await newRootKey(workspaceId, ["*"]);
      await admin("/v1/rootKeys.deleteRootKey", { keyId: gone.keyId });
      const first = await list("/v1/rootKeys.listRootKeys", { workspaceId, limit: "1" });
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      const second = await list("/v1/rootKeys.listRootKeys", { workspaceId, limit: "1", cursor: first.body.cursor });
      expect(second.body.cursor).toBeUndefined();
      const keys = [...first.body.rootKeys, ...second.body.rootKeys];
      const byId = new Map<string, { start: string }>(keys.map((k: { id: string; start: string }) => [k.id, k]));
      expect(keys.map((k: { id: string }) => k.id).sort()).toEqual([a.keyId, b.keyId].sort());
      expect(byId.get(a.keyId)).toEqual({
        id: a.keyId,
        name: "ci",
        start: expect.any(String),
        permissions: ["api.*.create_key"],
        createdAt: expect.any(Number),
      });
      expect(a.key.startsWith(byId.get(a.keyId)!.start)).toBe(true);
      const text = JSON.stringify(keys);
      for (const secret of [a.key, b.key, hashKey(a.key), hashKey(b.key)]) expect(text).not.toContain(secret);
    });

    it("shows a root key's lastUsedAt once it authenticated (after the last-used flush), absent before", async () => {
      const workspaceId = await newWorkspace("last-used");
      const used = await newRootKey(workspaceId, ["*"]);
      const idle = await newRootKey(workspaceId, ["*"]);
      await h.jobs.lastUsed.flush();
      const listed = async () => {
        const res = await list("/v1/rootKeys.listRootKeys", { workspaceId });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        return new Map<string, { lastUsedAt?: number }>(res.body.rootKeys.map((k: { id: string }) => [k.id, k]));
      };
      expect((await listed()).get(used.keyId)).not.toHaveProperty("lastUsedAt");
      const before = h.clock.now();
      // v1 and v2 both authenticate it, whatever the request then answers.
      expect((await h.post("/v1/apis.createApi", { name: "by-used" }, used.key)).status).toBe(200);
      expect((await h.post("/v2/apis.listKeys", { apiId: "api_missing" }, used.key)).status).toBe(404);
      const after = h.clock.now();
      await h.jobs.lastUsed.flush();
      const keys = await listed();
      expect(keys.get(used.keyId)!.lastUsedAt).toBeGreaterThanOrEqual(before);
      expect(keys.get(used.keyId)!.lastUsedAt).toBeLessThanOrEqual(after);
      expect(keys.get(idle.keyId)).not.toHaveProperty("lastUsedAt");
      // Its time goes with it.
      await admin("/v1/rootKeys.deleteRootKey", { keyId: used.keyId });
      expect(await count(h, `root_key_last_used where root_key_id = '${used.keyId}'`)).toBe(0);
    });

    it("answers 404 for a workspace that does not exist, and 400 for a bad limit", async () => {
      expectError(await list("/v1/rootKeys.listRootKeys", { workspaceId: "ws_missing" }), 404, "NOT_FOUND", /ws_missing/);
      expectError(await list("/v1/workspaces.listWorkspaces", { limit: "0" }), 400, "BAD_REQUEST", /^limit: /);
      expectError(await list("/v1/workspaces.listWorkspaces", { limit: "101" }), 400, "BAD_REQUEST", /^limit: /);
    });
  });
});

describe("operator routes without KEYHAVEN_ADMIN_TOKEN", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness({ KEYHAVEN_ADMIN_TOKEN: "" });
  });
  afterAll(() => h?.close());

  it("answer 403 FORBIDDEN on every operator route, whatever the token, and write nothing", async () => {
    const t = await h.tenant();
    const before = [await count(h, "workspaces"), await count(h, "root_keys")];
    const calls: [string, unknown][] = [
      ["/v1/workspaces.createWorkspace", { name: "intruder" }],
      ["/v1/workspaces.updateWorkspace", { workspaceId: t.workspaceId, enabled: false }],
      ["/v1/rootKeys.createRootKey", { workspaceId: t.workspaceId, permissions: ["*"] }],
      ["/v1/rootKeys.deleteRootKey", { keyId: t.rootKeyId }],
      ["/v1/migrations.retryMigration", { workspaceId: t.workspaceId, migrationId: "m" }],
    ];
    for (const [path, body] of calls) {
      for (const token of [undefined, "", ADMIN_TOKEN, t.rootKey]) {
        expectError(await h.post(path, body, token), 403, "FORBIDDEN", /operator routes are disabled.*KEYHAVEN_ADMIN_TOKEN/);
      }
    }
    expect([await count(h, "workspaces"), await count(h, "root_keys")]).toEqual(before);
    expect(await h.sql(`select enabled from workspaces where id = '${t.workspaceId}'`)).toEqual([{ enabled: true }]);
    expect((await h.post("/v1/apis.createApi", { name: "still-works" }, t.rootKey)).status).toBe(200);
  });
});
