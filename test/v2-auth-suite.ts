import { describe, expect, it } from "vitest";
import type { Harness, Response, Tenant } from "./helper.js";
import { expectV2Error } from "./v2-errors.js";
import { served } from "./v2-served.js";

/**
 * The checks every v2 root-key route must pass, as test/auth-suite.ts has them for v1, one table row per route (or per
 * grant of a route): a root key without the route's permission is refused (403 insufficient_permissions, or the route's
 * masked answer, contract §2 "On deny") and nothing is written; a root key holding exactly the grant is accepted; a root
 * key of another workspace, holding everything, does not reach the owner's object (contract §1: another workspace's
 * object is not found). Authentication itself (400 without a header, 401 for a wrong key) is test/route-auth.test.ts's.
 * A row for a route keyhaven does not serve yet is skipped until the route is registered (test/v2-served.ts).
 */
export type V2AuthCase = {
  path: `/v2/${string}`;
  /** Tells two rows of one route apart (e.g. the wildcard grant and the one naming the object). */
  label?: string;
  /**
   * Makes what the request needs in `owner`'s workspace (through v1, v2, or SQL) and answers the request's body and
   * `grant`, the permissions that are exactly enough for it.
   */
  setup(h: Harness, owner: Tenant): Promise<{ body: unknown; grant: string[] }>;
  /** Permissions a refused root key holds (default none): close to the grant, but not enough. */
  insufficient?: string[];
  /**
   * How the route refuses a key without its permission when it masks the refusal (default 403 insufficient_permissions):
   * a v2 error, or a check of its own (keys.verifyKey answers 200 NOT_FOUND).
   */
  denied?: { status: number; type: string; detail?: string } | ((res: Response) => void);
  /** The status of the accepted request: 200 unless the route says otherwise. */
  successStatus?: number;
  /**
   * How the route answers the owner's request sent with another workspace's root key: a v2 error (404, its type), or
   * a check of its own (a list route answers the other workspace's own list; a create route creates in its own).
   */
  otherWorkspace: { status: number; type: string } | ((res: Response, h: Harness, owner: Tenant, other: Tenant) => Promise<void>);
};

/** Every row of the tables v2 routes write, as one fingerprint: a refused request must leave it as it was. */
const WRITTEN_TABLES = [
  "apis",
  "keys",
  "encrypted_keys",
  "identities",
  "permissions",
  "roles",
  "keys_roles",
  "keys_permissions",
  "roles_permissions",
  "ratelimits",
  "ratelimit_namespaces",
  "ratelimit_overrides",
];
async function fingerprint(h: Harness) {
  const parts = await Promise.all(
    WRITTEN_TABLES.map(
      async (table) =>
        (
          await h.sql<{ f: string | null }>(
            `select md5(string_agg(row_to_json(t)::text, ',' order by row_to_json(t)::text)) as f from ${table} t`,
          )
        )[0]!.f,
    ),
  );
  return parts.join("|");
}

const INSUFFICIENT = "unkey/authorization/insufficient_permissions";

export function describeV2RootKeyAuth(harness: () => Harness, cases: V2AuthCase[]) {
  for (const c of cases) {
    const name = `POST ${c.path}${c.label ? ` (${c.label})` : ""}`;
    describe.runIf(served(c.path))(`${name}: root-key permission and tenant isolation`, () => {
      it(`refuses a root key without its permission (${c.denied ? "masked" : "403"}), writing nothing`, async () => {
        const h = harness();
        const owner = await h.tenant();
        const { body } = await c.setup(h, owner);
        const weak = await h.rootKey(owner.workspaceId, c.insufficient ?? []);
        const before = await fingerprint(h);
        const res = await h.post(c.path, body, weak);
        if (typeof c.denied === "function") c.denied(res);
        else if (c.denied) expectV2Error(res, c.denied.status, c.denied.type, c.denied.detail);
        else expectV2Error(res, 403, INSUFFICIENT, /^Missing (permission|one of these permissions)/);
        expect(await fingerprint(h)).toBe(before);
      });

      it("accepts a root key holding exactly its grant", async () => {
        const h = harness();
        const owner = await h.tenant();
        const { body, grant } = await c.setup(h, owner);
        const res = await h.post(c.path, body, await h.rootKey(owner.workspaceId, grant));
        expect(res.status, `${JSON.stringify(grant)}: ${JSON.stringify(res.body)}`).toBe(c.successStatus ?? 200);
      });

      it("does not let another workspace's root key (holding everything) reach the owner's object", async () => {
        const h = harness();
        const owner = await h.tenant();
        const other = await h.tenant();
        const { body } = await c.setup(h, owner);
        const before = await fingerprint(h);
        const res = await h.post(c.path, body, other.rootKey);
        if (typeof c.otherWorkspace === "function") await c.otherWorkspace(res, h, owner, other);
        else {
          expectV2Error(res, c.otherWorkspace.status, c.otherWorkspace.type);
          expect(await fingerprint(h)).toBe(before);
        }
      });
    });
  }
}

// Answers of another workspace, as `otherWorkspace` values.

/** A v2 404 of this type (`unkey/data/key_not_found`, …). */
export const notFound = (type: string) => ({ status: 404, type: `unkey/data/${type}` });

/** 200 with an empty `data` list: a list route answers the other workspace's own (empty) list. */
export const listsNothing = async (res: Response) => {
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.data).toEqual([]);
};

/** 200, and what the route created (the row of `table` whose id is `data[idField]`) is the other workspace's. */
export const createsInOwnWorkspace =
  (table: string, idField: string) => async (res: Response, h: Harness, owner: Tenant, other: Tenant) => {
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [row] = await h.sql<{ workspace_id: string }>(`select workspace_id from ${table} where id = '${res.body.data[idField]}'`);
    expect(row?.workspace_id).toBe(other.workspaceId);
    expect(row?.workspace_id).not.toBe(owner.workspaceId);
  };
