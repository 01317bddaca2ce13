import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { AUDIT_EVENTS } from "../src/core/audit/audit.events.js";
import { hashKey } from "../src/crypto/hash.js";
import { MUTATING_ROUTES } from "../src/wire/writes.js";
import { auditEntries } from "./audit-entries.js";
import { test } from "./fixtures.js";
import { ADMIN_TOKEN, type Harness, type Response, type Tenant } from "./helper.js";
import { installKeyInsertFault, keyInsertFault } from "./key-insert-fault.js";

// Issue 35 "Done when": every mutating route (src/wire/writes.ts) records the audit entries of what it changed, by
// whoever sent it, in the workspace it changed, with the request's id; and no entry holds a secret. One case per route,
// each on a fresh tenant of the file's one harness, its setup made by real calls.

const requestIdOf = (res: Response): string =>
  (res.headers["unkey-request-id"] as string | undefined) ?? (res.body?.meta?.requestId as string);

const unique = (prefix: string) => `${prefix}_${randomBytes(5).toString("hex")}`;

/** Every secret the run handled: none may stand in any stored entry. */
const secrets = new Set<string>([ADMIN_TOKEN]);
/** A `meta` value no entry may hold (meta values are never recorded), remembered as a secret. */
const meta = () => {
  const note = `meta-secret-${randomBytes(8).toString("hex")}`;
  secrets.add(note);
  return { note };
};
const plaintext = (key: string | undefined) => {
  if (key) secrets.add(key).add(hashKey(key));
};

type Ctx = { h: Harness; t: Tenant };
type Expected = {
  body: unknown;
  /** The expected events of the request, as a multiset. */
  events: string[];
  /** Ids that must be among the entries' targets, once the request answered. */
  targets: (res: Response) => string[];
  /** The workspace the entries belong to (default the tenant's). */
  workspaceId?: (res: Response) => string;
  /** 2xx expected: 200 unless told. */
  status?: number;
};
/**
 * Who sends the request: the tenant's root key, the operator, or (`portal`) a portal session of the tenant's, by
 * the `portal_session` cookie the case's setup returns (`session`), with no Authorization header.
 */
type Case = { sender: "root" | "operator" | "portal"; setup(ctx: Ctx): Promise<Expected & { session?: PortalSessionOf }> };
type PortalSessionOf = { id: string; token: string };

const ok = (res: Response) => {
  expect(res.status, JSON.stringify(res.body)).toBeGreaterThanOrEqual(200);
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
  return res.body;
};

async function api({ h, t }: Ctx) {
  return h.createApi(t);
}
async function key(ctx: Ctx, fields: Record<string, unknown> = {}) {
  const apiId = await api(ctx);
  const body = ok(await ctx.h.post("/v1/keys.createKey", { apiId, remaining: 5, meta: meta(), ...fields }, ctx.t.rootKey));
  plaintext(body.key);
  return { apiId, keyId: body.keyId as string };
}
async function permission({ h, t }: Ctx) {
  const slug = unique("audit.routes");
  const body = ok(await h.post("/v1/permissions.createPermission", { name: slug, slug }, t.rootKey));
  return { id: body.permissionId as string, slug };
}
async function role({ h, t }: Ctx) {
  const name = unique("audit-routes-role");
  const body = ok(await h.post("/v1/permissions.createRole", { name }, t.rootKey));
  return { id: body.roleId as string, name };
}
async function identity({ h, t }: Ctx) {
  const externalId = unique("audit_ext");
  const body = ok(await h.post("/v1/identities.createIdentity", { externalId, meta: meta() }, t.rootKey));
  return { id: body.identityId as string, externalId };
}
/** A rate limit namespace of the tenant's, made by its first limit call: setOverride refuses a namespace that is not. */
async function namespace({ h, t }: Ctx) {
  const name = unique("audit_ns");
  ok(await h.post("/v2/ratelimit.limit", { namespace: name, identifier: "seed", limit: 1, duration: 60_000 }, t.rootKey));
  return name;
}
async function overrideV1(ctx: Ctx) {
  const { h, t } = ctx;
  const namespaceName = await namespace(ctx);
  const body = ok(await h.post("/v1/ratelimits.setOverride", { namespaceName, identifier: "vip", limit: 5, duration: 60_000 }, t.rootKey));
  return { namespaceName, overrideId: body.overrideId as string };
}
/**
 * A migration whose one batch failed as a whole, so that retryMigration has something to queue again (with nothing
 * failed it changes, and records, nothing): while the key-insert fault is on (test/key-insert-fault.ts), a key named
 * `fail:P0001` fails its whole batch; the file's harness runs the worker.
 */
