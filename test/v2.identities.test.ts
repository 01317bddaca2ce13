import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import { expectV2Error } from "./v2-errors.js";
import type { Harness, Tenant } from "./helper.js";

// v2's identities.* routes (contract §7) over the core v1 uses: one `identity` field naming the id or the
// externalId, rate limits with ids and autoApply, pages by id with v2's cursor, v2's errors, v1 and v2 on one store.

const ext = () => `user_${randomBytes(5).toString("hex")}`;

async function createIdentity(h: Harness, t: Tenant, body: Record<string, unknown>) {
  const res = await h.post("/v2/identities.createIdentity", body, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data.identityId as string;
}

const limit = (name: string, autoApply = false) => ({ name, limit: 10, duration: 60_000, autoApply });

describe("v2 identities", () => {
  test("createIdentity, then getIdentity by id and by externalId, with meta and rate limits (ids, autoApply)", async ({ h, t }) => {
    const externalId = ext();
    const id = await createIdentity(h, t, { externalId, meta: { plan: "pro" }, ratelimits: [limit("requests", true), limit("tokens")] });
    expect(id).toMatch(/^id_/);
    for (const identity of [id, externalId]) {
      const res = await h.post("/v2/identities.getIdentity", { identity }, t.rootKey);
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual({
        id,
        externalId,
        meta: { plan: "pro" },
        ratelimits: [
          { id: expect.stringMatching(/^rl_/), name: "requests", limit: 10, duration: 60_000, autoApply: true },
          { id: expect.stringMatching(/^rl_/), name: "tokens", limit: 10, duration: 60_000, autoApply: false },
        ],
      });
    }
    // The same identity through v1, which shows neither rate-limit ids nor autoApply.
    const v1 = await h.get("/v1/identities.getIdentity", { identityId: id }, t.rootKey);
    expect(v1.body).toEqual({
      id,
      externalId,
      meta: { plan: "pro" },
      ratelimits: [
        { name: "requests", limit: 10, duration: 60_000 },
        { name: "tokens", limit: 10, duration: 60_000 },
      ],
    });
    const bare = await createIdentity(h, t, { externalId: ext() });
    expect((await h.post("/v2/identities.getIdentity", { identity: bare }, t.rootKey)).body.data).toEqual({
      id: bare,
      externalId: expect.any(String),
    });
  });

  test("refuses a taken externalId (409), a bad one and an unknown field of updateIdentity (400), a repeated rate-limit name (400)", async ({
    h,
    t,
  }) => {
    const externalId = ext();
    await createIdentity(h, t, { externalId });
    expectV2Error(
      await h.post("/v2/identities.createIdentity", { externalId }, t.rootKey),
      409,
      "unkey/data/identity_already_exists",
      `Identity with externalId '${externalId}' already exists in this workspace.`,
    );
    expectV2Error(
      await h.post("/v2/identities.createIdentity", { externalId: "has space" }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
    expectV2Error(
      await h.post("/v2/identities.updateIdentity", { identity: externalId, other: 1 }, t.rootKey),
      400,
      "unkey/application/invalid_input",
    );
    expectV2Error(
      await h.post("/v2/identities.createIdentity", { externalId: ext(), ratelimits: [limit("same"), limit("same")] }, t.rootKey),
      400,
      "unkey/application/invalid_input",
      "Ratelimit with name 'same' is already defined in the request",
    );
    expectV2Error(
      await h.post("/v2/identities.updateIdentity", { identity: externalId, ratelimits: [limit("same"), limit("same")] }, t.rootKey),
      400,
      "unkey/application/invalid_input",
      "Ratelimit with name 'same' is already defined in the request",
    );
  });

  test("meta over 1.0 MB as JSON is 400 in v2's words, and nothing is written", async ({ h, t }) => {
    const externalId = ext();
    const res = await h.post("/v2/identities.createIdentity", { externalId, meta: { blob: "x".repeat(1_000_000) } }, t.rootKey);
    expectV2Error(res, 400, "unkey/application/invalid_input", "Metadata is too large: it must be at most 1.0 MB, but is 1.0 MB.");
    expect(await h.sql(`select id from identities where external_id = '${externalId}'`)).toEqual([]);
    // v1 keeps its own limit (64k characters).
    const v1 = await h.post("/v1/identities.createIdentity", { externalId, meta: { blob: "x".repeat(70_000) } }, t.rootKey);
    expect(v1.status).toBe(400);
  });

  test("updateIdentity replaces meta and reconciles rate limits by name, keeping the ids of kept names; answers what is stored", async ({
    h,
    t,
  }) => {
    const externalId = ext();
    const id = await createIdentity(h, t, { externalId, meta: { a: 1 }, ratelimits: [limit("keep"), limit("drop")] });
    const before = (await h.post("/v2/identities.getIdentity", { identity: id }, t.rootKey)).body.data;
    const keptId = before.ratelimits.find((r: { name: string }) => r.name === "keep").id;
    const updated = await h.post(
      "/v2/identities.updateIdentity",
      { identity: externalId, meta: { b: 2 }, ratelimits: [{ ...limit("keep", true), limit: 99 }, limit("new")] },
      t.rootKey,
    );
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body.data).toEqual({
      id,
      externalId,
      meta: { b: 2 },
      ratelimits: [
        { id: keptId, name: "keep", limit: 99, duration: 60_000, autoApply: true },
        { id: expect.stringMatching(/^rl_/), name: "new", limit: 10, duration: 60_000, autoApply: false },
      ],
    });
    // Without meta, the stored meta is answered (not the request's, which upstream echoes).
    const noMeta = await h.post("/v2/identities.updateIdentity", { identity: id, ratelimits: [] }, t.rootKey);
    expect(noMeta.body.data).toEqual({ id, externalId, meta: { b: 2 } });
    const cleared = await h.post("/v2/identities.updateIdentity", { identity: id, meta: {} }, t.rootKey);
    expect(cleared.body.data).toEqual({ id, externalId });
  });

  test("deleteIdentity answers only meta; the identity is gone and its externalId free again", async ({ h, t }) => {
    const externalId = ext();
    await createIdentity(h, t, { externalId });
    const deleted = await h.post("/v2/identities.deleteIdentity", { identity: externalId }, t.rootKey);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ meta: { requestId: expect.stringMatching(/^req_/) } });
    expectV2Error(
      await h.post("/v2/identities.getIdentity", { identity: externalId }, t.rootKey),
      404,
      "unkey/data/identity_not_found",
      "This identity does not exist.",
    );
    expectV2Error(await h.post("/v2/identities.deleteIdentity", { identity: externalId }, t.rootKey), 404, "unkey/data/identity_not_found");
    await createIdentity(h, t, { externalId });
  });

  test("another workspace's identity is not found, by id or externalId", async ({ h, t }) => {
    const other = await h.tenant();
    const externalId = ext();
    const id = await createIdentity(h, other, { externalId });
    for (const identity of [id, externalId]) {
      expectV2Error(await h.post("/v2/identities.getIdentity", { identity }, t.rootKey), 404, "unkey/data/identity_not_found");
      expectV2Error(await h.post("/v2/identities.updateIdentity", { identity, meta: {} }, t.rootKey), 404, "unkey/data/identity_not_found");
      expectV2Error(await h.post("/v2/identities.deleteIdentity", { identity }, t.rootKey), 404, "unkey/data/identity_not_found");
    }
  });

  test("listIdentities pages by id; a key that may read only some identities is refused for a page holding others", async ({ h }) => {
    const t = await h.tenant();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await createIdentity(h, t, { externalId: `list_${i}_${ext()}` }));
    ids.sort();
    const first = await h.post("/v2/identities.listIdentities", { limit: 2 }, t.rootKey);
    expect(first.body.data.map((r: { id: string }) => r.id)).toEqual(ids.slice(0, 2));
    expect(first.body.pagination).toEqual({ hasMore: true, cursor: ids[2] });
    const second = await h.post("/v2/identities.listIdentities", { limit: 2, cursor: ids[2] }, t.rootKey);
    expect(second.body.data.map((r: { id: string }) => r.id)).toEqual([ids[2]]);
    expect(second.body.pagination).toEqual({ hasMore: false });
    expect((await h.post("/v2/identities.listIdentities", { search: "LIST_1" }, t.rootKey)).body.data).toHaveLength(1);
    const one = await h.rootKey(t.workspaceId, [`identity.${ids[0]}.read_identity`]);
    expect((await h.post("/v2/identities.listIdentities", { limit: 1 }, one)).status).toBe(200);
    expectV2Error(
      await h.post("/v2/identities.listIdentities", {}, one),
      403,
      "unkey/authorization/insufficient_permissions",
      `Missing one of these permissions: identity.*.read_identity or identity.${ids[1]}.read_identity or unkey:v1:${t.workspaceId}:projects/*/identities/*#read_identity`,
    );
  });

  test("getIdentity looks up first (404), then checks the permission on the identity's id (403)", async ({ h, t }) => {
    const id = await createIdentity(h, t, { externalId: ext() });
    const none = await h.rootKey(t.workspaceId, ["api.*.read_api"]);
    expectV2Error(await h.post("/v2/identities.getIdentity", { identity: "id_missing_1" }, none), 404, "unkey/data/identity_not_found");
    expectV2Error(await h.post("/v2/identities.getIdentity", { identity: id }, none), 403, "unkey/authorization/insufficient_permissions");
    const scoped = await h.rootKey(t.workspaceId, [`identity.${id}.read_identity`]);
    expect((await h.post("/v2/identities.getIdentity", { identity: id }, scoped)).status).toBe(200);
  });
});
