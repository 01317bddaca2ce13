import { describe, expect } from "vitest";
import { auditEntries } from "./audit-entries.js";
import { test } from "./fixtures.js";
import type { Harness, Response, Tenant } from "./helper.js";

// Issue 35: each key write of v1 and v2 records one audit entry, in its own transaction, naming the root key that
// made it, the key it touched, the workspace, the surface and the request; a refused write records none.

const requestIdOf = (res: Response): string =>
  (res.headers["unkey-request-id"] as string | undefined) ?? (res.body?.meta?.requestId as string);

async function keyOf(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown> = {}) {
  const res = await h.post("/v1/keys.createKey", { apiId, ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.keyId as string;
}

/** The entries of `event` in `t`'s workspace made by the request `res` answered. */
async function entriesOf(h: Harness, t: Tenant, event: string, res: Response) {
  const entries = await auditEntries(h, { workspaceId: t.workspaceId, event });
  return entries.filter((e) => e.requestId === requestIdOf(res));
}

describe("key writes record their audit entry", () => {
  for (const surface of ["v1", "v2"] as const) {
    test(`${surface} keys.deleteKey records key.delete with the key, its API and whether it was permanent`, async ({ h }) => {
      const t = await h.tenant();
      const apiId = await h.createApi(t);
      const keyId = await keyOf(h, t, apiId);
      const res = await h.post(`/${surface}/keys.deleteKey`, { keyId, permanent: true }, t.rootKey);
      expect(res.status).toBe(200);
      const entries = await auditEntries(h, { workspaceId: t.workspaceId, event: "key.delete" });
      expect(entries).toHaveLength(1);
      expect(entries[0]).toMatchObject({
        workspaceId: t.workspaceId,
        actorKind: "root_key",
        actorId: t.rootKeyId,
        targets: [
          { type: "key", id: keyId },
          { type: "api", id: apiId },
        ],
        details: { permanent: true },
        surface,
        requestId: requestIdOf(res),
      });
    });

    test(`${surface} keys.deleteKey refused (403, 404) records nothing`, async ({ h }) => {
      const t = await h.tenant();
      const apiId = await h.createApi(t);
      const keyId = await keyOf(h, t, apiId);
      const weak = await h.rootKey(t.workspaceId, ["api.*.read_key"]);
      expect((await h.post(`/${surface}/keys.deleteKey`, { keyId }, weak)).status).toBe(403);
      expect((await h.post(`/${surface}/keys.deleteKey`, { keyId: "key_missing" }, t.rootKey)).status).toBe(404);
      expect(await auditEntries(h, { workspaceId: t.workspaceId, event: "key.delete" })).toEqual([]);
    });
    test(`${surface} keys.createKey of a bare key and keys.updateKey of its own columns: one statement each, that records its entry too`, async ({
      h,
    }) => {
      const t = await h.tenant();
      const apiId = await h.createApi(t);
      // The one-statement forms (services.keyWrites) are what these writes take: counted, so the test holds them to it.
      const writes = h.services.keyWrites;
      const used = { insert: 0, update: 0 };
      const { insertKeyInLiveApi, updateLiveKeyColumns } = writes;
      writes.insertKeyInLiveApi = (...args) => {
        used.insert++;
        return insertKeyInLiveApi.apply(writes, args);
      };
      writes.updateLiveKeyColumns = (...args) => {
        used.update++;
        return updateLiveKeyColumns.apply(writes, args);
      };
      try {
        const created = await h.post(`/${surface}/keys.createKey`, { apiId, name: "bare" }, t.rootKey);
        expect(created.status, JSON.stringify(created.body)).toBe(200);
        const keyId = (surface === "v1" ? created.body.keyId : created.body.data.keyId) as string;
        const updated = await h.post(`/${surface}/keys.updateKey`, { keyId, name: "renamed", enabled: false }, t.rootKey);
        expect(updated.status, JSON.stringify(updated.body)).toBe(200);
        expect(used).toEqual({ insert: 1, update: 1 });
        const base = { workspaceId: t.workspaceId, actorKind: "root_key", actorId: t.rootKeyId, surface };
        expect(await entriesOf(h, t, "key.create", created)).toEqual([
          expect.objectContaining({
            ...base,
            targets: [
              { type: "key", id: keyId },
              { type: "api", id: apiId },
            ],
            details: { fields: surface === "v1" ? ["apiId", "name"] : expect.arrayContaining(["apiId", "name"]) },
          }),
        ]);
        expect(await entriesOf(h, t, "key.update", updated)).toEqual([
          expect.objectContaining({
            ...base,
            targets: [
              { type: "key", id: keyId },
              { type: "api", id: apiId },
            ],
            details: { fields: ["name", "enabled"] },
          }),
        ]);
        // A statement that wrote nothing records nothing: a deleted key, an API the root key may not update keys of.
        const count = (await auditEntries(h, { workspaceId: t.workspaceId })).length;
        const otherApi = await h.createApi(t);
        const narrow = await h.rootKey(t.workspaceId, [`api.${otherApi}.update_key`]);
        expect((await h.post(`/${surface}/keys.updateKey`, { keyId, name: "no" }, narrow)).status).toBe(403);
        expect((await h.post(`/${surface}/keys.deleteKey`, { keyId }, t.rootKey)).status).toBe(200);
        expect((await h.post(`/${surface}/keys.updateKey`, { keyId, name: "gone" }, t.rootKey)).status).toBe(404);
        const after = await auditEntries(h, { workspaceId: t.workspaceId });
        expect(after.slice(count).map((e) => e.event)).toEqual(["api.create", "key.delete"]);
      } finally {
        writes.insertKeyInLiveApi = insertKeyInLiveApi;
        writes.updateLiveKeyColumns = updateLiveKeyColumns;
      }
    });
  }

  test("v1 keys.updateRemaining records key.update of the remaining uses; refused, nothing", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const keyId = await keyOf(h, t, apiId, { remaining: 5 });
    const res = await h.post("/v1/keys.updateRemaining", { keyId, op: "increment", value: 2 }, t.rootKey);
    expect(res.status).toBe(200);
    expect(await entriesOf(h, t, "key.update", res)).toEqual([
      expect.objectContaining({
        actorKind: "root_key",
        actorId: t.rootKeyId,
        targets: [{ type: "key", id: keyId }],
        details: expect.objectContaining({ fields: ["remaining"] }),
        surface: "v1",
      }),
    ]);
    const before = (await auditEntries(h, { workspaceId: t.workspaceId })).length;
    const unlimited = await keyOf(h, t, apiId);
    const afterCreate = (await auditEntries(h, { workspaceId: t.workspaceId })).length;
    expect((await h.post("/v1/keys.updateRemaining", { keyId: unlimited, op: "increment", value: 1 }, t.rootKey)).status).toBe(400);
    expect((await h.post("/v1/keys.updateRemaining", { keyId: "key_missing", op: "set", value: 1 }, t.rootKey)).status).toBe(404);
    expect((await auditEntries(h, { workspaceId: t.workspaceId })).length).toBe(afterCreate);
    expect(afterCreate).toBeGreaterThanOrEqual(before);
  });

  test("v2 keys.updateCredits records key.update of the remaining uses; refused, nothing", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const keyId = await keyOf(h, t, apiId, { remaining: 5 });
    const res = await h.post("/v2/keys.updateCredits", { keyId, operation: "set", value: 9 }, t.rootKey);
    expect(res.status).toBe(200);
    expect(await entriesOf(h, t, "key.update", res)).toEqual([
      expect.objectContaining({
        actorId: t.rootKeyId,
        targets: [{ type: "key", id: keyId }],
        details: expect.objectContaining({ fields: ["remaining"] }),
        surface: "v2",
        requestId: res.body.meta.requestId,
      }),
    ]);
    const count = (await auditEntries(h, { workspaceId: t.workspaceId, event: "key.update" })).length;
    const weak = await h.rootKey(t.workspaceId, ["api.*.read_key"]);
    expect((await h.post("/v2/keys.updateCredits", { keyId, operation: "set", value: 1 }, weak)).status).toBe(403);
    expect((await h.post("/v2/keys.updateCredits", { keyId: "key_missing", operation: "set", value: 1 }, t.rootKey)).status).toBe(404);
    expect((await auditEntries(h, { workspaceId: t.workspaceId, event: "key.update" })).length).toBe(count);
  });

  test("v2 keys.rerollKey records key.reroll naming the old and the new key; refused, nothing", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const keyId = await keyOf(h, t, apiId);
    const res = await h.post("/v2/keys.rerollKey", { keyId, expiration: 0 }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const entries = await auditEntries(h, { workspaceId: t.workspaceId, event: "key.reroll" });
    expect(entries).toEqual([
      expect.objectContaining({
        actorKind: "root_key",
        actorId: t.rootKeyId,
        targets: [
          { type: "key", id: keyId },
          { type: "key", id: res.body.data.keyId },
        ],
        surface: "v2",
        requestId: res.body.meta.requestId,
      }),
    ]);
    const weak = await h.rootKey(t.workspaceId, ["api.*.read_key"]);
    expect((await h.post("/v2/keys.rerollKey", { keyId, expiration: 0 }, weak)).status).toBe(403);
    expect((await h.post("/v2/keys.rerollKey", { keyId: "key_missing", expiration: 0 }, t.rootKey)).status).toBe(404);
    expect(await auditEntries(h, { workspaceId: t.workspaceId, event: "key.reroll" })).toHaveLength(1);
  });
});
