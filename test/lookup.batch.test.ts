import { describe, expect } from "vitest";
import { prepareKeyObjectReads } from "../src/storage/keys/keyObjects.repository.js";
import { type KeyForVerification, prepareVerificationLookup } from "../src/storage/keys/keys.repository.js";
import { test } from "./fixtures.js";

// The verification lookup reads what a batch of keys has in other tables (roles, permissions direct and through
// roles, the key's and its identity's rate limits) once for the whole batch (keys.columns.ts, batchListsOf),
// where the key object reads them per key. Here keys that share roles, permissions and an identity are looked up
// together and one by one: each row must hold exactly its own key's, whatever else is in the batch.

const it = test.extend("keys", { scope: "file" }, async ({ h, t, apiId }) => {
  const ws = t.workspaceId;
  const now = Date.now();
  await h.sql(`insert into permissions (id, workspace_id, name, slug, created_at_m) values
    ('lb_pa', '${ws}', 'A read', 'a.read', ${now}), ('lb_pb', '${ws}', 'B write', 'b.write', ${now}),
    ('lb_pc', '${ws}', 'C admin', 'c.admin', ${now})`);
  await h.sql(`insert into roles (id, workspace_id, name, created_at_m) values
    ('lb_rx', '${ws}', 'x', ${now}), ('lb_ry', '${ws}', 'y', ${now}), ('lb_rz', '${ws}', 'z', ${now})`);
  await h.sql(`insert into roles_permissions (role_id, permission_id, workspace_id, created_at_m) values
    ('lb_rx', 'lb_pa', '${ws}', ${now}), ('lb_rx', 'lb_pb', '${ws}', ${now}),
    ('lb_ry', 'lb_pb', '${ws}', ${now}), ('lb_ry', 'lb_pc', '${ws}', ${now})`);
  await h.sql(`insert into identities (id, workspace_id, external_id, created_at_m) values
    ('lb_i1', '${ws}', 'lb-owner-1', ${now}), ('lb_i2', '${ws}', 'lb-owner-2', ${now})`);
  const key = (n: number, identity: string | null, deleted = false) =>
    `('lb_k${n}', '${ws}', '${apiId}', 'lb_hash_${n}', 'lb', ${identity ? `'${identity}'` : "null"}, ${now}, ${deleted ? now : "null"})`;
  await h.sql(`insert into keys (id, workspace_id, api_id, hash, start, identity_id, created_at_m, deleted_at_m) values
    ${[key(1, "lb_i1"), key(2, "lb_i1"), key(3, null), key(4, "lb_i2"), key(5, null, true)].join(", ")}`);
  await h.sql(`insert into keys_roles (key_id, role_id, workspace_id, created_at_m) values
    ('lb_k1', 'lb_rx', '${ws}', ${now}), ('lb_k1', 'lb_ry', '${ws}', ${now}), ('lb_k4', 'lb_rz', '${ws}', ${now}),
    ('lb_k5', 'lb_rx', '${ws}', ${now})`);
  await h.sql(`insert into keys_permissions (key_id, permission_id, workspace_id, created_at_m) values
    ('lb_k1', 'lb_pa', '${ws}', ${now}), ('lb_k4', 'lb_pc', '${ws}', ${now}), ('lb_k5', 'lb_pa', '${ws}', ${now})`);
  await h.sql(`insert into ratelimits (id, workspace_id, name, key_id, identity_id, "limit", duration, auto_apply, created_at_m) values
    ('lb_rl_k1', '${ws}', 'own', 'lb_k1', null, 5, 1000, true, ${now}),
    ('lb_rl_k3', '${ws}', 'default', 'lb_k3', null, 7, 2000, false, ${now}),
    ('lb_rl_i1', '${ws}', 'shared', null, 'lb_i1', 10, 60000, true, ${now}),
    ('lb_rl_i2a', '${ws}', 'tokens', null, 'lb_i2', 20, 1000, false, ${now}),
    ('lb_rl_i2b', '${ws}', 'calls', null, 'lb_i2', 30, 1000, true, ${now})`);
});

const rl = (id: string, name: string, limit: number, duration: number, autoApply: boolean, owner: "key" | "identity") => ({
  id,
  name,
  limit,
  duration,
  autoApply,
  owner,
});

/** What each live key has, as the lookup must answer it (rate limits by id: the lookup's order is any). */
const expected: Record<string, Pick<KeyForVerification, "roles" | "roleIds" | "permissions" | "ratelimits">> = {
  lb_hash_1: {
    roles: ["x", "y"],
    roleIds: ["lb_rx", "lb_ry"],
    // a.read directly and through x, b.write through x and y, c.admin through y: each once, by slug.
    permissions: ["a.read", "b.write", "c.admin"],
    ratelimits: [rl("lb_rl_i1", "shared", 10, 60000, true, "identity"), rl("lb_rl_k1", "own", 5, 1000, true, "key")],
  },
  lb_hash_2: { roles: [], roleIds: [], permissions: [], ratelimits: [rl("lb_rl_i1", "shared", 10, 60000, true, "identity")] },
  lb_hash_3: { roles: [], roleIds: [], permissions: [], ratelimits: [rl("lb_rl_k3", "default", 7, 2000, false, "key")] },
  lb_hash_4: {
    roles: ["z"],
    roleIds: ["lb_rz"],
    permissions: ["c.admin"],
    ratelimits: [rl("lb_rl_i2a", "tokens", 20, 1000, false, "identity"), rl("lb_rl_i2b", "calls", 30, 1000, true, "identity")],
  },
};

function aggregatesOf(row: KeyForVerification) {
  return {
    roles: row.roles,
    roleIds: [...row.roleIds].sort(),
    permissions: row.permissions,
    ratelimits: [...row.ratelimits].sort((a, b) => a.id.localeCompare(b.id)),
  };
}

describe("the verification lookup reads a batch's roles, permissions and rate limits per key", () => {
  it("answers each key of a batch with its own, as when looked up alone", async ({ h, keys: _ }) => {
    const lookup = prepareVerificationLookup(h.db);
    const hashes = ["lb_hash_4", "lb_hash_1", "lb_hash_none", "lb_hash_5", "lb_hash_3", "lb_hash_2"];
    const together = await lookup.execute({ hashes });
    // The deleted key and the unknown hash have no row.
    expect(together.map((r) => r.hash).sort()).toEqual(Object.keys(expected).sort());
    for (const row of together) expect(aggregatesOf(row), row.hash).toEqual(expected[row.hash]);
    for (const hash of Object.keys(expected)) {
      const alone = await lookup.execute({ hashes: [hash] });
      expect(alone.map(aggregatesOf), hash).toEqual([expected[hash]]);
    }
  });

  it("agrees with the key object, which reads the same rules per key", async ({ h, keys: _ }) => {
    const lookup = prepareVerificationLookup(h.db);
    const reads = prepareKeyObjectReads(h.db);
    for (const row of await lookup.execute({ hashes: Object.keys(expected) })) {
      const object = await reads.find({ hash: row.hash }, "effective-slugs");
      expect({ roles: object?.roles, permissions: object?.permissions }, row.hash).toEqual({
        roles: row.roles,
        permissions: row.permissions,
      });
    }
  });
});
