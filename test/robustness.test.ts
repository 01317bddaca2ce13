/**
 * Robustness: every operation of /openapi.json gets a deterministic barrage of malformed requests (wrong JSON
 * types, huge strings and numbers, deep nesting, huge arrays, lone surrogates and NUL, unknown fields, bodies that
 * are not JSON or not declared as JSON, garbage query strings, ids that do not exist or belong to another
 * workspace). Every answer must be below 500 and, when an error, the v1 envelope with a non-empty message; and the
 * whole barrage for a route must leave every table of the database exactly as it was (row counts and contents).
 *
 * The barrage is built so that no request in it is valid and allowed: ids name nothing of the caller's workspace,
 * creating routes are called with a root key that holds no permission (or with a name that already exists), and
 * operator routes with a wrong admin token or a workspace/key that does not exist.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeToStatus, errorCodes } from "../src/http/errors.js";
import { ADMIN_TOKEN, createHarness, type Harness, type Tenant } from "./helper.js";
import { tableSnapshot } from "./table-snapshot.js";
import { waitFor } from "./wait.js";

// ---------------------------------------------------------------------------------------------------------------
// Deterministic pseudo-randomness (mulberry32), for the few places that pick among values.
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const seedOf = (s: string) => createHash("sha256").update(s).digest().readUInt32LE(0);

// ---------------------------------------------------------------------------------------------------------------
// The harness and the document are needed to enumerate the operations, so they are made at collection time.
const h: Harness = await createHarness();
const docRes = await h.app.inject({ method: "GET", url: "/openapi.json" });
const doc = JSON.parse(docRes.body);
type Operation = { method: "GET" | "POST"; path: string; security: string[]; schema: any };
const operations: Operation[] = [];
for (const [path, item] of Object.entries<any>(doc.paths)) {
  for (const [method, op] of Object.entries<any>(item)) {
    operations.push({
      method: method.toUpperCase() as "GET" | "POST",
      path,
      security: (op.security ?? []).flatMap((s: Record<string, unknown>) => Object.keys(s)),
      schema:
        method === "get"
          ? { type: "object", properties: Object.fromEntries((op.parameters ?? []).map((p: any) => [p.name, p.schema])) }
          : op.requestBody?.content?.["application/json"]?.schema,
    });
  }
}
afterAll(() => h.close());

// ---------------------------------------------------------------------------------------------------------------
// Fixtures: workspace A (the caller) and workspace B (whose ids A must not reach).
type Fixture = {
  t: Tenant;
  noPermKey: string;
  apiId: string;
  keyId: string;
  key: string;
  roleId: string;
  roleName: string;
  permissionId: string;
  permissionName: string;
  identityId: string;
  externalId: string;
  namespaceId: string;
  namespaceName: string;
  migrationId: string;
  /** The portal of `apiId`, and a live session of it for `externalId` with every scope (its access token). */
  portalId: string;
  portalToken: string;
};

async function ok(res: { status: number; body: any }) {
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
  return res.body;
}

async function makeFixture(tag: string): Promise<Fixture> {
  const t = await h.tenant();
  const noPermKey = await h.rootKey(t.workspaceId, []);
  const apiId = await h.createApi(t);
  const roleName = `role-${tag}`;
  const permissionName = `perm.${tag}`;
  const roleId = (await ok(await h.post("/v1/permissions.createRole", { name: roleName }, t.rootKey))).roleId;
  const permissionId = (await ok(await h.post("/v1/permissions.createPermission", { name: permissionName }, t.rootKey))).permissionId;
  const { key, keyId } = await h.importKey(t, apiId, { roles: [roleName], permissions: [permissionName], remaining: 100 });
  const externalId = `user-${tag}`;
  const identityId = (await ok(await h.post("/v1/identities.createIdentity", { externalId }, t.rootKey))).identityId;
  const namespaceName = `ns-${tag}`;
  await ok(
    await h.post("/v1/ratelimits.limit", { namespace: namespaceName, identifier: "someone", limit: 10, duration: 60_000 }, t.rootKey),
  );
  await ok(await h.post("/v1/ratelimits.setOverride", { namespaceName, identifier: "someone", limit: 5, duration: 60_000 }, t.rootKey));
  const [ns] = await h.sql<{ id: string }>(
    `select id from ratelimit_namespaces where workspace_id = '${t.workspaceId}' and name = '${namespaceName}'`,
  );
  const migrationId = `mig-${tag}`;
  await ok(
    await h.post("/v1/migrations.enqueueKeys", { migrationId, apiId, keys: [{ plaintext: `sk_enqueued_${tag}_0123456789` }] }, t.rootKey),
  );
  const portalId = (await ok(await h.post("/v2/keyhaven.createPortal", { apiId, slug: `robust-${tag}`, name: "robust" }, t.rootKey))).data
    .portalId;
  const scopes = ["keys:read", "keys:reroll", "analytics:read"];
  const minted = await ok(await h.post("/v2/portal.createSession", { portal: portalId, externalId, scopes }, t.rootKey));
  const code = new URL(minted.data.url).searchParams.get("code");
  const portalToken = (await ok(await h.post("/v2/portal.exchangeCode", { code }))).data.accessToken;
  return {
    t,
    noPermKey,
    portalId,
    portalToken,
    apiId,
    keyId,
    key,
    roleId,
    roleName,
    permissionId,
    permissionName,
    identityId,
    externalId,
    namespaceId: ns!.id,
    namespaceName,
    migrationId,
  };
}

let A: Fixture;
let B: Fixture;

/** Ids of the right shape that name nothing. */
const MISSING = {
  apiId: "api_1111111111111111111111",
  keyId: "key_1111111111111111111111",
  roleId: "role_1111111111111111111111",
  permissionId: "perm_1111111111111111111111",
  identityId: "id_1111111111111111111111",
  namespaceId: "rlns_1111111111111111111111",
  migrationId: "mig-missing",
  workspaceId: "ws_1111111111111111111111",
  key: "sk_missing_0123456789abcdef",
  externalId: "user-missing",
  namespaceName: "ns-missing",
  portalId: "pc_1111111111111111111111",
};

/** Waits until the enqueued fixture batches are processed, so the worker writes nothing during a barrage. */
async function settle() {
  await waitFor("the fixture batches processed", async () => {
    const [row] = await h.sql<{ n: string }>(`select count(*)::text as n from migration_batches where status = 'pending'`);
    return row!.n === "0";
  });
  // What fixture set-up counted is written now, not by the flusher in the middle of a barrage.
  await h.jobs.analytics.flush();
}

// ---------------------------------------------------------------------------------------------------------------
// A request as sent, described for the failure list.
type Req = {
  label: string;
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
};

/** `portal`: no Authorization, the cookie of workspace A's live portal session (every scope, for A's externalId, who owns no key). */
type Auth = "root" | "noPerm" | "admin" | "badAdmin" | "portal" | "none";

/** A starting point a barrage mutates: a body (POST) or query (GET) that is not allowed as it stands. */
type Base = {
  label: string;
  input: any;
  auth: Auth;
  /** Properties whose schema-valid mutations could make the request allowed (they are dropped). */
  guard?: string[];
};

const RAW = (i: number) => `__RAW_${i}__`;

/** JSON text of `value` with the sentinel strings replaced by raw JSON text (escapes JSON.stringify would not write). */
function withRaw(value: unknown, raws: string[]): string {
  let text = JSON.stringify(value);
  raws.forEach((raw, i) => {
    text = text.replace(`"${RAW(i)}"`, () => raw);
  });
  return text;
}

