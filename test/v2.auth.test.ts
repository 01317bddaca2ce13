import { createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, expect } from "vitest";
import { createHarness, type Harness, type Response, type Tenant } from "./helper.js";
import { createsInOwnWorkspace, describeV2RootKeyAuth, listsNothing, notFound } from "./v2-auth-suite.js";

/**
 * The shared root-key suite (test/v2-auth-suite.ts) over every v2 route of contract §2: one row per route and grant.
 * Rows of routes still being built run once the route is registered. A new route: add its row here.
 */
let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h?.close());

const unique = (name: string) => `${name}_${randomBytes(4).toString("hex")}`;

async function ok(res: Response) {
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

// What the routes' requests name, made in the owner's workspace through v1 (or v2 where keyhaven serves it).
const api = (h: Harness, owner: Tenant) => h.createApi(owner);
async function key(h: Harness, owner: Tenant, fields: Record<string, unknown> = {}) {
  const apiId = await api(h, owner);
  const created = await ok(await h.post("/v1/keys.createKey", { apiId, remaining: 5, ...fields }, owner.rootKey));
  return { apiId, keyId: created.keyId as string, key: created.key as string };
}
async function identity(h: Harness, owner: Tenant) {
  const externalId = unique("auth_ext");
  const created = await ok(await h.post("/v2/identities.createIdentity", { externalId }, owner.rootKey));
  return { id: created.data.identityId as string, externalId };
}
async function permission(h: Harness, owner: Tenant) {
  const slug = unique("auth.perm");
  const created = await ok(await h.post("/v1/permissions.createPermission", { name: slug, slug }, owner.rootKey));
  return { id: created.permissionId as string, slug };
}
async function role(h: Harness, owner: Tenant) {
  const name = unique("auth.role");
  const created = await ok(await h.post("/v1/permissions.createRole", { name }, owner.rootKey));
  return { id: created.roleId as string, name };
}
/** A rate-limit namespace (made by a first ratelimit.limit) and its id, which per-namespace grants name. */
async function namespace(h: Harness, owner: Tenant) {
  const name = unique("auth_ns");
  await ok(await h.post("/v2/ratelimit.limit", { namespace: name, identifier: "seed", limit: 1, duration: 60_000 }, owner.rootKey));
  const [row] = await h.sql<{ id: string }>(
    `select id from ratelimit_namespaces where workspace_id = '${owner.workspaceId}' and name = '${name}'`,
  );
  return { name, id: row!.id };
}
async function override(h: Harness, owner: Tenant) {
  const ns = await namespace(h, owner);
  await ok(await h.post("/v2/ratelimit.setOverride", { namespace: ns.name, identifier: "vip", limit: 5, duration: 60_000 }, owner.rootKey));
  return ns;
}

/** keys.verifyKey's answer to a caller that may not verify the key, or of another workspace: 200 NOT_FOUND. */
const verifiesNotFound = (res: Response) => {
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.data).toEqual({ valid: false, code: "NOT_FOUND" });
};

/** ratelimit.limit / multiLimit for another workspace: its own namespace of that name, the owner's counter untouched. */
const limitsInOwnNamespace = async (res: Response, h: Harness, owner: Tenant, other: Tenant) => {
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const rows = await h.sql<{ workspace_id: string }>(
    `select workspace_id from ratelimit_namespaces where name in (select name from ratelimit_namespaces where workspace_id = '${owner.workspaceId}')`,
  );
  expect(rows.map((r) => r.workspace_id).sort()).toEqual([owner.workspaceId, other.workspaceId].sort());
};

