import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { answersEmpty, answersNotFound, describeRootKeyAuthOf } from "./auth-suite.js";
import { countIn, test } from "./fixtures.js";
import { expectError, type Harness, type Tenant } from "./helper.js";

const unique = (prefix: string) => `${prefix}_${randomBytes(4).toString("hex")}`;
const identityRowsIn = async (h: Harness) => (await countIn(h, "identities")) + (await countIn(h, "ratelimits"));

async function newIdentityIn(h: Harness, tenant: Tenant, body: Record<string, unknown> = {}) {
  const externalId = (body.externalId as string | undefined) ?? unique("user");
  const res = await h.post("/v1/identities.createIdentity", { externalId, ...body }, tenant.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { id: res.body.identityId as string, externalId };
}

// The file's harness and tenant (`h`, `t` of test/fixtures.ts), and helpers over them.
const it = test
  .extend(
    "identityRows",
    async ({ h }) =>
      () =>
        identityRowsIn(h),
  )
  .extend(
    "newIdentity",
    async ({ h }) =>
      (tenant: Tenant, body: Record<string, unknown> = {}) =>
        newIdentityIn(h, tenant, body),
  )
  .extend(
    "verify",
    async ({ h }) =>
      (body: Record<string, unknown>) =>
        h.post("/v1/keys.verifyKey", body),
  );

describe("identities.createIdentity", () => {
  it("creates an identity with meta and rate limits that are not applied automatically", async ({ h, t, newIdentity }) => {
    const { id, externalId } = await newIdentity(t, {
      meta: { plan: "pro" },
      ratelimits: [{ name: "tokens", limit: 10, duration: 60_000 }],
    });
    expect(id).toMatch(/^id_/);
    const [row] = await h.sql<any>(`select * from identities where id = '${id}'`);
    expect(row).toMatchObject({ workspace_id: t.workspaceId, external_id: externalId, meta: { plan: "pro" } });
    const rls = await h.sql<any>(
      `select name, "limit", duration, auto_apply, key_id, identity_id from ratelimits where identity_id = '${id}'`,
    );
    expect(rls).toHaveLength(1);
    expect(rls[0]).toMatchObject({ name: "tokens", limit: 10, auto_apply: false, key_id: null, identity_id: id });
    expect(Number(rls[0].duration)).toBe(60_000);
  });

  it("answers a duplicate externalId in the workspace with 409 and creates nothing", async ({ h, t, identityRows, newIdentity }) => {
    const { externalId } = await newIdentity(t);
    const before = await identityRows();
    expectError(
      await h.post("/v1/identities.createIdentity", { externalId, ratelimits: [{ name: "a", limit: 1, duration: 1000 }] }, t.rootKey),
      409,
      "CONFLICT",
      `Identity with externalId "${externalId}" already exists in this workspace`,
    );
    expect(await identityRows()).toBe(before);
  });

  it("lets two workspaces use the same externalId", async ({ h, t, newIdentity }) => {
    const { externalId } = await newIdentity(t);
    await newIdentity(await h.tenant(), { externalId });
  });

  it("refuses meta longer than 64 000 characters when JSON-encoded", async ({ h, t, identityRows, newIdentity }) => {
    const meta = { blob: "x".repeat(64_000) };
    const size = JSON.stringify(meta).length;
    const before = await identityRows();
    expectError(
      await h.post("/v1/identities.createIdentity", { externalId: unique("user"), meta }, t.rootKey),
      400,
      "BAD_REQUEST",
      `metadata is too large, it must be less than 64k characters when json encoded, got: ${size}`,
    );
    expect(await identityRows()).toBe(before);
    const fits = { blob: "x".repeat(64_000 - 11) };
    expect(JSON.stringify(fits).length).toBe(64_000);
    await newIdentity(t, { meta: fits });
  });

  it("validates externalId and rate limits", async ({ h, t, identityRows }) => {
    const before = await identityRows();
    const post = (body: unknown) => h.post("/v1/identities.createIdentity", body, t.rootKey);
    expectError(await post({ externalId: "ab" }), 400, "BAD_REQUEST", /^externalId: /);
    expectError(await post({}), 400, "BAD_REQUEST", /^externalId: /);
    expectError(
      await post({ externalId: "abc", ratelimits: [{ name: "a", limit: 0, duration: 1000 }] }),
      400,
      "BAD_REQUEST",
      /^ratelimits\.0\.limit: /,
    );
    expectError(
      await post({ externalId: "abc", ratelimits: [{ name: "a", limit: 1, duration: 999 }] }),
      400,
      "BAD_REQUEST",
      /^ratelimits\.0\.duration: /,
    );
    expectError(await post({ externalId: "abc", meta: "nope" }), 400, "BAD_REQUEST", /^meta: /);
    // Bounded by what the columns hold: these were 500s (an int4 overflow, names too long for a unique index).
    expectError(await post({ externalId: "x".repeat(257) }), 400, "BAD_REQUEST", /^externalId: /);
    expectError(
      await post({ externalId: "abc", ratelimits: [{ name: "a", limit: 2 ** 31, duration: 1000 }] }),
      400,
      "BAD_REQUEST",
      /^ratelimits\.0\.limit: /,
    );
    expectError(
      await post({ externalId: "abc", ratelimits: [{ name: "n".repeat(9000), limit: 1, duration: 1000 }] }),
      400,
      "BAD_REQUEST",
      /^ratelimits\.0\.name: /,
    );
    expectError(
      await h.post(
        "/v1/identities.updateIdentity",
        { externalId: "abc", ratelimits: [{ name: "a", limit: 2 ** 31, duration: 1000 }] },
        t.rootKey,
      ),
      400,
      "BAD_REQUEST",
      /^ratelimits\.0\.limit: /,
    );
    expectError(
      await post({
        externalId: unique("user"),
        ratelimits: [
          { name: "a", limit: 1, duration: 1000 },
          { name: "a", limit: 2, duration: 1000 },
        ],
      }),
      409,
      "CONFLICT",
      'Ratelimit with name "a" is already defined in the request',
    );
    expect(await identityRows()).toBe(before);
  });
});

describe("identities.getIdentity", () => {
  it("reads an identity by id and by externalId", async ({ h, t, newIdentity }) => {
    const { id, externalId } = await newIdentity(t, {
      meta: { a: 1 },
      ratelimits: [
        { name: "b", limit: 5, duration: 2000 },
        { name: "a", limit: 1, duration: 1000 },
      ],
    });
    const expected = {
      id,
      externalId,
      meta: { a: 1 },
      ratelimits: [
        { name: "a", limit: 1, duration: 1000 },
        { name: "b", limit: 5, duration: 2000 },
      ],
    };
    const byId = await h.get("/v1/identities.getIdentity", { identityId: id }, t.rootKey);
    expect(byId.status).toBe(200);
    expect(byId.body).toEqual(expected);
    const byExternal = await h.get("/v1/identities.getIdentity", { externalId }, t.rootKey);
    expect(byExternal.body).toEqual(expected);
  });

  it("reports missing meta as {}", async ({ h, t, newIdentity }) => {
    const { id, externalId } = await newIdentity(t);
    const res = await h.get("/v1/identities.getIdentity", { identityId: id }, t.rootKey);
    expect(res.body).toEqual({ id, externalId, meta: {}, ratelimits: [] });
  });

  it("needs identityId or externalId, and answers an unknown one with 404", async ({ h, t }) => {
    expectError(await h.get("/v1/identities.getIdentity", {}, t.rootKey), 400, "BAD_REQUEST", "Provide either identityId or externalId");
    // Checked before the root key, as v1 did.
    expectError(await h.get("/v1/identities.getIdentity", {}), 400, "BAD_REQUEST", "Provide either identityId or externalId");
    expectError(
      await h.get("/v1/identities.getIdentity", { identityId: "id_nope" }, t.rootKey),
      404,
      "NOT_FOUND",
      "identity id_nope not found",
    );
    expectError(
      await h.get("/v1/identities.getIdentity", { externalId: "nobody" }, t.rootKey),
      404,
      "NOT_FOUND",
      "identity nobody not found",
    );
  });

  it("answers an identity of another workspace exactly like a missing one", async ({ h, t, newIdentity }) => {
    const { id, externalId } = await newIdentity(t);
    const other = await h.tenant();
    expectError(await h.get("/v1/identities.getIdentity", { identityId: id }, other.rootKey), 404, "NOT_FOUND", `identity ${id} not found`);
    expectError(
      await h.get("/v1/identities.getIdentity", { externalId }, other.rootKey),
      404,
      "NOT_FOUND",
      `identity ${externalId} not found`,
    );
  });

  it("accepts identity.*.read_identity and identity.<id>.read_identity, but not another identity's", async ({ h, t, newIdentity }) => {
    const { id } = await newIdentity(t);
    const { id: otherId } = await newIdentity(t);
    for (const perm of ["identity.*.read_identity", `identity.${id}.read_identity`]) {
      const key = await h.rootKey(t.workspaceId, [perm]);
      expect((await h.get("/v1/identities.getIdentity", { identityId: id }, key)).status).toBe(200);
    }
    const key = await h.rootKey(t.workspaceId, [`identity.${otherId}.read_identity`]);
    expectError(await h.get("/v1/identities.getIdentity", { identityId: id }, key), 403, "INSUFFICIENT_PERMISSIONS");
  });

  it("tells a root key without the permission neither the id behind an externalId nor whether it exists", async ({ h, t, newIdentity }) => {
    const { id, externalId } = await newIdentity(t);
    const { id: otherId } = await newIdentity(t);
    for (const perms of [[], ["identity.*.create_identity"], [`identity.${otherId}.read_identity`]]) {
      const key = await h.rootKey(t.workspaceId, perms);
      const existing = await h.get("/v1/identities.getIdentity", { externalId }, key);
      expectError(existing, 403, "INSUFFICIENT_PERMISSIONS", /read_identity on the identity with externalId /);
      expect(existing.body.error.message).not.toContain(id);
      const missing = await h.get("/v1/identities.getIdentity", { externalId: `${externalId}-missing` }, key);
      expect(missing.body.error.message.replace(`${externalId}-missing`, externalId)).toBe(existing.body.error.message);
      // By id, the permission is checked before the lookup: a missing id and an existing one answer alike.
      const byId = await h.get("/v1/identities.getIdentity", { identityId: id }, key);
      const byMissingId = await h.get("/v1/identities.getIdentity", { identityId: "id_missing0000000" }, key);
      expectError(byId, 403, "INSUFFICIENT_PERMISSIONS");
      expectError(byMissingId, 403, "INSUFFICIENT_PERMISSIONS");
    }
    const own = await h.rootKey(t.workspaceId, [`identity.${id}.read_identity`]);
    expect((await h.get("/v1/identities.getIdentity", { externalId }, own)).body).toMatchObject({ id, externalId });
  });
});

describe("identities.listIdentities", () => {
  it("pages through 250 identities, each exactly once, with the total", async ({ h }) => {
    const tenant = await h.tenant();
    const created = new Set<string>();
    const values: string[] = [];
    for (let i = 0; i < 250; i++) {
      const id = `id_list${String(i).padStart(4, "0")}${randomBytes(3).toString("hex")}`;
      created.add(id);
      values.push(`('${id}', '${tenant.workspaceId}', 'ext_${i}', 'default', ${Date.now()})`);
    }
    await h.sql(`insert into identities (id, workspace_id, external_id, environment, created_at_m) values ${values.join(",")}`);
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const res = await h.get("/v1/identities.listIdentities", { limit: "100", ...(cursor && { cursor }) }, tenant.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.total).toBe(250);
      seen.push(...res.body.identities.map((i: { id: string }) => i.id));
      cursor = res.body.cursor;
      pages++;
    } while (cursor && pages < 10);
    expect(seen).toHaveLength(250);
    expect(new Set(seen)).toEqual(created);
  });

  it("lists identities with their rate limits, only of the workspace and environment", async ({ h, t, newIdentity }) => {
    const tenant = await h.tenant();
    const a = await newIdentity(tenant, { ratelimits: [{ name: "r", limit: 3, duration: 5000 }] });
    await newIdentity(t);
    const res = await h.get("/v1/identities.listIdentities", {}, tenant.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      identities: [{ id: a.id, externalId: a.externalId, ratelimits: [{ name: "r", limit: 3, duration: 5000 }] }],
      total: 1,
    });
    const staging = await h.get("/v1/identities.listIdentities", { environment: "staging" }, tenant.rootKey);
    expect(staging.body).toEqual({ identities: [], total: 0 });
  });

  it("validates limit", async ({ h, t }) => {
    for (const limit of ["0", "101", "1.5", "x", ""]) {
      expectError(await h.get("/v1/identities.listIdentities", { limit }, t.rootKey), 400, "BAD_REQUEST", /^limit: /);
    }
  });

  it("accepts identity.<environment>.read_identity", async ({ h, t }) => {
    const key = await h.rootKey(t.workspaceId, ["identity.default.read_identity"]);
    expect((await h.get("/v1/identities.listIdentities", {}, key)).status).toBe(200);
    expectError(await h.get("/v1/identities.listIdentities", { environment: "prod" }, key), 403, "INSUFFICIENT_PERMISSIONS");
  });
});