const HUGE = "a".repeat(100_000);
const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
const deepArray = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

/** Raw JSON values every property gets in turn. */
const VALUES: Array<[string, string]> = [
  ["string", '"x"'],
  ["empty string", '""'],
  ["zero", "0"],
  ["-1", "-1"],
  ["1.5", "1.5"],
  ["1e308", "1e308"],
  ["-1e308", "-1e308"],
  ["2**53+1", "9007199254740993"],
  ["2**31", "2147483648"],
  ["1e-7", "1e-7"],
  ["true", "true"],
  ["false", "false"],
  ["null", "null"],
  ["[]", "[]"],
  ["{}", "{}"],
  ['["x"]', '["x"]'],
  ["[1]", "[1]"],
  ["[mixed]", '[null,1,"x",{},[],true]'],
  ['{"a":1}', '{"a":1}'],
  ["100k string", JSON.stringify(HUGE)],
  ['"NaN"', '"NaN"'],
  ['"Infinity"', '"Infinity"'],
  ['"-1"', '"-1"'],
  ['"1e308"', '"1e308"'],
  ['"9007199254740993"', '"9007199254740993"'],
  ["lone high surrogate", '"\\ud800"'],
  ["lone low surrogate inside", '"a\\udc00b"'],
  ["NUL", '"\\u0000"'],
  ["NUL inside", '"x\\u0000y"'],
  ["surrogate property name", '{"\\ud800":1}'],
  ["NUL property name", '{"\\u0000":1}'],
  ["__proto__", '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}'],
  ["depth 5000 object", deepObject(5000)],
  ["depth 5000 array", deepArray(5000)],
  ["depth 60 object", deepObject(60)],
  ["emoji and RTL", '"\\ud83d\\ude00\\u202e\\u200b\\ufeff"'],
];

/** Fewer values for nested properties (one level down), to keep the barrage within its time. */
const NESTED_VALUES = VALUES.filter(([l]) =>
  [
    "string",
    "empty string",
    "-1",
    "1.5",
    "1e308",
    "2**53+1",
    "2**31",
    "true",
    "null",
    "[]",
    "{}",
    "100k string",
    "lone high surrogate",
    "NUL",
    "depth 5000 object",
  ].includes(l),
);

// ---------------------------------------------------------------------------------------------------------------
// Per route: the bases its barrage starts from. `ids(f)` gives the ids to use: missing ones, or workspace B's.
type Ids = {
  apiId: string;
  keyId: string;
  roleId: string;
  permissionId: string;
  identityId: string;
  namespaceId: string;
  migrationId: string;
  key: string;
  externalId: string;
  namespaceName: string;
  portalId: string;
};
const missingIds = (): Ids => MISSING;
const foreignIds = (): Ids => B;
const FAR = 4_102_444_800_000; // 2100-01-01

/** Both flavours of a base that uses ids: ids that do not exist, and ids of another workspace. */
function both(make: (ids: Ids) => any, auth: Auth = "root"): Base[] {
  return [
    { label: "missing ids", input: make(missingIds()), auth },
    { label: "ids of another workspace", input: make(foreignIds()), auth },
  ];
}

const keyFields = (ids: Ids) => ({
  prefix: "rb",
  name: "robust",
  ownerId: "owner",
  externalId: ids.externalId,
  meta: { plan: "pro", nested: { a: [1, 2] } },
  roles: ["role-a"],
  permissions: ["perm.a"],
  expires: FAR,
  remaining: 10,
  refill: { interval: "daily", amount: 10 },
  enabled: true,
  environment: "test",
});

/** v2's keys.createKey/updateKey fields, every one set. */
const v2KeyFields = (ids: Ids) => ({
  prefix: "rb",
  name: "robust",
  externalId: "robust-user",
  meta: { plan: "pro", nested: { a: [1, 2] }, ext: ids.externalId },
  roles: ["role-a"],
  permissions: ["perm.a"],
  expires: FAR,
  credits: { remaining: 10, refill: { interval: "monthly", amount: 10, refillDay: 3 } },
  ratelimits: [{ name: "requests", limit: 10, duration: 60_000, autoApply: true }],
  enabled: true,
});

