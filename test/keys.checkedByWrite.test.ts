import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";

// keys.createKey and keys.updateKey, v1's and v2's, use a root key they hold in memory without reading the store's
// epoch first: the statement that writes re-checks the root key at its own snapshot (or a transaction's first
// statement does), and any refusal is answered after authenticating again at a fresh epoch
// (RootKeyAuthenticator.authorizeWrite, issue 13 §3: a round trip fewer per call). Each case puts the root key in
// memory with a first write, changes the root key behind the app's back, and expects the very next write to be
// answered as it is for a root key authenticated at a fresh epoch, changing nothing when refused. Both the
// one-statement write (a plain key, a rename) and the transaction (with an owner) are covered.

type Route = "/v1/keys.createKey" | "/v2/keys.createKey" | "/v1/keys.updateKey" | "/v2/keys.updateKey";
type Case = { route: Route; shape: "one statement" | "with an owner (a transaction)" };
const CASES: Case[] = (["/v1/keys.createKey", "/v2/keys.createKey", "/v1/keys.updateKey", "/v2/keys.updateKey"] as const).flatMap((route) =>
  (["one statement", "with an owner (a transaction)"] as const).map((shape) => ({ route, shape })),
);
const isV1 = (c: Case) => c.route.startsWith("/v1");

/**
 * A fresh workspace whose root key is in memory (it made one write of the case), with `write()` (the case's write
 * again, each time a different one) and `state()` (what the writes change: the API's keys, or the updated key's name
 * and owner).
 */
async function cachedRootKey(h: Harness, c: Case) {
  const t: Tenant = await h.tenant();
  const apiId = await h.createApi(t);
  const owner = c.shape === "one statement" ? {} : { externalId: "owner-1" };
  const { keyId } = (await h.post("/v1/keys.createKey", { apiId }, t.rootKey)).body as { keyId: string };
  let n = 0;
  const write = () =>
    c.route.endsWith("createKey")
      ? h.post(c.route, { apiId, ...owner }, t.rootKey)
      : h.post(c.route, { keyId, name: `renamed-${++n}`, ...owner }, t.rootKey);
  const state = async () =>
    h.sql<{ keys: number; name: string | null; owner: string | null }>(
      `select (select count(*)::int from keys where api_id = '${apiId}') as keys, name, owner_id as owner from keys where id = '${keyId}'`,
    );
  expect((await write()).status).toBe(200);
  return { t, apiId, write, state };
}

/** How many times the app read the store's epoch while `run` ran. */
async function epochReadsDuring(h: Harness, run: () => Promise<void>): Promise<number> {
  const epochs = h.services.epochs;
  const current = epochs.current;
  let reads = 0;
  epochs.current = () => {
    reads++;
    return current.call(epochs);
  };
  try {
    await run();
  } finally {
    epochs.current = current;
  }
  return reads;
}

/** The refusal's status and code, v1's `error.code` or the last word of v2's `error.type`. */
const refusal = (res: { status: number; body: { error?: { code?: string; type?: string } } }) => ({
  status: res.status,
  code: res.body.error?.code ?? res.body.error?.type?.split("/").at(-1),
});

describe("keys.createKey and keys.updateKey with a root key in memory: the write re-checks it", () => {
  test.for(CASES)("$route, $shape: reads no epoch before writing", async (c, { h }) => {
    const { write, state } = await cachedRootKey(h, c);
    const before = await state();
    expect(await epochReadsDuring(h, async () => expect((await write()).status).toBe(200))).toBe(0);
    expect(await state()).not.toEqual(before);
  });

  test.for(CASES)("$route, $shape: refuses a root key deleted since, and changes nothing", async (c, { h }) => {
    const { t, write, state } = await cachedRootKey(h, c);
    const before = await state();
    await h.sql(`delete from root_keys where id = '${t.rootKeyId}'`);
    const res = await write();
    expect(res.status).toBe(isV1(c) ? 403 : 401);
    if (isV1(c)) expect(res.body.error.message).toBe("key not found");
    expect(await state()).toEqual(before);
  });

  test.for(CASES)("$route, $shape: refuses a root key that lost its permission since, and changes nothing", async (c, { h }) => {
    const { t, write, state } = await cachedRootKey(h, c);
    const before = await state();
    await h.sql(`update root_keys set permissions = '{api.*.read_api}' where id = '${t.rootKeyId}'`);
    // v2 answers a root key that may not create keys in the API as if the API were not there.
    const v2Refusal = c.route.endsWith("createKey")
      ? { status: 404, code: "api_not_found" }
      : { status: 403, code: "insufficient_permissions" };
    expect(refusal(await write())).toEqual(isV1(c) ? { status: 403, code: "INSUFFICIENT_PERMISSIONS" } : v2Refusal);
    expect(await state()).toEqual(before);
  });

  test.for(CASES)("$route, $shape: refuses a root key whose workspace was disabled since, and changes nothing", async (c, { h }) => {
    const { t, write, state } = await cachedRootKey(h, c);
    const before = await state();
    await h.disableWorkspace(t.workspaceId);
    expect((await write()).status).toBe(403);
    expect(await state()).toEqual(before);
  });

  test.for(CASES)("$route, $shape: accepts a root key granted its permission since it was refused", async (c, { h }) => {
    const { t, write, state } = await cachedRootKey(h, c);
    await h.sql(`update root_keys set permissions = '{api.*.read_api}' where id = '${t.rootKeyId}'`);
    const refused = await write(); // in memory again, without the permission
    expect(refused.status).toBeGreaterThanOrEqual(403);
    const before = await state();
    await h.sql(`update root_keys set permissions = '{*}' where id = '${t.rootKeyId}'`);
    expect((await write()).status).toBe(200);
    expect(await state()).not.toEqual(before);
  });

  test.for(CASES)("$route, $shape: answers 404 for an API deleted since, and changes nothing", async (c, { h }) => {
    const { apiId, write, state } = await cachedRootKey(h, c);
    await h.sql(`update apis set deleted_at_m = 1 where id = '${apiId}'`);
    const before = await state();
    expect((await write()).status).toBe(404);
    expect(await state()).toEqual(before);
  });
});

