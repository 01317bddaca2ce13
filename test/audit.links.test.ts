import { describe, expect } from "vitest";
import { auditEntries } from "./audit-entries.js";
import { test as it } from "./fixtures.js";

// Each change of a key's roles or permissions writes its audit entries (event, actor, targets, workspace, surface,
// request id) in its own transaction; a refused call writes none.

describe("audit: key links", () => {
  it("v1 and v2 addRoles, removeRoles each write one entry naming the key and the role; a refused call none", async ({
    h,
    t,
    importKey,
    createRole,
  }) => {
    const { keyId } = await importKey();
    const roleId = await createRole("audit-links-a");
    const before = (await auditEntries(h, { workspaceId: t.workspaceId })).length;
    for (const [surface, add, remove] of [
      ["v1", "/v1/keys.addRoles", "/v1/keys.removeRoles"],
      ["v2", "/v2/keys.addRoles", "/v2/keys.removeRoles"],
    ] as const) {
      const roles = surface === "v1" ? [{ name: "audit-links-a" }] : ["audit-links-a"];
      const added = await h.post(add, { keyId, roles }, t.rootKey);
      expect(added.status).toBe(200);
      const [connect] = await auditEntries(h, { workspaceId: t.workspaceId, event: "authorization.connect_role_and_key" }).then((e) =>
        e.filter((x) => x.surface === surface),
      );
      expect(connect).toMatchObject({
        actorKind: "root_key",
        actorId: t.rootKeyId,
        surface,
        targets: [
          { type: "key", id: keyId },
          { type: "role", id: roleId, name: "audit-links-a" },
        ],
      });
      expect(connect!.requestId).toBe(added.headers["unkey-request-id"] ?? added.body.meta?.requestId);
      const removed = await h.post(remove, { keyId, roles }, t.rootKey);
      expect(removed.status).toBe(200);
      const disconnects = (await auditEntries(h, { workspaceId: t.workspaceId, event: "authorization.disconnect_role_and_key" })).filter(
        (x) => x.surface === surface,
      );
      expect(disconnects).toHaveLength(1);
      // Removing again changes nothing: no entry.
      await h.post(remove, { keyId, roles }, t.rootKey);
    }
    expect((await auditEntries(h, { workspaceId: t.workspaceId })).length).toBe(before + 4);
    const weak = await h.tenant();
    const refused = await h.post("/v1/keys.addRoles", { keyId, roles: [{ name: "audit-links-a" }] }, weak.rootKey);
    expect([403, 404]).toContain(refused.status);
    expect((await auditEntries(h, { workspaceId: t.workspaceId })).length).toBe(before + 4);
  });
});
