import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashKey } from "../src/crypto/hash.js";
import { createHarness, expectError, type Harness, type Tenant } from "./helper.js";

let h: Harness;
let t: Tenant;
let apiId: string;
beforeAll(async () => {
  h = await createHarness();
  t = await h.tenant();
  apiId = (await h.post("/v1/apis.createApi", { name: "verify-api" }, t.rootKey)).body.apiId;
});
afterAll(() => h.close());

const secret = () => `sk_${randomBytes(16).toString("hex")}`;
async function importOne(key: Record<string, unknown>): Promise<string> {
  const res = await h.post("/v1/migrations.createKeys", [{ apiId, ...key }], t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.keyIds[0];
}
const verify = (body: Record<string, unknown>) => h.post("/v1/keys.verifyKey", body, "this header is ignored");

describe("keys.verifyKey on imported keys", () => {
  it("verifies a key imported by plaintext", async () => {
    const key = secret();
    const keyId = await importOne({ plaintext: key, name: "plain", environment: "test", meta: { a: 1 } });
    const res = await verify({ key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      requestId: res.headers["unkey-request-id"],
      valid: true,
      code: "VALID",
      keyId,
      name: "plain",
      meta: { a: 1 },
      enabled: true,
      permissions: [],
      roles: [],
      environment: "test",
    });
  });

  it("verifies a key imported by its SHA-256 hash", async () => {
    const key = secret();
    const keyId = await importOne({ hash: { value: hashKey(key), variant: "sha256_base64" } });
    const res = await verify({ key, apiId });
    expect(res.body).toMatchObject({ valid: true, code: "VALID", keyId });
  });

  it("answers an unknown key with exactly NOT_FOUND and the request id", async () => {
    const res = await verify({ key: secret() });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ valid: false, code: "NOT_FOUND", requestId: res.headers["unkey-request-id"] });
  });

  it("answers a disabled imported key with DISABLED", async () => {
    const key = secret();
    const keyId = await importOne({ plaintext: key, enabled: false });
    expect((await verify({ key })).body).toMatchObject({ valid: false, code: "DISABLED", keyId, enabled: false });
  });

  it("answers an expired key with EXPIRED and a future one with VALID", async () => {
    const past = secret();
    const future = secret();
    await importOne({ plaintext: past, expires: Date.now() - 1000 });
    await importOne({ plaintext: future, expires: Date.now() + 60_000 });
    expect((await verify({ key: past })).body).toMatchObject({ valid: false, code: "EXPIRED" });
    expect((await verify({ key: future })).body).toMatchObject({ valid: true, code: "VALID" });
  });

  it("answers FORBIDDEN for another apiId, without revealing where the key lives", async () => {
    const key = secret();
    await importOne({ plaintext: key });
    const res = await verify({ key, apiId: "api_someone_else" });
    expect(res.body).toMatchObject({ valid: false, code: "FORBIDDEN" });
    expect(JSON.stringify(res.body)).not.toContain(apiId);
  });

  it("reports roles, permissions and the identity of an imported key", async () => {
    await h.post("/v1/permissions.createRole", { name: "verify.role" }, t.rootKey);
    await h.post("/v1/permissions.createPermission", { name: "verify.perm" }, t.rootKey);
    const key = secret();
    await importOne({ plaintext: key, roles: ["verify.role"], permissions: ["verify.perm"], externalId: "user-7", ownerId: "legacy" });
    const res = await verify({ key, authorization: { permissions: "verify.perm" } });
    expect(res.body).toMatchObject({
      valid: true,
      roles: ["verify.role"],
      permissions: ["verify.perm"],
      ownerId: "user-7",
      identity: { externalId: "user-7", meta: {} },
    });
    const denied = await verify({ key, authorization: { permissions: { and: ["verify.perm", "admin"] } } });
    expect(denied.body).toMatchObject({ valid: false, code: "INSUFFICIENT_PERMISSIONS" });
    expectError(await verify({ key, authorization: { permissions: { xor: [] } } }), 400, "BAD_REQUEST", "permission query is invalid");
  });

  it("takes permission queries of up to 100 nodes nested up to 10 levels, and refuses larger ones precisely", async () => {
    await h.post("/v1/permissions.createPermission", { name: "p.99" }, t.rootKey);
    const key = secret();
    await importOne({ plaintext: key, permissions: ["p.99"] });
    const or99 = { or: Array.from({ length: 99 }, (_, i) => `p.${i + 1}`) };
    expect((await verify({ key, authorization: { permissions: or99 } })).body).toMatchObject({ valid: true });
    const nested = (depth: number): unknown => (depth === 0 ? "p.99" : { and: [nested(depth - 1)] });
    expect((await verify({ key, authorization: { permissions: nested(10) } })).body).toMatchObject({ valid: true });

    const tooMany = { or: [...or99.or, "p.100"] };
    expectError(
      await verify({ key, authorization: { permissions: tooMany } }),
      400,
      "BAD_REQUEST",
      "permission query is invalid: it holds more than 100 permissions and operators",
    );
    expectError(
      await verify({ key, authorization: { permissions: nested(11) } }),
      400,
      "BAD_REQUEST",
      'permission query is invalid: "and" and "or" nest deeper than 10 levels',
    );
    expectError(
      await verify({ key, authorization: { permissions: "p".repeat(513) } }),
      400,
      "BAD_REQUEST",
      "permission query is invalid: a permission is longer than 512 characters",
    );
    for (const bad of ["", { or: [] }, { or: ["a"], and: ["b"] }, ["a"], null, 1, { or: ["a", {}] }]) {
      expectError(await verify({ key, authorization: { permissions: bad } }), 400, "BAD_REQUEST", "permission query is invalid");
    }
  });

  it("counts down remaining uses and stops at zero", async () => {
    const key = secret();
    await importOne({ plaintext: key, remaining: 2 });
    expect((await verify({ key })).body).toMatchObject({ valid: true, remaining: 1 });
    expect((await verify({ key })).body).toMatchObject({ valid: true, remaining: 0 });
    expect((await verify({ key })).body).toMatchObject({ valid: false, code: "USAGE_EXCEEDED", remaining: 0 });
  });

  it("answers a key of a disabled workspace with the 403 envelope", async () => {
    const other = await h.tenant();
    const otherApi = (await h.post("/v1/apis.createApi", { name: "soon-disabled" }, other.rootKey)).body.apiId;
    const key = secret();
    await h.post("/v1/migrations.createKeys", [{ apiId: otherApi, plaintext: key }], other.rootKey);
    await h.disableWorkspace(other.workspaceId);
    expectError(await verify({ key }), 403, "FORBIDDEN", "workspace is disabled");
  });

  it("answers a soft-deleted key with NOT_FOUND on the very next call", async () => {
    const key = secret();
    const keyId = await importOne({ plaintext: key });
    expect((await verify({ key })).body.valid).toBe(true);
    await h.sql(`update keys set deleted_at_m = ${Date.now()} where id = '${keyId}'`);
    expect((await verify({ key })).body).toMatchObject({ valid: false, code: "NOT_FOUND" });
  });

  it("refuses a request without a key with 400", async () => {
    expectError(await verify({}), 400, "BAD_REQUEST", /^key: /);
    expectError(await verify({ key: "" }), 400, "BAD_REQUEST", /^key: Too small/);
  });
});
