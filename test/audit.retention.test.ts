import { describe, expect } from "vitest";
import { AUDIT_PRUNE_BATCH_ROWS, AuditRetention } from "../src/core/audit/audit.retention.js";
import { ManualClock } from "../src/clock.js";
import { loadConfig } from "../src/config.js";
import { harnessWith, testWith } from "./fixtures.js";

const clock = new ManualClock(Date.UTC(2026, 0, 1));
const it = testWith(harnessWith({ KEYHAVEN_AUDIT_RETENTION_DAYS: "30" }, { clock }));
const DAY = 86_400_000;

describe("the audit log's retention (KEYHAVEN_AUDIT_RETENTION_DAYS)", () => {
  it("deletes entries older than the retention in bounded batches and keeps the newer ones", async ({ h, t }) => {
    const now = clock.now();
    const old = AUDIT_PRUNE_BATCH_ROWS + 5; // more than one statement's batch
    await h.sql(
      `insert into audit_log (id, workspace_id, event, actor_kind, actor_id, actor_name, targets, description, surface, created_at_m)
       select 'audit_old_' || i, '${t.workspaceId}', 'key.create', 'cli', 'cli', 'cli', '[]'::jsonb, 'old', 'cli', ${now - 31 * DAY} + i
         from generate_series(1, ${old}) i
       union all
       select 'audit_new_' || i, '${t.workspaceId}', 'key.create', 'cli', 'cli', 'cli', '[]'::jsonb, 'new', 'cli', ${now - 29 * DAY} + i
         from generate_series(1, 3) i`,
    );
    expect(h.config.auditRetentionDays).toBe(30);
    const retention = new AuditRetention(h.db, clock, h.config.auditRetentionDays);
    expect(await retention.pruneNow()).toBe(old);
    const left = await h.sql<{ description: string }>(`select description from audit_log where workspace_id = '${t.workspaceId}'`);
    expect(left.map((r) => r.description)).toEqual(["new", "new", "new"]);
    // Two days later, those are old too.
    clock.advance(2 * DAY);
    expect(await retention.pruneNow()).toBe(3);
  });

  it("defaults to 90 days and takes only a whole number of days from 1", () => {
    const base = { KEYHAVEN_DATA_DIR: "memory://" };
    expect(loadConfig(base).auditRetentionDays).toBe(90);
    for (const bad of ["0", "-1", "1.5", "never", "36501"]) {
      expect(() => loadConfig({ ...base, KEYHAVEN_AUDIT_RETENTION_DAYS: bad }), bad).toThrow(/KEYHAVEN_AUDIT_RETENTION_DAYS/);
    }
  });
});
