import { sql } from "drizzle-orm";
import { describe, expect } from "vitest";
import { rowsOf } from "../src/storage/client.js";
import { findExistingHashes } from "../src/storage/import/migrations.repository.js";
import { prepareKeyObjectReads } from "../src/storage/keys/keyObjects.repository.js";
import { InvalidationTracker } from "../src/storage/invalidations.js";
import { prepareVerificationLookup } from "../src/storage/keys/keys.repository.js";
import { liveKeyHashExists, prepareRootKeyLookup } from "../src/storage/rootKeys/rootKeys.auth.repository.js";
import { test } from "./fixtures.js";
import type { Harness } from "./helper.js";
import { type PlanNode, planNodesOf } from "./plans.js";
import { type Captured, recordingDb } from "./recording-db.js";

// Issue 13 §2: after a bulk import nobody analysed, the verification lookup was planned from `apis` through
// keys_live_by_api_idx, reading every key of the API to find one hash. The lookups by hash (and the key object's
// lookup by id) must start from their unique index whatever the statistics say. Here `keys` and `root_keys` hold
// tens of thousands of fresh, never analysed rows of one API and one workspace, which makes the walk look cheap to
// the planner (the lookups' old shape took it), and each lookup's plan is read with EXPLAIN, never timed.

/** Rows inserted, straight into the tables, in one API (one workspace for the root keys). */
const BULK_ROWS = 30_000;

/** A bound value written as an SQL literal, for EXECUTE (which takes expressions, not bind parameters). */
function literal(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (Array.isArray(value)) return literal(`{${value.map((v) => `"${String(v)}"`).join(",")}}`);
  return `'${String(value).replace(/'/g, "''")}'`;
}

/**
 * The plans of `statement`, as a prepared statement is planned generically (as postgres.js's named statements
 * are, after five runs) and with its parameters' values (PGlite's unnamed statements): EXPLAIN without ANALYZE.
 */
async function plansOf(h: Harness, statement: Captured): Promise<Record<"generic" | "custom", PlanNode[]>> {
  return h.db.transaction(async (tx) => {
    const run = async (text: string) => rowsOf<Record<string, unknown>>(await tx.execute(sql.raw(text)));
    const plans = {} as Record<"generic" | "custom", PlanNode[]>;
    for (const mode of ["generic", "custom"] as const) {
      await run(`set local plan_cache_mode = force_${mode}_plan`);
      await run(`prepare lookup_plan_test as ${statement.query}`);
      const [row] = await run(`explain (format json) execute lookup_plan_test(${statement.params.map(literal).join(", ")})`);
      await run("deallocate lookup_plan_test");
      plans[mode] = planNodesOf(row);
    }
    return plans;
  });
}

/** Names of `table`'s indexes. */
async function indexesOf(h: Harness, table: string): Promise<Set<string>> {
  const rows = await h.sql<{ indexname: string }>(`select indexname from pg_indexes where tablename = '${table}'`);
  return new Set(rows.map((r) => r.indexname));
}

