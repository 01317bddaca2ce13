import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rpcs } from "../src/wire/v1/routes.js";
import type { Rpc } from "../src/wire/v1/rpc.js";
import { v2Rpcs } from "../src/wire/v2/routes.js";
import type { V2Rpc } from "../src/wire/v2/rpc.js";
import { createHarness, expectError, type Harness, type Response } from "./helper.js";

/**
 * Every registered route refuses a caller without credentials, and one with a wrong bearer token, before its
 * handler runs: registerRpc enforces the route's declared `auth`. The loop runs over the registry (src/wire/v1/routes.ts),
 * so a new route is covered without being named here; only the routes anybody may call are listed, explicitly.
 */

/** The routes that need no credentials: a route wrongly declared so is caught by this list and by the loop. */
const OPEN_ROUTES = ["GET /v1/liveness", "GET /v1/readiness", "POST /v1/keys.verifyKey"];

const routeName = (rpc: Rpc) => `${rpc.method} ${rpc.path}`;

/** A wrong bearer token, long enough to be looked up as a root key. */
const WRONG_TOKEN = "not-a-root-key-0123456789abcdef";

let h: Harness;
/** A live key of a live API: keys.whoami looks its key up before authenticating (404 for an unknown one). */
let liveKey: string;

/**
 * The smallest input each route validates, for the routes whose validation (a 400, before authentication) refuses
 * an empty one, and for those that check their input or look something up before authenticating (`beforeAuth`).
 * A route not listed is sent `{}`. Ids need not exist: authentication comes before any lookup of them.
 */
const minimalInput = (): Record<string, unknown> => ({
  "POST /v1/apis.createApi": { name: "api" },
  "GET /v1/apis.getApi": { apiId: "api_missing" },
  "POST /v1/apis.deleteApi": { apiId: "api_missing" },
  "POST /v1/apis.deleteKeys": { apiId: "api_missing" },
  "GET /v1/apis.listKeys": { apiId: "api_missing" },
  "POST /v1/apis.updateApi": { apiId: "api_missing", ipWhitelist: null },
  "POST /v1/keys.verifyKey": { key: "sk_missing" },
  "POST /v1/keys.createKey": { apiId: "api_missing" },
  "POST /v1/keys.deleteKey": { keyId: "key_missing" },
  "POST /v1/keys.updateRemaining": { keyId: "key_missing", op: "set", value: 1 },
  "POST /v1/keys.updateKey": { keyId: "key_missing" },
  "GET /v1/keys.getKey": { keyId: "key_missing" },
  "POST /v1/keys.whoami": { key: liveKey },
  "POST /v1/keys.addPermissions": { keyId: "key_missing", permissions: [{ name: "perm" }] },
  "POST /v1/keys.removePermissions": { keyId: "key_missing", permissions: [{ name: "perm" }] },
  "POST /v1/keys.setPermissions": { keyId: "key_missing", permissions: [{ name: "perm" }] },
  "POST /v1/keys.addRoles": { keyId: "key_missing", roles: [{ name: "role" }] },
  "POST /v1/keys.removeRoles": { keyId: "key_missing", roles: [{ name: "role" }] },
  "POST /v1/keys.setRoles": { keyId: "key_missing", roles: [{ name: "role" }] },
  "GET /v1/keys.getVerifications": { keyId: "key_missing" },
  "POST /v1/migrations.createKeys": [],
  "POST /v1/migrations.enqueueKeys": { migrationId: "mig_missing", apiId: "api_missing", keys: [] },
  "GET /v1/migrations.getMigration": { migrationId: "mig_missing" },
  "GET /v1/analytics.getVerifications": { apiId: "api_missing", start: "0" },
  "POST /v1/permissions.createPermission": { name: "perm" },
  "POST /v1/permissions.createRole": { name: "role" },
  "GET /v1/permissions.getPermission": { permissionId: "perm_missing" },
  "POST /v1/permissions.deletePermission": { permissionId: "perm_missing" },
  "GET /v1/permissions.getRole": { roleId: "role_missing" },
  "POST /v1/permissions.deleteRole": { roleId: "role_missing" },
  "POST /v1/permissions.addPermissionsToRole": { roleId: "role_missing", permissions: [{ slug: "perm" }] },
  "POST /v1/permissions.removePermissionsFromRole": { roleId: "role_missing", permissions: [{ slug: "perm" }] },
  "POST /v1/identities.createIdentity": { externalId: "ext" },
  "GET /v1/identities.getIdentity": { externalId: "ext" },
  "POST /v1/identities.updateIdentity": { externalId: "ext" },
  "POST /v1/identities.deleteIdentity": { identityId: "id_missing" },
  "POST /v1/ratelimits.limit": { identifier: "id", limit: 1, duration: 1000 },
  "POST /v1/ratelimits.setOverride": { namespaceName: "ns", identifier: "ident", limit: 1, duration: 1000 },
  "GET /v1/ratelimits.getOverride": { namespaceName: "ns", identifier: "id" },
  "GET /v1/ratelimits.listOverrides": { namespaceName: "ns" },
  "POST /v1/ratelimits.deleteOverride": { namespaceName: "ns", identifier: "id" },
  "POST /v1/workspaces.createWorkspace": { name: "ws" },
  "POST /v1/workspaces.updateWorkspace": { workspaceId: "ws_missing", enabled: true },
  "POST /v1/rootKeys.createRootKey": { workspaceId: "ws_missing", permissions: [] },
  "POST /v1/rootKeys.deleteRootKey": { keyId: "rk_missing" },
  "GET /v1/rootKeys.listRootKeys": { workspaceId: "ws_missing" },
  "POST /v1/migrations.retryMigration": { workspaceId: "ws_missing", migrationId: "mig_missing" },
});

