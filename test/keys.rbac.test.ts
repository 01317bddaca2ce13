import { randomBytes } from "node:crypto";
import { Unkey } from "@unkey/api";
import { describe, expect } from "vitest";
import { answersNotFoundLeaving, describeRootKeyAuth, rowsOf } from "./auth-suite.js";
import { test } from "./fixtures.js";
import { expectError } from "./helper.js";

const unique = (label: string) => `${label}-${randomBytes(4).toString("hex")}`;

// The file's harness, tenant and API (`h`, `t`, `apiId` of test/fixtures.ts), and helpers over them.
const it = test
  .extend("grantToRole", async ({ h, t }) => async (roleId: string, permissionId: string, tenant = t) => {
    await h.sql(
      `insert into roles_permissions (role_id, permission_id, workspace_id, created_at_m)
     values ('${roleId}', '${permissionId}', '${tenant.workspaceId}', ${Date.now()})`,
    );
  })
  .extend(
    "call",
    async ({ route }) =>
      (name: string, body: unknown, rootKey?: string) =>
        route(`/v1/keys.${name}`)(body, rootKey),
  )
  .extend(
    "ok",
    async ({ route }) =>
      (name: string, body: unknown, rootKey?: string) =>
        route(`/v1/keys.${name}`).ok(body, rootKey),
  )
  .extend(
    "verify",
    async ({ route }) =>
      (key: string, permissions: unknown) =>
        route("/v1/keys.verifyKey").ok({ key, authorization: { permissions } }, null),
  )
  .extend(
    "allowed",
    async ({ verify }) =>
      async (key: string, permission: string) =>
        (await verify(key, permission)).valid as boolean,
  );
const sorted = (ids: string[]) => [...ids].sort();

