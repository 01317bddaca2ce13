import { sql } from "drizzle-orm";
import { expect } from "vitest";
import { PGLITE_REPLAN_AFTER_MS } from "../src/storage/pglitePrepared.js";
import { prepareVerificationLookup } from "../src/storage/keys/keys.repository.js";
import { test } from "./fixtures.js";
import { createHarness, type Harness } from "./helper.js";
import { planNodesOf } from "./plans.js";

// Issue 13 §2 on the embedded store: the verification lookup is a PREPAREd statement there, and a prepared statement
// keeps its plan until a table it reads is analysed, which PGlite never does by itself (keyhaven analyses after
// imports only). A plan made while `keys_roles` was empty reads it whole; it must not go on doing so once roles
// have been granted to many keys. Plans are read with EXPLAIN, never timed.

/** Keys (each with a role) added after the lookup was planned: enough that reading `keys_roles` whole costs more. */
const GROWN_ROWS = 5_000;

/** How the session's prepared lookup reads `keys_roles` in its generic plan (the one a prepared statement keeps). */
async function keysRolesScans(h: Harness, hash: string): Promise<string[]> {
  await h.sql("set plan_cache_mode = force_generic_plan");
  try {
    const [row] = await h.sql(`explain (format json) execute keyhaven_verification_lookup('{"${hash}"}')`);
    return planNodesOf(row)
      .filter((n) => n["Relation Name"] === "keys_roles" || n["Index Name"]?.startsWith("keys_roles"))
      .map((n) => `${n["Node Type"]}${n["Index Name"] ? ` using ${n["Index Name"]}` : ""}`);
  } finally {
    await h.sql("reset plan_cache_mode");
  }
}

test.skipIf(process.env.TEST_DATABASE_URL !== undefined)(
  "on PGlite, the verification lookup is planned again once its plan is old: a table that grew is read through its index",
  { timeout: 120_000 },
  async () => {
    const h = await createHarness();
    try {
      const tenant = await h.tenant();
      const apiId = await h.createApi(tenant);
      const ws = tenant.workspaceId;
      await h.sql(`insert into keys (id, workspace_id, api_id, hash, start, created_at_m)
        values ('replan_key_0', '${ws}', '${apiId}', 'replan_hash_0', 'x', 0)`);
      // As the ANALYZE after an import leaves them (statistics.ts): analysed while keys_roles was empty.
      await h.sql("analyze keys, keys_roles, keys_permissions, ratelimits, identities");
      let clock = 0;
      const lookup = prepareVerificationLookup(h.db, { now: () => clock });
      // Past the five runs after which PostgreSQL keeps a generic plan.
      for (let run = 0; run < 7; run++) expect((await lookup.execute({ hashes: ["replan_hash_0"] })).length).toBe(1);
      expect(await keysRolesScans(h, "replan_hash_0")).toContain("Seq Scan");

      // Roles granted to many keys, as the API grants them: no import, so no ANALYZE. (Not with the foreign keys'
      // checks skipped: setting session_replication_role drops every cached plan.)
      await h.db.transaction(async (tx) => {
        const run = (text: string) => tx.execute(sql.raw(text));
        await run(`insert into roles (id, workspace_id, name, created_at_m) values ('replan_role', '${ws}', 'replan', 0)`);
        await run(`insert into keys (id, workspace_id, api_id, hash, start, created_at_m)
          select 'replan_key_' || i, '${ws}', '${apiId}', 'replan_hash_' || i, 'x', 0 from generate_series(1, ${GROWN_ROWS}) i`);
        await run(`insert into keys_roles (key_id, role_id, workspace_id, created_at_m)
          select 'replan_key_' || i, 'replan_role', '${ws}', 0 from generate_series(0, ${GROWN_ROWS}) i`);
      });
      // Not yet old: the plan made when keys_roles was empty is still the one kept.
      clock = PGLITE_REPLAN_AFTER_MS - 1;
      expect((await lookup.execute({ hashes: ["replan_hash_0"] }))[0]?.roles).toEqual(["replan"]);
      expect(await keysRolesScans(h, "replan_hash_0")).toContain("Seq Scan");

      clock = PGLITE_REPLAN_AFTER_MS;
      expect((await lookup.execute({ hashes: ["replan_hash_7"] }))[0]?.roles).toEqual(["replan"]);
      const scans = await keysRolesScans(h, "replan_hash_7");
      expect(scans).not.toContain("Seq Scan");
      expect(
        scans.some((scan) => scan.includes("using keys_roles_key_id_role_id_pk")),
        JSON.stringify(scans),
      ).toBe(true);
    } finally {
      await h.close();
    }
  },
);