// permissions.addPermissionsToRole and removePermissionsFromRole (keyhaven's v1 extensions) authenticate the same
// way: their one statement finds the role only while the root key still grants what it did.
type RoleRoute = "/v1/permissions.addPermissionsToRole" | "/v1/permissions.removePermissionsFromRole";
const ROLE_ROUTES: RoleRoute[] = ["/v1/permissions.addPermissionsToRole", "/v1/permissions.removePermissionsFromRole"];

/**
 * A fresh workspace whose root key is in memory (it made one change of the route), a role with `write()` (the route
 * again, with the next of five permissions: added to the role, or removed from it) and `state()` (the role's links).
 */
async function cachedRootKeyForRoles(h: Harness, route: RoleRoute) {
  const t: Tenant = await h.tenant();
  const slugs = ["side.1", "side.2", "side.3", "side.4", "side.5"];
  for (const name of slugs) expect((await h.post("/v1/permissions.createPermission", { name }, t.rootKey)).status).toBe(200);
  const { roleId } = (await h.post("/v1/permissions.createRole", { name: "side-role" }, t.rootKey)).body as { roleId: string };
  if (route.endsWith("removePermissionsFromRole")) {
    const all = slugs.map((slug) => ({ slug }));
    expect((await h.post("/v1/permissions.addPermissionsToRole", { roleId, permissions: all }, t.rootKey)).status).toBe(200);
  }
  let n = 0;
  const write = () => h.post(route, { roleId, permissions: [{ slug: slugs[n++ % slugs.length] }] }, t.rootKey);
  const state = () => h.sql<{ links: number }>(`select count(*)::int as links from roles_permissions where role_id = '${roleId}'`);
  expect((await write()).status).toBe(200);
  return { t, roleId, write, state };
}

describe("a role's permissions changed with a root key in memory: the change re-checks it", () => {
  test.for(ROLE_ROUTES)("%s: reads no epoch before writing", async (route, { h }) => {
    const { write, state } = await cachedRootKeyForRoles(h, route);
    const before = await state();
    expect(await epochReadsDuring(h, async () => expect((await write()).status).toBe(200))).toBe(0);
    expect(await state()).not.toEqual(before);
  });

  test.for(ROLE_ROUTES)("%s: refuses a root key deleted since, and changes nothing", async (route, { h }) => {
    const { t, write, state } = await cachedRootKeyForRoles(h, route);
    const before = await state();
    await h.sql(`delete from root_keys where id = '${t.rootKeyId}'`);
    const res = await write();
    expect(res.status).toBe(403);
    expect(res.body.error.message).toBe("key not found");
    expect(await state()).toEqual(before);
  });

  test.for(ROLE_ROUTES)("%s: refuses a root key that lost its permission since, and changes nothing", async (route, { h }) => {
    const { t, write, state } = await cachedRootKeyForRoles(h, route);
    const before = await state();
    await h.sql(`update root_keys set permissions = '{rbac.*.read_role}' where id = '${t.rootKeyId}'`);
    expect(refusal(await write())).toEqual({ status: 403, code: "INSUFFICIENT_PERMISSIONS" });
    expect(await state()).toEqual(before);
  });

  test.for(ROLE_ROUTES)("%s: refuses a root key whose workspace was disabled since, and changes nothing", async (route, { h }) => {
    const { t, write, state } = await cachedRootKeyForRoles(h, route);
    const before = await state();
    await h.disableWorkspace(t.workspaceId);
    expect((await write()).status).toBe(403);
    expect(await state()).toEqual(before);
  });

  test.for(ROLE_ROUTES)("%s: accepts a root key granted its permission since it was refused", async (route, { h }) => {
    const { t, write, state } = await cachedRootKeyForRoles(h, route);
    await h.sql(`update root_keys set permissions = '{rbac.*.read_role}' where id = '${t.rootKeyId}'`);
    expect((await write()).status).toBe(403); // in memory again, without the permission
    const before = await state();
    await h.sql(`update root_keys set permissions = '{*}' where id = '${t.rootKeyId}'`);
    expect((await write()).status).toBe(200);
    expect(await state()).not.toEqual(before);
  });

  test.for(ROLE_ROUTES)("%s: answers 404 for a role deleted since", async (route, { h }) => {
    const { roleId, write, state } = await cachedRootKeyForRoles(h, route);
    await h.sql(`delete from roles where id = '${roleId}'`);
    expect(refusal(await write())).toEqual({ status: 404, code: "NOT_FOUND" });
    expect(await state()).toEqual([{ links: 0 }]);
  });
});
