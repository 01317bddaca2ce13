import { afterAll, beforeAll, describe, expect, it as plainIt } from "vitest";
import { ManualClock } from "../src/clock.js";
import { AUDIT_SETTLE_MS } from "../src/core/audit/audit.read.js";
import { trustedCaller } from "../src/core/caller.js";
import { WriteGate } from "../src/core/changes.js";
import type { AuditEvent } from "../src/core/audit/audit.events.js";
import { test } from "./fixtures.js";
import { ADMIN_TOKEN, createHarness, type Harness } from "./helper.js";

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

describe('POST /v2/keyhaven.listAuditLogs with order: "asc"', () => {
  // The app's clock is set by hand, so that an entry's time and the settling margin are the test's to choose.
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness({}, { clock });
  });
  afterAll(() => h?.close());

  /** `n` entries, each a millisecond after the one before. */
  async function spaced(workspaceId: string, n: number, event: AuditEvent = "key.create") {
    for (let i = 0; i < n; i++) {
      clock.advance(1);
      await writeEntries(h, workspaceId, 1, event);
    }
    return (await writeEntries(h, workspaceId, 0)).reverse();
  }

  plainIt("pages oldest first without skipping or repeating an entry while entries are being written", async () => {
    const tenant = await h.tenant();
    const ids = await spaced(tenant.workspaceId, 7);
    clock.advance(AUDIT_SETTLE_MS + 1);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const res = await list(h, { order: "asc", limit: 2, ...(cursor && { cursor }) }, tenant.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const times = res.body.data.map((e: any) => e.time);
      expect(times).toEqual([...times].sort((x: number, y: number) => x - y));
      seen.push(...res.body.data.map((e: any) => e.id));
      // Written between pages: newer than every page, and inside the settling margin, so no page holds it.
      clock.advance(1);
      await writeEntries(h, tenant.workspaceId, 1);
      cursor = res.body.pagination.cursor;
      if (!res.body.pagination.hasMore) break;
    }
    expect(seen).toEqual(ids);
  });

  plainIt("leaves out the entries of the last AUDIT_SETTLE_MS, which newest first shows at once", async () => {
    const tenant = await h.tenant();
    const [old] = await spaced(tenant.workspaceId, 1);
    clock.advance(AUDIT_SETTLE_MS + 1);
    // Its change may still be committing: its time is less than AUDIT_SETTLE_MS ago.
    const fresh = (await spaced(tenant.workspaceId, 1)).at(-1)!;
    const asc = await list(h, { order: "asc" }, tenant.rootKey);
    expect(asc.status, JSON.stringify(asc.body)).toBe(200);
    expect(asc.body.data.map((e: any) => e.id)).toEqual([old]);
    const desc = await list(h, { order: "desc" }, tenant.rootKey);
    expect(desc.body.data.map((e: any) => e.id)).toEqual([fresh, old]);
    expect((await list(h, {}, tenant.rootKey)).body.data.map((e: any) => e.id)).toEqual([fresh, old]);
    // A range entirely inside the margin is empty, not an error.
    const inside = await list(h, { order: "asc", since: clock.now() - 1 }, tenant.rootKey);
    expect(inside.status).toBe(200);
    expect(inside.body.data).toEqual([]);
    clock.advance(AUDIT_SETTLE_MS + 1);
    expect((await list(h, { order: "asc" }, tenant.rootKey)).body.data.map((e: any) => e.id)).toEqual([old, fresh]);
  });

  plainIt("holds the range and workspace filters oldest first", async () => {
    const a = await h.tenant();
    const b = await h.tenant();
    const ids = await spaced(a.workspaceId, 5);
    await spaced(b.workspaceId, 2);
    clock.advance(AUDIT_SETTLE_MS + 1);
    const rows = await h.sql<{ id: string; created_at_m: string | number }>(
      `select id, created_at_m from audit_log where workspace_id = '${a.workspaceId}' order by created_at_m, id`,
    );
    const since = Number(rows[1]!.created_at_m);
    const until = Number(rows[4]!.created_at_m);
    const res = await list(h, { order: "asc", since, until, workspaceId: a.workspaceId, limit: 100 }, ADMIN_TOKEN);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.map((e: any) => e.id)).toEqual(ids.slice(1, 4));
  });

  plainIt("refuses an order other than asc or desc with a 400", async () => {
    const tenant = await h.tenant();
    for (const order of ["ASC", "up", 1, null]) {
      const res = await list(h, { order }, tenant.rootKey);
      expect(res.status, JSON.stringify(order)).toBe(400);
      expect(JSON.stringify(res.body.error.errors)).toContain("order");
    }
  });
});
