import { expect, test as base } from "vitest";
import { rpcs } from "../src/wire/v1/routes.js";
import { createHarness, type Harness, type Response, type Tenant } from "./helper.js";

/** Rows matching `query` (`<table> where …`), counted in `h`'s database. */
export const countIn = async (h: Harness, query: string) =>
  Number((await h.sql<{ n: string }>(`select count(*) as n from ${query}`))[0]!.n);

/**
 * A key's stored ciphertext row (encrypted_keys) with `decrypted`, what the keyring makes of it for `workspaceId`.
 */
export async function storedCiphertext(h: Harness, workspaceId: string, keyId: string) {
  const [enc] = await h.sql<any>(`select * from encrypted_keys where key_id = '${keyId}'`);
  return { ...enc, decrypted: await h.keyring.decrypt(h.db, workspaceId, enc.encryption_key_id, keyId, enc.encrypted) };
}

/** Whether `secret` stands in clear in any row of the tables a stored key is written to (keys and its ciphertexts). */
export async function inClear(h: Harness, secret: string) {
  const dump = await h.sql<{ row: string }>(
    `select row_to_json(x)::text as row from (select * from keys) x
     union all select row_to_json(x)::text from (select * from encrypted_keys) x
     union all select row_to_json(x)::text from (select * from encryption_keys) x`,
  );
  return dump.some((r) => r.row.includes(secret));
}

const rpcOf = new Map(rpcs.map((rpc) => [rpc.path, rpc]));

/**
 * One request to a v1 route, sent as the route itself is defined (src/wire/v1/routes.ts), so that no test file keeps
 * its own list of which route is a read: a GET with `input` as its query, a POST with `input` as its JSON body.
 */
export function callRoute(h: Harness, path: string, input: unknown = {}, rootKey?: string, headers?: Record<string, string>) {
  const rpc = rpcOf.get(path as `/v1/${string}`);
  if (!rpc) throw new Error(`no v1 route ${path}`);
  return rpc.method === "GET" ? h.get(path, input as Record<string, string>, rootKey) : h.post(path, input, rootKey, headers);
}

/**
 * A caller of one route: `(input, rootKey)` answers the raw response, with the file's root key `t.rootKey` unless told
 * another (`null`: no Authorization header at all); `.ok(input, rootKey)` expects the route's success status and
 * answers the body.
 */
export type RouteCaller = ((input?: unknown, rootKey?: string | null) => Promise<Response>) & {
  ok(input?: unknown, rootKey?: string | null): Promise<any>;
};

export function routeCaller(h: Harness, path: string, defaultRootKey?: string): RouteCaller {
  const call = (input?: unknown, rootKey: string | null | undefined = defaultRootKey) => callRoute(h, path, input, rootKey ?? undefined);
  return Object.assign(call, {
    async ok(input?: unknown, rootKey?: string | null) {
      const res = await call(input, rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(rpcOf.get(path as `/v1/${string}`)?.status ?? 200);
      return res.body;
    },
  });
}

/**
 * The prologue most test files share, as vitest fixtures of the file's scope instead of `let h; beforeAll(...)`
 * copied into each: a test names what it needs and gets the file's one copy, made at its first use and closed after
 * the file's last test.
 * - `h`: the real app on a fresh, migrated database of the file's own (createHarness()).
 * - `t`: a workspace of it with a root key holding `*`.
 * - `apiId`: an API of that workspace.
 * - `route`: `route("/v1/keys.createKey")` is a RouteCaller of that route with `t`'s root key.
 * - helpers over them that several files share: `newApi` (with any createApi settings), `importKey`, `createRole`,
 *   `createPermission`, `count`, `snapshot`, `backdate`, `keyRoles`, `keyPermissions` (made only for a test that
 *   names them).
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

/**
 * The shared fixtures over an `h` fixture of the caller's: `testWith(harnessWith({}, { clock }))` is `test` with the
 * file's harness made so. A file calls it once, at its top. (Not vitest's `test.override`: that changes the shared
 * `test` itself, and a worker that runs several files in one module graph (`isolate: false`) would hand the
 * override to the files that run after it.)
 */
export function testWith(h: ReturnType<typeof harnessWith>) {
  return (
    base
      .extend("h", { scope: "file" }, h)
      .extend("t", { scope: "file" }, async ({ h }) => h.tenant())
      .extend("apiId", { scope: "file" }, async ({ h, t }) => h.createApi(t))
      // File-scoped so that a suite-level `it.beforeAll` may call routes too.
      .extend(
        "route",
        { scope: "file" },
        async ({ h, t }) =>
          (path: `/v1/${string}`) =>
            routeCaller(h, path, t.rootKey),
      )
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
        "createPermission",
        { scope: "file" },
        async ({ h, t }) =>
          async (name: string, slug?: string, tenant = t): Promise<string> => {
            const res = await h.post("/v1/permissions.createPermission", { name, ...(slug && { slug }) }, tenant.rootKey);
            expect(res.status, JSON.stringify(res.body)).toBe(200);
            return res.body.permissionId;
          },
      )
      .extend(
        "count",
        async ({ h }) =>
          (query: string) =>
            countIn(h, query),
      )
      /** Every table a key's creation or import may write to, counted, to prove that a refused request wrote nothing. */
      .extend("snapshot", async ({ count }) => async () => ({
        keys: await count("keys"),
        identities: await count("identities"),
        ratelimits: await count("ratelimits"),
        encrypted: await count("encrypted_keys"),
        encryptionKeys: await count("encryption_keys"),
        roles: await count("roles"),
        permissions: await count("permissions"),
        keysRoles: await count("keys_roles"),
        keysPermissions: await count("keys_permissions"),
      }))
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
            (await h.sql<{ id: string }>(`select role_id as id from keys_roles where key_id = '${keyId}' order by role_id`)).map(
              (r) => r.id,
            ),
      )
      .extend(
        "keyPermissions",
        async ({ h }) =>
          async (keyId: string) =>
            (
              await h.sql<{ id: string }>(
                `select permission_id as id from keys_permissions where key_id = '${keyId}' order by permission_id`,
              )
            ).map((r) => r.id),
      )
  );
}

export const test = testWith(harnessWith());
export const it = test;