function call(rpc: Rpc, token: string | undefined): Promise<Response> {
  const input = minimalInput()[routeName(rpc)] ?? {};
  return rpc.method === "GET" ? h.get(rpc.path, input as Record<string, string>, token) : h.post(rpc.path, input, token);
}

/**
 * The refusal a route's `auth` gives a caller without credentials (`token` undefined) or with a wrong token; what
 * differs is added to `failures`, so that one run names every route that is not refused.
 */
function expectRefused(rpc: Rpc, res: Response, token: string | undefined, failures: string[]) {
  const route = routeName(rpc);
  try {
    if (rpc.auth === "admin") {
      expectError(res, 403, "UNAUTHORIZED", token === undefined ? "admin token required" : "admin token is not valid");
    } else {
      expectError(res, 403, "UNAUTHORIZED", token === undefined ? "key required" : "key not found");
    }
  } catch (err) {
    failures.push(
      `${route} (auth ${rpc.auth}) ${token === undefined ? "without credentials" : "with a wrong token"}: ${(err as Error).message}`,
    );
  }
}

describe("authentication of every registered route", () => {
  beforeAll(async () => {
    h = await createHarness();
    const tenant = await h.tenant();
    const apiId = await h.createApi(tenant);
    liveKey = (await h.importKey(tenant, apiId)).key;
  });
  afterAll(() => h?.close());

  it("declares needing no credentials only on the routes listed here", () => {
    const open = rpcs.filter((rpc) => rpc.auth === "none" || rpc.auth === "optionalRootKey").map(routeName);
    expect(open.sort()).toEqual([...OPEN_ROUTES].sort());
  });

  it("lets only keys.createKey's, keys.updateKey's and a role's permission changes re-check their root key (test/keys.checkedByWrite)", () => {
    expect(rpcs.filter((rpc) => rpc.auth === "rootKeyCheckedByWrite").map(routeName)).toEqual([
      "POST /v1/keys.createKey",
      "POST /v1/keys.updateKey",
      "POST /v1/permissions.addPermissionsToRole",
      "POST /v1/permissions.removePermissionsFromRole",
    ]);
  });

  it("refuses every other route without Authorization (403 UNAUTHORIZED), whatever it is", async () => {
    const guarded = rpcs.filter((rpc) => !OPEN_ROUTES.includes(routeName(rpc)));
    expect(guarded.length).toBe(rpcs.length - OPEN_ROUTES.length);
    const failures: string[] = [];
    for (const rpc of guarded) expectRefused(rpc, await call(rpc, undefined), undefined, failures);
    expect(failures).toEqual([]);
  });

  it("refuses every other route with a wrong bearer token (403 UNAUTHORIZED)", async () => {
    const failures: string[] = [];
    for (const rpc of rpcs.filter((r) => !OPEN_ROUTES.includes(routeName(r)))) {
      expectRefused(rpc, await call(rpc, WRONG_TOKEN), WRONG_TOKEN, failures);
    }
    expect(failures).toEqual([]);
  });

  it("answers the open routes without credentials, and with a token that is no root key", async () => {
    for (const rpc of rpcs.filter((r) => OPEN_ROUTES.includes(routeName(r)))) {
      for (const token of [undefined, WRONG_TOKEN]) {
        const res = await call(rpc, token);
        expect(res.status, `${routeName(rpc)}: ${JSON.stringify(res.body)}`).toBe(200);
      }
    }
  });

  it("keeps what a route answered before authenticating (its beforeAuth) ahead of the refusal", async () => {
    // Without credentials: the input's own 400, or keys.whoami's lookup (v1's order), comes first.
    expectError(await h.post("/v1/keys.whoami", { key: "sk_unknown_0123456789" }), 404, "NOT_FOUND", "Key not found");
    expectError(await h.get("/v1/identities.getIdentity", {}), 400, "BAD_REQUEST", "Provide either identityId or externalId");
    expectError(await h.get("/v1/keys.getVerifications", {}), 400, "BAD_REQUEST", "keyId or ownerId must be provided");
    expectError(
      await h.get("/v1/keys.getVerifications", { keyId: "key_missing", start: "20", end: "10" }),
      400,
      "BAD_REQUEST",
      "start must not be after end",
    );
    expectError(
      await h.get("/v1/analytics.getVerifications", { apiId: "api_missing", start: "10", end: "10" }),
      400,
      "BAD_REQUEST",
      "start cannot be equal or greater than end",
    );
    const noNamespace = "You must provide a namespaceId or a namespaceName";
    expectError(
      await h.post("/v1/ratelimits.setOverride", { identifier: "ident", limit: 1, duration: 1000 }),
      400,
      "BAD_REQUEST",
      noNamespace,
    );
    expectError(await h.get("/v1/ratelimits.getOverride", { identifier: "ident" }), 400, "BAD_REQUEST", noNamespace);
    expectError(await h.get("/v1/ratelimits.listOverrides", {}), 400, "BAD_REQUEST", noNamespace);
    expectError(await h.post("/v1/ratelimits.deleteOverride", { identifier: "ident" }), 400, "BAD_REQUEST", noNamespace);
    // ... and then the refusal, for a request that passes them.
    expectError(await h.post("/v1/keys.whoami", { key: liveKey }), 403, "UNAUTHORIZED", "key required");
  });

  it("sends each refused route an input it validates, so the refusal is authentication's, not validation's", () => {
    const invalid = rpcs.filter((rpc) => !rpc.input.safeParse(minimalInput()[routeName(rpc)] ?? {}).success).map(routeName);
    expect(invalid).toEqual([]);
  });
});

