import { describe, expect } from "vitest";
import { auditEntries } from "./audit-entries.js";
import { test } from "./fixtures.js";
import { ADMIN_TOKEN, type Harness, type Response, type Tenant } from "./helper.js";

// Each API write of v1 and v2 records one audit entry in its own transaction: the event, the root key that made it,
// the API it touched, the workspace, the surface and the request's id; a refused call records nothing.

const requestIdOf = (res: Response) => (res.body?.meta?.requestId as string | undefined) ?? (res.headers["unkey-request-id"] as string);

async function entriesOf(h: Harness, t: Tenant, event: string) {
  return auditEntries(h, { workspaceId: t.workspaceId, event });
}

describe("audit: APIs", () => {
  test("v1 apis.createApi records api.create with the settings given, by name", async ({ h }) => {
    const t = await h.tenant();
    const res = await h.post("/v1/apis.createApi", { name: "audited", deleteProtection: true }, t.rootKey);
    expect(res.status).toBe(200);
    const [entry, ...more] = await entriesOf(h, t, "api.create");
    expect(more).toEqual([]);
    expect(entry).toMatchObject({
      workspaceId: t.workspaceId,
      actorKind: "root_key",
      actorId: t.rootKeyId,
      targets: [{ type: "api", id: res.body.apiId, name: "audited" }],
      details: { fields: ["deleteProtection"] },
      surface: "v1",
      requestId: requestIdOf(res),
    });
  });

  test("v2 apis.createApi records api.create on surface v2", async ({ h }) => {
    const t = await h.tenant();
    const res = await h.post("/v2/apis.createApi", { name: "audited-v2" }, t.rootKey);
    expect(res.status).toBe(200);
    expect(await entriesOf(h, t, "api.create")).toEqual([
      expect.objectContaining({
        actorId: t.rootKeyId,
        targets: [{ type: "api", id: res.body.data.apiId, name: "audited-v2" }],
        surface: "v2",
        requestId: res.body.meta.requestId,
      }),
    ]);
  });

  test("v1 apis.updateApi records api.update naming the field, never its value", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const res = await h.post("/v1/apis.updateApi", { apiId, ipWhitelist: "10.0.0.0/8" }, t.rootKey);
    expect(res.status).toBe(200);
    const entries = await entriesOf(h, t, "api.update");
    expect(entries).toEqual([
      expect.objectContaining({
        actorId: t.rootKeyId,
        targets: [{ type: "api", id: apiId }],
        details: { fields: ["ipWhitelist"] },
        surface: "v1",
        requestId: requestIdOf(res),
      }),
    ]);
    expect(JSON.stringify(entries)).not.toContain("10.0.0.0");
  });

  test("v1 apis.updateApi records one api.update naming every field it changed, never a value", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const body = { apiId, name: "renamed-audit", defaultPrefix: "zq9", defaultBytes: 48, deleteProtection: false };
    const res = await h.post("/v1/apis.updateApi", body, t.rootKey);
    expect(res.status).toBe(200);
    const entries = await entriesOf(h, t, "api.update");
    expect(entries).toEqual([
      expect.objectContaining({
        actorId: t.rootKeyId,
        targets: [{ type: "api", id: apiId }],
        details: { fields: ["name", "defaultPrefix", "defaultBytes", "deleteProtection"] },
        surface: "v1",
        requestId: requestIdOf(res),
      }),
    ]);
    const text = JSON.stringify(entries);
    expect(text).not.toContain("renamed-audit");
    expect(text).not.toContain("zq9");
  });

  test("v1 and v2 apis.deleteApi record api.delete with how many keys went with the API", async ({ h }) => {
    const t = await h.tenant();
    const v1Api = await h.createApi(t);
    await h.importKey(t, v1Api);
    await h.importKey(t, v1Api);
    const v1 = await h.post("/v1/apis.deleteApi", { apiId: v1Api }, t.rootKey);
    expect(v1.status).toBe(200);
    const v2Api = await h.createApi(t);
    const v2 = await h.post("/v2/apis.deleteApi", { apiId: v2Api }, t.rootKey);
    expect(v2.status).toBe(200);
    expect(await entriesOf(h, t, "api.delete")).toEqual([
      expect.objectContaining({
        actorKind: "root_key",
        actorId: t.rootKeyId,
        targets: [{ type: "api", id: v1Api }],
        details: { deletedKeys: 2 },
        surface: "v1",
        requestId: requestIdOf(v1),
      }),
      expect.objectContaining({
        targets: [{ type: "api", id: v2Api }],
        details: { deletedKeys: 0 },
        surface: "v2",
        requestId: v2.body.meta.requestId,
      }),
    ]);
  });

  test("refused API writes record nothing: 403, 404, 412 and 400", async ({ h }) => {
    const t = await h.tenant();
    const reader = await h.tenant(["api.*.read_api"]);
    const protectedApi = await h.createApi(t, { deleteProtection: true });
    const before = await auditEntries(h, { workspaceId: t.workspaceId });
    const refused = [
      await h.post("/v1/apis.createApi", { name: "nope" }, reader.rootKey),
      await h.post("/v2/apis.createApi", { name: "nope" }, reader.rootKey),
      await h.post("/v1/apis.updateApi", { apiId: "api_missing", ipWhitelist: null }, t.rootKey),
      await h.post("/v1/apis.deleteApi", { apiId: protectedApi }, t.rootKey),
      await h.post("/v2/apis.deleteApi", { apiId: "api_missing" }, t.rootKey),
      await h.post("/v1/apis.createApi", { name: "x" }, t.rootKey),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 403, 404, 412, 404, 400]);
    expect(await auditEntries(h, { workspaceId: t.workspaceId })).toEqual(before);
    expect(await auditEntries(h, { workspaceId: reader.workspaceId })).toEqual([]);
  });
});

describe("audit: operator workspaces", () => {
  test("workspaces.createWorkspace and updateWorkspace record workspace.create / workspace.update as the operator", async ({ h }) => {
    const created = await h.post("/v1/workspaces.createWorkspace", { name: "audited-ws" }, ADMIN_TOKEN);
    expect(created.status).toBe(200);
    const workspaceId = created.body.workspaceId as string;
    const updated = await h.post("/v1/workspaces.updateWorkspace", { workspaceId, enabled: false }, ADMIN_TOKEN);
    expect(updated.status).toBe(200);
    const operator = { actorKind: "operator", actorId: "admin", actorName: "operator", surface: "operator", workspaceId };
    expect(await auditEntries(h, { workspaceId })).toEqual([
      expect.objectContaining({
        ...operator,
        event: "workspace.create",
        targets: [{ type: "workspace", id: workspaceId, name: "audited-ws" }],
        requestId: requestIdOf(created),
      }),
      expect.objectContaining({
        ...operator,
        event: "workspace.update",
        targets: [{ type: "workspace", id: workspaceId }],
        details: { fields: ["enabled"] },
        requestId: requestIdOf(updated),
      }),
    ]);
    expect(JSON.stringify(await auditEntries(h))).not.toContain(ADMIN_TOKEN);
  });

  test("a refused operator call records nothing (404)", async ({ h }) => {
    const before = await auditEntries(h);
    const res = await h.post("/v1/workspaces.updateWorkspace", { workspaceId: "ws_missing", enabled: true }, ADMIN_TOKEN);
    expect(res.status).toBe(404);
    expect(await auditEntries(h)).toEqual(before);
  });
});
