import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { countIn, test } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
import { installKeyInsertFault, keyInsertFault } from "./key-insert-fault.js";
import { expectV2Error } from "./v2-errors.js";

// keyhaven's extension for `keyhaven import --from-unkey` (issue 36 §1, /work/briefs/copy-contract.md): records of a
// hosted Unkey workspace upserted by their ids, keys without plaintext pending until adopted, and the two reads of
// the copy's progress.

const id = (prefix: string) => `${prefix}_${randomBytes(8).toString("hex")}`;
const plaintextKey = () => `uk_${randomBytes(16).toString("hex")}`;

const copy = (h: Harness, rootKey: string, body: unknown, headers?: Record<string, string>) =>
  h.post("/v2/keyhaven.copyFromUnkey", body, rootKey, headers);

async function copyOk(h: Harness, t: Tenant, body: unknown) {
  const res = await copy(h, t.rootKey, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}

type Counts = { created: number; updated: number; unchanged: number; skipped: { id: string; reason: string }[] };
const none: Counts = { created: 0, updated: 0, unchanged: 0, skipped: [] };
const counted = (c: Partial<Counts>) => Object.assign({}, none, c);

/** A key as hosted Unkey's listKeys would give it to the CLI, with `fields` over the defaults. */
function unkeyKey(apiId: string, fields: Record<string, unknown> = {}): Record<string, unknown> & { id: string; apiId: string } {
  return { id: id("key"), apiId, start: "uk_ab", createdAt: 1_700_000_000_000, enabled: true, ...fields };
}

async function verifyV2(h: Harness, t: Tenant, key: string) {
  const res = await h.post("/v2/keys.verifyKey", { key }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data;
}

async function verifyV1(h: Harness, key: string) {
  const res = await h.post("/v1/keys.verifyKey", { key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

const auditEntries = (h: Harness, t: Tenant) =>
  h.sql<{ targets: { type: string; id: string }[]; details: Record<string, unknown> }>(
    `select targets, details from audit_log where workspace_id = '${t.workspaceId}' and event = 'import.from_unkey' order by created_at_m, id`,
  );

describe("keyhaven.copyFromUnkey", () => {
  test("creates apis and keys with their ids: a key without plaintext is pending, one with plaintext verifies at once", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    const key = plaintextKey();
    const pending = unkeyKey(apiId, { name: "pending one", meta: { plan: "pro" } });
    const verifiable = unkeyKey(apiId, { plaintext: key, credits: { remaining: 5, refill: { interval: "daily", amount: 5 } } });
    const data = await copyOk(h, t, { apis: [{ id: apiId, name: "copied api" }], keys: [pending, verifiable] });
    expect(data).toEqual({
      apis: counted({ created: 1 }),
      permissions: none,
      roles: none,
      identities: none,
      overrides: none,
      keys: Object.assign(counted({ created: 2 }), { verifiable: 1, pending: 1 }),
    });

    const got = await h.post("/v2/keys.getKey", { keyId: pending.id }, t.rootKey);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body.data).toMatchObject({
      keyId: pending.id,
      start: "uk_ab",
      name: "pending one",
      meta: { plan: "pro" },
      createdAt: 1_700_000_000_000,
    });
    const [row] = await h.sql<{ hash: string | null; api_id: string }>(`select hash, api_id from keys where id = '${pending.id}'`);
    expect(row).toEqual({ hash: null, api_id: apiId });

    const v2 = await verifyV2(h, t, key);
    expect(v2).toMatchObject({ valid: true, code: "VALID", keyId: verifiable.id, credits: 4 });
    const v1 = await verifyV1(h, key);
    expect(v1).toMatchObject({ valid: true, code: "VALID", keyId: verifiable.id });
    expect(await countIn(h, `keys where id = '${verifiable.id}' and hash is not null`)).toBe(1);
  });

  test("a pending key does not verify on v1 or v2: its start or a random key is NOT_FOUND", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    await copyOk(h, t, { apis: [{ id: apiId, name: "copied api" }], keys: [unkeyKey(apiId)] });
    expect(await verifyV2(h, t, "uk_ab")).toMatchObject({ valid: false, code: "NOT_FOUND" });
    expect(await verifyV1(h, "uk_ab")).toMatchObject({ valid: false, code: "NOT_FOUND" });
    expect(await verifyV2(h, t, plaintextKey())).toMatchObject({ valid: false, code: "NOT_FOUND" });
  });

  test("the same request twice creates nothing the second time: all unchanged, one audit entry each, the second naming nothing", async ({
    h,
  }) => {
    const t = await h.tenant();
    const apiId = id("api");
    const permissionId = id("perm");
    const roleId = id("role");
    const identityId = id("id");
    const body = {
      apis: [{ id: apiId, name: "copied api" }],
      permissions: [{ id: permissionId, name: "read docs", slug: "docs.read", description: "reads" }],
      roles: [{ id: roleId, name: "reader", permissions: ["docs.read"] }],
      identities: [
        {
          id: identityId,
          externalId: "customer-1",
          meta: { tier: 1 },
          ratelimits: [{ name: "calls", limit: 10, duration: 60_000, autoApply: true }],
        },
      ],
      keys: [
        unkeyKey(apiId, {
          name: "k",
          meta: { a: { b: 1 } },
          expires: 4_000_000_000_000,
          credits: { remaining: 10, refill: { interval: "monthly", amount: 20, refillDay: 3 } },
          ratelimits: [{ name: "tokens", limit: 5, duration: 1000, autoApply: false }],
          roles: ["reader"],
          permissions: ["docs.read"],
          identityId,
        }),
        unkeyKey(apiId, { plaintext: plaintextKey() }),
      ],
      overrides: [{ namespace: "email", identifier: "customer-1", limit: 3, duration: 60_000 }],
    };
    const first = await copyOk(h, t, body);
    expect(first).toEqual({
      apis: counted({ created: 1 }),
      permissions: counted({ created: 1 }),
      roles: counted({ created: 1 }),
      identities: counted({ created: 1 }),
      overrides: counted({ created: 1 }),
      keys: Object.assign(counted({ created: 2 }), { verifiable: 1, pending: 1 }),
    });
    const rowsAfterFirst = await h.sql(
      "select (select count(*) from keys) k, (select count(*) from ratelimits) r, (select count(*) from keys_roles) kr, (select count(*) from ratelimit_overrides) o",
    );
    const second = await copyOk(h, t, body);
    expect(second).toEqual({
      apis: counted({ unchanged: 1 }),
      permissions: counted({ unchanged: 1 }),
      roles: counted({ unchanged: 1 }),
      identities: counted({ unchanged: 1 }),
      overrides: counted({ unchanged: 1 }),
      keys: Object.assign(counted({ unchanged: 2 }), { verifiable: 1, pending: 1 }),
    });
    expect(
      await h.sql(
        "select (select count(*) from keys) k, (select count(*) from ratelimits) r, (select count(*) from keys_roles) kr, (select count(*) from ratelimit_overrides) o",
      ),
    ).toEqual(rowsAfterFirst);
    const entries = await auditEntries(h, t);
    expect(entries).toHaveLength(2);
    expect(entries[0]!.targets.map((x) => x.type).sort()).toEqual(
      ["api", "identity", "key", "key", "permission", "ratelimit_namespace", "ratelimit_override", "role"].sort(),
    );
    expect(entries[1]!.targets).toEqual([]);
    expect(entries[1]!.details).toMatchObject({ keys: { created: 0, updated: 0, unchanged: 2, skipped: 0, verifiable: 1, pending: 1 } });
    expect(JSON.stringify(entries)).not.toContain(body.keys[1]!.plaintext as string);

    const got = await h.post("/v2/keys.getKey", { keyId: body.keys[0]!.id }, t.rootKey);
    expect(got.body.data).toMatchObject({
      roles: ["reader"],
      permissions: ["docs.read"],
      credits: { remaining: 10, refill: { interval: "monthly", amount: 20, refillDay: 3 } },
      expires: 4_000_000_000_000,
      identity: { id: identityId, externalId: "customer-1", meta: { tier: 1 } },
      ratelimits: [expect.objectContaining({ name: "tokens", limit: 5, duration: 1000, autoApply: false })],
    });
  });

  test("a changed field updates the record where it differs, replacing roles, permissions and rate limits", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    const key = unkeyKey(apiId, {
      name: "before",
      roles: ["a"],
      permissions: ["p.one"],
      ratelimits: [{ name: "one", limit: 1, duration: 1000, autoApply: true }],
    });
    const rbac = {
      permissions: [
        { id: id("perm"), name: "one", slug: "p.one" },
        { id: id("perm"), name: "two", slug: "p.two" },
      ],
      roles: [
        { id: id("role"), name: "a", permissions: [] },
        { id: id("role"), name: "b", permissions: ["p.two"] },
      ],
    };
    await copyOk(h, t, Object.assign({ apis: [{ id: apiId, name: "before api" }], keys: [key] }, rbac));
    const changed = Object.assign({}, key, {
      name: "after",
      roles: ["b"],
      permissions: ["p.two"],
      ratelimits: [{ name: "two", limit: 2, duration: 2000, autoApply: false }],
      credits: { remaining: 7 },
    });
    const data = await copyOk(h, t, { apis: [{ id: apiId, name: "after api" }], keys: [changed] });
    expect(data.apis).toEqual(counted({ updated: 1 }));
    expect(data.keys).toEqual(Object.assign(counted({ updated: 1 }), { verifiable: 0, pending: 1 }));
    const got = await h.post("/v2/keys.getKey", { keyId: key.id }, t.rootKey);
    expect(got.body.data).toMatchObject({ name: "after", roles: ["b"], credits: { remaining: 7 } });
    expect(got.body.data.ratelimits).toEqual([expect.objectContaining({ name: "two", limit: 2, duration: 2000, autoApply: false })]);
    expect(await h.sql(`select permission_id from keys_permissions where key_id = '${key.id}'`)).toEqual([
      { permission_id: rbac.permissions[1]!.id },
    ]);
    expect((await h.post("/v2/apis.getApi", { apiId }, t.rootKey)).body.data).toMatchObject({ name: "after api" });
    const entries = await auditEntries(h, t);
    expect(entries.at(-1)!.targets).toEqual([
      { type: "api", id: apiId, name: "after api" },
      { type: "key", id: key.id },
    ]);
  });

  test("a pending key given its plaintext later becomes verifiable, even after a verification of that key missed", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    const secret = plaintextKey();
    const key = unkeyKey(apiId);
    await copyOk(h, t, { apis: [{ id: apiId, name: "copied api" }], keys: [key] });
    expect(await verifyV2(h, t, secret)).toMatchObject({ code: "NOT_FOUND" });
    expect(await verifyV1(h, secret)).toMatchObject({ code: "NOT_FOUND" });
    const data = await copyOk(h, t, { keys: [Object.assign({}, key, { plaintext: secret })] });
    expect(data.keys).toEqual(Object.assign(counted({ updated: 1 }), { verifiable: 1, pending: 0 }));
    expect(await verifyV2(h, t, secret)).toMatchObject({ valid: true, keyId: key.id });
    expect(await verifyV1(h, secret)).toMatchObject({ valid: true, keyId: key.id });
  });

  test("another replica that verified a key as unknown verifies it once a copy gives its plaintext", async ({ h }) => {
    const t = await h.tenant();
    const replica = await h.replica();
    try {
      const apiId = id("api");
      const secret = plaintextKey();
      const key = unkeyKey(apiId);
      await copyOk(h, t, { apis: [{ id: apiId, name: "copied api" }], keys: [key] });
      const verifyOnReplica = async () => {
        const res = await replica.app.inject({
          method: "POST",
          url: "/v2/keys.verifyKey",
          headers: { authorization: `Bearer ${t.rootKey}`, "content-type": "application/json" },
          payload: JSON.stringify({ key: secret }),
        });
        expect(res.statusCode, res.body).toBe(200);
        return JSON.parse(res.body).data;
      };
      expect(await verifyOnReplica()).toMatchObject({ code: "NOT_FOUND" });
      await copyOk(h, t, { keys: [Object.assign({}, key, { plaintext: secret })] });
      expect(await verifyOnReplica()).toMatchObject({ valid: true, keyId: key.id });
    } finally {
      await replica.close();
    }
  });

  test("a recoverable key is stored encrypted too: keys.getKey with decrypt returns it", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    const secret = plaintextKey();
    const key = unkeyKey(apiId, { plaintext: secret, recoverable: true });
    await copyOk(h, t, { apis: [{ id: apiId, name: "copied api" }], keys: [key] });
    const got = await h.post("/v2/keys.getKey", { keyId: key.id, decrypt: true }, t.rootKey);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body.data.plaintext).toBe(secret);
    const [enc] = await h.sql<{ encrypted: string }>(`select encrypted from encrypted_keys where key_id = '${key.id}'`);
    expect(enc!.encrypted).not.toContain(secret);
    // Again: unchanged, one ciphertext.
    const again = await copyOk(h, t, { keys: [key] });
    expect(again.keys).toEqual(Object.assign(counted({ unchanged: 1 }), { verifiable: 1, pending: 0 }));
    expect(await countIn(h, `encrypted_keys where key_id = '${key.id}'`)).toBe(1);
  });

  test("a recoverable key copied into an API that did not store encrypted keys turns that on, seen by keys.createKey at once", async ({
    h,
  }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const refused = await h.post("/v2/keys.createKey", { apiId, recoverable: true }, t.rootKey);
    expectV2Error(refused, 412, "unkey/application/precondition_failed");
    const secret = plaintextKey();
    const key = unkeyKey(apiId, { plaintext: secret, recoverable: true });
    const data = await copyOk(h, t, { keys: [key] });
    expect(data.keys).toEqual(Object.assign(counted({ created: 1 }), { verifiable: 1, pending: 0 }));
    expect((await auditEntries(h, t)).at(-1)!.targets).toEqual([
      { type: "api", id: apiId },
      { type: "key", id: key.id },
    ]);
    expect((await h.post("/v2/keys.getKey", { keyId: key.id, decrypt: true }, t.rootKey)).body.data.plaintext).toBe(secret);
    const created = await h.post("/v2/keys.createKey", { apiId, recoverable: true }, t.rootKey);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
  });

  test("a workspace's first recoverable key skipped still leaves its data key stored, so the next one seals under it", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    await copyOk(h, t, { apis: [{ id: apiId, name: "copied api" }] });
    const skipped = unkeyKey(apiId, { plaintext: plaintextKey(), recoverable: true, roles: ["no-such-role"] });
    expect((await copyOk(h, t, { keys: [skipped] })).keys.skipped).toEqual([{ id: skipped.id, reason: "roles not found: no-such-role" }]);
    const secret = plaintextKey();
    const sealed = unkeyKey(apiId, { plaintext: secret, recoverable: true });
    await copyOk(h, t, { keys: [sealed] });
    expect((await h.post("/v2/keys.getKey", { keyId: sealed.id, decrypt: true }, t.rootKey)).body.data.plaintext).toBe(secret);
  });

  test("an existing verifiable key is never made pending again, and its hash is never replaced by a copy", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    await copyOk(h, t, { apis: [{ id: apiId, name: "copied api" }] });
    const created = await h.post("/v2/keys.createKey", { apiId }, t.rootKey);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const { keyId, key } = created.body.data;
    const [before] = await h.sql<{ hash: string }>(`select hash from keys where id = '${keyId}'`);
    const withoutPlaintext = await copyOk(h, t, { keys: [unkeyKey(apiId, { id: keyId, name: "renamed" })] });
    expect(withoutPlaintext.keys).toEqual(Object.assign(counted({ updated: 1 }), { verifiable: 1, pending: 0 }));
    const otherPlaintext = plaintextKey();
    await copyOk(h, t, { keys: [unkeyKey(apiId, { id: keyId, name: "renamed", plaintext: otherPlaintext })] });
    expect(await h.sql(`select hash from keys where id = '${keyId}'`)).toEqual([before]);
    expect(await verifyV2(h, t, key)).toMatchObject({ valid: true, keyId });
    expect(await verifyV2(h, t, otherPlaintext)).toMatchObject({ code: "NOT_FOUND" });
  });

  test("ids of another workspace, deleted keys, unknown APIs, identities, roles and permissions are skipped with why; the rest applies", async ({
    h,
  }) => {
    const t = await h.tenant();
    const other = await h.tenant();
    const otherApi = id("api");
    const otherKey = unkeyKey(otherApi);
    await copyOk(h, other, { apis: [{ id: otherApi, name: "theirs" }], keys: [otherKey] });
    const apiId = id("api");
    await copyOk(h, t, { apis: [{ id: apiId, name: "mine" }] });
    const deleted = unkeyKey(apiId);
    await copyOk(h, t, { keys: [deleted] });
    expect((await h.post("/v2/keys.deleteKey", { keyId: deleted.id }, t.rootKey)).status).toBe(200);
    const good = unkeyKey(apiId);
    const taken = Object.assign({}, otherKey, { apiId });
    const noApi = unkeyKey(id("api"));
    const noIdentity = unkeyKey(apiId, { identityId: id("id") });
    const noRole = unkeyKey(apiId, { roles: ["missing-role", "also-missing"] });
    const noPermission = unkeyKey(apiId, { permissions: ["missing.perm"] });
    const refillUnlimited = unkeyKey(apiId, { credits: { remaining: null, refill: { interval: "daily", amount: 1 } } });
    const secret = plaintextKey();
    const firstWithSecret = unkeyKey(apiId, { plaintext: secret });
    const sameSecret = unkeyKey(apiId, { plaintext: secret });
    const data = await copyOk(h, t, {
      apis: [{ id: otherApi, name: "claimed" }],
      keys: [good, taken, deleted, noApi, noIdentity, noRole, noPermission, refillUnlimited, firstWithSecret, sameSecret],
    });
    expect(data.apis).toEqual(counted({ skipped: [{ id: otherApi, reason: "id is taken" }] }));
    expect(data.keys.created).toBe(2);
    expect(data.keys.skipped).toEqual([
      { id: taken.id, reason: "id is taken" },
      { id: deleted.id, reason: "deleted in keyhaven" },
      { id: noApi.id, reason: `apiId: api ${noApi.apiId} not found` },
      { id: noIdentity.id, reason: `identityId: identity ${noIdentity.identityId} not found` },
      { id: noRole.id, reason: "roles not found: missing-role, also-missing" },
      { id: noPermission.id, reason: "permissions not found: missing.perm" },
      { id: refillUnlimited.id, reason: "credits.refill: a refill needs credits.remaining" },
      { id: sameSecret.id, reason: `plaintext: another key (${firstWithSecret.id}) has the same key` },
    ]);
    expect(JSON.stringify(data)).not.toContain(secret);
    // The other workspace's key and API are as they were.
    expect(await h.sql(`select workspace_id, api_id from keys where id = '${otherKey.id}'`)).toEqual([
      { workspace_id: other.workspaceId, api_id: otherApi },
    ]);
    expect(await h.sql(`select name from apis where id = '${otherApi}'`)).toEqual([{ name: "theirs" }]);
    expect(await countIn(h, `keys where id in ('${noRole.id}', '${sameSecret.id}', '${noApi.id}')`)).toBe(0);
  });

  test("a malformed body is a 400 naming the item's field, and writes nothing", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    const good = unkeyKey(apiId);
    const bad = unkeyKey(apiId, { credits: { remaining: 1, refill: { interval: "daily", amount: 0 } } });
    const res = await copy(h, t.rootKey, { apis: [{ id: apiId, name: "copied api" }], keys: [good, bad] });
    expectV2Error(res, 400, "unkey/application/invalid_input", "keys[1].credits.refill.amount: minimum: got 0, want 1");
    expect(await countIn(h, `apis where workspace_id = '${t.workspaceId}'`)).toBe(0);
    expect(await countIn(h, `keys where workspace_id = '${t.workspaceId}'`)).toBe(0);

    const repeated = await copy(h, t.rootKey, { keys: [good, good] });
    expectV2Error(repeated, 400, "unkey/application/invalid_input", "keys[1].id: repeats keys[0].id");
    const badId = await copy(h, t.rootKey, { keys: [unkeyKey(apiId, { id: "key-with-dash" })] });
    expectV2Error(badId, 400, "unkey/application/invalid_input", /^keys\[0\]\.id: /);
    const recoverableAlone = await copy(h, t.rootKey, { keys: [unkeyKey(apiId, { recoverable: true })] });
    expectV2Error(recoverableAlone, 400, "unkey/application/invalid_input", "keys[0].recoverable: recoverable needs plaintext");
    const tooMany = await copy(h, t.rootKey, {
      apis: [{ id: apiId, name: "copied api" }],
      keys: Array.from({ length: 1000 }, () => unkeyKey(apiId)),
    });
    expectV2Error(tooMany, 400, "unkey/application/invalid_input", "body: at most 1000 items in all per request, got 1001");
    expect(await countIn(h, `keys where workspace_id = '${t.workspaceId}'`)).toBe(0);
    expect(await countIn(h, `audit_log where workspace_id = '${t.workspaceId}'`)).toBe(0);
  });

  test("each section needs the permission of the v2 route creating its kind, and a refusal writes nothing", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    await copyOk(h, t, { apis: [{ id: apiId, name: "copied api" }] });
    const key = unkeyKey(apiId);
    const keysOnly = await h.rootKey(t.workspaceId, ["api.*.create_key"]);
    expectV2Error(
      await copy(h, keysOnly, { apis: [{ id: id("api"), name: "new api" }] }),
      403,
      "unkey/authorization/insufficient_permissions",
    );
    expectV2Error(
      await copy(h, keysOnly, { roles: [{ id: id("role"), name: "r" }], keys: [key] }),
      403,
      "unkey/authorization/insufficient_permissions",
    );
    expect(await countIn(h, `keys where id = '${key.id}'`)).toBe(0);
    const created = await copy(h, keysOnly, { keys: [key] });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    // Updating needs update_key too.
    const renamed = Object.assign({}, key, { name: "renamed" });
    expectV2Error(await copy(h, keysOnly, { keys: [renamed] }), 403, "unkey/authorization/insufficient_permissions");
    expect(await h.sql(`select name from keys where id = '${key.id}'`)).toEqual([{ name: null }]);
    const mayUpdate = await h.rootKey(t.workspaceId, [`api.${apiId}.create_key`, `api.${apiId}.update_key`]);
    expect((await copy(h, mayUpdate, { keys: [renamed] })).status).toBe(200);
    // Another API's keys, recoverable keys, identities, permissions and overrides each need theirs.
    const recoverable = unkeyKey(apiId, { plaintext: plaintextKey(), recoverable: true });
    expectV2Error(await copy(h, mayUpdate, { keys: [recoverable] }), 403, "unkey/authorization/insufficient_permissions");
    expectV2Error(await copy(h, mayUpdate, { keys: [unkeyKey(id("api"))] }), 403, "unkey/authorization/insufficient_permissions");
    for (const body of [
      { identities: [{ id: id("id"), externalId: "x" }] },
      { permissions: [{ id: id("perm"), name: "p", slug: "p" }] },
      { overrides: [{ namespace: "ns", identifier: "x", limit: 1, duration: 1000 }] },
    ]) {
      expectV2Error(await copy(h, mayUpdate, body), 403, "unkey/authorization/insufficient_permissions");
    }
    expect(await countIn(h, `identities where workspace_id = '${t.workspaceId}'`)).toBe(0);
    expect(await countIn(h, `ratelimit_namespaces where workspace_id = '${t.workspaceId}'`)).toBe(0);
  });

  test("a request of no items answers zero counts and records nothing, whatever the root key may do", async ({ h }) => {
    const t = await h.tenant();
    const noPermission = await h.rootKey(t.workspaceId, []);
    for (const body of [{}, { keys: [], apis: [] }]) {
      const res = await copy(h, noPermission, body);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data.keys).toEqual(Object.assign(counted({}), { verifiable: 0, pending: 0 }));
    }
    expect(await countIn(h, `audit_log where workspace_id = '${t.workspaceId}'`)).toBe(0);
  });

  test("identities are updated where their externalId, meta or rate limits differ; an externalId another identity holds is skipped", async ({
    h,
  }) => {
    const t = await h.tenant();
    const identity = {
      id: id("id"),
      externalId: "ext-1",
      meta: { a: 1 },
      ratelimits: [{ name: "calls", limit: 1, duration: 1000, autoApply: true }],
    };
    await copyOk(h, t, { identities: [identity] });
    const clash = { id: id("id"), externalId: "ext-1" };
    const changed = Object.assign({}, identity, {
      meta: { a: 2 },
      ratelimits: [{ name: "other", limit: 3, duration: 3000, autoApply: false }],
    });
    const data = await copyOk(h, t, { identities: [changed, clash] });
    expect(data.identities).toEqual(
      counted({ updated: 1, skipped: [{ id: clash.id, reason: `externalId is held by identity ${identity.id}` }] }),
    );
    const got = await h.post("/v2/identities.getIdentity", { identity: identity.id }, t.rootKey);
    expect(got.body.data).toMatchObject({ id: identity.id, externalId: "ext-1", meta: { a: 2 } });
    expect(got.body.data.ratelimits).toEqual([expect.objectContaining({ name: "other", limit: 3, duration: 3000, autoApply: false })]);
    expect((await copyOk(h, t, { identities: [changed] })).identities).toEqual(counted({ unchanged: 1 }));
  });

  test("a unique violation, as a concurrent change taking an id or a key would raise, is a 409 that writes nothing", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    await installKeyInsertFault(h);
    await keyInsertFault(h, true);
    try {
      const res = await copy(h, t.rootKey, { apis: [{ id: apiId, name: "copied api" }], keys: [unkeyKey(apiId, { name: "fail:23505" })] });
      expectV2Error(
        res,
        409,
        "unkey/application/conflict",
        "A concurrent change took an id, name, slug or key this request was writing: nothing was written. Send the request again.",
      );
    } finally {
      await keyInsertFault(h, false);
    }
    expect(await countIn(h, `apis where id = '${apiId}'`)).toBe(0);
    expect(await countIn(h, `audit_log where workspace_id = '${t.workspaceId}'`)).toBe(0);
    expect(
      (await copy(h, t.rootKey, { apis: [{ id: apiId, name: "copied api" }], keys: [unkeyKey(apiId, { name: "fail:23505" })] })).status,
    ).toBe(200);
  });

  test("the same copy sent twice at once: each is applied or refused as a race (409), never half, and a third finds all unchanged", async ({
    h,
  }) => {
    const t = await h.tenant();
    const apiId = id("api");
    const body = {
      apis: [{ id: apiId, name: "copied api" }],
      identities: [{ id: id("id"), externalId: `ext-${randomBytes(4).toString("hex")}` }],
      keys: Array.from({ length: 50 }, (_, i) => unkeyKey(apiId, i % 2 === 0 ? { plaintext: plaintextKey() } : {})),
    };
    const answers = await Promise.all([copy(h, t.rootKey, body), copy(h, t.rootKey, body)]);
    for (const res of answers) expect([200, 409], JSON.stringify(res.body)).toContain(res.status);
    expect(answers.some((res) => res.status === 200)).toBe(true);
    const third = await copyOk(h, t, body);
    expect(third.keys).toEqual(Object.assign(counted({ unchanged: 50 }), { verifiable: 25, pending: 25 }));
    expect(await countIn(h, `keys where workspace_id = '${t.workspaceId}'`)).toBe(50);
  });

  test("overrides are upserted by namespace and identifier, the namespace created when absent", async ({ h }) => {
    const t = await h.tenant();
    const first = await copyOk(h, t, {
      overrides: [
        { namespace: "email", identifier: "a", limit: 1, duration: 1000 },
        { namespace: "email", identifier: "b*", limit: 2, duration: 2000 },
      ],
    });
    expect(first.overrides).toEqual(counted({ created: 2 }));
    const second = await copyOk(h, t, {
      overrides: [
        { namespace: "email", identifier: "a", limit: 1, duration: 1000 },
        { namespace: "email", identifier: "b*", limit: 5, duration: 2000 },
      ],
    });
    expect(second.overrides).toEqual(counted({ unchanged: 1, updated: 1 }));
    const got = await h.post("/v2/ratelimit.getOverride", { namespace: "email", identifier: "b*" }, t.rootKey);
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body.data).toMatchObject({ identifier: "b*", limit: 5, duration: 2000 });
    expect(await countIn(h, `ratelimit_namespaces where workspace_id = '${t.workspaceId}'`)).toBe(1);
  });
});

