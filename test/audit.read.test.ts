import { describe, expect } from "vitest";
import { trustedCaller } from "../src/core/caller.js";
import { WriteGate } from "../src/core/changes.js";
import type { AuditEvent } from "../src/core/audit/audit.events.js";
import { test } from "./fixtures.js";
import { ADMIN_TOKEN, type Harness } from "./helper.js";

const it = test;

/** Writes `n` entries of `event` in `workspaceId` through the write gate, as a CLI actor; answers their ids. */
async function writeEntries(h: Harness, workspaceId: string, n: number, event: AuditEvent = "key.create", targetId = "key_x") {
  const gate = new WriteGate(h.db, h.clock);
  const caller = trustedCaller({ kind: "cli", id: "cli_test", name: "test" }, workspaceId, { surface: "cli" });
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    await gate.change(caller, async (_tx, record) => {
      record({ event, targets: [{ type: "key", id: targetId }], description: `entry ${i}` });
    });
  }
  const rows = await h.sql<{ id: string }>(
    `select id from audit_log where workspace_id = '${workspaceId}' order by created_at_m desc, id desc`,
  );
  for (const r of rows) ids.push(r.id);
  return ids;
}

const list = (h: Harness, body: unknown, token: string) => h.post("/v2/keyhaven.listAuditLogs", body, token);

describe("POST /v2/keyhaven.listAuditLogs", () => {
  it("answers a workspace's entries newest first in v2's envelope, in the documented shape", async ({ h, t }) => {
    await writeEntries(h, t.workspaceId, 3);
    const res = await list(h, {}, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.meta.requestId).toEqual(expect.any(String));
    expect(res.body.pagination).toEqual({ hasMore: false });
    const entries = res.body.data;
    expect(entries).toHaveLength(3);
    const times = entries.map((e: any) => e.time);
    expect(times).toEqual([...times].sort((x: number, y: number) => y - x));
    expect(entries[0]).toMatchObject({
      event: "key.create",
      workspaceId: t.workspaceId,
      actor: { type: "cli", id: "cli_test", name: "test" },
      targets: [{ type: "key", id: "key_x" }],
      context: { surface: "cli" },
    });
    expect(entries[0].time).toEqual(expect.any(Number));
  });

  it("pages without skipping or repeating an entry while entries are being written", async ({ h }) => {
    const tenant = await h.tenant();
    const ids = await writeEntries(h, tenant.workspaceId, 7);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const res = await list(h, { limit: 2, ...(cursor && { cursor }) }, tenant.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      seen.push(...res.body.data.map((e: any) => e.id));
      // Newer entries written between pages come before the reader's first page: they shift nothing.
      await writeEntries(h, tenant.workspaceId, 1);
      cursor = res.body.pagination.cursor;
      if (!res.body.pagination.hasMore) break;
    }
    expect(seen).toEqual(ids);
  });

  it("filters by event, actor, target and time", async ({ h }) => {
    const tenant = await h.tenant();
    await writeEntries(h, tenant.workspaceId, 2, "key.create", "key_a");
    await writeEntries(h, tenant.workspaceId, 1, "key.delete", "key_b");
    const ok = async (body: unknown) => {
      const res = await list(h, body, tenant.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.data as any[];
    };
    expect((await ok({ events: ["key.delete"] })).map((e) => e.event)).toEqual(["key.delete"]);
    expect(await ok({ targetId: "key_a" })).toHaveLength(2);
    expect(await ok({ actorId: "cli_test" })).toHaveLength(3);
    expect(await ok({ actorId: "rk_other" })).toHaveLength(0);
    expect(await ok({ since: h.clock.now() + 60_000 })).toHaveLength(0);
    expect(await ok({ until: 1 })).toHaveLength(0);
  });

  it("refuses a bad cursor, a bad limit and an inverted range with a 400", async ({ h, t }) => {
    for (const body of [{ cursor: "nope!" }, { limit: 0 }, { limit: 101 }, { since: 10, until: 5 }, { events: ["no.such"] }]) {
      expect((await list(h, body, t.rootKey)).status, JSON.stringify(body)).toBe(400);
    }
  });

  it("needs audit.*.read_logs or * (403 otherwise) and shows a root key its own workspace alone", async ({ h }) => {
    const a = await h.tenant();
    const b = await h.tenant();
    await writeEntries(h, a.workspaceId, 1);
    await writeEntries(h, b.workspaceId, 1);
    const none = await h.rootKey(a.workspaceId, ["api.*.read_api"]);
    const denied = await list(h, {}, none);
    expect(denied.status).toBe(403);
    expect(denied.body.error.type).toContain("insufficient_permissions");
    // The operator route that creates root keys accepts the permission's name.
    const created = await h.post(
      "/v1/rootKeys.createRootKey",
      { workspaceId: a.workspaceId, permissions: ["audit.*.read_logs"] },
      ADMIN_TOKEN,
    );
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const res = await list(h, {}, created.body.key);
    expect(res.status).toBe(200);
    expect(new Set(res.body.data.map((e: any) => e.workspaceId))).toEqual(new Set([a.workspaceId]));
    expect((await list(h, { workspaceId: b.workspaceId }, created.body.key)).status).toBe(403);
    expect((await list(h, {}, "sk_not_a_key")).status).toBe(401);
  });

  it("lets the operator token read every workspace, or one with workspaceId", async ({ h }) => {
    const a = await h.tenant();
    const b = await h.tenant();
    await writeEntries(h, a.workspaceId, 1);
    await writeEntries(h, b.workspaceId, 1);
    const all = await list(h, { limit: 100 }, ADMIN_TOKEN);
    expect(all.status, JSON.stringify(all.body)).toBe(200);
    const workspaces = new Set(all.body.data.map((e: any) => e.workspaceId));
    expect(workspaces.has(a.workspaceId) && workspaces.has(b.workspaceId)).toBe(true);
    const one = await list(h, { workspaceId: b.workspaceId }, ADMIN_TOKEN);
    expect(one.body.data.map((e: any) => e.workspaceId)).toEqual([b.workspaceId]);
  });
});
