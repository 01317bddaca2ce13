import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it as plainIt } from "vitest";
import { buildApp } from "../src/app.js";
import { createServices } from "../src/services.js";
import { openPostgres } from "../src/storage/client.js";
import { MemoryRateLimiter } from "../src/storage/ratelimits/memory.ratelimiter.js";
import { FaultProxy } from "./fault-proxy.js";
import { findDependencyFailure } from "../src/storage/dependency.js";
import { auditEntries } from "./audit-entries.js";
import { countIn, test as it } from "./fixtures.js";
import { ADMIN_TOKEN, clientOf, createHarness, type Harness } from "./helper.js";

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

/** A write, its body built from what the setup made, and what its replay must not change (a count). */
type Write = { path: string; body: (s: Setup) => unknown; operator?: boolean };
type Setup = { apiId: string; keyId: string; roleId: string; permissionId: string; identityId: string; workspaceId: string; n: number };

// The mutating routes whose handlers read after they write: in a held transaction such a read through the store
// (not the scope's transaction) would wait for ever on PGlite's one connection, or miss the write on PostgreSQL.
const WRITES: Write[] = [
  { path: "/v1/apis.createApi", body: (s) => ({ name: `every-${s.n}` }) },
  { path: "/v1/keys.createKey", body: (s) => ({ apiId: s.apiId, name: "k", roles: ["every-role"], permissions: ["every.perm"] }) },
  { path: "/v1/keys.updateKey", body: (s) => ({ keyId: s.keyId, name: `renamed-${s.n}` }) },
  { path: "/v1/keys.updateRemaining", body: (s) => ({ keyId: s.keyId, op: "set", value: 10 }) },
  { path: "/v1/keys.addRoles", body: (s) => ({ keyId: s.keyId, roles: [{ name: "every-role" }] }) },
  { path: "/v1/keys.setPermissions", body: (s) => ({ keyId: s.keyId, permissions: [{ name: "every.perm" }] }) },
  { path: "/v1/permissions.createRole", body: (s) => ({ name: `role-${s.n}` }) },
  { path: "/v1/permissions.createPermission", body: (s) => ({ name: `perm.${s.n}` }) },
  { path: "/v1/identities.createIdentity", body: (s) => ({ externalId: `ext-${s.n}` }) },
  { path: "/v1/migrations.createKeys", body: (s) => [{ apiId: s.apiId, plaintext: `sk_every_${s.n}_${randomBytes(8).toString("hex")}` }] },
  { path: "/v1/workspaces.createWorkspace", body: (s) => ({ name: `ws-every-${s.n}` }), operator: true },
  { path: "/v1/rootKeys.createRootKey", body: (s) => ({ workspaceId: s.workspaceId, permissions: ["*"] }), operator: true },
  { path: "/v2/apis.createApi", body: (s) => ({ name: `every-v2-${s.n}` }) },
  { path: "/v2/keys.createKey", body: (s) => ({ apiId: s.apiId, name: "k2", roles: ["every-role"] }) },
  { path: "/v2/keys.updateKey", body: (s) => ({ keyId: s.keyId, name: `v2-renamed-${s.n}` }) },
  { path: "/v2/keys.updateCredits", body: (s) => ({ keyId: s.keyId, operation: "set", value: 5 }) },
  { path: "/v2/keys.setRoles", body: (s) => ({ keyId: s.keyId, roles: ["every-role"] }) },
  { path: "/v2/keys.rerollKey", body: (s) => ({ keyId: s.keyId, expiration: 0 }) },
  { path: "/v2/identities.createIdentity", body: (s) => ({ externalId: `ext-v2-${s.n}` }) },
  { path: "/v2/permissions.createRole", body: (s) => ({ name: `v2-role-${s.n}` }) },
  { path: "/v1/keys.removeRoles", body: (s) => ({ keyId: s.keyId, roles: [{ name: "every-role" }] }) },
  { path: "/v1/keys.deleteKey", body: (s) => ({ keyId: s.keyId }) },
  { path: "/v1/permissions.addPermissionsToRole", body: (s) => ({ roleId: s.roleId, permissions: [{ slug: "every.perm" }] }) },
  {
    path: "/v1/migrations.enqueueKeys",
    body: (s) => ({ migrationId: `mig-${s.n}`, apiId: s.apiId, keys: [{ plaintext: `sk_enq_${s.n}_${randomBytes(8).toString("hex")}` }] }),
  },
  { path: "/v2/keys.deleteKey", body: (s) => ({ keyId: s.keyId }) },
  { path: "/v2/permissions.setRolePermissions", body: (s) => ({ roleId: s.roleId, permissions: ["every.perm"] }) },
  { path: "/v2/keyhaven.createMigration", body: (s) => ({ migrationId: `v2-mig-${s.n}`, algorithm: "sha256" }) },
  {
    path: "/v2/keyhaven.copyFromUnkey",
    body: (s) => ({
      keys: [
        {
          id: `key_copy_${s.n}_${randomBytes(4).toString("hex")}`,
          apiId: s.apiId,
          start: "uk_ab",
          createdAt: 1_700_000_000_000,
          enabled: true,
          roles: ["every-role"],
          plaintext: `uk_copy_${randomBytes(8).toString("hex")}`,
          recoverable: true,
        },
      ],
    }),
  },
];