describe("identities.updateIdentity", () => {
  it("updates meta and reconciles rate limits by name: update, insert, delete", async ({ h, t, newIdentity }) => {
    const { id, externalId } = await newIdentity(t, {
      meta: { old: true },
      ratelimits: [
        { name: "keep", limit: 1, duration: 1000 },
        { name: "drop", limit: 2, duration: 2000 },
      ],
    });
    const [keepBefore] = await h.sql<{ id: string }>(`select id from ratelimits where identity_id = '${id}' and name = 'keep'`);
    const res = await h.post(
      "/v1/identities.updateIdentity",
      {
        identityId: id,
        meta: { new: 1 },
        ratelimits: [
          { name: "keep", limit: 9, duration: 9000 },
          { name: "add", limit: 3, duration: 3000 },
        ],
      },
      t.rootKey,
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      id,
      externalId,
      meta: { new: 1 },
      ratelimits: [
        { name: "add", limit: 3, duration: 3000 },
        { name: "keep", limit: 9, duration: 9000 },
      ],
    });
    const rows = await h.sql<{ id: string; name: string }>(`select id, name from ratelimits where identity_id = '${id}' order by name`);
    expect(rows.map((r) => r.name)).toEqual(["add", "keep"]);
    expect(rows[1]!.id).toBe(keepBefore!.id);
    const read = await h.get("/v1/identities.getIdentity", { identityId: id }, t.rootKey);
    expect(read.body).toEqual(res.body);
  });

  it("finds the identity by externalId and leaves what is not given as it was", async ({ h, t, count, newIdentity }) => {
    const { id, externalId } = await newIdentity(t, { meta: { m: 1 }, ratelimits: [{ name: "r", limit: 1, duration: 1000 }] });
    const res = await h.post("/v1/identities.updateIdentity", { externalId }, t.rootKey);
    expect(res.body).toEqual({ id, externalId, meta: { m: 1 }, ratelimits: [{ name: "r", limit: 1, duration: 1000 }] });
    const cleared = await h.post("/v1/identities.updateIdentity", { externalId, ratelimits: [] }, t.rootKey);
    expect(cleared.body.ratelimits).toEqual([]);
    expect(await count(`ratelimits where identity_id = '${id}'`)).toBe(0);
  });

  it("refuses duplicate rate limit names in the request and changes nothing", async ({ h, t, newIdentity }) => {
    const { id } = await newIdentity(t, { ratelimits: [{ name: "r", limit: 1, duration: 1000 }] });
    const before = await h.sql(`select * from ratelimits where identity_id = '${id}'`);
    expectError(
      await h.post(
        "/v1/identities.updateIdentity",
        {
          identityId: id,
          meta: { x: 1 },
          ratelimits: [
            { name: "r", limit: 5, duration: 1000 },
            { name: "r", limit: 6, duration: 1000 },
          ],
        },
        t.rootKey,
      ),
      409,
      "CONFLICT",
      'Ratelimit with name "r" is already defined in the request',
    );
    expect(await h.sql(`select * from ratelimits where identity_id = '${id}'`)).toEqual(before);
    expect((await h.sql<any>(`select meta from identities where id = '${id}'`))[0].meta).toBeNull();
  });

  it("answers missing input, unknown and foreign identities, and oversized meta with precise errors", async ({ h, t, newIdentity }) => {
    const { id } = await newIdentity(t);
    const post = (body: unknown, key = t.rootKey) => h.post("/v1/identities.updateIdentity", body, key);
    expectError(await post({}), 400, "BAD_REQUEST", "Provide either identityId or externalId");
    expectError(await post({ identityId: "id_nope" }), 404, "NOT_FOUND", "identity id_nope not found");
    expectError(await post({ identityId: id }, (await h.tenant()).rootKey), 404, "NOT_FOUND", `identity ${id} not found`);
    expectError(await post({ identityId: id, meta: { b: "x".repeat(64_001) } }), 400, "BAD_REQUEST", /^metadata is too large/);
  });
});