describeV2RootKeyAuth(
  () => h,
  [
    // apis
    {
      path: "/v2/apis.createApi",
      setup: async () => ({ body: { name: "auth-api" }, grant: ["api.*.create_api"] }),
      insufficient: ["api.*.read_api"],
      otherWorkspace: createsInOwnWorkspace("apis", "apiId"),
    },
    {
      path: "/v2/apis.getApi",
      setup: async (h, o) => ({ body: { apiId: await api(h, o) }, grant: ["api.*.read_api"] }),
      otherWorkspace: notFound("api_not_found"),
    },
    {
      path: "/v2/apis.getApi",
      label: "grant naming the API",
      setup: async (h, o) => {
        const apiId = await api(h, o);
        return { body: { apiId }, grant: [`api.${apiId}.read_api`] };
      },
      insufficient: ["api.api_other.read_api"],
      otherWorkspace: notFound("api_not_found"),
    },
    {
      path: "/v2/apis.listKeys",
      setup: async (h, o) => ({ body: { apiId: (await key(h, o)).apiId }, grant: ["api.*.read_key", "api.*.read_api"] }),
      insufficient: ["api.*.read_api"],
      denied: notFound("api_not_found"),
      otherWorkspace: notFound("api_not_found"),
    },
    {
      path: "/v2/apis.listKeys",
      label: "grant naming the API",
      setup: async (h, o) => {
        const { apiId } = await key(h, o);
        return { body: { apiId }, grant: [`api.${apiId}.read_key`, `api.${apiId}.read_api`] };
      },
      insufficient: ["api.*.read_key"],
      denied: notFound("api_not_found"),
      otherWorkspace: notFound("api_not_found"),
    },
    {
      path: "/v2/apis.deleteApi",
      setup: async (h, o) => ({ body: { apiId: await api(h, o) }, grant: ["api.*.delete_api"] }),
      insufficient: ["api.*.read_api"],
      otherWorkspace: notFound("api_not_found"),
    },
    // keys
    {
      path: "/v2/keys.getKey",
      setup: async (h, o) => ({ body: { keyId: (await key(h, o)).keyId }, grant: ["api.*.read_key"] }),
      insufficient: ["api.*.read_api"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.getKey",
      label: "grant naming the API",
      setup: async (h, o) => {
        const { apiId, keyId } = await key(h, o);
        return { body: { keyId }, grant: [`api.${apiId}.read_key`] };
      },
      insufficient: ["api.api_other.read_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.whoami",
      setup: async (h, o) => ({ body: { key: (await key(h, o)).key }, grant: ["api.*.read_key"] }),
      insufficient: ["api.*.read_api"],
      denied: notFound("key_not_found"),
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.deleteKey",
      setup: async (h, o) => ({ body: { keyId: (await key(h, o)).keyId }, grant: ["api.*.delete_key"] }),
      insufficient: ["api.*.read_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.updateCredits",
      setup: async (h, o) => ({ body: { keyId: (await key(h, o)).keyId, operation: "set", value: 3 }, grant: ["api.*.update_key"] }),
      insufficient: ["api.*.read_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.createKey",
      setup: async (h, o) => ({ body: { apiId: await api(h, o) }, grant: ["api.*.create_key"] }),
      insufficient: ["api.*.read_api"],
      denied: notFound("api_not_found"),
      otherWorkspace: notFound("api_not_found"),
    },
    {
      path: "/v2/keys.createKey",
      label: "grant naming the API",
      setup: async (h, o) => {
        const apiId = await api(h, o);
        return { body: { apiId }, grant: [`api.${apiId}.create_key`] };
      },
      insufficient: ["api.api_other.create_key"],
      denied: notFound("api_not_found"),
      otherWorkspace: notFound("api_not_found"),
    },
    {
      path: "/v2/keys.updateKey",
      setup: async (h, o) => ({ body: { keyId: (await key(h, o)).keyId, name: "renamed" }, grant: ["api.*.update_key"] }),
      insufficient: ["api.*.read_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.rerollKey",
      setup: async (h, o) => ({ body: { keyId: (await key(h, o)).keyId, expiration: 0 }, grant: ["api.*.create_key"] }),
      insufficient: ["api.*.read_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.verifyKey",
      setup: async (h, o) => ({ body: { key: (await key(h, o)).key }, grant: ["api.*.verify_key"] }),
      insufficient: ["api.*.read_key"],
      denied: verifiesNotFound,
      otherWorkspace: async (res) => verifiesNotFound(res),
    },
    {
      path: "/v2/keys.verifyKey",
      label: "grant naming the API",
      setup: async (h, o) => {
        const k = await key(h, o);
        return { body: { key: k.key }, grant: [`api.${k.apiId}.verify_key`] };
      },
      insufficient: ["api.api_other.verify_key"],
      denied: verifiesNotFound,
      otherWorkspace: async (res) => verifiesNotFound(res),
    },
    {
      path: "/v2/keys.migrateKeys",
      setup: async (h, o) => ({
        body: {
          migrationId: unique("auth_mig"),
          apiId: await api(h, o),
          keys: [{ hash: createHash("sha256").update(unique("sk")).digest("base64") }],
        },
        grant: ["api.*.create_key"],
      }),
      insufficient: ["api.*.read_key"],
      otherWorkspace: notFound("api_not_found"),
    },
    {
      path: "/v2/keys.addPermissions",
      setup: async (h, o) => ({
        body: { keyId: (await key(h, o)).keyId, permissions: [(await permission(h, o)).slug] },
        grant: ["api.*.update_key", "rbac.*.add_permission_to_key"],
      }),
      insufficient: ["api.*.update_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.removePermissions",
      setup: async (h, o) => ({
        body: { keyId: (await key(h, o)).keyId, permissions: [(await permission(h, o)).slug] },
        grant: ["api.*.update_key", "rbac.*.remove_permission_from_key"],
      }),
      insufficient: ["api.*.update_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.setPermissions",
      setup: async (h, o) => ({
        body: { keyId: (await key(h, o)).keyId, permissions: [(await permission(h, o)).slug] },
        grant: ["api.*.update_key", "rbac.*.add_permission_to_key", "rbac.*.remove_permission_from_key"],
      }),
      insufficient: ["api.*.update_key", "rbac.*.add_permission_to_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.addRoles",
      setup: async (h, o) => ({
        body: { keyId: (await key(h, o)).keyId, roles: [(await role(h, o)).name] },
        grant: ["api.*.update_key", "rbac.*.add_role_to_key"],
      }),
      insufficient: ["api.*.update_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.removeRoles",
      setup: async (h, o) => ({ body: { keyId: (await key(h, o)).keyId, roles: [(await role(h, o)).name] }, grant: ["api.*.update_key"] }),
      insufficient: ["rbac.*.remove_role_from_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    {
      path: "/v2/keys.setRoles",
      setup: async (h, o) => ({ body: { keyId: (await key(h, o)).keyId, roles: [(await role(h, o)).name] }, grant: ["api.*.update_key"] }),
      insufficient: ["rbac.*.add_role_to_key", "rbac.*.remove_role_from_key"],
      otherWorkspace: notFound("key_not_found"),
    },
    // identities
    {
      path: "/v2/identities.createIdentity",
      setup: async () => ({ body: { externalId: unique("auth_new") }, grant: ["identity.*.create_identity"] }),
      insufficient: ["identity.*.read_identity"],
      otherWorkspace: createsInOwnWorkspace("identities", "identityId"),
    },
    {
      path: "/v2/identities.getIdentity",
      setup: async (h, o) => ({ body: { identity: (await identity(h, o)).externalId }, grant: ["identity.*.read_identity"] }),
      insufficient: ["identity.*.update_identity"],
      otherWorkspace: notFound("identity_not_found"),
    },
    {
      path: "/v2/identities.getIdentity",
      label: "grant naming the identity",
      setup: async (h, o) => {
        const { id } = await identity(h, o);
        return { body: { identity: id }, grant: [`identity.${id}.read_identity`] };
      },
      insufficient: ["identity.id_other.read_identity"],
      otherWorkspace: notFound("identity_not_found"),
    },
    {
      path: "/v2/identities.listIdentities",
      setup: async (h, o) => {
        await identity(h, o);
        return { body: {}, grant: ["identity.*.read_identity"] };
      },
      insufficient: ["identity.*.update_identity"],
      otherWorkspace: listsNothing,
    },
    {
      path: "/v2/identities.updateIdentity",
      setup: async (h, o) => ({
        body: { identity: (await identity(h, o)).externalId, meta: { a: 1 } },
        grant: ["identity.*.update_identity"],
      }),
      insufficient: ["identity.*.read_identity"],
      otherWorkspace: notFound("identity_not_found"),
    },
    {
      path: "/v2/identities.deleteIdentity",
      setup: async (h, o) => ({ body: { identity: (await identity(h, o)).id }, grant: ["identity.*.delete_identity"] }),
      insufficient: ["identity.*.read_identity"],
      otherWorkspace: notFound("identity_not_found"),
    },
    // permissions and roles
    {
      path: "/v2/permissions.createPermission",
      setup: async () => {
        const slug = unique("auth.new");
        return { body: { name: slug, slug }, grant: ["rbac.*.create_permission"] };
      },
      insufficient: ["rbac.*.read_permission"],
      otherWorkspace: createsInOwnWorkspace("permissions", "permissionId"),
    },
    {
      path: "/v2/permissions.getPermission",
      setup: async (h, o) => ({ body: { permission: (await permission(h, o)).slug }, grant: ["rbac.*.read_permission"] }),
      insufficient: ["rbac.*.read_role"],
      otherWorkspace: notFound("permission_not_found"),
    },
    {
      path: "/v2/permissions.listPermissions",
      setup: async (h, o) => {
        await permission(h, o);
        return { body: {}, grant: ["rbac.*.read_permission"] };
      },
      insufficient: ["rbac.*.read_role"],
      otherWorkspace: listsNothing,
    },
    {
      path: "/v2/permissions.deletePermission",
      setup: async (h, o) => ({ body: { permission: (await permission(h, o)).id }, grant: ["rbac.*.delete_permission"] }),
      insufficient: ["rbac.*.read_permission"],
      otherWorkspace: notFound("permission_not_found"),
    },
    {
      path: "/v2/permissions.createRole",
      setup: async () => ({ body: { name: unique("auth.new_role") }, grant: ["rbac.*.create_role"] }),
      insufficient: ["rbac.*.read_role"],
      otherWorkspace: createsInOwnWorkspace("roles", "roleId"),
    },
    {
      path: "/v2/permissions.getRole",
      setup: async (h, o) => ({ body: { role: (await role(h, o)).name }, grant: ["rbac.*.read_role"] }),
      insufficient: ["rbac.*.read_permission"],
      otherWorkspace: notFound("role_not_found"),
    },
    {
      path: "/v2/permissions.listRoles",
      setup: async (h, o) => {
        await role(h, o);
        return { body: {}, grant: ["rbac.*.read_role"] };
      },
      insufficient: ["rbac.*.read_permission"],
      otherWorkspace: listsNothing,
    },
    {
      path: "/v2/permissions.deleteRole",
      setup: async (h, o) => ({ body: { role: (await role(h, o)).id }, grant: ["rbac.*.delete_role"] }),
      insufficient: ["rbac.*.read_role"],
      otherWorkspace: notFound("role_not_found"),
    },
    {
      path: "/v2/permissions.setRolePermissions",
      setup: async (h, o) => ({
        body: { roleId: (await role(h, o)).id, permissions: [(await permission(h, o)).slug] },
        grant: ["rbac.*.add_permission_to_role", "rbac.*.remove_permission_from_role"],
      }),
      insufficient: ["rbac.*.add_permission_to_role"],
      otherWorkspace: notFound("role_not_found"),
    },
    // ratelimit
    {
      path: "/v2/ratelimit.limit",
      setup: async (h, o) => ({
        body: { namespace: (await namespace(h, o)).name, identifier: "user", limit: 5, duration: 60_000 },
        grant: ["ratelimit.*.limit"],
      }),
      insufficient: ["ratelimit.*.set_override"],
      otherWorkspace: limitsInOwnNamespace,
    },
    {
      path: "/v2/ratelimit.limit",
      label: "grant naming the namespace",
      setup: async (h, o) => {
        const ns = await namespace(h, o);
        return { body: { namespace: ns.name, identifier: "user", limit: 5, duration: 60_000 }, grant: [`ratelimit.${ns.id}.limit`] };
      },
      insufficient: ["ratelimit.rlns_other.limit"],
      otherWorkspace: limitsInOwnNamespace,
    },
    {
      path: "/v2/ratelimit.multiLimit",
      setup: async (h, o) => ({
        body: [{ namespace: (await namespace(h, o)).name, identifier: "user", limit: 5, duration: 60_000 }],
        grant: ["ratelimit.*.limit"],
      }),
      insufficient: ["ratelimit.*.set_override"],
      otherWorkspace: limitsInOwnNamespace,
    },
    {
      path: "/v2/ratelimit.setOverride",
      setup: async (h, o) => ({
        body: { namespace: (await namespace(h, o)).name, identifier: "vip", limit: 5, duration: 60_000 },
        grant: ["ratelimit.*.set_override"],
      }),
      insufficient: ["ratelimit.*.limit"],
      otherWorkspace: notFound("ratelimit_namespace_not_found"),
    },
    {
      path: "/v2/ratelimit.setOverride",
      label: "grant naming the namespace",
      setup: async (h, o) => {
        const ns = await namespace(h, o);
        return { body: { namespace: ns.id, identifier: "vip", limit: 5, duration: 60_000 }, grant: [`ratelimit.${ns.id}.set_override`] };
      },
      insufficient: ["ratelimit.rlns_other.set_override"],
      otherWorkspace: notFound("ratelimit_namespace_not_found"),
    },
    {
      path: "/v2/ratelimit.getOverride",
      setup: async (h, o) => ({
        body: { namespace: (await override(h, o)).name, identifier: "vip" },
        grant: ["ratelimit.*.read_override"],
      }),
      insufficient: ["ratelimit.*.set_override"],
      denied: notFound("ratelimit_override_not_found"),
      otherWorkspace: notFound("ratelimit_namespace_not_found"),
    },
    {
      path: "/v2/ratelimit.listOverrides",
      setup: async (h, o) => ({ body: { namespace: (await override(h, o)).name }, grant: ["ratelimit.*.read_override"] }),
      insufficient: ["ratelimit.*.set_override"],
      otherWorkspace: notFound("ratelimit_namespace_not_found"),
    },
    {
      path: "/v2/ratelimit.deleteOverride",
      setup: async (h, o) => ({
        body: { namespace: (await override(h, o)).name, identifier: "vip" },
        grant: ["ratelimit.*.delete_override"],
      }),
      insufficient: ["ratelimit.*.read_override"],
      otherWorkspace: notFound("ratelimit_namespace_not_found"),
    },
    // analytics: the query runs on the caller's own workspace, whatever it names (§10).
    {
      path: "/v2/analytics.getVerifications",
      setup: async () => ({ body: { query: "SELECT count(*) FROM key_verifications_v1" }, grant: ["api.*.read_analytics"] }),
      insufficient: ["api.*.read_api"],
      otherWorkspace: async (res) => expect(res.status).toBe(200),
    },
  ],
);
