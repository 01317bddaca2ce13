import { describe, expect } from "vitest";
import { ManualClock } from "../src/clock.js";
import { harnessWith, testWith } from "./fixtures.js";
import { ADMIN_TOKEN, type Harness } from "./helper.js";

// The times the writes record (created, updated, deleted) are business time: they come from the injected clock
// (services.clock), as expiry and rate-limit windows do, never from the machine's. The clock here stands years in
// the past, so a time taken from Date.now() instead could not match by chance.
const START = Date.UTC(2021, 2, 3, 4, 5, 6, 7);
const clock = new ManualClock(START);
const it = testWith(harnessWith({}, { clock }));

/** The millisecond column `column` of the row of `table` with this id (for times v1 does not show). */
async function timeOf(h: Harness, table: string, column: string, id: string): Promise<number | null> {
  const rows = await h.sql<Record<string, unknown>>(`select ${column} as t from ${table} where id = '${id}'`);
  expect(rows).toHaveLength(1);
  const t = rows[0]!.t;
  return t === null ? null : Number(t);
}

/** Moves the clock to a new time of its own and answers it. */
function tick(ms = 60_000): number {
  clock.advance(ms);
  return clock.now();
}

describe("business time comes from the injected clock", () => {
  it("a key's creation, update, remaining change and soft deletion", async ({ h, t, apiId }) => {
    const createdAt = tick();
    const created = await h.post("/v1/keys.createKey", { apiId, remaining: 5 }, t.rootKey);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const { keyId } = created.body;
    let got = await h.get("/v1/keys.getKey", { keyId }, t.rootKey);
    expect(got.body.createdAt).toBe(createdAt);

    const updatedAt = tick();
    expect((await h.post("/v1/keys.updateKey", { keyId, name: "renamed" }, t.rootKey)).status).toBe(200);
    got = await h.get("/v1/keys.getKey", { keyId }, t.rootKey);
    expect(got.body).toMatchObject({ createdAt, updatedAt });

    const spentAt = tick();
    expect((await h.post("/v1/keys.updateRemaining", { keyId, op: "increment", value: 1 }, t.rootKey)).status).toBe(200);
    expect(await timeOf(h, "keys", "updated_at_m", keyId)).toBe(spentAt);

    const deletedAt = tick();
    expect((await h.post("/v1/keys.deleteKey", { keyId }, t.rootKey)).status).toBe(200);
    expect(await timeOf(h, "keys", "deleted_at_m", keyId)).toBe(deletedAt);
  });

  it("an imported key's creation (migrations.createKeys)", async ({ h, t, apiId }) => {
    const importedAt = tick();
    const { keyId } = await h.importKey(t, apiId);
    expect((await h.get("/v1/keys.getKey", { keyId }, t.rootKey)).body.createdAt).toBe(importedAt);
  });

  it("an API's, a role's, a permission's creation, and their links", async ({ h, t, apiId }) => {
    const apiAt = tick();
    const newApi = await h.createApi(t);
    expect(await timeOf(h, "apis", "created_at_m", newApi)).toBe(apiAt);

    const roleAt = tick();
    const { roleId } = (await h.post("/v1/permissions.createRole", { name: "clock-role" }, t.rootKey)).body;
    expect(await timeOf(h, "roles", "created_at_m", roleId)).toBe(roleAt);

    const permissionAt = tick();
    const { permissionId } = (await h.post("/v1/permissions.createPermission", { name: "clock.permission" }, t.rootKey)).body;
    expect(await timeOf(h, "permissions", "created_at_m", permissionId)).toBe(permissionAt);

    const linkedAt = tick();
    const linked = await h.post("/v1/permissions.addPermissionsToRole", { roleId, permissions: [{ id: permissionId }] }, t.rootKey);
    expect(linked.status, JSON.stringify(linked.body)).toBe(200);
    const [link] = await h.sql<{ t: string }>(`select created_at_m as t from roles_permissions where role_id = '${roleId}'`);
    expect(Number(link!.t)).toBe(linkedAt);

    const { keyId } = (await h.post("/v1/keys.createKey", { apiId }, t.rootKey)).body;
    const keyLinkedAt = tick();
    expect((await h.post("/v1/keys.addRoles", { keyId, roles: [{ id: roleId }] }, t.rootKey)).status).toBe(200);
    const [keyLink] = await h.sql<{ t: string }>(`select created_at_m as t from keys_roles where key_id = '${keyId}'`);
    expect(Number(keyLink!.t)).toBe(keyLinkedAt);
  });

  it("an identity's creation and update", async ({ h, t }) => {
    const createdAt = tick();
    const created = await h.post("/v1/identities.createIdentity", { externalId: "clock-identity" }, t.rootKey);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const { identityId } = created.body;
    expect(await timeOf(h, "identities", "created_at_m", identityId)).toBe(createdAt);

    const updatedAt = tick();
    const updated = await h.post("/v1/identities.updateIdentity", { identityId, meta: { plan: "pro" } }, t.rootKey);
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(await timeOf(h, "identities", "updated_at_m", identityId)).toBe(updatedAt);
  });

  it("a rate-limit namespace's creation, an override's creation and deletion", async ({ h, t }) => {
    const namespaceAt = tick();
    const limited = await h.post("/v1/ratelimits.limit", { namespace: "clock-ns", identifier: "a", limit: 1, duration: 1000 }, t.rootKey);
    expect(limited.status, JSON.stringify(limited.body)).toBe(200);
    const [ns] = await h.sql<{ id: string }>(`select id from ratelimit_namespaces where name = 'clock-ns'`);
    expect(await timeOf(h, "ratelimit_namespaces", "created_at_m", ns!.id)).toBe(namespaceAt);

    const overrideAt = tick();
    const set = await h.post(
      "/v1/ratelimits.setOverride",
      { namespaceName: "clock-ns", identifier: "alice", limit: 5, duration: 1000 },
      t.rootKey,
    );
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    const { overrideId } = set.body;
    expect(await timeOf(h, "ratelimit_overrides", "created_at_m", overrideId)).toBe(overrideAt);

    const deletedAt = tick();
    expect((await h.post("/v1/ratelimits.deleteOverride", { namespaceName: "clock-ns", identifier: "alice" }, t.rootKey)).status).toBe(200);
    expect(await timeOf(h, "ratelimit_overrides", "deleted_at_m", overrideId)).toBe(deletedAt);
  });

  it("a workspace's creation and update, a root key's creation (operator routes)", async ({ h }) => {
    const createdAt = tick();
    const { workspaceId } = (await h.post("/v1/workspaces.createWorkspace", { name: "clock-ws" }, ADMIN_TOKEN)).body;
    expect(await timeOf(h, "workspaces", "created_at_m", workspaceId)).toBe(createdAt);

    const updatedAt = tick();
    expect((await h.post("/v1/workspaces.updateWorkspace", { workspaceId, enabled: false }, ADMIN_TOKEN)).status).toBe(200);
    expect(await timeOf(h, "workspaces", "updated_at_m", workspaceId)).toBe(updatedAt);

    const rootKeyAt = tick();
    const { keyId } = (await h.post("/v1/rootKeys.createRootKey", { workspaceId, permissions: ["*"] }, ADMIN_TOKEN)).body;
    expect(await timeOf(h, "root_keys", "created_at_m", keyId)).toBe(rootKeyAt);
  });
});