describe("identities.deleteIdentity", () => {
  it("hard-deletes the identity and its rate limits; its keys keep verifying", async ({ h, t, newApi, count, verify }) => {
    const apiId = await newApi(t);
    const externalId = unique("user");
    const plaintext = `sk_${randomBytes(16).toString("hex")}`;
    const imported = await h.post("/v1/migrations.createKeys", [{ apiId, plaintext, externalId }], t.rootKey);
    expect(imported.status, JSON.stringify(imported.body)).toBe(200);
    const [ident] = await h.sql<{ id: string }>(`select id from identities where external_id = '${externalId}'`);
    await h.post(
      "/v1/identities.updateIdentity",
      { identityId: ident!.id, ratelimits: [{ name: "r", limit: 1, duration: 60_000 }] },
      t.rootKey,
    );
    const res = await h.post("/v1/identities.deleteIdentity", { identityId: ident!.id }, t.rootKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    expect(await count(`identities where id = '${ident!.id}'`)).toBe(0);
    expect(await count(`ratelimits where identity_id = '${ident!.id}'`)).toBe(0);
    const [key] = await h.sql<{ identity_id: string | null }>(`select identity_id from keys where id = '${imported.body.keyIds[0]}'`);
    expect(key!.identity_id).toBeNull();
    const v = await verify({ key: plaintext, apiId });
    expect(v.status).toBe(200);
    expect(v.body.valid).toBe(true);
    expect(v.body.identity).toBeUndefined();
  });

  it("answers an unknown or foreign identity with the same 404 and deletes nothing", async ({ h, t, count, newIdentity }) => {
    const { id } = await newIdentity(t);
    expectError(
      await h.post("/v1/identities.deleteIdentity", { identityId: "id_nope" }, t.rootKey),
      404,
      "NOT_FOUND",
      "identity id_nope not found",
    );
    expectError(
      await h.post("/v1/identities.deleteIdentity", { identityId: id }, (await h.tenant()).rootKey),
      404,
      "NOT_FOUND",
      `identity ${id} not found`,
    );
    expect(await count(`identities where id = '${id}'`)).toBe(1);
    expectError(await h.post("/v1/identities.deleteIdentity", {}, t.rootKey), 400, "BAD_REQUEST", /^identityId: /);
  });

  it("accepts identity.<id>.delete_identity for that identity only", async ({ h, t, newIdentity }) => {
    const { id } = await newIdentity(t);
    const { id: otherId } = await newIdentity(t);
    const key = await h.rootKey(t.workspaceId, [`identity.${id}.delete_identity`]);
    expectError(await h.post("/v1/identities.deleteIdentity", { identityId: otherId }, key), 403, "INSUFFICIENT_PERMISSIONS");
    expect((await h.post("/v1/identities.deleteIdentity", { identityId: id }, key)).status).toBe(200);
  });
});

describe("identity rate limits at verification", () => {
  it("shares an identity limit across its keys, applies it only when requested, and sees updates at once", async ({
    h,
    t,
    newApi,
    count,
    verify,
  }) => {
    const apiId = await newApi(t);
    const externalId = unique("user");
    const k1 = `sk_${randomBytes(16).toString("hex")}`;
    const k2 = `sk_${randomBytes(16).toString("hex")}`;
    const imported = await h.post(
      "/v1/migrations.createKeys",
      [
        { apiId, plaintext: k1, externalId },
        { apiId, plaintext: k2, externalId },
      ],
      t.rootKey,
    );
    expect(imported.status, JSON.stringify(imported.body)).toBe(200);
    expect(await count(`identities where external_id = '${externalId}'`)).toBe(1);
    const [ident] = await h.sql<{ id: string }>(`select id from identities where external_id = '${externalId}'`);
    const set = await h.post(
      "/v1/identities.updateIdentity",
      { externalId, ratelimits: [{ name: "hourly", limit: 2, duration: 3_600_000 }] },
      t.rootKey,
    );
    expect(set.status, JSON.stringify(set.body)).toBe(200);

    // auto_apply is false: without asking for it the limit is not charged.
    for (let i = 0; i < 3; i++) expect((await verify({ key: k1, apiId })).body.valid).toBe(true);

    const results: boolean[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await verify({ key: i % 2 === 0 ? k1 : k2, apiId, ratelimits: [{ name: "hourly" }] });
      expect(res.status).toBe(200);
      expect(res.body.identity).toMatchObject({ id: ident!.id, externalId });
      results.push(res.body.valid);
      if (!res.body.valid) expect(res.body.code).toBe("RATE_LIMITED");
    }
    expect(results).toEqual([true, true, false, false, false, false]);

    await h.post(
      "/v1/identities.updateIdentity",
      { externalId, ratelimits: [{ name: "hourly", limit: 4, duration: 3_600_000 }] },
      t.rootKey,
    );
    const after: boolean[] = [];
    for (let i = 0; i < 4; i++)
      after.push((await verify({ key: i % 2 === 0 ? k2 : k1, apiId, ratelimits: [{ name: "hourly" }] })).body.valid);
    expect(after).toEqual([true, true, false, false]);
  });

  it("answers a request for a limit the identity does not have with 400", async ({ h, t, newApi, verify }) => {
    const apiId = await newApi(t);
    const externalId = unique("user");
    const plaintext = `sk_${randomBytes(16).toString("hex")}`;
    const imported = await h.post("/v1/migrations.createKeys", [{ apiId, plaintext, externalId }], t.rootKey);
    const [ident] = await h.sql<{ id: string }>(`select id from identities where external_id = '${externalId}'`);
    expectError(
      await verify({ key: plaintext, apiId, ratelimits: [{ name: "nope" }] }),
      400,
      "BAD_REQUEST",
      `ratelimit "nope" was requested but does not exist for key "${imported.body.keyIds[0]}" nor identity { id: ${ident!.id}, externalId: ${externalId}}`,
    );
  });
});

describeRootKeyAuthOf(it, { countRows: identityRowsIn }, [
  {
    method: "POST",
    path: "/v1/identities.createIdentity",
    validRequest: async () => ({ body: { externalId: unique("user"), ratelimits: [{ name: "r", limit: 1, duration: 1000 }] } }),
    insufficientPermissions: ["identity.*.read_identity", "identity.*.update_identity"],
    expectForOtherWorkspace: async (res) => expect(res.status).toBe(200),
  },
  {
    method: "GET",
    path: "/v1/identities.getIdentity",
    validRequest: async (h, owner) => ({ query: { identityId: (await newIdentityIn(h, owner)).id } }),
    insufficientPermissions: ["identity.*.create_identity", "identity.*.delete_identity"],
    expectForOtherWorkspace: answersNotFound(/^identity id_\S+ not found$/),
  },
  {
    method: "GET",
    path: "/v1/identities.listIdentities",
    validRequest: async (h, owner) => {
      await newIdentityIn(h, owner);
      return { query: {} };
    },
    insufficientPermissions: ["identity.*.create_identity", "identity.prod.read_identity"],
    expectForOtherWorkspace: answersEmpty({ identities: [], total: 0 }),
  },
  {
    method: "POST",
    path: "/v1/identities.updateIdentity",
    validRequest: async (h, owner) => ({
      body: { identityId: (await newIdentityIn(h, owner)).id, meta: { a: 1 }, ratelimits: [{ name: "r", limit: 1, duration: 1000 }] },
    }),
    insufficientPermissions: ["identity.*.read_identity", "identity.*.create_identity"],
    expectForOtherWorkspace: answersNotFound(/^identity id_\S+ not found$/),
  },
  {
    method: "POST",
    path: "/v1/identities.deleteIdentity",
    validRequest: async (h, owner) => ({ body: { identityId: (await newIdentityIn(h, owner)).id } }),
    insufficientPermissions: ["identity.*.read_identity", "identity.*.update_identity"],
    expectForOtherWorkspace: answersNotFound(/^identity id_\S+ not found$/),
  },
]);