const SPECS: Record<string, () => Base[]> = {
  "GET /v1/liveness": () => [{ label: "no query", input: {}, auth: "none" }],
  "GET /v1/readiness": () => [{ label: "no query", input: {}, auth: "none" }],
  "POST /v1/apis.createApi": () => [
    {
      label: "root key without permissions",
      input: { name: "robust-api", storeEncryptedKeys: true, defaultPrefix: "rb", defaultBytes: 16, deleteProtection: false },
      auth: "noPerm",
    },
  ],
  "GET /v1/apis.getApi": () => both((ids) => ({ apiId: ids.apiId })),
  "POST /v1/apis.deleteApi": () => both((ids) => ({ apiId: ids.apiId })),
  "POST /v1/apis.updateApi": () => both((ids) => ({ apiId: ids.apiId, ipWhitelist: "10.0.0.1, 2001:db8::1" })),
  "POST /v1/apis.deleteKeys": () => both((ids) => ({ apiId: ids.apiId, permanent: false })),
  "GET /v1/apis.listKeys": () =>
    both((ids) => ({
      apiId: ids.apiId,
      limit: "10",
      cursor: "key_0",
      ownerId: "o",
      externalId: ids.externalId,
      decrypt: "false",
      revalidateKeysCache: "false",
    })),
  "POST /v1/keys.verifyKey": () => [
    ...both(
      (ids) => ({
        key: ids.key === B.key ? MISSING.key : ids.key,
        apiId: ids.apiId,
        tags: ["t1", "t2"],
        authorization: { permissions: { and: ["perm.a", { or: ["perm.b", "perm.c"] }] } },
        remaining: { cost: 1 },
        ratelimit: { cost: 1 },
        ratelimits: [{ name: "requests", cost: 1, limit: 10, duration: 60_000 }],
      }),
      "none",
    ),
  ],
  "POST /v1/keys.createKey": () => [
    ...both((ids) => ({
      apiId: ids.apiId,
      byteLength: 16,
      ...keyFields(ids),
      ratelimit: { async: true, limit: 10, duration: 60_000 },
      recoverable: false,
    })),
    {
      label: "root key without permissions",
      input: {
        apiId: "__A_API__",
        byteLength: 16,
        ...keyFields(MISSING),
        ratelimit: { async: true, limit: 10, duration: 60_000 },
        recoverable: false,
      },
      auth: "noPerm",
    },
  ],
  "POST /v1/keys.deleteKey": () => both((ids) => ({ keyId: ids.keyId, permanent: false })),
  "POST /v1/keys.updateRemaining": () => both((ids) => ({ keyId: ids.keyId, op: "set", value: 5 })),
  "POST /v1/keys.updateKey": () =>
    both((ids) => ({
      keyId: ids.keyId,
      name: "n",
      ownerId: "o",
      externalId: ids.externalId,
      meta: { a: 1 },
      expires: FAR,
      ratelimit: { async: true, limit: 10, duration: 60_000 },
      remaining: 10,
      refill: { interval: "monthly", amount: 10, refillDay: 3 },
      enabled: true,
      environment: "test",
      roles: [{ name: "role-a", create: true }],
      permissions: [{ name: "perm.a", create: true }],
    })),
  "GET /v1/keys.getKey": () => both((ids) => ({ keyId: ids.keyId, decrypt: "true" })),
  "POST /v1/keys.whoami": () => [
    { label: "missing key", input: { key: MISSING.key }, auth: "root" },
    { label: "key of another workspace", input: { key: "__B_KEY__" }, auth: "root" },
  ],
  "POST /v1/keys.addPermissions": () =>
    both((ids) => ({ keyId: ids.keyId, permissions: [{ name: "perm.new", create: true }, { id: ids.permissionId }] })),
  "POST /v1/keys.removePermissions": () =>
    both((ids) => ({ keyId: ids.keyId, permissions: [{ id: ids.permissionId }, { name: "perm.a" }] })),
  "POST /v1/keys.setPermissions": () =>
    both((ids) => ({ keyId: ids.keyId, permissions: [{ name: "perm.new", create: true }, { id: ids.permissionId }] })),
  "POST /v1/keys.addRoles": () => both((ids) => ({ keyId: ids.keyId, roles: [{ name: "role-new", create: true }, { id: ids.roleId }] })),
  "POST /v1/keys.removeRoles": () => both((ids) => ({ keyId: ids.keyId, roles: [{ id: ids.roleId }, { name: "role-a" }] })),
  "POST /v1/keys.setRoles": () => both((ids) => ({ keyId: ids.keyId, roles: [{ name: "role-new", create: true }, { id: ids.roleId }] })),
  "GET /v1/keys.getVerifications": () => [
    ...both((ids) => ({ keyId: ids.keyId, start: "0", end: String(FAR), granularity: "day" })),
    { label: "missing ownerId", input: { ownerId: "owner-missing", start: "0", end: String(FAR) }, auth: "root" },
  ],
  "POST /v1/migrations.createKeys": () => [
    ...both((ids) => [
      {
        apiId: ids.apiId,
        plaintext: "sk_robust_plaintext_0123456789",
        start: "sk_robust",
        ...keyFields(ids),
        ratelimit: { async: false, type: "fast", limit: 10, refillRate: 10, refillInterval: 1000 },
      },
      { apiId: ids.apiId, hash: { value: "i4wPHdL316Ad/9xCZ+3ItroneDEAtVKFq6p772fNdvE=", variant: "sha256_base64" } },
    ]),
    {
      label: "root key without permissions",
      input: [{ apiId: "__A_API__", plaintext: "sk_robust_plaintext_0123456789", ...keyFields(MISSING) }],
      auth: "noPerm",
    },
  ],
  "POST /v1/migrations.enqueueKeys": () => [
    ...both((ids) => ({
      migrationId: "mig-robust",
      apiId: ids.apiId,
      keys: [
        { plaintext: "sk_robust_enqueued_0123456789", ...keyFields(ids) },
        { hash: { value: "i4wPHdL316Ad/9xCZ+3ItroneDEAtVKFq6p772fNdvE=", variant: "sha256_base64" } },
      ],
    })),
    {
      label: "root key without permissions",
      input: { migrationId: "mig-robust", apiId: "__A_API__", keys: [{ plaintext: "sk_robust_enqueued_0123456789" }] },
      auth: "noPerm",
    },
  ],
  "GET /v1/migrations.getMigration": () => both((ids) => ({ migrationId: ids.migrationId })),
  "GET /v1/analytics.getVerifications": () =>
    both((ids) => ({
      apiId: ids.apiId,
      externalId: ids.externalId,
      keyId: ids.keyId,
      tag: "t1",
      start: "0",
      end: String(FAR),
      groupBy: "key",
      limit: "10",
      orderBy: "total",
      order: "desc",
    })),
  "POST /v1/permissions.createPermission": () => [
    {
      label: "name that exists",
      input: { name: "__A_PERM__", slug: "__A_PERM__", description: "d" },
      auth: "root",
      guard: ["name", "slug"],
    },
    { label: "root key without permissions", input: { name: "perm.robust", slug: "perm.robust", description: "d" }, auth: "noPerm" },
  ],
  "POST /v1/permissions.createRole": () => [
    { label: "name that exists", input: { name: "__A_ROLE__", description: "d" }, auth: "root", guard: ["name"] },
    { label: "root key without permissions", input: { name: "role-robust", description: "d" }, auth: "noPerm" },
  ],
  "GET /v1/permissions.getPermission": () => both((ids) => ({ permissionId: ids.permissionId })),
  "GET /v1/permissions.listPermissions": () => [{ label: "no query", input: {}, auth: "root" }],
  "POST /v1/permissions.deletePermission": () => both((ids) => ({ permissionId: ids.permissionId })),
  "GET /v1/permissions.getRole": () => both((ids) => ({ roleId: ids.roleId })),
  "GET /v1/permissions.listRoles": () => [{ label: "no query", input: {}, auth: "root" }],
  "POST /v1/permissions.deleteRole": () => both((ids) => ({ roleId: ids.roleId })),
  "POST /v1/permissions.addPermissionsToRole": () =>
    both((ids) => ({ roleId: ids.roleId, permissions: [{ id: ids.permissionId }, { slug: "perm.a" }] })),
  "POST /v1/permissions.removePermissionsFromRole": () =>
    both((ids) => ({ roleId: ids.roleId, permissions: [{ id: ids.permissionId }, { slug: "perm.a" }] })),
  "POST /v1/identities.createIdentity": () => [
    {
      label: "externalId that exists",
      input: { externalId: "__A_EXT__", meta: { a: 1 }, ratelimits: [{ name: "tokens", limit: 10, duration: 60_000 }] },
      auth: "root",
      guard: ["externalId"],
    },
    {
      label: "root key without permissions",
      input: { externalId: "user-robust", meta: { a: 1 }, ratelimits: [{ name: "tokens", limit: 10, duration: 60_000 }] },
      auth: "noPerm",
    },
  ],
  "GET /v1/identities.getIdentity": () => [
    ...both((ids) => ({ identityId: ids.identityId })),
    ...both((ids) => ({ externalId: ids.externalId })).map((b) => ({ ...b, label: `${b.label} (externalId)` })),
  ],
  "GET /v1/identities.listIdentities": () => [
    { label: "query", input: { environment: "default", limit: "10", cursor: "id_0" }, auth: "root" },
  ],
  "POST /v1/identities.updateIdentity": () => [
    ...both((ids) => ({
      identityId: ids.identityId,
      environment: "default",
      meta: { a: 1 },
      ratelimits: [{ name: "tokens", limit: 10, duration: 60_000 }],
    })),
    ...both((ids) => ({ externalId: ids.externalId, meta: { a: 1 }, ratelimits: [{ name: "tokens", limit: 10, duration: 60_000 }] })).map(
      (b) => ({
        ...b,
        label: `${b.label} (externalId)`,
      }),
    ),
  ],
  "POST /v1/identities.deleteIdentity": () => both((ids) => ({ identityId: ids.identityId })),
  "POST /v1/ratelimits.limit": () => [
    {
      label: "root key without permissions",
      input: {
        namespace: "ns-robust",
        identifier: "someone",
        limit: 10,
        duration: 60_000,
        cost: 1,
        async: false,
        meta: { a: 1 },
        resources: [{ type: "project", id: "p1", name: "P", meta: { a: 1 } }],
      },
      auth: "noPerm",
    },
  ],
  "POST /v1/ratelimits.setOverride": () => [
    ...both((ids) => ({ namespaceId: ids.namespaceId, identifier: "someone", limit: 5, duration: 60_000, async: false })),
    ...both((ids) => ({ namespaceName: ids.namespaceName, identifier: "someone", limit: 5, duration: 60_000, async: false })).map((b) => ({
      ...b,
      label: `${b.label} (namespaceName)`,
    })),
  ],
  "GET /v1/ratelimits.getOverride": () => [
    ...both((ids) => ({ namespaceId: ids.namespaceId, identifier: "someone" })),
    ...both((ids) => ({ namespaceName: ids.namespaceName, identifier: "someone" })).map((b) => ({
      ...b,
      label: `${b.label} (namespaceName)`,
    })),
  ],
  "GET /v1/ratelimits.listOverrides": () => [
    ...both((ids) => ({ namespaceId: ids.namespaceId, limit: "10", cursor: "x" })),
    ...both((ids) => ({ namespaceName: ids.namespaceName, limit: "10" })).map((b) => ({ ...b, label: `${b.label} (namespaceName)` })),
  ],
  "GET /v1/ratelimits.listNamespaces": () => [{ label: "query", input: { limit: "10", cursor: "ns-a" }, auth: "root" }],
  "POST /v1/ratelimits.deleteOverride": () => [
    ...both((ids) => ({ namespaceId: ids.namespaceId, identifier: "someone" })),
    ...both((ids) => ({ namespaceName: ids.namespaceName, identifier: "someone" })).map((b) => ({
      ...b,
      label: `${b.label} (namespaceName)`,
    })),
  ],
  "POST /v1/workspaces.createWorkspace": () => [{ label: "wrong admin token", input: { name: "robust-ws" }, auth: "badAdmin" }],
  "POST /v1/workspaces.updateWorkspace": () => [
    { label: "missing workspace", input: { workspaceId: MISSING.workspaceId, enabled: false }, auth: "admin" },
    { label: "wrong admin token", input: { workspaceId: "__B_WS__", enabled: false }, auth: "badAdmin" },
  ],
  "POST /v1/rootKeys.createRootKey": () => [
    { label: "missing workspace", input: { workspaceId: MISSING.workspaceId, name: "rk", permissions: ["*"] }, auth: "admin" },
    { label: "wrong admin token", input: { workspaceId: "__B_WS__", name: "rk", permissions: ["*"] }, auth: "badAdmin" },
  ],
  "POST /v1/rootKeys.deleteRootKey": () => [
    { label: "missing root key", input: { keyId: MISSING.keyId }, auth: "admin" },
    { label: "wrong admin token", input: { keyId: "__B_ROOTKEY__" }, auth: "badAdmin" },
  ],
  "GET /v1/workspaces.listWorkspaces": () => [
    { label: "a page", input: { limit: "10", cursor: "ws_a" }, auth: "admin" },
    { label: "wrong admin token", input: {}, auth: "badAdmin" },
  ],
  "GET /v1/rootKeys.listRootKeys": () => [
    { label: "missing workspace", input: { workspaceId: MISSING.workspaceId }, auth: "admin" },
    { label: "wrong admin token", input: { workspaceId: "__B_WS__" }, auth: "badAdmin" },
  ],
  "POST /v1/migrations.retryMigration": () => [
    { label: "missing migration", input: { workspaceId: "__B_WS__", migrationId: "never-enqueued" }, auth: "admin" },
    { label: "wrong admin token", input: { workspaceId: "__B_WS__", migrationId: "m" }, auth: "badAdmin" },
  ],
  // Unkey v2 (issue 14): the same barrage, answered in v2's error envelope.
  "GET /v2/liveness": () => [{ label: "no body", input: {}, auth: "none" }],
  "POST /v2/apis.createApi": () => [{ label: "root key without permissions", input: { name: "robust-api" }, auth: "noPerm" }],
  "POST /v2/apis.getApi": () => both((ids) => ({ apiId: ids.apiId })),
  "POST /v2/apis.deleteApi": () => both((ids) => ({ apiId: ids.apiId })),
  "POST /v2/apis.listKeys": () =>
    both((ids) => ({ apiId: ids.apiId, limit: 10, cursor: "key_0", externalId: ids.externalId, decrypt: true, revalidateKeysCache: true })),
  "POST /v2/keys.getKey": () => both((ids) => ({ keyId: ids.keyId, decrypt: true })),
  "POST /v2/keys.whoami": () => [
    { label: "missing key", input: { key: MISSING.key }, auth: "root" },
    { label: "key of another workspace", input: { key: "__B_KEY__" }, auth: "root" },
  ],
  "POST /v2/keys.deleteKey": () => both((ids) => ({ keyId: ids.keyId, permanent: false })),
  "POST /v2/keys.updateCredits": () => both((ids) => ({ keyId: ids.keyId, operation: "increment", value: 5 })),
  "POST /v2/keys.verifyKey": () =>
    both((ids) => ({
      key: ids.key,
      tags: ["t1", "t2"],
      permissions: "perm.a AND (perm.b OR perm.c)",
      credits: { cost: 1 },
      ratelimits: [{ name: "requests", cost: 1, limit: 10, duration: 60_000 }],
      migrationId: "mig_robust",
    })),
  "POST /v2/keys.addPermissions": () => both((ids) => ({ keyId: ids.keyId, permissions: ["perm.new", "perm.a"] })),
  "POST /v2/keys.removePermissions": () => both((ids) => ({ keyId: ids.keyId, permissions: ["perm.a"] })),
  "POST /v2/keys.setPermissions": () => both((ids) => ({ keyId: ids.keyId, permissions: ["perm.new", "perm.a"] })),
  "POST /v2/keys.addRoles": () => both((ids) => ({ keyId: ids.keyId, roles: ["role-a"] })),
  "POST /v2/keys.removeRoles": () => both((ids) => ({ keyId: ids.keyId, roles: ["role-a"] })),
  "POST /v2/keys.setRoles": () => both((ids) => ({ keyId: ids.keyId, roles: ["role-a"] })),
  "POST /v2/keys.createKey": () => [
    ...both((ids) => ({ apiId: ids.apiId, ...v2KeyFields(ids), byteLength: 16, recoverable: false })),
    { label: "root key without permissions", input: { apiId: "__A_API__", ...v2KeyFields(MISSING), recoverable: true }, auth: "noPerm" },
  ],
  "POST /v2/keys.updateKey": () =>
    both((ids) => {
      const { prefix: _, ...fields } = v2KeyFields(ids);
      return { keyId: ids.keyId, ...fields, name: null, credits: { remaining: null, refill: null } };
    }),
  "POST /v2/keys.rerollKey": () => both((ids) => ({ keyId: ids.keyId, expiration: 60_000 })),
  "POST /v2/keys.migrateKeys": () =>
    both((ids) => ({
      migrationId: "mig-robust",
      apiId: ids.apiId,
      keys: [
        {
          hash: "robust-migrated-hash",
          name: "robust",
          externalId: ids.externalId,
          meta: { a: 1 },
          roles: ["role-a"],
          permissions: ["perm.a"],
          expires: FAR,
          enabled: true,
          credits: { remaining: 10, refill: { interval: "daily", amount: 10 } },
          ratelimits: [{ name: "tokens", limit: 10, duration: 60_000, autoApply: true }],
        },
      ],
    })),
  "POST /v2/keyhaven.listAuditLogs": () => [{ label: "root key without permissions", input: { limit: 10 }, auth: "noPerm" }],
  "POST /v2/keyhaven.copyFromUnkey": () => [
    {
      label: "root key without permissions",
      input: {
        apis: [{ id: "api_robust_copy", name: "robust api" }],
        permissions: [{ id: "perm_robust_copy", name: "robust", slug: "robust.copy", description: "d" }],
        roles: [{ id: "role_robust_copy", name: "robust-role", description: "d", permissions: ["robust.copy"] }],
        identities: [
          {
            id: "id_robust_copy",
            externalId: "robust-copy",
            meta: { a: 1 },
            ratelimits: [{ name: "tokens", limit: 10, duration: 60_000, autoApply: true }],
          },
        ],
        keys: [
          {
            id: "key_robust_copy",
            apiId: "api_robust_copy",
            start: "uk_ab",
            createdAt: 1_700_000_000_000,
            name: "robust",
            meta: { a: 1 },
            expires: FAR,
            enabled: true,
            credits: { remaining: 10, refill: { interval: "monthly", amount: 10, refillDay: 1 } },
            ratelimits: [{ name: "tokens", limit: 10, duration: 60_000, autoApply: true }],
            roles: ["robust-role"],
            permissions: ["robust.copy"],
            identityId: "id_robust_copy",
            plaintext: "uk_robust_copy_plaintext",
            recoverable: true,
          },
        ],
        overrides: [{ namespace: "robust-ns", identifier: "robust", limit: 10, duration: 60_000 }],
      },
      auth: "noPerm",
    },
  ],
  "POST /v2/keyhaven.getCopyStatus": () => both((ids) => ({ apiIds: [ids.apiId] })),
  "POST /v2/keyhaven.listPendingKeys": () => both((ids) => ({ apiId: ids.apiId, limit: 10, cursor: "key_0" })),
  // Webhooks: refused before anything is looked up (no permission) or for ids that do not exist, so that no mutated
  // URL is ever resolved or sent to, and nothing is written.
  "POST /v2/keyhaven.createWebhook": () => [
    {
      label: "root key without permissions",
      input: { url: "https://203.0.113.10/robust", events: ["key.create"], description: "d" },
      auth: "noPerm",
    },
  ],
  "POST /v2/keyhaven.listWebhooks": () => [{ label: "root key without permissions", input: {}, auth: "noPerm" }],
  "POST /v2/keyhaven.updateWebhook": () => [
    {
      label: "missing webhook",
      input: { webhookId: "wh_missing", url: "https://203.0.113.10/robust", events: ["key.create"], description: "d", enabled: false },
      auth: "root",
    },
  ],
  "POST /v2/keyhaven.deleteWebhook": () => [{ label: "missing webhook", input: { webhookId: "wh_missing" }, auth: "root" }],
  "POST /v2/keyhaven.listWebhookDeliveries": () => [
    { label: "missing webhook", input: { webhookId: "wh_missing", status: "failed", limit: 10 }, auth: "root" },
  ],
  "POST /v2/keyhaven.replayWebhookDelivery": () => [{ label: "missing delivery", input: { deliveryId: "msg_missing" }, auth: "root" }],
  "POST /v2/keyhaven.getAlertThresholds": () => [{ label: "missing api", input: { apiId: "api_missing" }, auth: "root" }],
  "POST /v2/keyhaven.setAlertThresholds": () => [
    { label: "missing key", input: { keyId: "key_missing", creditsLow: { percent: 20 }, expiringWithinMs: 60_000 }, auth: "root" },
  ],
  // Customer portals: minting refused (no permission, or a portal not the workspace's); the session's routes with a
  // live session of A's whose end user owns no key (so no reroll can succeed) and reads that write nothing.
  "POST /v2/portal.createSession": () => [
    {
      label: "root key without permissions",
      input: { portal: "__A_PORTAL__", externalId: "robust-user", scopes: ["keys:read", "analytics:read"], preview: true },
      auth: "noPerm",
    },
    ...both((ids) => ({ portal: ids.portalId, externalId: ids.externalId, scopes: ["keys:read"], returnUrl: "https://example.com/" })),
  ],
  "POST /v2/portal.exchangeCode": () => [{ label: "unknown code", input: { code: "pst_111111111111111111111111" }, auth: "none" }],
  "POST /v2/portal.listKeys": () => [{ label: "query", input: { limit: 10, cursor: "key_0" }, auth: "portal" }],
  "POST /v2/portal.rerollKey": () => [
    ...both((ids) => ({ keyId: ids.keyId, expiration: 60_000 }), "portal"),
    { label: "a key of the workspace's not the end user's", input: { keyId: "__A_KEY__", expiration: 0 }, auth: "portal" },
  ],
  "POST /v2/portal.getVerifications": () => [
    { label: "query", input: { startTime: 1_700_000_000_000, endTime: 1_700_003_600_000, keyId: "__A_KEY__" }, auth: "portal" },
  ],
  "POST /v2/keyhaven.createPortal": () => [
    {
      label: "root key without permissions",
      input: {
        apiId: "__A_API__",
        slug: "robust-new",
        name: "robust",
        returnUrl: "https://example.com/back",
        branding: { title: "t", accentColor: "#112233", logoUrl: "https://example.com/logo.png" },
      },
      auth: "noPerm",
    },
  ],
  "POST /v2/keyhaven.getPortal": () => both((ids) => ({ portalId: ids.portalId })),
  "POST /v2/keyhaven.listPortals": () => [{ label: "query", input: { limit: 10, cursor: "pc_0", apiId: "__A_API__" }, auth: "root" }],
  "POST /v2/keyhaven.updatePortal": () =>
    both((ids) => ({
      portalId: ids.portalId,
      slug: "robust-renamed",
      name: "renamed",
      enabled: false,
      returnUrl: null,
      branding: { title: null, accentColor: "#abcdef", logoUrl: null },
    })),
  "POST /v2/keyhaven.deletePortal": () => both((ids) => ({ portalId: ids.portalId })),
  "POST /v2/keyhaven.createMigration": () => [
    { label: "root key without permissions", input: { migrationId: "mig-robust", algorithm: "sha256" }, auth: "noPerm" },
  ],
  "POST /v2/identities.createIdentity": () => [
    {
      label: "externalId that exists",
      input: { externalId: "__A_EXT__", meta: { a: 1 }, ratelimits: [{ name: "tokens", limit: 10, duration: 60_000, autoApply: true }] },
      auth: "root",
      guard: ["externalId"],
    },
    {
      label: "root key without permissions",
      input: { externalId: "user-robust", meta: { a: 1 }, ratelimits: [{ name: "tokens", limit: 10, duration: 60_000, autoApply: true }] },
      auth: "noPerm",
    },
  ],
  "POST /v2/identities.getIdentity": () => [
    ...both((ids) => ({ identity: ids.identityId })),
    ...both((ids) => ({ identity: ids.externalId })).map((b) => ({ ...b, label: `${b.label} (externalId)` })),
  ],
  "POST /v2/identities.listIdentities": () => [{ label: "query", input: { limit: 10, cursor: "id_0", search: "user" }, auth: "root" }],
  "POST /v2/identities.updateIdentity": () =>
    both((ids) => ({
      identity: ids.identityId,
      meta: { a: 1 },
      ratelimits: [{ name: "tokens", limit: 10, duration: 60_000, autoApply: false }],
    })),
  "POST /v2/identities.deleteIdentity": () => both((ids) => ({ identity: ids.identityId })),
  "POST /v2/permissions.createPermission": () => [
    { label: "slug that exists", input: { name: "n", slug: "__A_PERM__", description: "d" }, auth: "root", guard: ["slug"] },
    { label: "root key without permissions", input: { name: "perm.robust", slug: "perm.robust", description: "d" }, auth: "noPerm" },
  ],
  "POST /v2/permissions.getPermission": () => both((ids) => ({ permission: ids.permissionId })),
  "POST /v2/permissions.listPermissions": () => [{ label: "query", input: { limit: 10, cursor: "perm_0", search: "perm" }, auth: "root" }],
  "POST /v2/permissions.deletePermission": () => both((ids) => ({ permission: ids.permissionId })),
  "POST /v2/permissions.createRole": () => [
    { label: "name that exists", input: { name: "__A_ROLE__", description: "d", permissions: ["perm.a"] }, auth: "root", guard: ["name"] },
    { label: "root key without permissions", input: { name: "role-robust", description: "d", permissions: ["perm.a"] }, auth: "noPerm" },
  ],
  "POST /v2/permissions.setRolePermissions": () => both((ids) => ({ roleId: ids.roleId, permissions: ["perm.a", "perm.new"] })),
  "POST /v2/permissions.getRole": () => both((ids) => ({ role: ids.roleId })),
  "POST /v2/permissions.listRoles": () => [{ label: "query", input: { limit: 10, cursor: "role_0", search: "role" }, auth: "root" }],
  "POST /v2/permissions.deleteRole": () => both((ids) => ({ role: ids.roleId })),
  "POST /v2/ratelimit.limit": () => [
    {
      label: "root key without permissions",
      input: { namespace: "ns-robust", identifier: "someone", limit: 10, duration: 60_000, cost: 1 },
      auth: "noPerm",
    },
    ...both((ids) => ({ namespace: ids.namespaceId, identifier: "someone", limit: 10, duration: 60_000 }), "noPerm"),
  ],
  "POST /v2/ratelimit.multiLimit": () => [
    {
      label: "root key without permissions",
      input: [{ namespace: "ns-robust", identifier: "someone", limit: 10, duration: 60_000, cost: 1 }],
      auth: "noPerm",
    },
  ],
  "POST /v2/analytics.getVerifications": () => [
    { label: "root key without permissions", input: { query: "SELECT count(*) FROM key_verifications_v1" }, auth: "noPerm" },
  ],
  "POST /v2/ratelimit.setOverride": () => [
    ...both((ids) => ({ namespace: ids.namespaceId, identifier: "someone", limit: 5, duration: 60_000 })),
    ...both((ids) => ({ namespace: ids.namespaceName, identifier: "someone", limit: 5, duration: 60_000 })).map((b) => ({
      ...b,
      label: `${b.label} (name)`,
    })),
  ],
  "POST /v2/ratelimit.getOverride": () => [
    ...both((ids) => ({ namespace: ids.namespaceId, identifier: "someone" })),
    ...both((ids) => ({ namespace: ids.namespaceName, identifier: "someone" })).map((b) => ({ ...b, label: `${b.label} (name)` })),
  ],
  "POST /v2/ratelimit.listOverrides": () => [
    ...both((ids) => ({ namespace: ids.namespaceId, limit: 10, cursor: "x" })),
    ...both((ids) => ({ namespace: ids.namespaceName, limit: 10 })).map((b) => ({ ...b, label: `${b.label} (name)` })),
  ],
  "POST /v2/ratelimit.deleteOverride": () => [
    ...both((ids) => ({ namespace: ids.namespaceId, identifier: "someone" })),
    ...both((ids) => ({ namespace: ids.namespaceName, identifier: "someone" })).map((b) => ({ ...b, label: `${b.label} (name)` })),
  ],
};