describe("keyhaven.getCopyStatus and keyhaven.listPendingKeys", () => {
  test("getCopyStatus counts live, verifiable, pending and adopted keys per API, in the request's order", async ({ h }) => {
    const t = await h.tenant();
    const other = await h.tenant();
    const apiId = id("api");
    const emptyApi = id("api");
    const otherApi = id("api");
    await copyOk(h, other, { apis: [{ id: otherApi, name: "theirs" }] });
    const keys = [unkeyKey(apiId), unkeyKey(apiId), unkeyKey(apiId, { plaintext: plaintextKey() }), unkeyKey(apiId)];
    await copyOk(h, t, {
      apis: [
        { id: apiId, name: "mine" },
        { id: emptyApi, name: "empty" },
      ],
      keys,
    });
    await h.sql(`update keys set hash = 'adopted-${keys[3]!.id}', adopted_at_m = 1 where id = '${keys[3]!.id}'`);
    expect((await h.post("/v2/keys.deleteKey", { keyId: keys[1]!.id }, t.rootKey)).status).toBe(200);
    const res = await h.post("/v2/keyhaven.getCopyStatus", { apiIds: [otherApi, apiId, "api_missing", emptyApi] }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toEqual([
      { apiId: otherApi, found: false },
      { apiId, found: true, keys: 3, verifiable: 2, pending: 1, adopted: 1 },
      { apiId: "api_missing", found: false },
      { apiId: emptyApi, found: true, keys: 0, verifiable: 0, pending: 0, adopted: 0 },
    ]);
    const readKeysOnly = await h.rootKey(t.workspaceId, ["api.*.read_key"]);
    expectV2Error(
      await h.post("/v2/keyhaven.getCopyStatus", { apiIds: [apiId] }, readKeysOnly),
      403,
      "unkey/authorization/insufficient_permissions",
    );
    const readThis = await h.rootKey(t.workspaceId, [`api.${apiId}.read_api`]);
    expect((await h.post("/v2/keyhaven.getCopyStatus", { apiIds: [apiId] }, readThis)).status).toBe(200);
    expectV2Error(await h.post("/v2/keyhaven.getCopyStatus", { apiIds: [] }, t.rootKey), 400, "unkey/application/invalid_input");
  });

  test("listPendingKeys pages an API's pending keys in id order with their externalId; an unknown API is 404", async ({ h }) => {
    const t = await h.tenant();
    const apiId = id("api");
    const identityId = id("id");
    const keys = Array.from({ length: 5 }, (_, i) => unkeyKey(apiId, i === 0 ? { name: "named", identityId } : {}));
    keys.push(unkeyKey(apiId, { plaintext: plaintextKey() }));
    await copyOk(h, t, { apis: [{ id: apiId, name: "mine" }], identities: [{ id: identityId, externalId: "owner-1" }], keys });
    const pendingIds = keys
      .slice(0, 5)
      .map((k) => k.id)
      .sort();
    const seen: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const res = await h.post("/v2/keyhaven.listPendingKeys", { apiId, limit: 2, ...(cursor && { cursor }) }, t.rootKey);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      seen.push(...res.body.data.map((k: { keyId: string }) => k.keyId));
      expect(res.body.data.length).toBeLessThanOrEqual(2);
      if (!res.body.pagination.hasMore) {
        expect(res.body.pagination.cursor).toBeUndefined();
        break;
      }
      cursor = res.body.pagination.cursor;
    }
    expect(seen).toEqual(pendingIds);
    const all = await h.post("/v2/keyhaven.listPendingKeys", { apiId }, t.rootKey);
    expect(all.body.data.find((k: { keyId: string }) => k.keyId === keys[0]!.id)).toEqual({
      keyId: keys[0]!.id,
      start: "uk_ab",
      name: "named",
      externalId: "owner-1",
      createdAt: 1_700_000_000_000,
    });
    expectV2Error(await h.post("/v2/keyhaven.listPendingKeys", { apiId: "api_missing" }, t.rootKey), 404, "unkey/data/api_not_found");
    const other = await h.tenant();
    expectV2Error(await h.post("/v2/keyhaven.listPendingKeys", { apiId }, other.rootKey), 404, "unkey/data/api_not_found");
    const cannotRead = await h.rootKey(t.workspaceId, ["api.*.read_api"]);
    expectV2Error(await h.post("/v2/keyhaven.listPendingKeys", { apiId }, cannotRead), 404, "unkey/data/api_not_found");
  });
});