describe("Idempotency-Key on the writes that read after they write", () => {
  it("each answers (not a 5xx) within a deadline, and its replay is the same answer with no second change", async ({ h }) => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const role = await h.post("/v1/permissions.createRole", { name: "every-role" }, t.rootKey);
    const roleId = role.body.roleId as string;
    expect((await h.post("/v1/permissions.createPermission", { name: "every.perm" }, t.rootKey)).status).toBe(200);
    const failures: string[] = [];
    let n = 0;
    for (const write of WRITES) {
      n++;
      const created = await h.post("/v1/keys.createKey", { apiId }, t.rootKey);
      const s = { apiId, keyId: created.body.keyId as string, roleId, permissionId: "", identityId: "", workspaceId: t.workspaceId, n };
      const body = write.body(s);
      const auth = write.operator ? ADMIN_TOKEN : t.rootKey;
      const key = newKey();
      const timed = (label: string) =>
        Promise.race([
          h.post(write.path, body, auth, withKey(key)),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${write.path} ${label}: no answer within 10 s`)), 10_000)),
        ]);
      const audits = async () => (await auditEntries(h)).length;
      try {
        const first = await timed("first");
        if (first.status >= 300) {
          failures.push(`${write.path}: ${first.status} ${JSON.stringify(first.body)}`);
          continue;
        }
        const before = await audits();
        const again = await timed("replay");
        if (
          again.status !== first.status ||
          again.headers["idempotency-replayed"] !== "true" ||
          JSON.stringify(again.body) !== JSON.stringify(first.body)
        ) {
          failures.push(`${write.path}: replay ${again.status} ${JSON.stringify(again.body)}`);
        }
        if ((await audits()) !== before) failures.push(`${write.path}: the replay wrote an audit entry`);
      } catch (err) {
        failures.push(String(err));
      }
    }
    expect(failures).toEqual([]);
  }, 300_000);
});

describe("Idempotency-Key expiry", () => {
  it("an answer older than 24 hours is not replayed (the retry is a new request) and is pruned in the background", async ({ h }) => {
    const t = await h.tenant();
    const key = newKey();
    expect((await h.post("/v1/apis.createApi", { name: "expiring" }, t.rootKey, withKey(key))).status).toBe(200);
    const scope = `idempotency_keys where scope like '${t.workspaceId}:%'`;
    await h.sql(`update idempotency_keys set created_at_m = created_at_m - 86400001 where scope like '${t.workspaceId}:%'`);
    const later = await h.post("/v1/apis.createApi", { name: "expiring" }, t.rootKey, withKey(key));
    expect(later.status).toBe(200);
    expect(later.headers["idempotency-replayed"]).toBeUndefined();
    expect(await countIn(h, `apis where workspace_id = '${t.workspaceId}'`)).toBe(2);
    // The expired row was replaced by the new answer, which is replayed.
    expect(await countIn(h, scope)).toBe(1);
    expect((await h.post("/v1/apis.createApi", { name: "expiring" }, t.rootKey, withKey(key))).headers["idempotency-replayed"]).toBe(
      "true",
    );
    await h.sql(`update idempotency_keys set created_at_m = created_at_m - 86400001 where scope like '${t.workspaceId}:%'`);
    expect(await h.services.idempotency.pruneNow()).toBeGreaterThanOrEqual(1);
    expect(await countIn(h, scope)).toBe(0);
  });
});

describe("Idempotency-Key's held transaction has a deadline", () => {
  it("a request that has not answered within its bound is rolled back: its change is undone, its answer a 503, nothing stored", async ({
    h,
  }) => {
    const t = await h.tenant();
    const request = { scope: `${t.workspaceId}:root_key:test`, key: newKey(), fingerprint: "f" };
    const scope = h.services.idempotency.begin(request, 300);
    await scope.within(h.db, (tx) =>
      tx.execute(sql.raw(`insert into keyhaven_settings (name, value) values ('idem-held-${t.workspaceId}', 'x')`)),
    );
    const started = Date.now();
    const failure = await Promise.race([scope.expiry, new Promise((r) => setTimeout(r, 5000))]).catch((err: unknown) => err);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(findDependencyFailure(failure)?.publicMessage).toMatch(/did not finish within 300 ms; nothing was changed/);
    await expect(scope.commit({ status: 200, contentType: "application/json", body: "{}" })).rejects.toThrow(
      /did not finish within 300 ms/,
    );
    expect(await countIn(h, `keyhaven_settings where name = 'idem-held-${t.workspaceId}'`)).toBe(0);
    expect(await countIn(h, `idempotency_keys where scope = '${request.scope}'`)).toBe(0);
  });
});

let cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn().catch(() => {});
  cleanup = [];
});

/** An app on `h`'s database behind a fault proxy, one connection, 1 s deadlines (as dependency-outage.writes.test.ts). */
async function appBehindProxy(h: Harness) {
  const target = new URL(h.databaseUrl!);
  const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
  const config = Object.assign({}, h.config, { databaseStatementTimeoutMs: 1000, databaseConnectTimeoutMs: 1000 });
  const store = openPostgres(proxy.urlFor(h.databaseUrl!), 1, { connectTimeoutMs: 1000, statementTimeoutMs: 1000 });
  const app: FastifyInstance = await buildApp({
    deps: await createServices(config, store, { ratelimiter: new MemoryRateLimiter() }),
    logger: { level: process.env.IDEMLOG ?? "silent" },
  });
  cleanup.push(
    () => proxy.close(),
    () => store.close(),
    () => app.close(),
  );
  return { proxy, ...clientOf(app) };
}

describe.runIf(process.env.TEST_DATABASE_URL)("Idempotency-Key through a frozen database", () => {
  plainIt.each(["/v1/keys.createKey", "/v2/keys.createKey"])(
    "%s whose answer is lost (503), retried with the same key after the thaw, writes exactly once",
    async (route) => {
      const h = await createHarness();
      cleanup.push(() => h.close());
      const t = await h.tenant();
      const apiId = await h.createApi(t);
      const { proxy, post } = await appBehindProxy(h);
      expect((await post(route, { apiId, name: "warm-up" }, t.rootKey)).status).toBe(200);
      // The answers muted at several points of the request: before its lookup, in its transaction, at its COMMIT.
      for (const [i, delayMs] of [0, 2, 5, 10, 20].entries()) {
        const name = `lost-${i}`;
        const key = newKey();
        const timer = setTimeout(() => proxy.muteAnswers(), delayMs);
        const first = await post(route, { apiId, name }, t.rootKey, withKey(key));
        clearTimeout(timer);
        // The thaw: the connections that lost answers are gone (a restored link would deliver them late), PostgreSQL
        // answers again.
        await proxy.cut();
        await proxy.restore();
        expect([200, 503], JSON.stringify(first.body)).toContain(first.status);
        let retry = await post(route, { apiId, name }, t.rootKey, withKey(key));
        // Just after the thaw, the pool may still hold the dead connection: a 503 again, then served.
        for (let n = 0; retry.status === 503 && n < 20; n++) {
          await new Promise((r) => setTimeout(r, 100));
          retry = await post(route, { apiId, name }, t.rootKey, withKey(key));
        }
        expect(retry.status, JSON.stringify(retry.body)).toBe(200);
        if (first.status === 200) {
          expect(retry.headers["idempotency-replayed"]).toBe("true");
          expect(retry.body).toEqual(first.body);
        }
        expect(await countIn(h, `keys where api_id = '${apiId}' and name = '${name}'`), `${name} after ${delayMs} ms`).toBe(1);
      }
    },
    60_000,
  );
});