/** Replaces the placeholders for workspace A's and B's values (known only after the fixtures exist). */
function resolvePlaceholders(v: any): any {
  if (typeof v === "string") {
    const map: Record<string, string> = {
      __A_API__: A.apiId,
      __A_PERM__: A.permissionName,
      __A_ROLE__: A.roleName,
      __A_EXT__: A.externalId,
      __A_KEY__: A.keyId,
      __A_PORTAL__: A.portalId,
      __B_KEY__: B.key,
      __B_WS__: B.t.workspaceId,
      __B_ROOTKEY__: B.t.rootKeyId,
    };
    return map[v] ?? v;
  }
  if (Array.isArray(v)) return v.map(resolvePlaceholders);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, resolvePlaceholders(x)]));
  return v;
}

function authHeader(auth: Auth): Record<string, string> {
  switch (auth) {
    case "root":
      return { authorization: `Bearer ${A.t.rootKey}` };
    case "noPerm":
      return { authorization: `Bearer ${A.noPermKey}` };
    case "admin":
      return { authorization: `Bearer ${ADMIN_TOKEN}` };
    case "badAdmin":
      return { authorization: `Bearer ${ADMIN_TOKEN}-wrong` };
    case "portal":
      return { cookie: `portal_session=${A.portalToken}` };
    case "none":
      return {};
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Building the barrage.

/** Mutations of a JSON body: each a label and the raw JSON text (or other payload) to send. */
function bodyMutations(base: Base, seed: number): Array<{ label: string; payload: string | Buffer; contentType?: string | null }> {
  const out: Array<{ label: string; payload: string | Buffer; contentType?: string | null }> = [];
  const input = base.input;
  const guard = new Set(base.guard ?? []);
  const isArrayBody = Array.isArray(input);
  const root: Record<string, unknown> = isArrayBody ? input[0] : input;
  const wrap = (obj: Record<string, unknown>) => (isArrayBody ? [obj, ...input.slice(1)] : obj);
  // On a guarded property, a string that could be stored (non-empty, no NUL, no lone surrogate) could make the
  // request allowed (an emoji externalId is a valid new identity): such values are left out.
  const guarded = (prop: string, raw: string) => {
    if (!guard.has(prop)) return false;
    const v = JSON.parse(raw);
    return typeof v === "string" && v !== "" && !v.includes("\u0000") && v.isWellFormed();
  };

  // 1. Each top-level property (of the item, for an array body) replaced by each value.
  for (const prop of Object.keys(root)) {
    for (const [vl, raw] of VALUES) {
      if (guarded(prop, raw)) continue;
      out.push({ label: `${prop} = ${vl}`, payload: withRaw(wrap({ ...root, [prop]: RAW(0) }), [raw]) });
    }
    // Where an array is expected: 10,000 elements (copies of the first, or strings).
    const v = root[prop];
    if (Array.isArray(v)) {
      const el = v.length ? v[0] : "x";
      out.push({
        label: `${prop} = 10,000 elements`,
        payload: JSON.stringify(wrap({ ...root, [prop]: Array.from({ length: 10_000 }, () => el) })),
      });
      out.push({
        label: `${prop} = 10,000 numbers`,
        payload: JSON.stringify(wrap({ ...root, [prop]: Array.from({ length: 10_000 }, (_, i) => i) })),
      });
      // One level down, inside the first element.
      if (el && typeof el === "object" && !Array.isArray(el)) {
        for (const sub of Object.keys(el)) {
          for (const [vl, raw] of NESTED_VALUES) {
            out.push({
              label: `${prop}[0].${sub} = ${vl}`,
              payload: withRaw(wrap({ ...root, [prop]: [{ ...el, [sub]: RAW(0) }, ...v.slice(1)] }), [raw]),
            });
          }
        }
      }
    } else if (v && typeof v === "object") {
      for (const sub of Object.keys(v)) {
        for (const [vl, raw] of NESTED_VALUES) {
          out.push({
            label: `${prop}.${sub} = ${vl}`,
            payload: withRaw(wrap({ ...root, [prop]: { ...(v as object), [sub]: RAW(0) } }), [raw]),
          });
        }
      }
    }
    // The property missing.
    if (!guard.has(prop)) {
      const { [prop]: _, ...rest } = root;
      out.push({ label: `${prop} missing`, payload: JSON.stringify(wrap(rest)) });
    }
  }
  // 2. Unknown extra fields (sent only on bases that are not allowed anyway).
  out.push({ label: "unknown extra fields", payload: JSON.stringify(wrap({ ...root, unknownField: 1, another: { x: [1] } })) });
  out.push({
    label: "__proto__ and constructor fields",
    payload: withRaw(wrap({ ...root, zzz: RAW(0) }), ['1,"__proto__":{"admin":true},"constructor":{"prototype":{"admin":true}}']),
  });
  out.push({ label: "duplicate property", payload: JSON.stringify(wrap(root)).replace(/^(\[?)\{/, '$1{"zz":1,') });
  // 3. The whole body.
  const baseText = JSON.stringify(input);
  const whole: Array<[string, string | Buffer]> = [
    ["empty body", ""],
    ["whitespace body", "   \n"],
    ["truncated JSON", baseText.slice(0, Math.max(1, Math.floor(baseText.length / 2)))],
    ["trailing garbage", `${baseText}}`],
    ["two documents", `${baseText}${baseText}`],
    ["single quotes", baseText.replaceAll('"', "'")],
    ["NaN literal", '{"x":NaN}'],
    ["comment", `/* c */${baseText}`],
    ["BOM prefix", `\ufeff${baseText}`],
    ["null body", "null"],
    ["number body", "123"],
    ["string body", '"text"'],
    ["true body", "true"],
    ["empty object", "{}"],
    ["empty array", "[]"],
    ["array of null", "[null]"],
    ["array of base", isArrayBody ? "[[]]" : `[${baseText}]`],
    ["depth 5000 body", deepObject(5000)],
    ["depth 65 body", deepObject(65)],
    ["lone surrogate escape in body key", `{"\\udfff":1}`],
    ["invalid UTF-8", Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0xed, 0xa0, 0x80, 0x22, 0x3a, 0x31, 0x7d])],
    ["1.1 MB body", JSON.stringify({ ...root, padding: "p".repeat(1_150_000) })],
  ];
  for (const [l, p] of whole) out.push({ label: l, payload: p });
  // 4. Content types.
  const ctypes: Array<[string, string | null]> = [
    ["no content-type", null],
    ["text/plain", "text/plain"],
    ["form", "application/x-www-form-urlencoded"],
    ["multipart", "multipart/form-data; boundary=xyz"],
    ["json utf-16 charset", "application/json; charset=utf-16"],
    ["garbage content-type", "%%%/;;;"],
    ["application/jsonx", "application/jsonx"],
  ];
  for (const [l, ct] of ctypes) out.push({ label: `${l} with the base body`, payload: baseText, contentType: ct });
  // 5. A few seeded random byte strings declared as JSON.
  const rand = rng(seed);
  for (let i = 0; i < 4; i++) {
    const len = 1 + Math.floor(rand() * 200);
    const bytes = Buffer.alloc(len);
    for (let j = 0; j < len; j++) bytes[j] = Math.floor(rand() * 256);
    out.push({ label: `random bytes #${i} (${len} bytes)`, payload: bytes });
  }
  return out;
}

/** Mutations of a GET query: each the raw query string after `?`. */
function queryMutations(base: Base, props: string[], seed: number): Array<{ label: string; query: string }> {
  const enc = (q: Record<string, string>) => Object.entries(q).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  const input = base.input as Record<string, string>;
  const out: Array<{ label: string; query: string }> = [];
  const values: Array<[string, string]> = [
    ["empty", ""],
    ["x", "x"],
    ["-1", "-1"],
    ["0", "0"],
    ["1.5", "1.5"],
    ["1e308", "1e308"],
    ["2**53+1", "9007199254740993"],
    ["99999999999999999999999", "99999999999999999999999"],
    ["NaN", "NaN"],
    ["Infinity", "Infinity"],
    ["true", "true"],
    ["null", "null"],
    ["[]", "%5B%5D"],
    ["{}", "%7B%7D"],
    ["100k string", HUGE],
    ["NUL", "%00"],
    ["NUL inside", "a%00b"],
    ["lone surrogate (CESU bytes)", "%ED%A0%80"],
    ["invalid UTF-8", "%FF%FE"],
    ["bare percent", "%"],
    ["bad escape", "%zz"],
    ["plus and spaces", "+%20+"],
    ["emoji and RTL", "%F0%9F%98%80%E2%80%AE"],
    ["JSON", "%7B%22a%22%3A1%7D"],
  ];
  for (const prop of props) {
    const rest = enc(Object.fromEntries(Object.entries(input).filter(([k]) => k !== prop)));
    for (const [vl, raw] of values)
      out.push({ label: `${prop} = ${vl}`, query: [...rest, `${encodeURIComponent(prop)}=${raw}`].join("&") });
    out.push({ label: `${prop} repeated`, query: [...rest, `${prop}=a`, `${prop}=b`].join("&") });
    out.push({
      label: `${prop} repeated 1000 times`,
      query: [...rest, ...Array.from({ length: 1000 }, (_, i) => `${prop}=${i}`)].join("&"),
    });
    out.push({ label: `${prop}[] bracket`, query: [...rest, `${prop}[]=a`, `${prop}[x]=b`].join("&") });
    out.push({ label: `${prop} without =`, query: [...rest, prop].join("&") });
    out.push({ label: `${prop} missing`, query: rest.join("&") });
  }
  const all = enc(input);
  out.push({ label: "unknown parameters", query: [...all, "unknown=1", "__proto__=x", "constructor=y", "hasOwnProperty=z"].join("&") });
  out.push({ label: "empty parameters", query: [...all, "", "=", "&&"].join("&") });
  out.push({ label: "NUL in a parameter name", query: [...all, "a%00b=1"].join("&") });
  out.push({ label: "lone surrogate in a parameter name", query: [...all, "%ED%A0%80=1"].join("&") });
  out.push({ label: "5000 unknown parameters", query: [...all, ...Array.from({ length: 5000 }, (_, i) => `p${i}=${i}`)].join("&") });
  const rand = rng(seed);
  for (let i = 0; i < 4; i++) {
    let q = "";
    const len = 1 + Math.floor(rand() * 120);
    for (let j = 0; j < len; j++)
      q += `%${Math.floor(rand() * 256)
        .toString(16)
        .padStart(2, "0")}`;
    out.push({ label: `random bytes #${i}`, query: [...all, `${props[0] ?? "q"}=${q}`].join("&") });
  }
  return out;
}

function buildRequests(op: Operation): Req[] {
  const key = `${op.method} ${op.path}`;
  const bases = SPECS[key]!().map((b) => ({ ...b, input: resolvePlaceholders(b.input) }));
  const reqs: Req[] = [];
  const seed = seedOf(key);
  for (const base of bases) {
    const auth = authHeader(base.auth);
    const tag = `[${base.label}] `;
    if (op.method === "POST") {
      for (const m of bodyMutations(base, seed)) {
        const headers: Record<string, string> = { ...auth };
        if (m.contentType !== null) headers["content-type"] = m.contentType ?? "application/json";
        reqs.push({ label: tag + m.label, method: "POST", url: op.path, headers, payload: m.payload });
      }
    } else {
      const props = Object.keys(op.schema?.properties ?? {});
      for (const m of queryMutations(base, props, seed)) {
        reqs.push({ label: tag + m.label, method: "GET", url: `${op.path}?${m.query}`, headers: { ...auth } });
      }
      reqs.push({
        label: `${tag}GET with a JSON body`,
        method: "GET",
        url: op.path,
        headers: { ...auth, "content-type": "application/json" },
        payload: "{",
      });
    }
  }
  // Authorization garbage, on the first base.
  const first = bases[0]!;
  const payload = op.method === "POST" ? JSON.stringify(first.input) : undefined;
  const url = op.method === "POST" ? op.path : `${op.path}?${new URLSearchParams(first.input).toString()}`;
  const ct: Record<string, string> = op.method === "POST" ? { "content-type": "application/json" } : {};
  const authValues: Array<[string, string | undefined]> = [
    ["no authorization", undefined],
    ["Bearer without token", "Bearer"],
    ["Bearer and space", "Bearer "],
    ["Basic scheme", "Basic dXNlcjpwYXNz"],
    ["lowercase bearer", `bearer ${authHeader(first.auth).authorization?.slice("Bearer ".length) ?? "x"}`],
    ["unknown token", "Bearer khroot_unknown_0123456789"],
    ["100k token", `Bearer ${HUGE}`],
    ["latin1 token", "Bearer \u00e9\u00e8\u00ff"],
    [
      "admin token on a root-key route / root key on an admin route",
      `Bearer ${op.security.includes("adminToken") ? A.t.rootKey : ADMIN_TOKEN}`,
    ],
  ];
  for (const [l, v] of authValues) {
    reqs.push({
      label: `[auth] ${l}`,
      method: op.method,
      url,
      headers: { ...ct, ...(v === undefined ? {} : { authorization: v }) },
      payload,
    });
  }
  // The wrong method.
  reqs.push({
    label: "[method] the other method",
    method: op.method === "POST" ? "GET" : "POST",
    url: op.path,
    headers: { ...ct, ...authHeader("root") },
    payload: "{}",
  });
  reqs.push({
    label: "[method] PUT",
    method: "PUT",
    url: op.path,
    headers: { ...authHeader("root"), "content-type": "application/json" },
    payload: "{}",
  });
  reqs.push({ label: "[path] trailing slash", method: op.method, url: `${op.path}/`, headers: { ...ct, ...authHeader("root") }, payload });
  return reqs;
}

function describeRequest(r: Req): string {
  const p =
    r.payload === undefined
      ? ""
      : Buffer.isBuffer(r.payload)
        ? ` body=<${r.payload.length} bytes ${r.payload.toString("hex").slice(0, 80)}>`
        : ` body=${r.payload.length > 300 ? `${r.payload.slice(0, 300)}… (${r.payload.length} chars)` : r.payload}`;
  const url = r.url.length > 300 ? `${r.url.slice(0, 300)}… (${r.url.length} chars)` : r.url;
  const ct = r.headers["content-type"] === undefined ? "" : ` content-type=${r.headers["content-type"]}`;
  return `${r.label} :: ${r.method} ${url}${ct}${p}`;
}

/** Why a response breaks the rule (undefined when it keeps it). */
function violation(res: { statusCode: number; body: string; headers: Record<string, unknown> }, v2 = false): string | undefined {
  if (res.statusCode >= 500) return `status ${res.statusCode}`;
  if (res.statusCode < 400) return undefined;
  let body: any;
  try {
    body = JSON.parse(res.body);
  } catch {
    return `status ${res.statusCode} with a body that is not JSON`;
  }
  if (v2) return v2Violation(res, body);
  const e = body?.error;
  if (!e || typeof e !== "object") return `status ${res.statusCode} without an error envelope`;
  if (Object.keys(body).length !== 1) return "error body has other top-level fields";
  if (!errorCodes.includes(e.code)) return `unknown error code ${JSON.stringify(e.code)}`;
  if (codeToStatus[e.code as keyof typeof codeToStatus] !== res.statusCode) return `code ${e.code} with status ${res.statusCode}`;
  if (typeof e.message !== "string" || e.message.trim() === "") return "empty error message";
  if (typeof e.docs !== "string" || !e.docs.endsWith(`/docs/errors/${e.code}`)) return `bad docs ${JSON.stringify(e.docs)}`;
  if (typeof e.requestId !== "string" || e.requestId === "" || e.requestId !== res.headers["unkey-request-id"])
    return "requestId missing or not the Unkey-Request-Id header";
  return undefined;
}

/** What is wrong with a v2 error answer: `{meta: {requestId}, error: {title, detail, status, type}}`. */
function v2Violation(res: { statusCode: number; headers: Record<string, unknown> }, body: any): string | undefined {
  const e = body?.error;
  if (!e || typeof e !== "object") return `status ${res.statusCode} without an error envelope`;
  if (Object.keys(body).sort().join() !== "error,meta") return "error body has other top-level fields";
  if (e.status !== res.statusCode) return `error.status ${e.status} with status ${res.statusCode}`;
  if (typeof e.type !== "string" || !e.type.startsWith("https://unkey.com/docs/errors/")) return `bad type ${JSON.stringify(e.type)}`;
  if (typeof e.title !== "string" || e.title === "") return "empty title";
  if (typeof e.detail !== "string" || e.detail.trim() === "") return "empty detail";
  if (typeof body.meta?.requestId !== "string" || body.meta.requestId !== res.headers["unkey-request-id"])
    return "meta.requestId missing or not the request's id";
  return undefined;
}

// ---------------------------------------------------------------------------------------------------------------

const counts: Record<string, number> = {};

describe("robustness: malformed input never gives a 5xx, always the error envelope, and changes nothing", () => {
  beforeAll(async () => {
    A = await makeFixture("a");
    B = await makeFixture("b");
    await settle();
  }, 60_000);

  afterAll(() => {
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    console.log(
      `robustness: ${total} requests over ${Object.keys(counts).length} operations\n${Object.entries(counts)
        .map(([k, n]) => `  ${n}\t${k}`)
        .join("\n")}`,
    );
  });

  it("covers every operation of /openapi.json", () => {
    expect(operations.length).toBeGreaterThan(40);
    expect(operations.map((o) => `${o.method} ${o.path}`).filter((k) => !SPECS[k])).toEqual([]);
  });

  for (const op of operations) {
    const key = `${op.method} ${op.path}`;
    it.skipIf(!SPECS[key])(
      key,
      async () => {
        const reqs = buildRequests(op);
        counts[key] = reqs.length;
        const failures: string[] = [];
        const before = await tableSnapshot(h);
        for (const r of reqs) {
          let res;
          try {
            res = await h.app.inject({ method: r.method as any, url: r.url, headers: r.headers, payload: r.payload });
          } catch (err) {
            failures.push(`${describeRequest(r)}\n    -> threw ${(err as Error).stack ?? err}`);
            continue;
          }
          if (process.env.ROBUST_DEBUG && res.statusCode < 300 && op.method === "POST")
            console.log(`2xx ${key} ${describeRequest(r).slice(0, 400)} -> ${res.statusCode} ${res.body.slice(0, 200)}`);
          const why = violation(res, op.path.startsWith("/v2/"));
          if (why) failures.push(`${describeRequest(r)}\n    -> ${why}: ${res.statusCode} ${res.body.slice(0, 500)}`);
        }
        const after = await tableSnapshot(h);
        const changed = Object.keys({ ...before, ...after })
          .filter((t) => before[t] !== after[t])
          .map((t) => `${t}: ${before[t]} -> ${after[t]}`);
        expect(failures, failures.join("\n")).toEqual([]);
        expect(changed, `tables changed by the barrage of ${key}`).toEqual([]);
      },
      60_000,
    );
  }
});
