import { expect, test as base } from "vitest";
import { createHarness, type Harness, type Tenant } from "./helper.js";

/** Rows matching `query` (`<table> where …`), counted in `h`'s database. */
export const countIn = async (h: Harness, query: string) =>
  Number((await h.sql<{ n: string }>(`select count(*) as n from ${query}`))[0]!.n);

/**
 * The prologue most test files share, as vitest fixtures of the file's scope instead of `let h; beforeAll(...)`
 * copied into each: a test names what it needs and gets the file's one copy, made at its first use and closed after
 * the file's last test.
 * - `h`: the real app on a fresh, migrated database of the file's own (createHarness()).
 * - `t`: a workspace of it with a root key holding `*`.
 * - `apiId`: an API of that workspace.
 * - helpers over them that several files share: `newApi` (with any createApi settings), `importKey`, `createRole`,
 *   `count`, `keyRoles`, `keyPermissions` (made only for a test that names them).
 *
 *   import { test } from "./fixtures.js";
 *   test("creates an API", async ({ h, t }) => { ... });
 *
 * A file with fixtures of its own (helpers over `h`) extends `test` once, at its top: an `extend` inside a describe
 * is another test API, whose tests would get a second file-scoped harness.
 */
export const test = base
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this destructuring
  .extend("h", { scope: "file" }, async ({}, { onCleanup }) => {
    const h = await createHarness();
    onCleanup(() => h.close());
    return h;
  })
  .extend("t", { scope: "file" }, async ({ h }) => h.tenant())
  .extend("apiId", { scope: "file" }, async ({ h, t }) => h.createApi(t))
  .extend(
    "newApi",
    async ({ h }) =>
      (tenant: Tenant, settings: Record<string, unknown> = {}) =>
        h.createApi(tenant, settings),
  )
  .extend(
    "importKey",
    async ({ h, t, apiId }) =>
      (fields: Record<string, unknown> = {}, tenant = t, api = apiId) =>
        h.importKey(tenant, api, fields),
  )
  // File-scoped (a closure over the file's h and t) so that a suite-level `it.beforeAll` may create roles too.
  .extend("createRole", { scope: "file" }, async ({ h, t }) => async (name: string, tenant = t): Promise<string> => {
    const res = await h.post("/v1/permissions.createRole", { name }, tenant.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.roleId;
  })
  .extend(
    "count",
    async ({ h }) =>
      (query: string) =>
        countIn(h, query),
  )
  .extend(
    "keyRoles",
    async ({ h }) =>
      async (keyId: string) =>
        (await h.sql<{ id: string }>(`select role_id as id from keys_roles where key_id = '${keyId}' order by role_id`)).map((r) => r.id),
  )
  .extend(
    "keyPermissions",
    async ({ h }) =>
      async (keyId: string) =>
        (
          await h.sql<{ id: string }>(`select permission_id as id from keys_permissions where key_id = '${keyId}' order by permission_id`)
        ).map((r) => r.id),
  );

export const it = test;