/** The v2 routes anybody may call: liveness, and portal.exchangeCode (its code is the credential). */
const OPEN_V2_ROUTES = ["GET /v2/liveness", "POST /v2/portal.exchangeCode"];

/** The v2 routes a customer portal's session calls, by its `portal_session` cookie, and nothing else. */
const PORTAL_SESSION_ROUTES = ["POST /v2/portal.listKeys", "POST /v2/portal.rerollKey", "POST /v2/portal.getVerifications"];

/** The smallest body each v2 route validates (v2 validates before authenticating); a route not listed is sent `{}`. */
const minimalV2Input: Record<string, unknown> = {
  "POST /v2/apis.createApi": { name: "api" },
  "POST /v2/apis.getApi": { apiId: "api_missing" },
  "POST /v2/apis.deleteApi": { apiId: "api_missing" },
  "POST /v2/apis.listKeys": { apiId: "api_missing" },
  "POST /v2/ratelimit.limit": { namespace: "ns", identifier: "id", limit: 1, duration: 1000 },
  "POST /v2/ratelimit.setOverride": { namespace: "ns", identifier: "id", limit: 0, duration: 1000 },
  "POST /v2/ratelimit.getOverride": { namespace: "ns", identifier: "id" },
  "POST /v2/ratelimit.listOverrides": { namespace: "ns" },
  "POST /v2/ratelimit.deleteOverride": { namespace: "ns", identifier: "id" },
  "POST /v2/identities.createIdentity": { externalId: "ext" },
  "POST /v2/identities.getIdentity": { identity: "ext" },
  "POST /v2/identities.updateIdentity": { identity: "ext" },
  "POST /v2/identities.deleteIdentity": { identity: "ext" },
  "POST /v2/permissions.createPermission": { name: "perm", slug: "perm" },
  "POST /v2/permissions.getPermission": { permission: "perm" },
  "POST /v2/permissions.deletePermission": { permission: "perm" },
  "POST /v2/permissions.getRole": { role: "role" },
  "POST /v2/permissions.deleteRole": { role: "role" },
  "POST /v2/keys.getKey": { keyId: "key_missing" },
  "POST /v2/keys.whoami": { key: "sk_missing" },
  "POST /v2/keys.deleteKey": { keyId: "key_missing" },
  "POST /v2/keys.updateCredits": { keyId: "key_missing", operation: "set", value: 1 },
  "POST /v2/keys.verifyKey": { key: "sk_missing" },
  "POST /v2/keys.addPermissions": { keyId: "key_missing", permissions: ["perm"] },
  "POST /v2/keys.removePermissions": { keyId: "key_missing", permissions: ["perm"] },
  "POST /v2/keys.setPermissions": { keyId: "key_missing", permissions: [] },
  "POST /v2/keys.addRoles": { keyId: "key_missing", roles: ["role"] },
  "POST /v2/keys.removeRoles": { keyId: "key_missing", roles: ["role"] },
  "POST /v2/keys.setRoles": { keyId: "key_missing", roles: [] },
  "POST /v2/permissions.createRole": { name: "role" },
  "POST /v2/permissions.setRolePermissions": { roleId: "role_missing", permissions: [] },
  "POST /v2/ratelimit.multiLimit": [{ namespace: "ns", identifier: "id", limit: 1, duration: 1000 }],
  "POST /v2/analytics.getVerifications": { query: "SELECT 1" },
  "POST /v2/keys.createKey": { apiId: "api_missing" },
  "POST /v2/keys.updateKey": { keyId: "key_missing" },
  "POST /v2/keys.rerollKey": { keyId: "key_missing", expiration: 0 },
  "POST /v2/keys.migrateKeys": { migrationId: "mig", apiId: "api_missing", keys: [{ hash: "abc" }] },
  "POST /v2/keyhaven.createMigration": { migrationId: "mig", algorithm: "sha256" },
  "POST /v2/keyhaven.getCopyStatus": { apiIds: ["api_x"] },
  "POST /v2/keyhaven.listPendingKeys": { apiId: "api_x" },
  "POST /v2/keyhaven.createWebhook": { url: "https://203.0.113.10/hook", events: ["key.create"] },
  "POST /v2/keyhaven.updateWebhook": { webhookId: "wh_missing", enabled: false },
  "POST /v2/keyhaven.deleteWebhook": { webhookId: "wh_missing" },
  "POST /v2/keyhaven.listWebhookDeliveries": { webhookId: "wh_missing" },
  "POST /v2/keyhaven.replayWebhookDelivery": { deliveryId: "msg_missing" },
  "POST /v2/keyhaven.getAlertThresholds": { apiId: "api_missing" },
  "POST /v2/keyhaven.setAlertThresholds": { apiId: "api_missing", creditsLow: null },
  "POST /v2/portal.createSession": { portal: "pc_missing", externalId: "ext", scopes: ["keys:read"] },
  "POST /v2/portal.exchangeCode": { code: "pst_missing" },
  "POST /v2/portal.rerollKey": { keyId: "key_missing", expiration: 0 },
  "POST /v2/portal.getVerifications": { startTime: 0, endTime: 60_000 },
  "POST /v2/keyhaven.createPortal": { apiId: "api_missing", slug: "portal", name: "portal" },
  "POST /v2/keyhaven.getPortal": { portalId: "pc_missing" },
  "POST /v2/keyhaven.updatePortal": { portalId: "pc_missing", enabled: false },
  "POST /v2/keyhaven.deletePortal": { portalId: "pc_missing" },
};