describe("keys.addPermissions", () => {
  it("connects permissions by slug and by id, answers all of them, and the next verification sees them", async ({
    importKey,
    createPermission,
    ok,
    verify,
    allowed,
    keyPermissions,
  }) => {
    const [s1, s2] = [unique("docs.read"), unique("docs.write")];
    const p1 = await createPermission(`${s1}.name`, s1);
    const p2 = await createPermission(s2);
    const { key, keyId } = await importKey();
    expect(await allowed(key, s1)).toBe(false);

    const body = await ok("addPermissions", { keyId, permissions: [{ name: s1 }, { id: p2 }] });
    expect(body).toEqual([
      { id: p1, name: `${s1}.name` },
      { id: p2, name: s2 },
    ]);
    expect(await keyPermissions(keyId)).toEqual(sorted([p1, p2]));
    expect(await allowed(key, s1)).toBe(true);
    expect(await verify(key, { and: [s1, s2] })).toMatchObject({ valid: true });
  });

  it("keeps the permissions the key already has and accepts ones it already holds", async ({
    importKey,
    createPermission,
    ok,
    keyPermissions,
  }) => {
    const [s1, s2] = [unique("a"), unique("b")];
    const p1 = await createPermission(s1);
    const p2 = await createPermission(s2);
    const { keyId } = await importKey({ permissions: [s1] });
    expect(await ok("addPermissions", { keyId, permissions: [{ name: s1 }, { name: s2 }, { id: p2 }] })).toEqual([
      { id: p1, name: s1 },
      { id: p2, name: s2 },
    ]);
    expect(await keyPermissions(keyId)).toEqual(sorted([p1, p2]));
  });

  it("creates a missing permission with create (name = slug) when the root key may create permissions", async ({
    h,
    t,
    importKey,
    ok,
    allowed,
  }) => {
    const slug = unique("new.perm");
    const rootKey = await h.rootKey(t.workspaceId, ["rbac.*.add_permission_to_key", "rbac.*.create_permission"]);
    const { key, keyId } = await importKey();
    const [created] = await ok("addPermissions", { keyId, permissions: [{ name: slug, create: true }] }, rootKey);
    const [row] = await h.sql<any>(`select id, name, slug, workspace_id from permissions where slug = '${slug}'`);
    expect(row).toEqual({ id: created.id, name: slug, slug, workspace_id: t.workspaceId });
    expect(created).toEqual({ id: row.id, name: slug });
    expect(await allowed(key, slug)).toBe(true);
  });

  it("refuses to create without rbac.*.create_permission (403 UNAUTHORIZED) and changes nothing", async ({
    h,
    t,
    importKey,
    createPermission,
    call,
    count,
    keyPermissions,
  }) => {
    const existing = unique("existing");
    const slug = unique("never");
    await createPermission(existing);
    const rootKey = await h.rootKey(t.workspaceId, ["rbac.*.add_permission_to_key"]);
    const { keyId } = await importKey();
    expectError(
      await call("addPermissions", { keyId, permissions: [{ name: existing }, { name: slug, create: true }] }, rootKey),
      403,
      "UNAUTHORIZED",
    );
    expect(await keyPermissions(keyId)).toEqual([]);
    expect(await count(`permissions where slug = '${slug}'`)).toBe(0);
  });

  it("answers 404 for an unknown slug or id, and a missing one in the middle of the list changes nothing", async ({
    importKey,
    createPermission,
    call,
    count,
    keyPermissions,
  }) => {
    const [s1, s3] = [unique("first"), unique("third")];
    await createPermission(s1);
    await createPermission(s3);
    const created = unique("created");
    const missing = unique("missing");
    const { keyId } = await importKey();
    expectError(
      await call("addPermissions", {
        keyId,
        permissions: [{ name: s1 }, { name: created, create: true }, { name: missing }, { name: s3 }],
      }),
      404,
      "NOT_FOUND",
      `permission ${missing} not found`,
    );
    expectError(
      await call("addPermissions", { keyId, permissions: [{ name: s1 }, { id: "perm_missing" }] }),
      404,
      "NOT_FOUND",
      "permission perm_missing not found",
    );
    expect(await keyPermissions(keyId)).toEqual([]);
    expect(await count(`permissions where slug = '${created}'`)).toBe(0);
  });

  it("does not match a permission by its name when its slug differs", async ({ importKey, createPermission, call }) => {
    const slug = unique("slug");
    await createPermission(`${slug}.display`, slug);
    const { keyId } = await importKey();
    expectError(
      await call("addPermissions", { keyId, permissions: [{ name: `${slug}.display` }] }),
      404,
      "NOT_FOUND",
      `permission ${slug}.display not found`,
    );
  });

  it("treats a permission of another workspace as unknown", async ({ h, importKey, createPermission, call, keyPermissions }) => {
    const other = await h.tenant();
    const slug = unique("theirs");
    const theirs = await createPermission(slug, undefined, other);
    const { keyId } = await importKey();
    expectError(await call("addPermissions", { keyId, permissions: [{ id: theirs }] }), 404, "NOT_FOUND", `permission ${theirs} not found`);
    expectError(await call("addPermissions", { keyId, permissions: [{ name: slug }] }), 404, "NOT_FOUND", `permission ${slug} not found`);
    expect(await keyPermissions(keyId)).toEqual([]);
  });

  it("validates the body: keyId, a non-empty list, and an id or a name in each entry", async ({ importKey, call }) => {
    const { keyId } = await importKey();
    expectError(await call("addPermissions", { permissions: [{ name: "x" }] }), 400, "BAD_REQUEST", /^keyId: /);
    expectError(await call("addPermissions", { keyId, permissions: [] }), 400, "BAD_REQUEST", /^permissions: /);
    expectError(
      await call("addPermissions", { keyId, permissions: [{ create: true }] }),
      400,
      "BAD_REQUEST",
      "permissions.0: provide either `id` or `name`",
    );
    expectError(await call("addPermissions", { keyId, permissions: [{ name: "" }] }), 400, "BAD_REQUEST", /^permissions\.0\.name: /);
  });
});

