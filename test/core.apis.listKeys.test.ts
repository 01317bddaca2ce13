import { describe, expect } from "vitest";
import { listApiKeys } from "../src/core/apis/apis.core.js";
import { keyspaceUrn } from "../src/core/auth/permissions.query.js";
import { rootKeyCaller, withAccess } from "../src/core/caller.js";
import { NotFoundError, PermissionDeniedError } from "../src/errors.js";
import { V1_ACCESS } from "../src/wire/v1/caller.js";
import { V2_ACCESS } from "../src/wire/v2/caller.js";
import { test } from "./fixtures.js";

// Listing an API's keys is one core function both surfaces call (issue 35 §1): the caller's access policy decides who
// may list and how a refusal is told; the rules object the page's shape.
const callerOf = (workspaceId: string, permissions: string[], access = V1_ACCESS) =>
  rootKeyCaller({ rootKeyId: "rk_core_list", workspaceId, permissions: new Set(permissions) }, access, { surface: "v1" });
const after = { decryptNeedsEncryptingApi: false, cursor: "after", total: true, ratelimits: false } as const;
const from = { decryptNeedsEncryptingApi: true, cursor: "from", total: false, ratelimits: true } as const;

describe("core listApiKeys", () => {
  test("pages by the rules' cursor: after a page's last id with a total, or from the next page's first id", async ({
    h,
    t,
    apiId,
    importKey,
  }) => {
    const ids = [(await importKey()).keyId, (await importKey()).keyId, (await importKey()).keyId].sort();
    const all = callerOf(t.workspaceId, ["*"]);
    const first = await listApiKeys(h.services, all, { apiId, limit: 2 }, after);
    expect(first.keys.map((k) => k.id)).toEqual(ids.slice(0, 2));
    expect(first).toMatchObject({ cursor: ids[1], total: 3 });
    expect(first.ratelimits).toBeUndefined();
    const next = await listApiKeys(h.services, all, { apiId, limit: 2, cursor: first.cursor }, after);
    expect(next.keys.map((k) => k.id)).toEqual(ids.slice(2));
    expect(next.cursor).toBeUndefined();

    const v2First = await listApiKeys(h.services, all, { apiId, limit: 2 }, from);
    expect(v2First.cursor).toBe(ids[2]);
    expect(v2First.total).toBeUndefined();
    expect(v2First.ratelimits?.size).toBe(2);
    const v2Next = await listApiKeys(h.services, all, { apiId, limit: 2, cursor: v2First.cursor }, from);
    expect(v2Next.keys.map((k) => k.id)).toEqual(ids.slice(2));
  });

  test("refuses by the caller's access policy: 403 before the lookup, or not found after it", async ({ h, t, apiId }) => {
    const none = callerOf(t.workspaceId, []);
    await expect(listApiKeys(h.services, none, { apiId: "api_missing", limit: 1 }, after)).rejects.toBeInstanceOf(PermissionDeniedError);
    const hidden = withAccess(callerOf(t.workspaceId, [], V2_ACCESS), { denied: "notFound" });
    await expect(listApiKeys(h.services, hidden, { apiId, limit: 1 }, from)).rejects.toThrow(new NotFoundError("api", apiId));
    // The keyspace's URNs list only for a caller whose policy counts URN grants.
    const urns = [keyspaceUrn(t.workspaceId, apiId, "*", "read_key"), keyspaceUrn(t.workspaceId, apiId, null, "read_keyspace")];
    await expect(listApiKeys(h.services, callerOf(t.workspaceId, urns), { apiId, limit: 1 }, after)).rejects.toBeInstanceOf(
      PermissionDeniedError,
    );
    await expect(listApiKeys(h.services, callerOf(t.workspaceId, urns, V2_ACCESS), { apiId, limit: 1 }, from)).resolves.toHaveProperty(
      "keys",
    );
    await expect(listApiKeys(h.services, callerOf(t.workspaceId, ["*"]), { apiId: "api_missing", limit: 1 }, after)).rejects.toThrow(
      new NotFoundError("api", "api_missing"),
    );
  });
});