/** The portal of a new API of the tenant's. */
async function portal({ h, t }: Ctx) {
  const apiId = await h.createApi(t);
  const slug = `audit-${randomBytes(4).toString("hex")}`;
  const body = ok(await h.post("/v2/keyhaven.createPortal", { apiId, slug, name: "Audit portal" }, t.rootKey));
  return { apiId, slug, portalId: body.data.portalId as string };
}
/** A live session (exchanged) of a new portal for `externalId`, with `scopes`: its id and access token. */
async function portalSession(ctx: Ctx, externalId: string, scopes: string[]) {
  const { h, t } = ctx;
  const p = await portal(ctx);
  const minted = ok(await h.post("/v2/portal.createSession", { portal: p.slug, externalId, scopes }, t.rootKey));
  const code = new URL(minted.data.url).searchParams.get("code")!;
  secrets.add(code).add(hashKey(code));
  const token = ok(await h.post("/v2/portal.exchangeCode", { code })).data.accessToken as string;
  secrets.add(token).add(hashKey(token));
  return { ...p, session: { id: minted.data.id as string, token } };
}
/**
 * A webhook endpoint of the tenant's, on a public documentation address (TEST-NET-3) and subscribed to an event no
 * case makes, so that nothing is ever sent to it.
 */
async function webhook({ h, t }: Ctx) {
  const body = ok(await h.post("/v2/keyhaven.createWebhook", { url: "https://203.0.113.10/hook", events: ["key.reroll"] }, t.rootKey));
  secrets.add(body.data.secret);
  return body.data.webhookId as string;
}
/** A delivery of a disabled endpoint of the tenant's (written as the outbox writes one): a replay never sends it. */
async function webhookDelivery(ctx: Ctx) {
  const webhookId = await webhook(ctx);
  const deliveryId = unique("msg");
  await ctx.h.sql(`update webhook_endpoints set enabled = false where id = '${webhookId}'`);
  await ctx.h.sql(
    `insert into webhook_deliveries (id, workspace_id, endpoint_id, event, payload, status, next_attempt_at_m, created_at_m, updated_at_m)
     values ('${deliveryId}', '${ctx.t.workspaceId}', '${webhookId}', 'key.reroll', '{}'::jsonb, 'failed', 0, 0, 0)`,
  );
  return { webhookId, deliveryId };
}
async function failedMigration({ h, t }: Ctx) {
  await installKeyInsertFault(h);
  const migrationId = unique("mig");
  const apiId = await h.createApi(t);
  const keys = [{ name: "fail:P0001", hash: { value: hashKey(unique("sk")), variant: "sha256_base64" } }];
  await keyInsertFault(h, true);
  try {
    ok(await h.post("/v1/migrations.enqueueKeys", { migrationId, apiId, keys }, t.rootKey));
    const deadline = Date.now() + 20_000;
    for (;;) {
      const [row] = await h.sql<{ status: string }>(`select status from migration_batches where migration_id = '${migrationId}'`);
      if (row?.status === "failed") break;
      if (Date.now() > deadline) throw new Error(`the batch of ${migrationId} did not fail within 20 s (status ${row?.status})`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  } finally {
    await keyInsertFault(h, false);
  }
  return migrationId;
}
async function migration({ h, t }: Ctx) {
  const migrationId = unique("mig");
  ok(await h.post("/v2/keyhaven.createMigration", { migrationId, algorithm: "sha256" }, t.rootKey));
  return migrationId;
}
const linkedPermission = async (ctx: Ctx) => {
  const k = await key(ctx);
  const p = await permission(ctx);
  ok(await ctx.h.post("/v1/keys.addPermissions", { keyId: k.keyId, permissions: [{ id: p.id }] }, ctx.t.rootKey));
  return { ...k, permission: p };
};
const linkedRole = async (ctx: Ctx) => {
  const k = await key(ctx);
  const r = await role(ctx);
  ok(await ctx.h.post("/v1/keys.addRoles", { keyId: k.keyId, roles: [{ id: r.id }] }, ctx.t.rootKey));
  return { ...k, role: r };
};
const roleWithPermission = async (ctx: Ctx) => {
  const r = await role(ctx);
  const p = await permission(ctx);
  ok(await ctx.h.post("/v1/permissions.addPermissionsToRole", { roleId: r.id, permissions: [{ id: p.id }] }, ctx.t.rootKey));
  return { role: r, permission: p };
};

const CASES: Record<string, Case> = {
  // v1
  "/v1/apis.createApi": {
    sender: "root",
    setup: async () => ({ body: { name: unique("api") }, events: ["api.create"], targets: (res) => [res.body.apiId] }),
  },
  "/v1/apis.deleteApi": {
    sender: "root",
    setup: async (ctx) => {
      const apiId = await api(ctx);
      return { body: { apiId }, events: ["api.delete"], targets: () => [apiId] };
    },
  },
  "/v1/apis.deleteKeys": {
    sender: "root",
    setup: async (ctx) => {
      const { apiId, keyId } = await key(ctx);
      return { body: { apiId }, events: ["key.delete"], targets: () => [keyId, apiId] };
    },
  },
  "/v1/apis.updateApi": {
    sender: "root",
    setup: async (ctx) => {
      const apiId = await api(ctx);
      return { body: { apiId, ipWhitelist: "10.0.0.0/8" }, events: ["api.update"], targets: () => [apiId] };
    },
  },
  "/v1/keys.createKey": {
    sender: "root",
    setup: async (ctx) => {
      const apiId = await api(ctx);
      return { body: { apiId, name: "audited", meta: meta() }, events: ["key.create"], targets: (res) => [res.body.keyId, apiId] };
    },
  },
  "/v1/keys.deleteKey": {
    sender: "root",
    setup: async (ctx) => {
      const { apiId, keyId } = await key(ctx);
      return { body: { keyId }, events: ["key.delete"], targets: () => [keyId, apiId] };
    },
  },
  "/v1/keys.updateRemaining": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId } = await key(ctx);
      // The key alone (test/audit.keys.test.ts holds its targets to exactly that).
      return { body: { keyId, op: "increment", value: 2 }, events: ["key.update"], targets: () => [keyId] };
    },
  },
  "/v1/keys.updateKey": {
    sender: "root",
    setup: async (ctx) => {
      const { apiId, keyId } = await key(ctx);
      return { body: { keyId, name: "renamed", meta: meta() }, events: ["key.update"], targets: () => [keyId, apiId] };
    },
  },
  "/v1/keys.addPermissions": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId } = await key(ctx);
      const p = await permission(ctx);
      return {
        body: { keyId, permissions: [{ id: p.id }] },
        events: ["authorization.connect_permission_and_key"],
        targets: () => [keyId, p.id],
      };
    },
  },
  "/v1/keys.removePermissions": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId, permission: p } = await linkedPermission(ctx);
      return {
        body: { keyId, permissions: [{ id: p.id }] },
        events: ["authorization.disconnect_permission_and_key"],
        targets: () => [keyId, p.id],
      };
    },
  },
  "/v1/keys.setPermissions": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId, permission: old } = await linkedPermission(ctx);
      const p = await permission(ctx);
      return {
        body: { keyId, permissions: [{ id: p.id }] },
        events: ["authorization.connect_permission_and_key", "authorization.disconnect_permission_and_key"],
        targets: () => [keyId, p.id, old.id],
      };
    },
  },
  "/v1/keys.addRoles": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId } = await key(ctx);
      const r = await role(ctx);
      return { body: { keyId, roles: [{ id: r.id }] }, events: ["authorization.connect_role_and_key"], targets: () => [keyId, r.id] };
    },
  },
  "/v1/keys.removeRoles": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId, role: r } = await linkedRole(ctx);
      return { body: { keyId, roles: [{ id: r.id }] }, events: ["authorization.disconnect_role_and_key"], targets: () => [keyId, r.id] };
    },
  },
  "/v1/keys.setRoles": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId, role: old } = await linkedRole(ctx);
      const r = await role(ctx);
      return {
        body: { keyId, roles: [{ id: r.id }] },
        events: ["authorization.connect_role_and_key", "authorization.disconnect_role_and_key"],
        targets: () => [keyId, r.id, old.id],
      };
    },
  },
  "/v1/migrations.createKeys": {
    sender: "root",
    setup: async (ctx) => {
      const apiId = await api(ctx);
      const key = `sk_${randomBytes(16).toString("hex")}`;
      plaintext(key);
      return {
        body: [{ apiId, plaintext: key, meta: meta() }],
        events: ["import.create_keys"],
        targets: (res) => [apiId, res.body.keyIds[0]],
      };
    },
  },
  "/v1/migrations.enqueueKeys": {
    sender: "root",
    setup: async (ctx) => {
      const migrationId = unique("mig");
      const apiId = await api(ctx);
      const keys = [{ hash: { value: hashKey(unique("sk")), variant: "sha256_base64" }, meta: meta() }];
      return { body: { migrationId, apiId, keys }, status: 202, events: ["import.enqueue"], targets: () => [migrationId, apiId] };
    },
  },
  "/v1/migrations.retryMigration": {
    sender: "operator",
    setup: async (ctx) => {
      const migrationId = await failedMigration(ctx);
      return { body: { workspaceId: ctx.t.workspaceId, migrationId }, events: ["import.retry"], targets: () => [migrationId] };
    },
  },
  "/v1/permissions.createPermission": {
    sender: "root",
    setup: async () => {
      const slug = unique("audit.routes.new");
      return { body: { name: slug, slug }, events: ["permission.create"], targets: (res) => [res.body.permissionId] };
    },
  },
  "/v1/permissions.createRole": {
    sender: "root",
    setup: async () => ({ body: { name: unique("audit-routes-new") }, events: ["role.create"], targets: (res) => [res.body.roleId] }),
  },
  "/v1/permissions.deletePermission": {
    sender: "root",
    setup: async (ctx) => {
      const p = await permission(ctx);
      return { body: { permissionId: p.id }, events: ["permission.delete"], targets: () => [p.id] };
    },
  },
  "/v1/permissions.deleteRole": {
    sender: "root",
    setup: async (ctx) => {
      const r = await role(ctx);
      return { body: { roleId: r.id }, events: ["role.delete"], targets: () => [r.id] };
    },
  },
  "/v1/permissions.addPermissionsToRole": {
    sender: "root",
    setup: async (ctx) => {
      const r = await role(ctx);
      const p = await permission(ctx);
      return {
        body: { roleId: r.id, permissions: [{ id: p.id }] },
        events: ["authorization.connect_role_and_permission"],
        targets: () => [r.id, p.id],
      };
    },
  },
  "/v1/permissions.removePermissionsFromRole": {
    sender: "root",
    setup: async (ctx) => {
      const { role: r, permission: p } = await roleWithPermission(ctx);
      return {
        body: { roleId: r.id, permissions: [{ id: p.id }] },
        events: ["authorization.disconnect_role_and_permission"],
        targets: () => [r.id, p.id],
      };
    },
  },
  "/v1/identities.createIdentity": {
    sender: "root",
    setup: async () => ({
      body: { externalId: unique("audit_ext_new"), meta: meta() },
      events: ["identity.create"],
      targets: (res) => [res.body.identityId],
    }),
  },
  "/v1/identities.updateIdentity": {
    sender: "root",
    setup: async (ctx) => {
      const i = await identity(ctx);
      return { body: { identityId: i.id, meta: meta() }, events: ["identity.update"], targets: () => [i.id] };
    },
  },
  "/v1/identities.deleteIdentity": {
    sender: "root",
    setup: async (ctx) => {
      const i = await identity(ctx);
      return { body: { identityId: i.id }, events: ["identity.delete"], targets: () => [i.id] };
    },
  },
  "/v1/ratelimits.setOverride": {
    sender: "root",
    setup: async (ctx) => ({
      body: { namespaceName: await namespace(ctx), identifier: "vip", limit: 5, duration: 60_000 },
      events: ["ratelimit.set_override"],
      targets: (res) => [res.body.overrideId],
    }),
  },
  "/v1/ratelimits.deleteOverride": {
    sender: "root",
    setup: async (ctx) => {
      const o = await overrideV1(ctx);
      return {
        body: { namespaceName: o.namespaceName, identifier: "vip" },
        events: ["ratelimit.delete_override"],
        targets: () => [o.overrideId],
      };
    },
  },
  // v1 operator routes
  "/v1/workspaces.createWorkspace": {
    sender: "operator",
    setup: async () => ({
      body: { name: unique("audit-ws") },
      events: ["workspace.create"],
      targets: (res) => [res.body.workspaceId],
      workspaceId: (res) => res.body.workspaceId,
    }),
  },
  "/v1/workspaces.updateWorkspace": {
    sender: "operator",
    setup: async ({ t }) => ({
      body: { workspaceId: t.workspaceId, enabled: false },
      events: ["workspace.update"],
      targets: () => [t.workspaceId],
    }),
  },
  "/v1/rootKeys.createRootKey": {
    sender: "operator",
    setup: async ({ t }) => ({
      body: { workspaceId: t.workspaceId, permissions: ["*"] },
      events: ["rootKey.create"],
      targets: (res) => {
        plaintext(res.body.key);
        return [res.body.keyId];
      },
    }),
  },
  "/v1/rootKeys.deleteRootKey": {
    sender: "operator",
    setup: async ({ h, t }) => {
      const created = ok(await h.post("/v1/rootKeys.createRootKey", { workspaceId: t.workspaceId, permissions: ["*"] }, ADMIN_TOKEN));
      plaintext(created.key);
      return { body: { keyId: created.keyId }, events: ["rootKey.delete"], targets: () => [created.keyId] };
    },
  },
  // v2
  "/v2/apis.createApi": {
    sender: "root",
    setup: async () => ({ body: { name: unique("api") }, events: ["api.create"], targets: (res) => [res.body.data.apiId] }),
  },
  "/v2/apis.deleteApi": {
    sender: "root",
    setup: async (ctx) => {
      const apiId = await api(ctx);
      return { body: { apiId }, events: ["api.delete"], targets: () => [apiId] };
    },
  },
  "/v2/keys.createKey": {
    sender: "root",
    setup: async (ctx) => {
      const apiId = await api(ctx);
      return {
        body: { apiId, name: "audited", meta: meta() },
        events: ["key.create"],
        targets: (res) => {
          plaintext(res.body.data.key);
          return [res.body.data.keyId, apiId];
        },
      };
    },
  },
  "/v2/keys.deleteKey": {
    sender: "root",
    setup: async (ctx) => {
      const { apiId, keyId } = await key(ctx);
      return { body: { keyId }, events: ["key.delete"], targets: () => [keyId, apiId] };
    },
  },
  "/v2/keys.updateKey": {
    sender: "root",
    setup: async (ctx) => {
      const { apiId, keyId } = await key(ctx);
      return { body: { keyId, name: "renamed", meta: meta() }, events: ["key.update"], targets: () => [keyId, apiId] };
    },
  },
  "/v2/keys.updateCredits": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId } = await key(ctx);
      return { body: { keyId, operation: "set", value: 9 }, events: ["key.update"], targets: () => [keyId] };
    },
  },
  "/v2/keys.addPermissions": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId } = await key(ctx);
      const p = await permission(ctx);
      return { body: { keyId, permissions: [p.slug] }, events: ["authorization.connect_permission_and_key"], targets: () => [keyId, p.id] };
    },
  },
  "/v2/keys.removePermissions": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId, permission: p } = await linkedPermission(ctx);
      return {
        body: { keyId, permissions: [p.slug] },
        events: ["authorization.disconnect_permission_and_key"],
        targets: () => [keyId, p.id],
      };
    },
  },
  "/v2/keys.setPermissions": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId, permission: old } = await linkedPermission(ctx);
      const p = await permission(ctx);
      return {
        body: { keyId, permissions: [p.slug] },
        events: ["authorization.connect_permission_and_key", "authorization.disconnect_permission_and_key"],
        targets: () => [keyId, p.id, old.id],
      };
    },
  },
  "/v2/keys.addRoles": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId } = await key(ctx);
      const r = await role(ctx);
      return { body: { keyId, roles: [r.name] }, events: ["authorization.connect_role_and_key"], targets: () => [keyId, r.id] };
    },
  },
  "/v2/keys.removeRoles": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId, role: r } = await linkedRole(ctx);
      return { body: { keyId, roles: [r.name] }, events: ["authorization.disconnect_role_and_key"], targets: () => [keyId, r.id] };
    },
  },
  "/v2/keys.setRoles": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId, role: old } = await linkedRole(ctx);
      const r = await role(ctx);
      return {
        body: { keyId, roles: [r.name] },
        events: ["authorization.connect_role_and_key", "authorization.disconnect_role_and_key"],
        targets: () => [keyId, r.id, old.id],
      };
    },
  },
  "/v2/keys.rerollKey": {
    sender: "root",
    setup: async (ctx) => {
      const { keyId } = await key(ctx);
      return {
        body: { keyId, expiration: 0 },
        events: ["key.reroll"],
        targets: (res) => {
          plaintext(res.body.data.key);
          return [keyId, res.body.data.keyId];
        },
      };
    },
  },
  "/v2/portal.createSession": {
    sender: "root",
    setup: async (ctx) => {
      const p = await portal(ctx);
      return {
        body: { portal: p.portalId, externalId: unique("portal_user"), scopes: ["keys:read"] },
        events: ["portal.create_session"],
        targets: (res) => {
          const code = new URL(res.body.data.url).searchParams.get("code")!;
          secrets.add(code).add(hashKey(code));
          return [res.body.data.id, p.portalId];
        },
      };
    },
  },
  "/v2/portal.rerollKey": {
    sender: "portal",
    setup: async (ctx) => {
      const externalId = unique("portal_user");
      const { apiId, session } = await portalSession(ctx, externalId, ["keys:reroll"]);
      const owned = ok(await ctx.h.post("/v2/keys.createKey", { apiId, externalId }, ctx.t.rootKey));
      plaintext(owned.data.key);
      return {
        body: { keyId: owned.data.keyId, expiration: 0 },
        events: ["key.reroll"],
        session,
        targets: (res) => {
          plaintext(res.body.data.key);
          return [owned.data.keyId, res.body.data.keyId];
        },
      };
    },
  },
  "/v2/keyhaven.createPortal": {
    sender: "root",
    setup: async (ctx) => {
      const apiId = await api(ctx);
      return {
        body: { apiId, slug: `audit-${randomBytes(4).toString("hex")}`, name: "Audit portal", returnUrl: "https://example.com/account" },
        events: ["portal.create"],
        targets: (res) => [res.body.data.portalId, apiId],
      };
    },
  },
  "/v2/keyhaven.updatePortal": {
    sender: "root",
    setup: async (ctx) => {
      const { portalId } = await portal(ctx);
      return { body: { portalId, name: "Renamed", enabled: false }, events: ["portal.update"], targets: () => [portalId] };
    },
  },
  "/v2/keyhaven.deletePortal": {
    sender: "root",
    setup: async (ctx) => {
      const { portalId } = await portal(ctx);
      return { body: { portalId }, events: ["portal.delete"], targets: () => [portalId] };
    },
  },
  "/v2/keys.migrateKeys": {
    sender: "root",
    setup: async (ctx) => {
      const migrationId = await migration(ctx);
      const apiId = await api(ctx);
      const key = `sk_${randomBytes(16).toString("hex")}`;
      plaintext(key);
      return {
        body: { migrationId, apiId, keys: [{ hash: hashKey(key), meta: meta() }] },
        events: ["import.create_keys"],
        targets: (res) => [apiId, res.body.data.migrated[0].keyId],
      };
    },
  },
  "/v2/identities.createIdentity": {
    sender: "root",
    setup: async () => ({
      body: { externalId: unique("audit_ext_new"), meta: meta() },
      events: ["identity.create"],
      targets: (res) => [res.body.data.identityId],
    }),
  },
  "/v2/identities.updateIdentity": {
    sender: "root",
    setup: async (ctx) => {
      const i = await identity(ctx);
      return { body: { identity: i.externalId, meta: meta() }, events: ["identity.update"], targets: () => [i.id] };
    },
  },
  "/v2/identities.deleteIdentity": {
    sender: "root",
    setup: async (ctx) => {
      const i = await identity(ctx);
      return { body: { identity: i.externalId }, events: ["identity.delete"], targets: () => [i.id] };
    },
  },
  "/v2/permissions.createPermission": {
    sender: "root",
    setup: async () => {
      const slug = unique("audit.routes.v2");
      return { body: { name: slug, slug }, events: ["permission.create"], targets: (res) => [res.body.data.permissionId] };
    },
  },
  "/v2/permissions.deletePermission": {
    sender: "root",
    setup: async (ctx) => {
      const p = await permission(ctx);
      return { body: { permission: p.slug }, events: ["permission.delete"], targets: () => [p.id] };
    },
  },
  "/v2/permissions.createRole": {
    sender: "root",
    setup: async () => ({ body: { name: unique("audit-routes-v2") }, events: ["role.create"], targets: (res) => [res.body.data.roleId] }),
  },
  "/v2/permissions.deleteRole": {
    sender: "root",
    setup: async (ctx) => {
      const r = await role(ctx);
      return { body: { role: r.name }, events: ["role.delete"], targets: () => [r.id] };
    },
  },
  "/v2/permissions.setRolePermissions": {
    sender: "root",
    setup: async (ctx) => {
      const { role: r, permission: old } = await roleWithPermission(ctx);
      const p = await permission(ctx);
      return {
        body: { roleId: r.id, permissions: [p.slug] },
        events: ["authorization.connect_role_and_permission", "authorization.disconnect_role_and_permission"],
        targets: () => [r.id, p.id, old.id],
      };
    },
  },
  "/v2/ratelimit.setOverride": {
    sender: "root",
    setup: async (ctx) => ({
      body: { namespace: await namespace(ctx), identifier: "vip", limit: 5, duration: 60_000 },
      events: ["ratelimit.set_override"],
      targets: (res) => [res.body.data.overrideId],
    }),
  },
  "/v2/ratelimit.deleteOverride": {
    sender: "root",
    setup: async (ctx) => {
      const o = await overrideV1(ctx);
      return {
        body: { namespace: o.namespaceName, identifier: "vip" },
        events: ["ratelimit.delete_override"],
        targets: () => [o.overrideId],
      };
    },
  },
  "/v2/keyhaven.createMigration": {
    sender: "root",
    setup: async () => {
      const migrationId = unique("mig");
      return { body: { migrationId, algorithm: "sha256" }, events: ["migration.create"], targets: () => [migrationId] };
    },
  },
  "/v2/keyhaven.createWebhook": {
    sender: "root",
    setup: async () => ({
      body: { url: "https://203.0.113.10/hook", events: ["key.reroll"], description: "audit case" },
      events: ["webhook.create"],
      targets: (res) => {
        secrets.add(res.body.data.secret);
        return [res.body.data.webhookId];
      },
    }),
  },
  "/v2/keyhaven.updateWebhook": {
    sender: "root",
    setup: async (ctx) => {
      const webhookId = await webhook(ctx);
      return { body: { webhookId, enabled: false }, events: ["webhook.update"], targets: () => [webhookId] };
    },
  },
  "/v2/keyhaven.deleteWebhook": {
    sender: "root",
    setup: async (ctx) => {
      const webhookId = await webhook(ctx);
      return { body: { webhookId }, events: ["webhook.delete"], targets: () => [webhookId] };
    },
  },
  "/v2/keyhaven.replayWebhookDelivery": {
    sender: "root",
    setup: async (ctx) => {
      const { webhookId, deliveryId } = await webhookDelivery(ctx);
      return { body: { deliveryId }, events: ["webhook.replay_delivery"], targets: () => [webhookId, deliveryId] };
    },
  },
  "/v2/keyhaven.setAlertThresholds": {
    sender: "root",
    setup: async (ctx) => {
      const apiId = await api(ctx);
      return {
        body: { apiId, creditsLow: { remaining: 10 }, expiringWithinMs: 3_600_000 },
        events: ["api.update"],
        targets: () => [apiId],
      };
    },
  },
  "/v2/keyhaven.copyFromUnkey": {
    sender: "root",
    setup: async () => {
      const apiId = unique("api");
      const pendingKey = unique("key");
      const verifiableKey = unique("key");
      const identityId = unique("id");
      const key = `uk_${randomBytes(16).toString("hex")}`;
      plaintext(key);
      const common = { apiId, start: "uk_ab", createdAt: 1_700_000_000_000, enabled: true };
      return {
        body: {
          apis: [{ id: apiId, name: "copied api" }],
          identities: [{ id: identityId, externalId: unique("customer"), meta: meta() }],
          keys: [
            Object.assign({ id: pendingKey, meta: meta(), identityId }, common),
            Object.assign({ id: verifiableKey, plaintext: key, recoverable: true }, common),
          ],
        },
        events: ["import.from_unkey"],
        targets: () => [apiId, identityId, pendingKey, verifiableKey],
      };
    },
  },
};

