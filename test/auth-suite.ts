import { describe, expect, it } from "vitest";
import { countIn } from "./fixtures.js";
import { expectError, type Harness, type Response, type Tenant } from "./helper.js";

export type RouteRequest = { body?: unknown; query?: Record<string, string> };

export type AuthCase = {
  method: "GET" | "POST";
  path: string;
  /** A request that succeeds for `owner` (it may create what it needs in owner's workspace first). */
  validRequest(h: Harness, owner: Tenant): Promise<RouteRequest>;
  /** Permissions that are not enough for this route. */
  insufficientPermissions: string[];
  /** How the route answers `other`, a root key of another workspace, making owner's valid request. */
  expectForOtherWorkspace(res: Response, h: Harness, owner: Tenant, other: Tenant): Promise<void>;
  /** Rows that a refused request must leave as they were. */
  countRows(h: Harness): Promise<number>;
  /** The status of the owner's accepted request: 200 unless the route says otherwise (enqueueKeys: 202). */
  successStatus?: number;
  /**
   * For a route that names one thing by id: the valid request naming one that does not exist. The suite then checks
   * that a wrong root key cannot tell the two apart (no existence oracle).
   */
  missingRequest?(valid: RouteRequest): RouteRequest;
};

/** An answer with the ids in its message blanked, to compare answers about different ids. */
const shapeOf = (res: Response) => ({
  status: res.status,
  code: res.body?.error?.code,
  message: String(res.body?.error?.message).replace(/\b[a-z]+_\w+/g, "<id>"),
});

const send = (h: Harness, c: AuthCase, req: RouteRequest, rootKey?: string) =>
  c.method === "GET" ? h.get(c.path, req.query ?? {}, rootKey) : h.post(c.path, req.body ?? {}, rootKey);

/** A file's test API with the harness fixture `h` (test/fixtures.ts, or a test extended from it). */
export type HarnessTest = ((name: string, fn: (context: { h: Harness }) => Promise<void>) => unknown) & { extend: unknown };

/**
 * The checks every root-key route must pass: one suite, run for each route, on the file's harness: its fixture `h`
 * (pass the file's test API) or, for a file not on fixtures yet, a getter of the harness its beforeAll made.
 */