describe("authentication of every registered v2 route", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness();
  });
  afterAll(() => h?.close());

  const v2Name = (rpc: V2Rpc) => `${rpc.method} ${rpc.path}`;
  const guardedV2 = () => v2Rpcs.filter((rpc) => !OPEN_V2_ROUTES.includes(v2Name(rpc)));
  const rootKeyV2 = () => guardedV2().filter((rpc) => !PORTAL_SESSION_ROUTES.includes(v2Name(rpc)));

  it("declares needing no credentials only on the routes listed here", () => {
    expect(v2Rpcs.filter((rpc) => rpc.auth === "none").map(v2Name)).toEqual(OPEN_V2_ROUTES);
  });

  it("declares a portal session's authentication only on the portal routes listed here", () => {
    expect(v2Rpcs.filter((rpc) => rpc.auth === "portalSession").map(v2Name)).toEqual(PORTAL_SESSION_ROUTES);
  });

  it("answers portal.exchangeCode without credentials: an unknown code is its own 401, not an authentication's", async () => {
    for (const token of [undefined, WRONG_TOKEN]) {
      const res = await h.post("/v2/portal.exchangeCode", minimalV2Input["POST /v2/portal.exchangeCode"], token);
      expect(res.status, JSON.stringify(res.body)).toBe(401);
      expect(res.body.error.type).toBe("https://unkey.com/docs/errors/unkey/authentication/portal_session_not_found");
    }
  });

  it("refuses the portal routes without the portal_session cookie (400), with a wrong one (401) and with any Authorization header (400)", async () => {
    const failures: string[] = [];
    for (const rpc of guardedV2().filter((r) => PORTAL_SESSION_ROUTES.includes(v2Name(r)))) {
      const body = minimalV2Input[v2Name(rpc)] ?? {};
      const none = await h.post(rpc.path, body);
      if (none.status !== 400 || none.body?.error?.detail !== "API Key portal_session not found in cookies") {
        failures.push(`${v2Name(rpc)} without the cookie: ${none.status} ${JSON.stringify(none.body)}`);
      }
      const wrong = await h.post(rpc.path, body, undefined, { cookie: `portal_session=${WRONG_TOKEN}` });
      if (
        wrong.status !== 401 ||
        wrong.body?.error?.type !== "https://unkey.com/docs/errors/unkey/authentication/portal_session_not_found"
      ) {
        failures.push(`${v2Name(rpc)} with a wrong cookie: ${wrong.status} ${JSON.stringify(wrong.body)}`);
      }
      const bearer = await h.post(rpc.path, body, WRONG_TOKEN, { cookie: `portal_session=${WRONG_TOKEN}` });
      if (bearer.status !== 400)
        failures.push(`${v2Name(rpc)} with an Authorization header: ${bearer.status} ${JSON.stringify(bearer.body)}`);
    }
    expect(failures).toEqual([]);
  });

  it("lets only keys.createKey's and keys.updateKey's writes re-check their root key (test/keys.checkedByWrite)", () => {
    expect(v2Rpcs.filter((rpc) => rpc.auth === "rootKeyCheckedByWrite").map(v2Name)).toEqual([
      "POST /v2/keys.createKey",
      "POST /v2/keys.updateKey",
    ]);
  });

  it("sends each route a body it validates, so what follows is authentication's answer", () => {
    const invalid = guardedV2()
      .filter((rpc) => !rpc.input.safeParse(minimalV2Input[v2Name(rpc)] ?? {}).success)
      .map(v2Name);
    expect(invalid).toEqual([]);
  });

  it("refuses every other route without Authorization (400) and with a wrong bearer token (401)", async () => {
    const failures: string[] = [];
    for (const rpc of rootKeyV2()) {
      const body = minimalV2Input[v2Name(rpc)] ?? {};
      const none = await h.post(rpc.path, body);
      const wrong = await h.post(rpc.path, body, WRONG_TOKEN);
      // A portal session's cookie is no credential here: the same 400 as none.
      const cookie = await h.post(rpc.path, body, undefined, { cookie: `portal_session=${WRONG_TOKEN}` });
      for (const [res, what] of [
        [none, "without credentials"],
        [cookie, "with only a portal_session cookie"],
      ] as const) {
        if (res.status !== 400 || res.body?.error?.detail !== "Authorization header for 'bearer' scheme") {
          failures.push(`${v2Name(rpc)} ${what}: ${res.status} ${JSON.stringify(res.body)}`);
        }
      }
      if (wrong.status !== 401 || wrong.body?.error?.type !== "https://unkey.com/docs/errors/unkey/authentication/key_not_found") {
        failures.push(`${v2Name(rpc)} with a wrong token: ${wrong.status} ${JSON.stringify(wrong.body)}`);
      }
    }
    expect(failures).toEqual([]);
  });
});
