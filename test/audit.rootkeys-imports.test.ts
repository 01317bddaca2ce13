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