describe("keys.removePermissions", () => {
  it("disconnects every requested permission, by slug (name or slug field) and by id, and answers {}", async ({
    importKey,
    createPermission,
    ok,
    allowed,
    keyPermissions,
  }) => {
    const [s1, s2, s3, s4] = [unique("r1"), unique("r2"), unique("r3"), unique("keep")];
    const p1 = await createPermission(`${s1}.name`, s1);
    const p2 = await createPermission(s2);
    const p3 = await createPermission(s3);
    const p4 = await createPermission(s4);
    // migrations match permissions by name, the routes under test by slug.
    const { key, keyId } = await importKey({ permissions: [`${s1}.name`, s2, s3, s4] });
    expect(await keyPermissions(keyId)).toEqual(sorted([p1, p2, p3, p4]));
    expect(await ok("removePermissions", { keyId, permissions: [{ name: s1 }, { slug: s2 }, { id: p3 }] })).toEqual({});
    expect(await keyPermissions(keyId)).toEqual([p4]);
    expect(await allowed(key, s1)).toBe(false);
    expect(await allowed(key, s2)).toBe(false);
    expect(await allowed(key, s4)).toBe(true);
  });

  it("accepts a permission the key does not hold", async ({ importKey, createPermission, ok }) => {
    const slug = unique("not-held");
    await createPermission(slug);
    const { keyId } = await importKey();
    expect(await ok("removePermissions", { keyId, permissions: [{ name: slug }] })).toEqual({});
  });

  it("answers 200 for unknown permissions and ones the key does not hold, still removing the others (as v1)", async ({
    h,
    importKey,
    createPermission,
    ok,
    allowed,
    keyPermissions,
  }) => {
    const [s1, s2, s3] = [unique("a"), unique("b"), unique("kept")];
    await createPermission(s1);
    const p2 = await createPermission(s2);
    const p3 = await createPermission(s3);
    const notHeld = await createPermission(unique("not-held"));
    const other = await h.tenant();
    const theirs = await createPermission(s3, undefined, other);
    const { key, keyId } = await importKey({ permissions: [s1, s2, s3] });
    const missing = unique("missing");
    expect(
      await ok("removePermissions", {
        keyId,
        permissions: [{ name: s1 }, { name: missing }, { id: "perm_missing" }, { id: notHeld }, { id: theirs }, { id: p2 }],
      }),
    ).toEqual({});
    expect(await keyPermissions(keyId)).toEqual([p3]);
    expect(await allowed(key, s1)).toBe(false);
    expect(await allowed(key, s3)).toBe(true);
    // v1's legacy security cases: names that exist nowhere.
    expect(await ok("removePermissions", { keyId, permissions: [{ name: "hello" }, { slug: "there" }] })).toEqual({});
    expect(await keyPermissions(keyId)).toEqual([p3]);
  });

  it("validates each entry: an id, a name or a slug", async ({ importKey, call }) => {
    const { keyId } = await importKey();
    expectError(
      await call("removePermissions", { keyId, permissions: [{}] }),
      400,
      "BAD_REQUEST",
      "permissions.0: provide one of `id`, `name` or `slug`",
    );
  });
});