export function describeRootKeyAuth(harness: HarnessTest | (() => Harness), c: AuthCase) {
  const run = (name: string, fn: (h: Harness) => Promise<void>) =>
    "extend" in harness ? harness(name, async ({ h }) => fn(h)) : it(name, () => fn(harness()));
  describe(`${c.method} ${c.path}: root-key authentication`, () => {
    const refused = async (h: Harness, rootKey: string | undefined, status: number, code: string, message?: string | RegExp) => {
      const owner = await h.tenant();
      const req = await c.validRequest(h, owner);
      const before = await c.countRows(h);
      expectError(await send(h, c, req, rootKey ?? undefined), status, code, message);
      expect(await c.countRows(h)).toBe(before);
      return { h, owner, req };
    };

    run("refuses a request without a key (403 UNAUTHORIZED, key required)", async (h) => {
      await refused(h, undefined, 403, "UNAUTHORIZED", "key required");
      await refused(h, "", 403, "UNAUTHORIZED", "key required");
    });

    run("refuses an unknown key (403 UNAUTHORIZED, key not found)", async (h) => {
      await refused(h, "khroot_not_a_real_key_at_all", 403, "UNAUTHORIZED", "key not found");
    });

    run("refuses a key without the permission (403 INSUFFICIENT_PERMISSIONS)", async (h) => {
      const owner = await h.tenant();
      const req = await c.validRequest(h, owner);
      const weakKey = await h.rootKey(owner.workspaceId, c.insufficientPermissions);
      const before = await c.countRows(h);
      expectError(await send(h, c, req, weakKey), 403, "INSUFFICIENT_PERMISSIONS");
      expect(await c.countRows(h)).toBe(before);
    });

    run("refuses every key of a disabled workspace (403 FORBIDDEN, workspace is disabled)", async (h) => {
      const owner = await h.tenant();
      const req = await c.validRequest(h, owner);
      await h.disableWorkspace(owner.workspaceId);
      const before = await c.countRows(h);
      expectError(await send(h, c, req, owner.rootKey), 403, "FORBIDDEN", "workspace is disabled");
      expect(await c.countRows(h)).toBe(before);
    });

    run("never lets a key reach another workspace's data", async (h) => {
      const owner = await h.tenant();
      const other = await h.tenant();
      const req = await c.validRequest(h, owner);
      await c.expectForOtherWorkspace(await send(h, c, req, other.rootKey), h, owner, other);
    });

    if (c.missingRequest) {
      const missingRequest = c.missingRequest;
      run("answers a wrong root key the same whether or not the id exists", async (h) => {
        const owner = await h.tenant();
        const other = await h.tenant();
        const disabled = await h.tenant();
        await h.disableWorkspace(disabled.workspaceId);
        const existing = await c.validRequest(h, owner);
        const missing = missingRequest(existing);
        const before = await c.countRows(h);
        for (const rootKey of [undefined, "khroot_not_a_real_key_at_all", disabled.rootKey, other.rootKey]) {
          const [a, b] = [await send(h, c, existing, rootKey), await send(h, c, missing, rootKey)];
          expect(a.status, JSON.stringify(a.body)).toBeGreaterThanOrEqual(400);
          expect(shapeOf(b), String(rootKey)).toEqual(shapeOf(a));
        }
        expect(await c.countRows(h)).toBe(before);
      });
    }

    run("accepts the owner's key", async (h) => {
      const owner = await h.tenant();
      const res = await send(h, c, await c.validRequest(h, owner), owner.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(c.successStatus ?? 200);
    });
  });
}

/** describeRootKeyAuth for several routes of a file, with what they have in common (`countRows`, ...) said once. */
export function describeRootKeyAuthOf<S extends Partial<AuthCase>>(
  harness: HarnessTest | (() => Harness),
  shared: S,
  cases: (Omit<AuthCase, keyof S> & Partial<AuthCase>)[],
) {
  for (const c of cases) describeRootKeyAuth(harness, { ...shared, ...c } as AuthCase);
}

// The answers routes give a root key of another workspace, as `expectForOtherWorkspace` values.

/** `countRows` of the rows that match `query` (`<table> where …`). */
export const rowsOf = (query: string) => (h: Harness) => countIn(h, query);

/** 404 NOT_FOUND with this message: the owner's thing is as missing for the other workspace as a made-up id. */
export const answersNotFound = (message: string | RegExp) => async (res: Response) => expectError(res, 404, "NOT_FOUND", message);

/** 404 NOT_FOUND, and the owner's workspace still holds `n` rows of `table` (the refused write left them). */
export const answersNotFoundLeaving =
  (message: string | RegExp, table: string, n: number, where = "") =>
  async (res: Response, h: Harness, owner: Tenant) => {
    expectError(res, 404, "NOT_FOUND", message);
    expect(await countIn(h, `${table} where workspace_id = '${owner.workspaceId}'${where}`)).toBe(n);
  };

/** 200 with exactly `body`: a list route answers the other workspace's own (empty) list. */
export const answersEmpty = (body: unknown) => async (res: Response) => {
  expect(res.status).toBe(200);
  expect(res.body).toEqual(body);
};

/** 200 with the other workspace's own list (an array of rows with ids), none of them a row of `table` of the owner's. */
export const listsNoneOfOwners = (table: string) => async (res: Response, h: Harness, owner: Tenant) => {
  expect(res.status).toBe(200);
  const ownerIds = (await h.sql<{ id: string }>(`select id from ${table} where workspace_id = '${owner.workspaceId}'`)).map((r) => r.id);
  expect(res.body.some((r: { id: string }) => ownerIds.includes(r.id))).toBe(false);
};

/** 200, and the row of `table` the route created (its id in the body's `idField`) belongs to the other workspace. */
export const createsInOwnWorkspace =
  (table: string, idField: string) => async (res: Response, h: Harness, owner: Tenant, other: Tenant) => {
    expect(res.status).toBe(200);
    const [row] = await h.sql<{ workspace_id: string }>(`select workspace_id from ${table} where id = '${res.body[idField]}'`);
    expect(row!.workspace_id).toBe(other.workspaceId);
    expect(row!.workspace_id).not.toBe(owner.workspaceId);
  };
