import { createHash, randomBytes } from "node:crypto";
import { V1_KEY_LINKS } from "../src/wire/v1/keys/keys.rbac.rules.js";
import { V2_KEY_LINKS } from "../src/wire/v2/keys/keys.rbac.rules.js";
import { callerOf } from "./caller-of.js";
import { describe, expect } from "vitest";
import { importKeys } from "../src/core/import/import.keys.js";
import { enqueueKeys } from "../src/core/import/import.enqueue.js";
import { migrateKeys } from "../src/core/import/import.migrate.js";
import { createKey, V1_CREATE_KEY_RULES } from "../src/core/keys/keys.create.js";
import { rootKeyCaller } from "../src/core/caller.js";
import { V1_ACCESS } from "../src/wire/v1/caller.js";
import { MAX_LINKS_PER_REQUEST, MAX_NAMES_PER_REQUEST } from "../src/core/rbac/rbac.bounds.js";
import { addToKey, permissionKind, replaceOnKey, roleKind, setOnKey } from "../src/core/rbac/rbac.keyLinks.js";
import { changePermissionsOfRole, createRole, setPermissionsOfRole } from "../src/core/rbac/rbac.rolesPermissions.js";
import { InvalidInputError } from "../src/errors.js";
import { test } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";

// The per-request bound on the roles and permissions one request names and the links it writes (issue 34 §1): the
// 400 beyond it on every route family, nothing written, and a request at the bound served.

const sha256Base64 = (key: string) => createHash("sha256").update(key).digest("base64");
const newHash = () => sha256Base64(randomBytes(16).toString("hex"));
const tag = () => randomBytes(3).toString("hex");

/** `keys` keys, key i naming the `perKey` names `${prefix}${(i * stride + j) % pool}`: `pool` distinct names in all. */
function namesOf(prefix: string, keys: number, perKey: number, pool: number): string[][] {
  return Array.from({ length: keys }, (_, i) => Array.from({ length: perKey }, (_, j) => `${prefix}${(i * perKey + j) % pool}`));
}

/** What a refused request must not have written: the workspace's keys, names, links, batches and migrations. */
async function writtenBy(h: Harness, t: Tenant) {
  const ws = `workspace_id = '${t.workspaceId}'`;
  const n = async (table: string) => Number((await h.sql<{ n: string }>(`select count(*) as n from ${table} where ${ws}`))[0]!.n);
  return {
    keys: await n("keys"),
    roles: await n("roles"),
    permissions: await n("permissions"),
    keysRoles: await n("keys_roles"),
    keysPermissions: await n("keys_permissions"),
    batches: await n("migration_batches"),
    migrations: await n("key_migrations"),
  };
}

const NAMES_WORDS = {
  v1: (count: number) =>
    `the request names ${count} distinct roles and permissions; one request may name at most ${MAX_NAMES_PER_REQUEST}: send fewer keys per request`,
  v2: (count: number) =>
    `The request names ${count} distinct roles and permissions, but one request may name at most ${MAX_NAMES_PER_REQUEST}. Send fewer keys per request.`,
};
const LINKS_WORDS = {
  v1: (count: number) =>
    `the request connects ${count} roles and permissions (summed over its keys); one request may connect at most ${MAX_LINKS_PER_REQUEST}: send fewer keys per request`,
  v2: (count: number) =>
    `The request connects ${count} roles and permissions (summed over its keys), but one request may connect at most ${MAX_LINKS_PER_REQUEST}. Send fewer keys per request.`,
};

type Batch = { roles?: string[][]; permissions?: string[][] };

/** The import routes, each with the body of a batch of keys naming `batch`'s roles and permissions. */
const IMPORT_ROUTES: {
  path: string;
  protocol: "v1" | "v2";
  body(apiId: string, batch: Batch): unknown;
}[] = [
  {
    path: "/v1/migrations.createKeys",
    protocol: "v1",
    body: (apiId, { roles, permissions }) =>
      (roles ?? permissions)!.map((_, i) => ({
        apiId,
        hash: { value: newHash(), variant: "sha256_base64" },
        ...(roles && { roles: roles[i] }),
        ...(permissions && { permissions: permissions[i] }),
      })),
  },
  {
    path: "/v1/migrations.enqueueKeys",
    protocol: "v1",
    body: (apiId, { roles, permissions }) => ({
      migrationId: `mig_${tag()}`,
      apiId,
      keys: (roles ?? permissions)!.map((_, i) => ({
        hash: { value: newHash(), variant: "sha256_base64" },
        ...(roles && { roles: roles[i] }),
        ...(permissions && { permissions: permissions[i] }),
      })),
    }),
  },
  {
    path: "/v2/keys.migrateKeys",
    protocol: "v2",
    body: (apiId, { roles, permissions }) => ({
      migrationId: `mig_${tag()}`,
      apiId,
      keys: (roles ?? permissions)!.map((_, i) => ({
        hash: newHash(),
        ...(roles && { roles: roles[i] }),
        ...(permissions && { permissions: permissions[i] }),
      })),
    }),
  },
];

