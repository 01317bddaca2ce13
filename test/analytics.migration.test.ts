import { describe, expect } from "vitest";
import { migrateAndRun } from "../src/storage/client.js";
import { test as it } from "./fixtures.js";

// Migration 0016 keys a tag set's counts by a digest of the tags instead of their text. Counts written before it
// must keep counting: each existing row gets its digest, and a later write of the same tags adds to it. The file's
// database (migrated, pooled on PGlite) is taken back to the schema before 0016 (what 0016 changed, undone by hand,
// and its row in drizzle's journal deleted), counts are written, and the migrations are applied again as at start.

/** What 0016 changed, undone: the primary key on the tags' text again, no digest, no function. */
const UNDO_0016 = [
  // The migrations after 0016 first, newest first (0026_portals, 0025_alerts, 0024_webhooks, 0023_verification_log, 0022_key_last_used,
  // 0021_console_key_search, 0020_console_sessions, 0019_pending_keys, 0018_idempotency_keys, 0017_audit_log), so that
  // 0016 is the last applied. (0019 made keys.hash nullable; no key here lacks one, so it is set back.)
  `drop trigger identities_end_portal_sessions on identities`,
  `drop function keyhaven_end_portal_sessions_of_identities()`,
  `drop table portal_sessions`,
  `drop table portals`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
  `drop trigger keys_alerts_inserted on keys`,
  `drop trigger keys_alerts_updated on keys`,
  `drop trigger keys_credits_start on keys`,
  `drop function keyhaven_key_alerts_inserted()`,
  `drop function keyhaven_key_alerts_updated()`,
  `drop function keyhaven_apply_key_alerts(text[], boolean[], boolean[], bigint)`,
  `drop function keyhaven_enqueue_event(text, text, bigint, jsonb)`,
  `drop function keyhaven_key_event_data(keys, text, jsonb)`,
  `drop function keyhaven_expiring_within(text, text)`,
  `drop function keyhaven_credits_low_threshold(keys)`,
  `drop function keyhaven_threshold_events()`,
  `drop function keyhaven_credits_start()`,
  `drop table key_alerts`,
  `drop table alert_thresholds`,
  `alter table keys drop column credits_start`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
  `drop trigger audit_log_webhook_outbox on audit_log`,
  `drop function keyhaven_webhook_outbox()`,
  `drop table webhook_attempts`,
  `drop table webhook_deliveries`,
  `drop table webhook_endpoints`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
  `drop view key_verifications_log`,
  `drop function keyhaven_chunk_events(jsonb)`,
  `drop table key_verification_chunks`,
  `alter table verification_counts drop column spent_credits`,
  `alter table verification_counts drop column latency_sum`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
  `drop trigger keys_forget_last_used on keys`,
  `drop trigger root_keys_forget_last_used on root_keys`,
  `drop function keyhaven_forget_key_last_used()`,
  `drop function keyhaven_forget_root_key_last_used()`,
  `drop table key_last_used`,
  `drop table root_key_last_used`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
  `drop index keys_name_prefix_idx`,
  `drop index keys_start_prefix_idx`,
  `drop index keys_disabled_by_api_idx`,
  `drop index keys_expiring_by_api_idx`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
  `drop table console_sessions`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
  `drop index keys_pending_idx`,
  `alter table keys drop column adopted_at_m`,
  `alter table keys alter column hash set not null`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
  `drop table idempotency_keys`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
  `drop table audit_log`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
  `alter table verification_counts drop constraint verification_counts_key_id_hour_m_outcome_tags_hash_pk`,
  `alter table verification_counts drop column tags_hash`,
  `alter table verification_counts add constraint verification_counts_key_id_hour_m_outcome_tags_pk primary key (key_id, hour_m, outcome, tags)`,
  `drop function keyhaven_tags_hash(text[])`,
  `delete from drizzle.__drizzle_migrations where created_at = (select max(created_at) from drizzle.__drizzle_migrations)`,
];

type Sql = (text: string) => Promise<Record<string, unknown>[]>;

const big = Array.from({ length: 3 }, (_, i) => `${"é✓".repeat(200)}${i}`);
const HOUR_M = 1_796_000_400_000;

async function seedBefore(sql: Sql) {
  await sql(`insert into verification_counts (key_id, hour_m, outcome, tags, workspace_id, api_id, count) values
    ('k1', ${HOUR_M}, 'VALID', '{}', 'ws', 'api', 5),
    ('k1', ${HOUR_M}, 'VALID', '{a,b}', 'ws', 'api', 3),
    ('k1', ${HOUR_M}, 'VALID', '{b,a}', 'ws', 'api', 2),
    ('k1', ${HOUR_M}, 'VALID', '{""}', 'ws', 'api', 1),
    ('k1', ${HOUR_M}, 'VALID', array['${big.join("','")}'], 'ws', 'api', 4)`);
}

async function expectConverted(sql: Sql) {
  const digests = await sql(
    "select count(*)::int as n, count(distinct tags_hash)::int as d from verification_counts where tags_hash is not null",
  );
  expect(digests).toEqual([{ n: 5, d: 5 }]);
  // Later writes, keyed by the digest, add to the rows written before the migration.
  for (const tags of ["'{}'", "'{a,b}'", `array['${big.join("','")}']`]) {
    await sql(`insert into verification_counts (key_id, hour_m, outcome, tags, workspace_id, api_id, count)
      values ('k1', ${HOUR_M}, 'VALID', ${tags}, 'ws', 'api', 10)
      on conflict (key_id, hour_m, outcome, tags_hash) do update set count = verification_counts.count + excluded.count`);
  }
  const rows = await sql("select tags, count::int as n from verification_counts order by count, tags");
  expect(rows).toEqual([
    { tags: [""], n: 1 },
    { tags: ["b", "a"], n: 2 },
    { tags: ["a", "b"], n: 13 },
    { tags: big, n: 14 },
    { tags: [], n: 15 },
  ]);
}

describe("migration 0016: tag sets keyed by their digest", () => {
  it("gives every count stored before it its digest, and later writes of the same tags add to it", async ({ h }) => {
    const sql: Sql = (text) => h.sql(text);
    const [{ applied }] = (await sql("select count(*)::int as applied from drizzle.__drizzle_migrations")) as [{ applied: number }];
    for (const statement of UNDO_0016) await sql(statement);
    await seedBefore(sql);
    await migrateAndRun(h.store, h.databaseUrl, async () => {});
    expect(await sql("select count(*)::int as applied from drizzle.__drizzle_migrations")).toEqual([{ applied }]);
    await expectConverted(sql);
    await sql("delete from verification_counts where key_id = 'k1'");
  });
});