/** A case's request, as its sender sends it: a bearer root key or admin token, or a portal session's cookie. */
function send(h: Harness, t: Tenant, c: Case, expected: { body: unknown; session?: PortalSessionOf }, path: string, headers = {}) {
  if (c.sender === "portal") {
    return h.post(path, expected.body, undefined, { ...headers, cookie: `portal_session=${expected.session!.token}` });
  }
  return h.post(path, expected.body, c.sender === "operator" ? ADMIN_TOKEN : t.rootKey, headers);
}

describe("every mutating route records its audit entries", () => {
  test("a case for every path of MUTATING_ROUTES, and none for a path not in it", () => {
    const cased = Object.keys(CASES);
    expect(
      [...MUTATING_ROUTES].filter((path) => !cased.includes(path)),
      "mutating routes without a case",
    ).toEqual([]);
    expect(
      cased.filter((path) => !MUTATING_ROUTES.has(path)),
      "cases of routes not in MUTATING_ROUTES",
    ).toEqual([]);
  });

  for (const [path, c] of Object.entries(CASES)) {
    test(path, async ({ h }) => {
      const t = await h.tenant();
      secrets.add(t.rootKey);
      const expected = await c.setup({ h, t });
      // A case names only catalogued events (src/core/audit/audit.events.ts), so a misspelt one fails here, not later.
      expect(expected.events.filter((event) => !(AUDIT_EVENTS as readonly string[]).includes(event))).toEqual([]);
      const res = await send(h, t, c, expected, path);
      expect(res.status, JSON.stringify(res.body)).toBe(expected.status ?? 200);
      const requestId = requestIdOf(res);
      expect(requestId).toBeTruthy();
      const entries = (await auditEntries(h)).filter((e) => e.requestId === requestId);
      expect(entries.map((e) => e.event).sort(), JSON.stringify(entries)).toEqual([...expected.events].sort());
      const actor =
        c.sender === "operator"
          ? { actorKind: "operator", actorId: "admin" }
          : c.sender === "portal"
            ? { actorKind: "portal_session", actorId: expected.session!.id }
            : { actorKind: "root_key", actorId: t.rootKeyId };
      const surface = c.sender === "operator" ? "operator" : path.slice(1, 3);
      const workspaceId = expected.workspaceId?.(res) ?? t.workspaceId;
      for (const entry of entries) {
        expect(entry, entry.event).toMatchObject({ ...actor, workspaceId, surface, requestId });
      }
      const targeted = new Set(entries.flatMap((e) => e.targets.map((target) => target.id)));
      for (const id of expected.targets(res)) {
        expect(typeof id === "string" && id.length > 0, `target id of ${path}: ${String(id)}`).toBe(true);
        expect([...targeted], `${path} targets ${id}`).toContain(id);
      }
    });
  }

  // Issue 35 §3, on the same cases: every mutating route takes an Idempotency-Key, answers within its deadline while
  // the key's scope holds the transaction (a read after the change outside it would wait for it: keys.setRoles did),
  // and a retry with the key gets the same answer, marked replayed, without a second change (every change records
  // an entry: no new entry but the worker's).
  for (const [path, c] of Object.entries(CASES)) {
    test(`${path} with an Idempotency-Key: applied once, the retry replayed`, async ({ h }) => {
      const t = await h.tenant();
      secrets.add(t.rootKey);
      const expected = await c.setup({ h, t });
      const headers = { "idempotency-key": `audit-routes-${randomBytes(8).toString("hex")}` };
      const first = await send(h, t, c, expected, path, headers);
      expect(first.status, JSON.stringify(first.body)).toBe(expected.status ?? 200);
      expect(first.headers["idempotency-replayed"]).toBeUndefined();
      const changes = async () => (await auditEntries(h)).filter((e) => e.actorKind !== "worker").length;
      const before = await changes();
      const again = await send(h, t, c, expected, path, headers);
      expect(again.status, JSON.stringify(again.body)).toBe(first.status);
      expect(again.headers["idempotency-replayed"]).toBe("true");
      expect(again.body).toEqual(first.body);
      expect(await changes()).toBe(before);
    });
  }

  test("no secret in any entry", async ({ h }) => {
    const encryptionKey = h.config.encryptionKey;
    expect(encryptionKey).toBeDefined();
    secrets.add(encryptionKey!.toString("base64"));
    const stored = await auditEntries(h);
    expect(stored.length).toBeGreaterThan(0);
    // The file's cases ran first (same file, in order) and filled `secrets`: there is something to look for.
    expect(secrets.size).toBeGreaterThan(Object.keys(CASES).length);
    // A failure names the entry (event and id), not the secret it found.
    const dump = stored.map((entry) => ({ entry: `${entry.event} ${entry.id}`, text: JSON.stringify(entry) }));
    const holding = [...secrets].flatMap((secret, i) =>
      dump.filter(({ text }) => text.includes(secret)).map(({ entry }) => `${entry} holds secret #${i}`),
    );
    expect(holding, "entries holding a secret").toEqual([]);
  });
});
