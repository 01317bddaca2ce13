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
 *   `count`, `backdate`, `keyRoles`, `keyPermissions` (made only for a test that names them).
 *
 *   import { test } from "./fixtures.js";
 *   test("creates an API", async ({ h, t }) => { ... });
 *
 * A file with fixtures of its own (helpers over `h`) extends `test` once, at its top: an `extend` inside a describe
 * is another test API, whose tests would get a second file-scoped harness.
 */
/**
 * The `h` fixture: a harness made with `env` and `options` (default: none), closed after the file's last test, and
 * `setUp` run on it first. A file whose harness needs its own (a clock, no migration worker) overrides `h` once at its
 * top, so that `t`, `apiId` and the helpers are of it:
 *
 *   const it = test.override("h", { scope: "file" }, harnessWith({}, { clock })).extend(...);
 */
export const harnessWith =
  (env?: Parameters<typeof createHarness>[0], options?: Parameters<typeof createHarness>[1], setUp?: (h: Harness) => Promise<unknown>) =>
  // biome-ignore lint/correctness/noEmptyPattern: vitest reads a fixture's dependencies from this destructuring
  async ({}: object, { onCleanup }: { onCleanup: (cleanup: () => Promise<void>) => void }) => {
    const h = await createHarness(env, options);
    onCleanup(() => h.close());
    await setUp?.(h);
    return h;
  };

export const test = base
  .extend("h", { scope: "file" }, harnessWith())
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
  /** Moves a key's creation and last refill back by `days`, so that a refill falls due. */
  .extend(
    "backdate",
    async ({ h }) =>
      (keyId: string, days: number) =>
        h.sql(`update keys set created_at_m = created_at_m - ${days * 86_400_000}::bigint,
         last_refill_at = case when last_refill_at is null then null else last_refill_at - interval '${days} days' end
         where id = '${keyId}'`),
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