describe("keys.setPermissions", () => {
  it("makes the key's direct permissions exactly the requested ones and answers them", async ({
    importKey,
    createPermission,
    ok,
    allowed,
    keyPermissions,
  }) => {
    const [s1, s2, s3] = [unique("old"), unique("kept"), unique("new")];
    await createPermission(s1);
    const p2 = await createPermission(s2);
    const p3 = await createPermission(`${s3}.name`, s3);
    const { key, keyId } = await importKey({ permissions: [s1, s2] });
    expect(await ok("setPermissions", { keyId, permissions: [{ id: p2 }, { slug: s3 }] })).toEqual([
      { id: p2, name: s2 },
      { id: p3, name: `${s3}.name` },
    ]);
    expect(await keyPermissions(keyId)).toEqual(sorted([p2, p3]));
    expect(await allowed(key, s1)).toBe(false);
    expect(await allowed(key, s3)).toBe(true);
  });

  it("creates a missing permission with create when allowed", async ({ h, t, importKey, ok, allowed, keyPermissions }) => {
    const slug = unique("created");
    const rootKey = await h.rootKey(t.workspaceId, ["rbac.*.add_permission_to_key", "rbac.*.create_permission"]);
    const { key, keyId } = await importKey();
    const [created] = await ok("setPermissions", { keyId, permissions: [{ name: slug, create: true }] }, rootKey);
    expect(created).toEqual({ id: expect.any(String), name: slug });
    expect(await keyPermissions(keyId)).toEqual([created.id]);
    expect(await allowed(key, slug)).toBe(true);
  });

  it("answers 404 'not found and not allowed to create' for a missing one without create, changing nothing", async ({
    importKey,
    createPermission,
    call,
    keyPermissions,
  }) => {
    const s1 = unique("s1");
    const p1 = await createPermission(s1);
    const s2 = unique("s2");
    await createPermission(s2);
    const { keyId } = await importKey({ permissions: [s1] });
    const missing = unique("missing");
    expectError(
      await call("setPermissions", { keyId, permissions: [{ name: s2 }, { name: missing }] }),
      404,
      "NOT_FOUND",
      `permission ${missing} not found and not allowed to create`,
    );
    expect(await keyPermissions(keyId)).toEqual([p1]);
  });

  it("needs remove_permission_from_key to disconnect (403 UNAUTHORIZED)", async ({
    h,
    t,
    importKey,
    createPermission,
    call,
    ok,
    keyPermissions,
  }) => {
    const [s1, s2] = [unique("held"), unique("wanted")];
    const p1 = await createPermission(s1);
    await createPermission(s2);
    const { keyId } = await importKey({ permissions: [s1] });
    const rootKey = await h.rootKey(t.workspaceId, ["rbac.*.add_permission_to_key"]);
    expectError(await call("setPermissions", { keyId, permissions: [{ name: s2 }] }, rootKey), 403, "UNAUTHORIZED");
    expect(await keyPermissions(keyId)).toEqual([p1]);
    // Keeping the held one and adding another needs no removal.
    await ok("setPermissions", { keyId, permissions: [{ name: s1 }, { name: s2 }] }, rootKey);
    expect((await keyPermissions(keyId)).length).toBe(2);
  });

  it("needs add_permission_to_key to connect and create_permission to create (403 INSUFFICIENT_PERMISSIONS)", async ({
    h,
    t,
    importKey,
    createPermission,
    call,
    count,
    keyPermissions,
  }) => {
    const s1 = unique("s1");
    await createPermission(s1);
    const { keyId } = await importKey();
    const removeOnly = await h.rootKey(t.workspaceId, ["rbac.*.remove_permission_from_key", "rbac.*.create_permission"]);
    expectError(await call("setPermissions", { keyId, permissions: [{ name: s1 }] }, removeOnly), 403, "INSUFFICIENT_PERMISSIONS");
    const slug = unique("never");
    const addOnly = await h.rootKey(t.workspaceId, ["rbac.*.add_permission_to_key"]);
    expectError(
      await call("setPermissions", { keyId, permissions: [{ name: slug, create: true }] }, addOnly),
      403,
      "INSUFFICIENT_PERMISSIONS",
    );
    expect(await keyPermissions(keyId)).toEqual([]);
    expect(await count(`permissions where slug = '${slug}'`)).toBe(0);
  });
});