/** Every access to `table` in both plans goes through `index`, and none scans it whole. */
async function expectIndexFirst(h: Harness, statement: Captured, table: string, index: string) {
  const ofTable = await indexesOf(h, table);
  for (const [mode, nodes] of Object.entries(await plansOf(h, statement))) {
    const used = nodes.map((n) => n["Index Name"]).filter((name): name is string => name !== undefined && ofTable.has(name));
    const wholeScans = nodes.filter((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === table);
    const described = `${mode} plan of\n${statement.query}\nuses ${JSON.stringify(used)}`;
    expect(used, described).toContain(index);
    expect(new Set(used), described).toEqual(new Set([index]));
    expect(wholeScans, described).toEqual([]);
  }
}

/**
 * The scans of `table` under `node` that are not inside an InitPlan (a subquery that runs once per statement, before
 * the rows it is part of: the verification lookup's lists for the batch).
 */
function scansOutsideInitPlans(node: PlanNode, table: string): PlanNode[] {
  if (node["Parent Relationship"] === "InitPlan") return [];
  const own = node["Relation Name"] === table ? [node] : [];
  return [...own, ...(node.Plans ?? []).flatMap((child) => scansOutsideInitPlans(child, table))];
}

/** Tables whose rows grow with the keys, read by the verification lookup for each key it finds. */
const PER_KEY_TABLES = ["keys_roles", "keys_permissions", "ratelimits"];

/** No access to these tables, in either plan, reads one of them whole. */
async function expectNoWholeScans(h: Harness, statement: Captured, tables: string[]) {
  for (const [mode, nodes] of Object.entries(await plansOf(h, statement))) {
    const wholeScans = nodes.filter((n) => n["Node Type"] === "Seq Scan" && tables.includes(n["Relation Name"] ?? ""));
    expect(
      wholeScans.map((n) => n["Relation Name"]),
      `${mode} plan of\n${statement.query}`,
    ).toEqual([]);
  }
}

const it = test.extend("bulk", { scope: "file" }, async ({ h, t, apiId }) => {
  // Never analysed: on PostgreSQL, no autovacuum worker may analyse these tables during the file.
  if (h.onPostgres) {
    for (const table of ["keys", "root_keys", "apis", "workspaces", ...PER_KEY_TABLES]) {
      await h.sql(`alter table ${table} set (autovacuum_enabled = false)`);
    }
  }
  const ws = t.workspaceId;
  await h.sql(`insert into keys (id, workspace_id, api_id, hash, start, created_at_m)
    select 'plan_key_' || i, '${ws}', '${apiId}', 'plan_hash_' || i, 'x', 0 from generate_series(1, ${BULK_ROWS}) i`);
  // One key in three (7 and 28999 among them) with a role, a permission and a rate limit of its own; without the
  // foreign keys' checks (they hold), which took PGlite seconds per table.
  await h.db.transaction(async (tx) => {
    const run = (text: string) => tx.execute(sql.raw(text));
    await run("set local session_replication_role = replica");
    await run(`insert into roles (id, workspace_id, name, created_at_m) values ('plan_role', '${ws}', 'plan', 0)`);
    await run(`insert into permissions (id, workspace_id, name, slug, created_at_m) values ('plan_perm', '${ws}', 'plan', 'plan', 0)`);
    await run(`insert into keys_roles (key_id, role_id, workspace_id, created_at_m)
      select 'plan_key_' || i, 'plan_role', '${ws}', 0 from generate_series(1, ${BULK_ROWS}, 3) i`);
    await run(`insert into keys_permissions (key_id, permission_id, workspace_id, created_at_m)
      select 'plan_key_' || i, 'plan_perm', '${ws}', 0 from generate_series(1, ${BULK_ROWS}, 3) i`);
    await run(`insert into ratelimits (id, workspace_id, name, key_id, "limit", duration, created_at_m)
      select 'plan_rl_' || i, '${ws}', 'default', 'plan_key_' || i, 10, 1000, 0 from generate_series(1, ${BULK_ROWS}, 3) i`);
  });
  await h.sql(`insert into root_keys (id, workspace_id, hash, start, permissions, created_at_m)
    select 'plan_root_' || i, '${t.workspaceId}', 'plan_root_hash_' || i, 'x', '{}', 0 from generate_series(1, ${BULK_ROWS}) i`);
  const [stats] = await h.sql<{ analysed: boolean }>(
    "select coalesce(last_analyze, last_autoanalyze) is not null as analysed from pg_stat_user_tables where relname = 'keys'",
  );
  expect(stats?.analysed).toBe(false);
  return { hashes: ["plan_hash_7", "plan_hash_28999"] };
});

describe("lookups by hash start from the hash index, whatever the table's statistics", () => {
  it("the verification lookup", { timeout: 120_000 }, async ({ h, bulk }) => {
    const lookup = prepareVerificationLookup(h.db);
    const rows = await lookup.execute({ hashes: bulk.hashes });
    expect(rows.map((r) => r.hash).sort()).toEqual([...bulk.hashes].sort());
    expect(rows.map((r) => [r.roles, r.permissions, r.ratelimits.length])).toEqual(bulk.hashes.map(() => [["plan"], ["plan"], 1]));
    // Its own text (on PGlite the statement it PREPAREs, then EXECUTEs), planned as PostgreSQL plans it.
    await expectIndexFirst(h, { query: lookup.sql, params: [bulk.hashes] }, "keys", "keys_hash_idx");
    // What the keys found have in other tables is read through their indexes, for the batch at once.
    await expectNoWholeScans(h, { query: lookup.sql, params: [bulk.hashes] }, PER_KEY_TABLES);
    // The keys' identities too, once for the batch: joined per key, each key started a scan of `identities`, which on
    // the embedded store cost a system call (PGlite asking the file's size) and a quarter of a statement of 31 keys.
    for (const [mode, nodes] of Object.entries(await plansOf(h, { query: lookup.sql, params: [bulk.hashes] }))) {
      const identityScans = nodes.filter((n) => n["Relation Name"] === "identities");
      expect(identityScans.length, `${mode} plan of\n${lookup.sql}`).toBeGreaterThan(0);
      expect(scansOutsideInitPlans(nodes[0]!, "identities"), `${mode} plan of\n${lookup.sql}`).toEqual([]);
    }
  });

  it("the key object's lookup by hash, and by id", async ({ h, bulk }) => {
    const recording = recordingDb(h);
    const reads = prepareKeyObjectReads(recording.db);
    expect((await reads.find({ hash: bulk.hashes[0]! }, "direct-names"))?.id).toBe("plan_key_7");
    await expectIndexFirst(h, recording.last(), "keys", "keys_hash_idx");
    expect((await reads.find({ id: "plan_key_7" }, "effective-slugs"))?.id).toBe("plan_key_7");
    await expectIndexFirst(h, recording.last(), "keys", "keys_pkey");
  });

  it("the check that a root key's token is a customer's key", async ({ h, bulk }) => {
    const recording = recordingDb(h);
    expect(await liveKeyHashExists(recording.db, bulk.hashes[0]!)).toBe(true);
    await expectIndexFirst(h, recording.last(), "keys", "keys_hash_idx");
  });

  it("the import's check for hashes that exist already", async ({ h, bulk }) => {
    const recording = recordingDb(h);
    const existing = await findExistingHashes(recording.db, [...bulk.hashes, "plan_hash_none"]);
    expect([...existing].sort()).toEqual([...bulk.hashes].sort());
    await expectIndexFirst(h, recording.last(), "keys", "keys_hash_idx");
  });

  it("the root key lookup", async ({ h }) => {
    const recording = recordingDb(h);
    const [row] = await prepareRootKeyLookup(recording.db).execute({ hash: "plan_root_hash_12" });
    expect(row?.id).toBe("plan_root_12");
    await expectIndexFirst(h, recording.last(), "root_keys", "root_keys_hash_idx");
  });

  it("the catch-up read of the invalidation log (every epoch read that finds the epoch moved)", async ({ h }) => {
    // Ten minutes of writes stay in the log: read whole, each catch-up cost every replica a scan of all of them.
    if (h.onPostgres) await h.sql("alter table keyhaven_invalidations set (autovacuum_enabled = false)");
    await h.sql(`insert into keyhaven_invalidations (tag) select 'key:plan_' || i from generate_series(1, ${BULK_ROWS}) i`);
    try {
      const recording = recordingDb(h);
      const tracker = new InvalidationTracker(recording.db);
      await tracker.readEpoch(); // the first read has no snapshot to catch up from
      await tracker.readEpoch();
      await expectIndexFirst(h, recording.last(), "keyhaven_invalidations", "keyhaven_invalidations_xid_idx");
    } finally {
      await h.sql("delete from keyhaven_invalidations where tag like 'key:plan_%'");
    }
  });
});
