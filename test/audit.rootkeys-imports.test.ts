import { describe, expect } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { auditEntries } from "./audit-entries.js";
import { test } from "./fixtures.js";
import { ADMIN_TOKEN, type Response } from "./helper.js";

// Issue 35 §2: root keys (operator), apis.deleteKeys and the imports record their audit entries through the write
// gate, in the change's own transaction: the event, the actor, the targets, the workspace, the surface and the
// request id; a refused call records nothing, and no entry holds a secret.

const requestIdOf = (res: Response) => (res.body?.meta?.requestId as string | undefined) ?? (res.headers["unkey-request-id"] as string);

const OPERATOR = { actorKind: "operator", actorId: "admin", actorName: "operator", surface: "operator" };

describe("audit: operator root keys", () => {
  test("rootKeys.createRootKey and deleteRootKey record rootKey.create / rootKey.delete in the key's workspace", async ({ h }) => {
    const t = await h.tenant();
    const created = await h.post(
      "/v1/rootKeys.createRootKey",
      { workspaceId: t.workspaceId, name: "ci", permissions: ["api.*.create_api", "api.*.read_api", "api.*.create_api"] },
      ADMIN_TOKEN,
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const { keyId, key } = created.body as { keyId: string; key: string };
    const deleted = await h.post("/v1/rootKeys.deleteRootKey", { keyId }, ADMIN_TOKEN);
    expect(deleted.status).toBe(200);
    const unnamed = await h.post("/v1/rootKeys.createRootKey", { workspaceId: t.workspaceId, permissions: [] }, ADMIN_TOKEN);
    expect(unnamed.status).toBe(200);

    const entries = await auditEntries(h, { workspaceId: t.workspaceId });
    expect(entries).toEqual([
      expect.objectContaining({
        ...OPERATOR,
        workspaceId: t.workspaceId,
        event: "rootKey.create",
        targets: [{ type: "rootKey", id: keyId, name: "ci" }],
        details: { permissions: ["api.*.create_api", "api.*.read_api"] },
        requestId: requestIdOf(created),
      }),
      expect.objectContaining({
        ...OPERATOR,
        workspaceId: t.workspaceId,
        event: "rootKey.delete",
        targets: [{ type: "rootKey", id: keyId, name: "ci" }],
        details: { permissions: ["api.*.create_api", "api.*.read_api"] },
        requestId: requestIdOf(deleted),
      }),
      expect.objectContaining({
        ...OPERATOR,
        event: "rootKey.create",
        targets: [{ type: "rootKey", id: unnamed.body.keyId }],
        details: { permissions: [] },
        requestId: requestIdOf(unnamed),
      }),
    ]);
    const stored = JSON.stringify(await auditEntries(h));
    for (const secret of [key, hashKey(key), unnamed.body.key, hashKey(unnamed.body.key), ADMIN_TOKEN])
      expect(stored).not.toContain(secret);
  });

  test("a refused root-key call (404 workspace, 404 key, 400) records nothing and creates nothing", async ({ h }) => {
    const before = await auditEntries(h);
    const keysBefore = await h.sql("select id from root_keys order by id");
    const refused = [
      await h.post("/v1/rootKeys.createRootKey", { workspaceId: "ws_missing", permissions: ["*"] }, ADMIN_TOKEN),
      await h.post("/v1/rootKeys.deleteRootKey", { keyId: "rk_missing" }, ADMIN_TOKEN),
      await h.post("/v1/rootKeys.createRootKey", { workspaceId: "ws_missing", permissions: "*" }, ADMIN_TOKEN),
    ];
    expect(refused.map((r) => r.status)).toEqual([404, 404, 400]);
    expect(await auditEntries(h)).toEqual(before);
    expect(await h.sql("select id from root_keys order by id")).toEqual(keysBefore);
  });
});

describe("audit: v1 apis.deleteKeys", () => {
  test("one key.delete entry per request naming the API and every key deleted, with its count", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const keyIds: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await h.post("/v1/keys.createKey", { apiId }, t.rootKey);
      expect(res.status).toBe(200);
      keyIds.push(res.body.keyId as string);
    }
    // One already deleted: a soft deleteKeys leaves it out, a permanent one removes its row too.
    expect((await h.post("/v1/keys.deleteKey", { keyId: keyIds[0] }, t.rootKey)).status).toBe(200);

    const soft = await h.post("/v1/apis.deleteKeys", { apiId }, t.rootKey);
    expect(soft.body).toEqual({ deletedKeys: 2 });
    const permanent = await h.post("/v1/apis.deleteKeys", { apiId, permanent: true }, t.rootKey);
    expect(permanent.body).toEqual({ deletedKeys: 3 });
    // Nothing left to delete: nothing changed, nothing recorded.
    const empty = await h.post("/v1/apis.deleteKeys", { apiId }, t.rootKey);
    expect(empty.body).toEqual({ deletedKeys: 0 });

    const byId = (a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id);
    const entries = (await auditEntries(h, { workspaceId: t.workspaceId, event: "key.delete" })).filter(
      (e) => e.requestId !== null && [requestIdOf(soft), requestIdOf(permanent), requestIdOf(empty)].includes(e.requestId),
    );
    expect(entries).toHaveLength(2);
    const [first, second] = entries;
    expect(first).toMatchObject({
      workspaceId: t.workspaceId,
      actorKind: "root_key",
      actorId: t.rootKeyId,
      surface: "v1",
      requestId: requestIdOf(soft),
      details: { count: 2, permanent: false },
    });
    expect(first!.targets[0]).toEqual({ type: "api", id: apiId });
    expect(first!.targets.slice(1).sort(byId)).toEqual(
      keyIds
        .slice(1)
        .map((id) => ({ type: "key", id }))
        .sort(byId),
    );
    expect(second).toMatchObject({ requestId: requestIdOf(permanent), details: { count: 3, permanent: true } });
    expect(second!.targets[0]).toEqual({ type: "api", id: apiId });
    expect(second!.targets.slice(1).sort(byId)).toEqual(keyIds.map((id) => ({ type: "key", id })).sort(byId));
  });

  test("a refused deleteKeys (403, 404, 400) records nothing and deletes nothing", async ({ h, t }) => {
    const apiId = await h.createApi(t);
    const { keyId } = await h.importKey(t, apiId);
    const reader = await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]);
    const before = await auditEntries(h, { workspaceId: t.workspaceId });
    const refused = [
      await h.post("/v1/apis.deleteKeys", { apiId }, reader),
      await h.post("/v1/apis.deleteKeys", { apiId: "api_missing" }, t.rootKey),
      await h.post("/v1/apis.deleteKeys", { apiId, permanent: "yes" }, t.rootKey),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 404, 400]);
    expect(await auditEntries(h, { workspaceId: t.workspaceId })).toEqual(before);
    expect(await h.sql(`select deleted_at_m from keys where id = '${keyId}'`)).toEqual([{ deleted_at_m: null }]);
  });
});
