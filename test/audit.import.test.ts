import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { auditEntries } from "./audit-entries.js";
import { test } from "./fixtures.js";

// Issue 35 §2: each change of the import domain records one audit entry, written with the change; a refused call none.

const newMigrationId = () => `mig_${randomBytes(6).toString("hex")}`;

describe("v2 keyhaven.createMigration's audit entry", () => {
  test("one migration.create entry naming the migration, by the root key, with the answer's request id", async ({ h, t }) => {
    const migrationId = newMigrationId();
    const res = await h.post("/v2/keyhaven.createMigration", { migrationId, algorithm: "sha256" }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const entries = await auditEntries(h, { workspaceId: t.workspaceId, event: "migration.create" });
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      workspaceId: t.workspaceId,
      event: "migration.create",
      actorKind: "root_key",
      actorId: t.rootKeyId,
      targets: [{ type: "migration", id: migrationId }],
      details: { algorithm: "sha256" },
      surface: "v2",
      requestId: res.body.meta.requestId,
    });
  });

  test("a refused call (403 without create_key, 409 for an id the workspace has) writes no entry", async ({ h, t }) => {
    const migrationId = newMigrationId();
    expect((await h.post("/v2/keyhaven.createMigration", { migrationId, algorithm: "sha256" }, t.rootKey)).status).toBe(200);
    const before = await auditEntries(h, { workspaceId: t.workspaceId });
    const again = await h.post("/v2/keyhaven.createMigration", { migrationId, algorithm: "sha256" }, t.rootKey);
    expect(again.status).toBe(409);
    const reader = await h.tenant(["api.*.read_api"]);
    const denied = await h.post("/v2/keyhaven.createMigration", { migrationId: newMigrationId(), algorithm: "sha256" }, reader.rootKey);
    expect(denied.status).toBe(403);
    expect(await auditEntries(h, { workspaceId: t.workspaceId })).toEqual(before);
    expect(await auditEntries(h, { workspaceId: reader.workspaceId })).toEqual([]);
  });
});