function expectRefused(res: { status: number; body: any }, protocol: "v1" | "v2", message: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  if (protocol === "v1") {
    expect(res.body.error.code).toBe("BAD_REQUEST");
    expect(res.body.error.message).toBe(message);
  } else {
    expect(res.body.error.type).toBe("https://unkey.com/docs/errors/unkey/application/invalid_input");
    expect(res.body.error.detail).toBe(message);
  }
}

describe("one request names at most MAX_NAMES_PER_REQUEST roles and permissions and writes at most MAX_LINKS_PER_REQUEST links", () => {
  for (const route of IMPORT_ROUTES) {
    test(`${route.path}: 400 beyond the names bound (2,100 distinct names over 100 keys), nothing written`, async ({ h }) => {
      const t = await h.tenant();
      const apiId = await h.createApi(t);
      const before = await writtenBy(h, t);
      // v2 takes at most 100 roles per key: the names are permissions there, roles on v1.
      const names = namesOf(`n${tag()}_`, 100, 21, 2_100);
      const batch = route.protocol === "v2" ? { permissions: names } : { roles: names };
      const res = await h.post(route.path, route.body(apiId, batch), t.rootKey);
      expectRefused(res, route.protocol, NAMES_WORDS[route.protocol](2_100));
      expect(await writtenBy(h, t)).toEqual(before);
    });

    test(`${route.path}: 400 beyond the links bound (100 keys x 101 names), nothing written`, async ({ h }) => {
      const t = await h.tenant();
      const apiId = await h.createApi(t);
      const before = await writtenBy(h, t);
      const res = await h.post(route.path, route.body(apiId, { permissions: namesOf(`p${tag()}_`, 100, 101, 101) }), t.rootKey);
      expectRefused(res, route.protocol, LINKS_WORDS[route.protocol](10_100));
      expect(await writtenBy(h, t)).toEqual(before);
    });
  }

  test("v2 keys.migrateKeys at both bounds (100 keys x 100 names, 2,000 distinct, all new) migrates every key", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const p = `p${tag()}_`;
    const r = `r${tag()}_`;
    // 50 roles and 50 permissions per key: 1,000 distinct of each, 10,000 links.
    const res = await h.post(
      "/v2/keys.migrateKeys",
      {
        migrationId: `mig_${tag()}`,
        apiId,
        keys: Array.from({ length: 100 }, (_, i) => ({
          hash: newHash(),
          roles: namesOf(r, 100, 50, 1_000)[i],
          permissions: namesOf(p, 100, 50, 1_000)[i],
        })),
      },
      t.rootKey,
    );
    expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(200);
    expect(res.body.data.migrated).toHaveLength(100);
    expect(res.body.data.failed).toEqual([]);
    const written = await writtenBy(h, t);
    expect(written).toMatchObject({ keys: 100, roles: 1_000, permissions: 1_000, keysRoles: 5_000, keysPermissions: 5_000 });
  });

  test("the request that answered 409 key_already_exists on the embedded store (100 keys x 100 new roles) is refused by the bound, and the store serves on", async ({
    h,
  }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const before = await writtenBy(h, t);
    const res = await h.post(
      "/v2/keys.migrateKeys",
      {
        migrationId: `mig_${tag()}`,
        apiId,
        keys: namesOf(`r${tag()}_`, 100, 100, 10_000).map((roles) => ({ hash: newHash(), roles })),
      },
      t.rootKey,
    );
    expectRefused(res, "v2", NAMES_WORDS.v2(10_000));
    expect(await writtenBy(h, t)).toEqual(before);
    const after = await h.post("/v2/apis.getApi", { apiId }, t.rootKey);
    expect(after.status, JSON.stringify(after.body)).toBe(200);
  });

  test("7 keys x 1,000 new permission slugs (a statement of 35,000 parameters before the bound) leave the store serving every later request", async ({
    h,
  }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const { key } = await h.importKey(t, apiId);
    const res = await h.post(
      "/v2/keys.migrateKeys",
      {
        migrationId: `mig_${tag()}`,
        apiId,
        keys: namesOf(`s${tag()}_`, 7, 1_000, 7_000).map((permissions) => ({ hash: newHash(), permissions })),
      },
      t.rootKey,
    );
    expectRefused(res, "v2", NAMES_WORDS.v2(7_000));
    // An unrelated request of another workspace: the embedded store answered no rows to anything once broken.
    const other = await h.tenant();
    const otherApi = await h.createApi(other);
    expect((await h.post("/v2/apis.getApi", { apiId: otherApi }, other.rootKey)).status).toBe(200);
    const verified = await h.post("/v1/keys.verifyKey", { apiId, key });
    expect(verified.status, JSON.stringify(verified.body)).toBe(200);
    expect(verified.body.valid).toBe(true);
  });

  test("the core applies the bound to every operation that creates or connects names, whatever the adapter's schema allows", async ({
    h,
  }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const { keyId } = await h.importKey(t, apiId);
    const roleId = (await h.post("/v1/permissions.createRole", { name: `role_${tag()}` }, t.rootKey)).body.roleId as string;
    const principal = { workspaceId: t.workspaceId, permissions: new Set(["*"]) };
    const caller = rootKeyCaller(
      { rootKeyId: "rk_bounds_test", workspaceId: t.workspaceId, permissions: principal.permissions },
      V1_ACCESS,
      { surface: "v1" },
    );
    const before = await writtenBy(h, t);
    const many = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
    const tooMany = many(`x${tag()}_`, MAX_NAMES_PER_REQUEST + 1);
    const wanted = tooMany.map((name) => ({ name, create: true }));
    const store = { db: h.db, keyring: h.keyring, statistics: { onImported: () => {} }, clock: h.clock, changes: h.services.changes };
    const now = h.clock.now();
    const operations: [string, () => Promise<unknown>][] = [
      ["createKey", () => createKey(h.services, caller, { apiId, permissions: tooMany }, V1_CREATE_KEY_RULES)],
      [
        "importKeys",
        () =>
          importKeys(store, callerOf(principal), [{ apiId, hash: { value: newHash(), variant: "sha256_base64" }, roles: tooMany }], now),
      ],
      [
        "enqueueKeys",
        () =>
          enqueueKeys(store, callerOf(principal), {
            migrationId: "m",
            apiId,
            keys: [{ hash: { value: newHash(), variant: "sha256_base64" }, roles: tooMany }],
          }),
      ],
      [
        "migrateKeys",
        () =>
          migrateKeys(
            store,
            callerOf(principal),
            { migrationId: `mig_${tag()}`, apiId, keys: [{ hash: newHash(), permissions: tooMany }] },
            now,
          ),
      ],
      ["addToKey (roles)", () => addToKey(h.services, callerOf(principal), roleKind, { keyId, wanted }, V1_KEY_LINKS)],
      ["addToKey (permissions)", () => addToKey(h.services, callerOf(principal), permissionKind, { keyId, wanted }, V2_KEY_LINKS)],
      ["setOnKey", () => setOnKey(h.services, callerOf(principal), permissionKind, { keyId, wanted }, V1_KEY_LINKS)],
      [
        "replaceOnKey (updateKey)",
        () =>
          h.db.transaction((tx) =>
            replaceOnKey(tx, principal, roleKind, { id: keyId, workspaceId: t.workspaceId }, wanted, now, undefined, true),
          ),
      ],
      ["createRole", () => createRole(h.services, caller, { name: `role_${tag()}`, permissions: tooMany })],
      ["setPermissionsOfRole", () => setPermissionsOfRole(h.services, caller, { roleId, permissions: tooMany })],
      [
        "changePermissionsOfRole",
        () => changePermissionsOfRole(h.services, caller, { roleId, permissions: tooMany.map((slug) => ({ slug })) }, "add"),
      ],
    ];
    for (const [name, run] of operations) {
      const err = await run().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, name).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).refusal, name).toEqual({
        kind: "tooManyNames",
        what: "names",
        count: MAX_NAMES_PER_REQUEST + 1,
        max: MAX_NAMES_PER_REQUEST,
      });
    }
    expect(await writtenBy(h, t)).toEqual(before);
  });
});