describe("keys.addRoles / removeRoles / setRoles", () => {
  it("connects roles by name and by id, and the next verification sees the role's permissions", async ({
    importKey,
    createRole,
    createPermission,
    grantToRole,
    ok,
    allowed,
    keyRoles,
  }) => {
    const [r1, r2] = [unique("admin"), unique("reader")];
    const role1 = await createRole(r1);
    const role2 = await createRole(r2);
    const slug = unique("via.role");
    await grantToRole(role1, await createPermission(slug));
    const { key, keyId } = await importKey();
    expect(await allowed(key, slug)).toBe(false);
    expect(await ok("addRoles", { keyId, roles: [{ name: r1 }, { id: role2 }] })).toEqual([
      { id: role1, name: r1 },
      { id: role2, name: r2 },
    ]);
    expect(await keyRoles(keyId)).toEqual(sorted([role1, role2]));
    expect(await allowed(key, slug)).toBe(true);
  });

  it("creates a missing role with create when the root key may create roles, and refuses otherwise (403 UNAUTHORIZED)", async ({
    h,
    t,
    importKey,
    call,
    ok,
    count,
    keyRoles,
  }) => {
    const name = unique("made");
    const { keyId } = await importKey();
    const weak = await h.rootKey(t.workspaceId, ["rbac.*.add_role_to_key"]);
    expectError(await call("addRoles", { keyId, roles: [{ name, create: true }] }, weak), 403, "UNAUTHORIZED");
    expect(await count(`roles where name = '${name}'`)).toBe(0);

    const strong = await h.rootKey(t.workspaceId, ["rbac.*.add_role_to_key", "rbac.*.create_role"]);
    const [role] = await ok("addRoles", { keyId, roles: [{ name, create: true }] }, strong);
    const [row] = await h.sql<any>(`select id, workspace_id from roles where name = '${name}'`);
    expect(row).toEqual({ id: role.id, workspace_id: t.workspaceId });
    expect(await keyRoles(keyId)).toEqual([role.id]);
  });

  it("answers 404 for an unknown role, leaving the key's roles unchanged", async ({ importKey, createRole, call, keyRoles }) => {
    const [r1, r3] = [unique("r1"), unique("r3")];
    await createRole(r1);
    await createRole(r3);
    const missing = unique("missing");
    const { keyId } = await importKey();
    expectError(
      await call("addRoles", { keyId, roles: [{ name: r1 }, { name: missing }, { name: r3 }] }),
      404,
      "NOT_FOUND",
      `role ${missing} not found`,
    );
    expectError(await call("addRoles", { keyId, roles: [{ id: "role_missing" }] }), 404, "NOT_FOUND", "role role_missing not found");
    expect(await keyRoles(keyId)).toEqual([]);
  });

  it("removes every requested role, by name and by id, and the next verification no longer sees its permissions", async ({
    importKey,
    createRole,
    createPermission,
    grantToRole,
    ok,
    allowed,
    keyRoles,
  }) => {
    const [r1, r2, r3] = [unique("a"), unique("b"), unique("keep")];
    const role1 = await createRole(r1);
    const role2 = await createRole(r2);
    const role3 = await createRole(r3);
    const slug = unique("via.role");
    await grantToRole(role1, await createPermission(slug));
    const { key, keyId } = await importKey({ roles: [r1, r2, r3] });
    expect(await allowed(key, slug)).toBe(true);
    expect(await ok("removeRoles", { keyId, roles: [{ name: r1 }, { id: role2 }] })).toEqual({});
    expect(await keyRoles(keyId)).toEqual([role3]);
    expect(await allowed(key, slug)).toBe(false);
  });

  it("answers 200 for unknown roles and ones the key does not have, still removing the others (as v1)", async ({
    h,
    importKey,
    createRole,
    ok,
    keyRoles,
  }) => {
    const [r1, r2, r3] = [unique("a"), unique("b"), unique("keep")];
    await createRole(r1);
    await createRole(r2);
    const role3 = await createRole(r3);
    const notHeld = await createRole(unique("not-held"));
    const other = await h.tenant();
    const theirs = await createRole(r3, other);
    const { keyId } = await importKey({ roles: [r1, r2, r3] });
    expect(
      await ok("removeRoles", {
        keyId,
        roles: [{ name: r1 }, { id: "role_missing" }, { name: unique("missing") }, { id: notHeld }, { id: theirs }, { name: r2 }],
      }),
    ).toEqual({});
    expect(await keyRoles(keyId)).toEqual([role3]);
    // v1's legacy security cases: names that exist nowhere.
    expect(await ok("removeRoles", { keyId, roles: [{ name: "hello" }, { name: "there" }] })).toEqual({});
    expect(await keyRoles(keyId)).toEqual([role3]);
  });

  it("set refuses a root key with neither add nor remove permission before looking at the key, even for its current set", async ({
    h,
    t,
    importKey,
    createRole,
    createPermission,
    call,
  }) => {
    const r1 = unique("current");
    await createRole(r1);
    const slug = unique("current.perm");
    await createPermission(slug, slug);
    const { keyId } = await importKey({ roles: [r1], permissions: [slug] });
    const nothing = await h.rootKey(t.workspaceId, []);
    const unrelated = await h.rootKey(t.workspaceId, ["api.*.read_key", "rbac.*.create_role", "rbac.*.create_permission"]);
    for (const rootKey of [nothing, unrelated]) {
      for (const id of [keyId, "key_missing0000000000"]) {
        const roles = await call("setRoles", { keyId: id, roles: [{ name: r1 }] }, rootKey);
        expectError(
          roles,
          403,
          "INSUFFICIENT_PERMISSIONS",
          /^Missing permissions: need one of \["\*", "rbac\.\*\.add_role_to_key", "rbac\.\*\.remove_role_from_key"\]/,
        );
        const perms = await call("setPermissions", { keyId: id, permissions: [{ slug }] }, rootKey);
        expectError(perms, 403, "INSUFFICIENT_PERMISSIONS", /add_permission_to_key", "rbac\.\*\.remove_permission_from_key"\]/);
      }
    }
    // Either permission is enough to be told the set is unchanged.
    const addOnly = await h.rootKey(t.workspaceId, ["rbac.*.add_role_to_key"]);
    expect((await call("setRoles", { keyId, roles: [{ name: r1 }] }, addOnly)).status).toBe(200);
  });

  it("setRoles replaces the key's roles, creating with create, and checks remove / add / create separately", async ({
    h,
    t,
    importKey,
    createRole,
    call,
    ok,
    count,
    keyRoles,
  }) => {
    const [r1, r2] = [unique("old"), unique("new")];
    const role1 = await createRole(r1);
    const role2 = await createRole(r2);
    const { keyId } = await importKey({ roles: [r1] });

    const addOnly = await h.rootKey(t.workspaceId, ["rbac.*.add_role_to_key"]);
    expectError(await call("setRoles", { keyId, roles: [{ name: r2 }] }, addOnly), 403, "UNAUTHORIZED");
    const removeOnly = await h.rootKey(t.workspaceId, ["rbac.*.remove_role_from_key"]);
    expectError(await call("setRoles", { keyId, roles: [{ name: r2 }] }, removeOnly), 403, "INSUFFICIENT_PERMISSIONS");
    const created = unique("created");
    const noCreate = await h.rootKey(t.workspaceId, ["rbac.*.add_role_to_key", "rbac.*.remove_role_from_key"]);
    expectError(await call("setRoles", { keyId, roles: [{ name: created, create: true }] }, noCreate), 403, "INSUFFICIENT_PERMISSIONS");
    expectError(
      await call("setRoles", { keyId, roles: [{ name: created }] }, noCreate),
      404,
      "NOT_FOUND",
      `role ${created} not found and not allowed to create`,
    );
    expect(await keyRoles(keyId)).toEqual([role1]);
    expect(await count(`roles where name = '${created}'`)).toBe(0);

    const body = await ok("setRoles", { keyId, roles: [{ id: role2 }, { name: created, create: true }] });
    expect(body).toEqual([
      { id: role2, name: r2 },
      { id: expect.any(String), name: created },
    ]);
    expect(await keyRoles(keyId)).toEqual(sorted([role2, body[1].id]));
  });
});

describe("the key itself", () => {
  const routes: [string, string, Record<string, unknown>][] = [
    ["addPermissions", "permissions", { name: "x" }],
    ["removePermissions", "permissions", { name: "x" }],
    ["setPermissions", "permissions", { name: "x" }],
    ["addRoles", "roles", { name: "x" }],
    ["removeRoles", "roles", { name: "x" }],
    ["setRoles", "roles", { name: "x" }],
  ];

  it("answers 404 'key <id> not found' for a missing, deleted or other workspace's key on every route", async ({
    h,
    t,
    newApi,
    importKey,
    call,
    keyRoles,
    keyPermissions,
  }) => {
    const other = await h.tenant();
    const theirs = (await importKey({}, other, await newApi(other))).keyId;
    const deleted = (await importKey()).keyId;
    expect((await h.post("/v1/keys.deleteKey", { keyId: deleted }, t.rootKey)).status).toBe(200);
    for (const [route, field, entry] of routes) {
      for (const keyId of ["key_missing", deleted, theirs]) {
        expectError(await call(route, { keyId, [field]: [entry] }), 404, "NOT_FOUND", `key ${keyId} not found`);
      }
    }
    expect(await keyPermissions(theirs)).toEqual([]);
    expect(await keyRoles(theirs)).toEqual([]);
  });
});

describe("@unkey/api@0.38.0", () => {
  it("adds, sets and removes a key's permissions and roles through the SDK, unchanged", async ({ h, t, importKey, allowed, keyRoles }) => {
    const baseUrl = await h.app.listen({ port: 0, host: "127.0.0.1" });
    const unkey = new Unkey({ rootKey: t.rootKey, baseUrl, disableTelemetry: true, retry: { attempts: 0 } });
    const [slug, role] = [unique("sdk.perm"), unique("sdk.role")];
    const { key, keyId } = await importKey();

    const added = await unkey.keys.addPermissions({ keyId, permissions: [{ name: slug, create: true }] });
    expect(added.error).toBeUndefined();
    expect(added.result).toEqual([{ id: expect.any(String), name: slug }]);
    const roles = await unkey.keys.addRoles({ keyId, roles: [{ name: role, create: true }] });
    expect(roles.result).toEqual([{ id: expect.any(String), name: role }]);
    expect(await allowed(key, slug)).toBe(true);

    const set = await unkey.keys.setPermissions({ keyId, permissions: [{ slug, create: true }] });
    expect(set.result).toEqual(added.result);
    expect((await unkey.keys.setRoles({ keyId, roles: [{ id: roles.result![0]!.id }] })).result).toEqual(roles.result);

    expect((await unkey.keys.removePermissions({ keyId, permissions: [{ slug }] })).result).toEqual({});
    expect((await unkey.keys.removeRoles({ keyId, roles: [{ name: role }] })).result).toEqual({});
    expect(await allowed(key, slug)).toBe(false);
    expect(await keyRoles(keyId)).toEqual([]);

    const missing = await unkey.keys.addRoles({ keyId: "key_missing", roles: [{ name: role }] });
    expect(missing.error).toMatchObject({ code: "NOT_FOUND", message: "key key_missing not found" });
  });
});

// ---- The shared root-key authentication suite, for each route ----

const marker = () => unique("auth-suite");
function authCase(
  route: string,
  opts: {
    field: "permissions" | "roles";
    /** Whether the valid request removes an existing connection (otherwise it adds one). */
    removes: boolean;
    insufficientPermissions: string[];
  },
) {
  let name = "";
  const table = opts.field === "permissions" ? "keys_permissions" : "keys_roles";
  describeRootKeyAuth(it, {
    method: "POST",
    path: `/v1/keys.${route}`,
    async validRequest(h, owner) {
      name = marker();
      const api = (await h.post("/v1/apis.createApi", { name: "auth-suite" }, owner.rootKey)).body.apiId;
      const create =
        opts.field === "permissions"
          ? await h.post("/v1/permissions.createPermission", { name }, owner.rootKey)
          : await h.post("/v1/permissions.createRole", { name }, owner.rootKey);
      expect(create.status, JSON.stringify(create.body)).toBe(200);
      const res = await h.post(
        "/v1/migrations.createKeys",
        [{ apiId: api, plaintext: `sk_${randomBytes(16).toString("hex")}`, ...(opts.removes && { [opts.field]: [name] }) }],
        owner.rootKey,
      );
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return { body: { keyId: res.body.keyIds[0], [opts.field]: [{ name }] } };
    },
    insufficientPermissions: opts.insufficientPermissions,
    countRows: rowsOf(table),
    expectForOtherWorkspace: answersNotFoundLeaving(/^key key_\w+ not found$/, table, opts.removes ? 1 : 0),
  });
}

// [route, field, removes, insufficientPermissions]
const authCases: [string, "permissions" | "roles", boolean, string[]][] = [
  ["addPermissions", "permissions", false, ["rbac.*.remove_permission_from_key", "rbac.*.create_permission", "api.*.update_key"]],
  ["removePermissions", "permissions", true, ["rbac.*.add_permission_to_key", "api.*.update_key"]],
  ["setPermissions", "permissions", false, ["rbac.*.remove_permission_from_key", "rbac.*.create_permission", "api.*.update_key"]],
  ["addRoles", "roles", false, ["rbac.*.remove_role_from_key", "rbac.*.create_role", "rbac.*.add_permission_to_key"]],
  ["removeRoles", "roles", true, ["rbac.*.add_role_to_key", "rbac.*.remove_permission_from_key"]],
  ["setRoles", "roles", false, ["rbac.*.remove_role_from_key", "rbac.*.create_role", "rbac.*.add_permission_to_key"]],
];
for (const [route, field, removes, insufficientPermissions] of authCases) authCase(route, { field, removes, insufficientPermissions });
