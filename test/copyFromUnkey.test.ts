import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { countIn, test } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
// expectV2Error: added with the refusal tests

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

const none = { created: 0, updated: 0, unchanged: 0, skipped: [] };
const counted = (c: Partial<typeof none>) => Object.assign({}, none, c);

/** A key as hosted Unkey's listKeys would give it to the CLI, with `fields` over the defaults. */
function unkeyKey(apiId: string, fields: Record<string, unknown> = {}) {
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

export const auditEntries = (h: Harness, t: Tenant) =>
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
});
