import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { auditEntries } from "./audit-entries.js";
import { countIn, test as it } from "./fixtures.js";
import { ADMIN_TOKEN } from "./helper.js";

// Idempotency-Key (issue 35 §3): a retried write with the same key and body gets the first answer again, with no
// second change; the same key with another body is a 422; a refused request stores nothing, so its retry runs afresh.

const newKey = () => `idem-${randomBytes(8).toString("hex")}`;
const withKey = (key: string) => ({ "idempotency-key": key });

describe("Idempotency-Key", () => {
  it("v1 keys.createKey: the retry replays the first answer (the same key, once), marked Idempotency-Replayed", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const key = newKey();
    const first = await h.post("/v1/keys.createKey", { apiId, name: "once" }, t.rootKey, withKey(key));
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.headers["idempotency-replayed"]).toBeUndefined();
    const again = await h.post("/v1/keys.createKey", { apiId, name: "once" }, t.rootKey, withKey(key));
    expect(again.status).toBe(200);
    expect(again.headers["idempotency-replayed"]).toBe("true");
    expect(again.body).toEqual(first.body);
    expect(String(again.headers["content-type"])).toMatch(/^application\/json/);
    expect(await countIn(h, `keys where api_id = '${apiId}'`)).toBe(1);
    expect(await auditEntries(h, { workspaceId: t.workspaceId, event: "key.create" })).toHaveLength(1);
  });

  it("v2 keys.createKey: the retry replays the first answer; another body under the same key is a 422 in problem+json", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const key = newKey();
    const first = await h.post("/v2/keys.createKey", { apiId, name: "once" }, t.rootKey, withKey(key));
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const again = await h.post("/v2/keys.createKey", { apiId, name: "once" }, t.rootKey, withKey(key));
    expect(again.status).toBe(200);
    expect(again.headers["idempotency-replayed"]).toBe("true");
    expect(again.body).toEqual(first.body);
    const other = await h.post("/v2/keys.createKey", { apiId, name: "another" }, t.rootKey, {
      ...withKey(key),
      accept: "application/problem+json",
    });
    expect(other.status).toBe(422);
    expect(String(other.headers["content-type"])).toMatch(/^application\/problem\+json/);
    expect(other.body.error).toMatchObject({
      status: 422,
      title: "Unprocessable Entity",
      type: "https://unkey.com/docs/errors/unkey/application/idempotency_key_reused",
    });
    expect(other.body.error.detail).toMatch(/Idempotency-Key: this key was used for another request/);
    expect(await countIn(h, `keys where api_id = '${apiId}'`)).toBe(1);
  });

  it("v1: the same key with another body, or on another route, is a 422 UNPROCESSABLE_ENTITY that changes nothing", async ({ h }) => {
    const t = await h.tenant();
    const key = newKey();
    const first = await h.post("/v1/apis.createApi", { name: "idem-a" }, t.rootKey, withKey(key));
    expect(first.status).toBe(200);
    const otherBody = await h.post("/v1/apis.createApi", { name: "idem-b" }, t.rootKey, withKey(key));
    expect(otherBody.status).toBe(422);
    expect(otherBody.body.error.code).toBe("UNPROCESSABLE_ENTITY");
    expect(otherBody.body.error.message).toMatch(/Idempotency-Key: this key was used for another request/);
    const otherRoute = await h.post("/v1/permissions.createRole", { name: "idem-a" }, t.rootKey, withKey(key));
    expect(otherRoute.status).toBe(422);
    expect(await countIn(h, `apis where workspace_id = '${t.workspaceId}'`)).toBe(1);
    expect(await countIn(h, `roles where workspace_id = '${t.workspaceId}'`)).toBe(0);
  });

  it("keys of two root keys never meet: the same key value from another root key is a request of its own", async ({ h }) => {
    const t = await h.tenant();
    const other = await h.rootKey(t.workspaceId, ["*"]);
    const key = newKey();
    expect((await h.post("/v1/apis.createApi", { name: "mine" }, t.rootKey, withKey(key))).status).toBe(200);
    const theirs = await h.post("/v1/apis.createApi", { name: "theirs" }, other, withKey(key));
    expect(theirs.status).toBe(200);
    expect(theirs.headers["idempotency-replayed"]).toBeUndefined();
    expect(await countIn(h, `apis where workspace_id = '${t.workspaceId}'`)).toBe(2);
  });

  it("a malformed header is a 400 with a precise message, on both surfaces, and changes nothing", async ({ h }) => {
    const t = await h.tenant();
    for (const bad of ["", "a b", "x".repeat(256), "é"]) {
      const v1 = await h.post("/v1/apis.createApi", { name: "bad-header" }, t.rootKey, withKey(bad));
      expect(v1.status, bad).toBe(400);
      expect(v1.body.error.code).toBe("BAD_REQUEST");
      expect(v1.body.error.message).toMatch(/^Idempotency-Key: must be 1 to 255 visible ASCII characters/);
      const v2 = await h.post("/v2/apis.createApi", { name: "bad-header" }, t.rootKey, withKey(bad));
      expect(v2.status, bad).toBe(400);
      expect(v2.body.error.detail).toMatch(/^Idempotency-Key: must be 1 to 255 visible ASCII characters/);
    }
    expect(await countIn(h, `apis where workspace_id = '${t.workspaceId}'`)).toBe(0);
    expect(await countIn(h, `idempotency_keys where scope like '${t.workspaceId}:%'`)).toBe(0);
  });

  it("a refused request (404, 409) stores nothing: its retry runs afresh, and succeeds once the cause is gone", async ({ h }) => {
    const t = await h.tenant();
    const key = newKey();
    const role = { name: "idem-role" };
    expect((await h.post("/v1/permissions.createRole", role, t.rootKey)).status).toBe(200);
    const refused = await h.post("/v1/permissions.createRole", role, t.rootKey, withKey(key));
    expect(refused.status).toBe(409);
    const [row] = await h.sql<{ id: string }>(`select id from roles where workspace_id = '${t.workspaceId}'`);
    expect((await h.post("/v1/permissions.deleteRole", { roleId: row!.id }, t.rootKey)).status).toBe(200);
    const retried = await h.post("/v1/permissions.createRole", role, t.rootKey, withKey(key));
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(retried.headers["idempotency-replayed"]).toBeUndefined();
    expect(await countIn(h, `idempotency_keys where scope like '${t.workspaceId}:%'`)).toBe(1);
  });

  it("the operator routes: createWorkspace and createRootKey replay their answers (the root key shown again, created once)", async ({
    h,
  }) => {
    const key = newKey();
    const ws = await h.post("/v1/workspaces.createWorkspace", { name: "idem-ws" }, ADMIN_TOKEN, withKey(key));
    expect(ws.status, JSON.stringify(ws.body)).toBe(200);
    const wsAgain = await h.post("/v1/workspaces.createWorkspace", { name: "idem-ws" }, ADMIN_TOKEN, withKey(key));
    expect(wsAgain.headers["idempotency-replayed"]).toBe("true");
    expect(wsAgain.body).toEqual(ws.body);
    const workspaceId = ws.body.workspaceId as string;
    expect(await countIn(h, "workspaces where name = 'idem-ws'")).toBe(1);
    const rkKey = newKey();
    const rk = await h.post("/v1/rootKeys.createRootKey", { workspaceId, permissions: ["*"] }, ADMIN_TOKEN, withKey(rkKey));
    expect(rk.status).toBe(200);
    const rkAgain = await h.post("/v1/rootKeys.createRootKey", { workspaceId, permissions: ["*"] }, ADMIN_TOKEN, withKey(rkKey));
    expect(rkAgain.headers["idempotency-replayed"]).toBe("true");
    expect(rkAgain.body).toEqual(rk.body);
    expect(await countIn(h, `root_keys where workspace_id = '${workspaceId}'`)).toBe(1);
  });

  it("the table alone yields no answer: no plaintext key, no Idempotency-Key, only digests and a ciphertext", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const key = newKey();
    const res = await h.post("/v1/keys.createKey", { apiId }, t.rootKey, withKey(key));
    expect(res.status).toBe(200);
    const rows = await h.sql<{ row: string }>(
      `select row_to_json(x)::text as row from (select * from idempotency_keys where scope like '${t.workspaceId}:%') x`,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]!.row).not.toContain(res.body.key);
    expect(rows[0]!.row).not.toContain(res.body.keyId);
    expect(rows[0]!.row).not.toContain(key);
  });

  it("a route that reads, and a write without the header, ignore Idempotency-Key and store nothing", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const read = await h.get("/v1/apis.getApi", { apiId }, t.rootKey);
    expect(read.status).toBe(200);
    const verify = await h.post("/v1/keys.verifyKey", { key: "nope", apiId }, undefined, withKey(newKey()));
    expect(verify.status).toBe(200);
    expect(verify.headers["idempotency-replayed"]).toBeUndefined();
    expect(await countIn(h, `idempotency_keys where scope like '${t.workspaceId}:%'`)).toBe(0);
  });
});
