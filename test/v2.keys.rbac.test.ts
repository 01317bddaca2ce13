import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import { expectV2Error } from "./v2-errors.js";
import type { Harness, Tenant } from "./helper.js";

// v2's keys.add/remove/setPermissions and keys.add/remove/setRoles (contract §4.8–§4.13) over the key-links core v1
// uses: the key looked up first (404), then update_key (tuple or the key's URN) with the route's rbac permission,
// permissions by slug (created when allowed), roles by name (never created), the key's list after the change.

const unique = (name: string) => `${name}.${randomBytes(4).toString("hex")}`;
const KEY_NOT_FOUND = "The specified key was not found. We could not find the requested key.";

async function newKey(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown> = {}) {
  const res = await h.post("/v1/keys.createKey", { apiId, ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { key: string; keyId: string };
}

async function newRole(h: Harness, t: Tenant, permissions: string[] = []) {
  const name = unique("role");
  const res = await h.post("/v2/permissions.createRole", { name, permissions }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { name, id: res.body.data.roleId as string };
}

const verifyV1 = async (h: Harness, key: string, permissions: string) =>
  (await h.post("/v1/keys.verifyKey", { key, authorization: { permissions } })).body;

const slugs = (data: { slug: string }[]) => data.map((p) => p.slug);

describe("v2 keys.addPermissions / removePermissions / setPermissions", () => {
  test("adds by slug (creating a missing one), answers the key's direct permissions, and v1's next verifyKey sees them", async ({
    h,
    t,
    apiId,
  }) => {
    const existing = unique("docs.read");
    await h.post("/v2/permissions.createPermission", { name: "read docs", slug: existing }, t.rootKey);
    const fresh = unique("docs.write");
    const { key, keyId } = await newKey(h, t, apiId);
    expect(await verifyV1(h, key, fresh)).toMatchObject({ valid: false, code: "INSUFFICIENT_PERMISSIONS" });

    const res = await h.post("/v2/keys.addPermissions", { keyId, permissions: [fresh, existing] }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(slugs(res.body.data)).toEqual([existing, fresh].sort());
    expect(res.body.data.find((p: any) => p.slug === existing)).toMatchObject({ name: "read docs", id: expect.stringMatching(/^perm_/) });
    expect(res.body.data.find((p: any) => p.slug === fresh)).toMatchObject({ name: fresh });
    expect(await verifyV1(h, key, fresh)).toMatchObject({ valid: true });

    // Idempotent: the same again changes nothing and answers the same set.
    const again = await h.post("/v2/keys.addPermissions", { keyId, permissions: [fresh] }, t.rootKey);
    expect(again.body.data).toEqual(res.body.data);
  });

  test("removePermissions: an unknown slug is a 404 naming it; one the key lacks changes nothing; answers what remains", async ({
    h,
    t,
    apiId,
  }) => {
    const [a, b, c] = [unique("a"), unique("b"), unique("c")];
    const { key, keyId } = await newKey(h, t, apiId, { permissions: [a, b] });
    await h.post("/v2/permissions.createPermission", { name: c, slug: c }, t.rootKey);
    const missing = unique("missing");
    expectV2Error(
      await h.post("/v2/keys.removePermissions", { keyId, permissions: [a, missing] }, t.rootKey),
      404,
      "unkey/data/permission_not_found",
      `Permission '${missing}' was not found.`,
    );
    const res = await h.post("/v2/keys.removePermissions", { keyId, permissions: [a, c] }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(slugs(res.body.data)).toEqual([b]);
    expect(await verifyV1(h, key, a)).toMatchObject({ valid: false, code: "INSUFFICIENT_PERMISSIONS" });
    const none = await h.post("/v2/keys.removePermissions", { keyId, permissions: [b] }, t.rootKey);
    expect(none.body.data).toEqual([]);
  });

  test("setPermissions replaces the set, creates unknown slugs, and [] removes all", async ({ h, t, apiId }) => {
    const [old, keep, fresh] = [unique("old"), unique("keep"), unique("fresh")];
    const { key, keyId } = await newKey(h, t, apiId, { permissions: [old, keep] });
    const res = await h.post("/v2/keys.setPermissions", { keyId, permissions: [keep, fresh] }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(slugs(res.body.data)).toEqual([keep, fresh].sort());
    expect(await verifyV1(h, key, old)).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS" });
    expect(await verifyV1(h, key, fresh)).toMatchObject({ valid: true });
    const cleared = await h.post("/v2/keys.setPermissions", { keyId, permissions: [] }, t.rootKey);
    expect(cleared.body.data).toEqual([]);
    expect(await verifyV1(h, key, keep)).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS" });
  });

  test("permissions: update_key with the rbac permission; creating also needs create_permission; v2's 403 names what it asks", async ({
    h,
    t,
    apiId,
  }) => {
    const existing = unique("exists");
    await h.post("/v2/permissions.createPermission", { name: existing, slug: existing }, t.rootKey);
    const { keyId } = await newKey(h, t, apiId);
    const adder = await h.rootKey(t.workspaceId, [`api.${apiId}.update_key`, "rbac.*.add_permission_to_key"]);
    expect((await h.post("/v2/keys.addPermissions", { keyId, permissions: [existing] }, adder)).status).toBe(200);
    const missing = unique("missing");
    // A permission addPermissions may not create is not found (upstream's test); setPermissions asks for the right.
    expectV2Error(
      await h.post("/v2/keys.addPermissions", { keyId, permissions: [missing] }, adder),
      404,
      "unkey/data/permission_not_found",
      `Permission '${missing}' was not found.`,
    );
    const apiSetter = await h.rootKey(t.workspaceId, [
      `api.${apiId}.update_key`,
      "rbac.*.add_permission_to_key",
      "rbac.*.remove_permission_from_key",
    ]);
    expectV2Error(
      await h.post("/v2/keys.setPermissions", { keyId, permissions: [missing] }, apiSetter),
      403,
      "unkey/authorization/insufficient_permissions",
      `Missing one of these permissions: unkey:v1:${t.workspaceId}:rbac/permissions/*#create_permission or rbac.*.create_permission`,
    );
    expect(await h.sql(`select id from permissions where slug = '${missing}'`)).toEqual([]);

    const rbacOnly = await h.rootKey(t.workspaceId, ["rbac.*.add_permission_to_key", "rbac.*.remove_permission_from_key"]);
    const urn = `unkey:v1:${t.workspaceId}:keyspaces/${apiId}/keys/${keyId}#update_key`;
    expectV2Error(
      await h.post("/v2/keys.addPermissions", { keyId, permissions: [existing] }, rbacOnly),
      403,
      "unkey/authorization/insufficient_permissions",
      `Missing one of these permissions: ${urn} or api.*.update_key or api.${apiId}.update_key and rbac.*.add_permission_to_key`,
    );
    expectV2Error(
      await h.post("/v2/keys.removePermissions", { keyId, permissions: [existing] }, adder),
      403,
      "unkey/authorization/insufficient_permissions",
    );
    expectV2Error(
      await h.post("/v2/keys.setPermissions", { keyId, permissions: [] }, adder),
      403,
      "unkey/authorization/insufficient_permissions",
    );
    const setter = await h.rootKey(t.workspaceId, [
      "api.*.update_key",
      "rbac.*.add_permission_to_key",
      "rbac.*.remove_permission_from_key",
    ]);
    expect((await h.post("/v2/keys.setPermissions", { keyId, permissions: [] }, setter)).status).toBe(200);
  });

  test("URN permissions: the key's exact URN or a covering pattern suffices; another workspace's or another action's does not", async ({
    h,
    t,
    apiId,
  }) => {
    const slug = unique("urn");
    const { keyId } = await newKey(h, t, apiId);
    const ws = t.workspaceId;
    for (const granted of [
      `unkey:v1:${ws}:keyspaces/${apiId}/keys/${keyId}#update_key`,
      `unkey:v1:${ws}:keyspaces/*/keys/*#update_key`,
      `unkey:v1:${ws}:keyspaces/${apiId}/**#update_key`,
      `unkey:v1:${ws}:**#*`,
    ]) {
      const rootKey = await h.rootKey(ws, [granted, "rbac.*.create_permission"]);
      const res = await h.post("/v2/keys.addPermissions", { keyId, permissions: [slug] }, rootKey);
      expect(res.status, `${granted}: ${JSON.stringify(res.body)}`).toBe(200);
    }
    // The URN form of create_permission creates a missing slug too.
    const urnCreator = await h.rootKey(ws, [
      `unkey:v1:${ws}:keyspaces/*/keys/*#update_key`,
      `unkey:v1:${ws}:rbac/permissions/*#create_permission`,
    ]);
    expect((await h.post("/v2/keys.addPermissions", { keyId, permissions: [unique("made")] }, urnCreator)).status).toBe(200);
    for (const granted of [
      `unkey:v1:ws_other:keyspaces/*/keys/*#update_key`,
      `unkey:v1:${ws}:keyspaces/*/keys/*#read_key`,
      `unkey:v1:${ws}:keyspaces/api_other/**#update_key`,
      `unkey:v1:${ws}:keyspaces/*#update_key`,
      `unkey:v1:${ws}:keyspaces/*/keys/*#*`, // an action `*` is only valid with the path `**`
    ]) {
      const rootKey = await h.rootKey(ws, [granted]);
      const res = await h.post("/v2/keys.addPermissions", { keyId, permissions: [slug] }, rootKey);
      expectV2Error(res, 403, "unkey/authorization/insufficient_permissions");
      expect(res.body.error.detail).not.toContain(granted);
    }
  });

  test("a key of another workspace, or none, is a 404 (before the permission check); schema failures are 400", async ({ h, t, apiId }) => {
    const other = await h.tenant();
    const theirApi = await h.createApi(other);
    const { keyId: theirs } = await newKey(h, other, theirApi);
    const noPermission = await h.rootKey(t.workspaceId, ["api.*.read_key"]);
    for (const route of ["addPermissions", "removePermissions", "setPermissions"]) {
      for (const keyId of [theirs, "key_missing_123"]) {
        for (const rootKey of [t.rootKey, noPermission]) {
          expectV2Error(
            await h.post(`/v2/keys.${route}`, { keyId, permissions: ["a.b"] }, rootKey),
            404,
            "unkey/data/key_not_found",
            KEY_NOT_FOUND,
          );
        }
      }
    }
    const { keyId } = await newKey(h, t, apiId);
    for (const body of [
      { keyId, permissions: [] },
      { keyId },
      { permissions: ["a"] },
      { keyId, permissions: ["has space"] },
      { keyId, permissions: [""] },
      { keyId, permissions: ["a"], extra: 1 },
      { keyId: "ab", permissions: ["a"] },
    ]) {
      expectV2Error(await h.post("/v2/keys.addPermissions", body, t.rootKey), 400, "unkey/application/invalid_input");
    }
    expectV2Error(
      await h.post("/v2/keys.removePermissions", { keyId, permissions: [] }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
    expect(await h.sql(`select 1 from keys_permissions where key_id = '${theirs}'`)).toEqual([]);
  });

  test("v1's routes keep their permissions: the rbac permission alone (or `*`); a URN grants nothing there", async ({ h, t, apiId }) => {
    const slug = unique("v1");
    await h.post("/v2/permissions.createPermission", { name: slug, slug }, t.rootKey);
    const { keyId } = await newKey(h, t, apiId);
    const rbac = await h.rootKey(t.workspaceId, ["rbac.*.add_permission_to_key"]);
    expect((await h.post("/v1/keys.addPermissions", { keyId, permissions: [{ name: slug }] }, rbac)).status).toBe(200);
    const urnOnly = await h.rootKey(t.workspaceId, [`unkey:v1:${t.workspaceId}:**#*`]);
    expect((await h.post("/v1/keys.addPermissions", { keyId, permissions: [{ name: slug }] }, urnOnly)).status).toBe(403);
    // `*` is everything on v2 too (keyhaven's decision), and v2's 403 never names it.
    const star = await h.rootKey(t.workspaceId, ["*"]);
    expect((await h.post("/v2/keys.addPermissions", { keyId, permissions: [slug] }, star)).status).toBe(200);
    const res = await h.post("/v2/keys.addPermissions", { keyId, permissions: [slug] }, rbac);
    expectV2Error(res, 403, "unkey/authorization/insufficient_permissions");
    expect(res.body.error.detail).not.toMatch(/'\*'| \* /);
  });
});

describe("v2 keys.addRoles / removeRoles / setRoles", () => {
  test("addRoles by name answers the key's roles with their permissions; idempotent; v1's verifyKey sees the role's permission", async ({
    h,
    t,
    apiId,
  }) => {
    const perm = unique("role.perm");
    const reader = await newRole(h, t, [perm]);
    const bare = await newRole(h, t);
    const { key, keyId } = await newKey(h, t, apiId);
    const res = await h.post("/v2/keys.addRoles", { keyId, roles: [reader.name, bare.name] }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const byName = new Map(res.body.data.map((r: any) => [r.name, r]));
    expect(byName.get(reader.name)).toMatchObject({ id: reader.id, permissions: [{ slug: perm }] });
    expect(byName.get(bare.name)).toEqual({ id: bare.id, name: bare.name });
    expect(await verifyV1(h, key, perm)).toMatchObject({ valid: true });
    const again = await h.post("/v2/keys.addRoles", { keyId, roles: [reader.name] }, t.rootKey);
    expect(again.body.data).toEqual(res.body.data);
  });

  test("an unknown role (or an id, or another workspace's) is a 404 naming it, and nothing changes", async ({ h, t, apiId }) => {
    const known = await newRole(h, t);
    const other = await h.tenant();
    const theirs = await newRole(h, other);
    const { keyId } = await newKey(h, t, apiId);
    for (const route of ["addRoles", "removeRoles", "setRoles"]) {
      for (const name of [unique("missing"), known.id, theirs.name]) {
        expectV2Error(
          await h.post(`/v2/keys.${route}`, { keyId, roles: [known.name, name] }, t.rootKey),
          404,
          "unkey/data/role_not_found",
          `Role '${name}' was not found.`,
        );
      }
    }
    expect(await h.sql(`select 1 from keys_roles where key_id = '${keyId}'`)).toEqual([]);
    expect(await h.sql(`select 1 from roles where workspace_id = '${t.workspaceId}' and name like 'missing.%'`)).toEqual([]);
  });

  test("removeRoles and setRoles: a role the key lacks changes nothing, the set is replaced, [] removes all", async ({ h, t, apiId }) => {
    const [a, b, c] = [await newRole(h, t), await newRole(h, t), await newRole(h, t)];
    const { keyId } = await newKey(h, t, apiId, { roles: [a.name, b.name] });
    const removed = await h.post("/v2/keys.removeRoles", { keyId, roles: [a.name, c.name] }, t.rootKey);
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    expect(removed.body.data.map((r: any) => r.name)).toEqual([b.name]);
    const set = await h.post("/v2/keys.setRoles", { keyId, roles: [c.name, a.name] }, t.rootKey);
    expect(set.body.data.map((r: any) => r.name)).toEqual([a.name, c.name].sort());
    const same = await h.post("/v2/keys.setRoles", { keyId, roles: [c.name, a.name] }, t.rootKey);
    expect(same.body.data).toEqual(set.body.data);
    const cleared = await h.post("/v2/keys.setRoles", { keyId, roles: [] }, t.rootKey);
    expect(cleared.body.data).toEqual([]);
  });

  test("roles: addRoles needs update_key and add_role_to_key; removeRoles and setRoles update_key alone", async ({ h, t, apiId }) => {
    const role = await newRole(h, t);
    const { keyId } = await newKey(h, t, apiId);
    const updateOnly = await h.rootKey(t.workspaceId, [`api.${apiId}.update_key`]);
    const rbacOnly = await h.rootKey(t.workspaceId, ["rbac.*.add_role_to_key", "rbac.*.remove_role_from_key"]);
    expectV2Error(
      await h.post("/v2/keys.addRoles", { keyId, roles: [role.name] }, updateOnly),
      403,
      "unkey/authorization/insufficient_permissions",
      /^Missing one of these permissions: /,
    );
    const both = await h.rootKey(t.workspaceId, [`api.${apiId}.update_key`, "rbac.*.add_role_to_key"]);
    expect((await h.post("/v2/keys.addRoles", { keyId, roles: [role.name] }, both)).status).toBe(200);
    for (const route of ["removeRoles", "setRoles"]) {
      expectV2Error(
        await h.post(`/v2/keys.${route}`, { keyId, roles: [role.name] }, rbacOnly),
        403,
        "unkey/authorization/insufficient_permissions",
        `Missing one of these permissions: api.*.update_key or api.${apiId}.update_key or unkey:v1:${t.workspaceId}:keyspaces/${apiId}/keys/${keyId}#update_key`,
      );
      expect((await h.post(`/v2/keys.${route}`, { keyId, roles: [role.name] }, updateOnly)).status).toBe(200);
    }
    const urn = await h.rootKey(t.workspaceId, [`unkey:v1:${t.workspaceId}:keyspaces/${apiId}/keys/*#update_key`]);
    expect((await h.post("/v2/keys.addRoles", { keyId, roles: [role.name] }, urn)).status).toBe(200);
  });

  test("a key of another workspace is a 404; schema failures are 400", async ({ h, t, apiId }) => {
    const other = await h.tenant();
    const { keyId: theirs } = await newKey(h, other, await h.createApi(other));
    const role = await newRole(h, t);
    for (const route of ["addRoles", "removeRoles", "setRoles"]) {
      expectV2Error(
        await h.post(`/v2/keys.${route}`, { keyId: theirs, roles: [role.name] }, t.rootKey),
        404,
        "unkey/data/key_not_found",
        KEY_NOT_FOUND,
      );
    }
    const { keyId } = await newKey(h, t, apiId);
    for (const body of [{ keyId, roles: [] }, { keyId }, { keyId, roles: [""] }, { keyId, roles: ["x".repeat(129)] }]) {
      expectV2Error(await h.post("/v2/keys.addRoles", body, t.rootKey), 400, "unkey/application/invalid_input");
    }
    expectV2Error(await h.post("/v2/keys.removeRoles", { keyId, roles: [] }, t.rootKey), 400, "unkey/application/invalid_input");
    expectV2Error(
      await h.post("/v2/keys.setRoles", { keyId, roles: Array.from({ length: 101 }, (_, i) => `r${i}`) }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
  });
});
