import { existsSync, readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { auditEntries } from "./audit-entries.js";
import { type Cli, commandSuite, emptyDatabase, keyhaven, killAll, started, withinSeconds } from "./cli-process.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { freePort, waitFor } from "./wait.js";

/**
 * The whole move off hosted Unkey (issue 36 §3), as docs/migrating-from-unkey.md walks it: a "hosted Unkey" (a
 * keyhaven serving its v2 routes over a port, seeded through them), a target keyhaven started with the fallback
 * configured against it, the real CLI (`keyhaven import --from-unkey`) copying between them; then every field
 * compared through both of the target's APIs, the recoverable key verifying at once, a non-recoverable one adopted on
 * its first verification, the source stopped; and a target killed with -9 mid-import, restarted, the same command
 * run again: exact counts.
 */

type Data = Record<string, unknown>;

/** A list of objects in a stable order (by `field`), for comparing two sides whose order need not match. */
const sortedBy = <T extends Data>(list: T[], field: string) => [...list].sort((a, b) => String(a[field]).localeCompare(String(b[field])));

/** Without the ids of rate limits: the copy upserts a key's and an identity's limits by name, their ids are keyhaven's. */
const noLimitIds = (limits: { id?: string }[] | undefined) => limits?.map(({ id: _id, ...r }) => r);

/**
 * A pass-through proxy (node:http) in front of the spawned target: `holdAfter(n)`: after `n` more requests to
 * keyhaven.copyFromUnkey, the next one is forwarded and applied but its answer held, so that the target can be killed
 * with a batch applied and never confirmed; `release` drops the held answer. It forwards to the same port after the
 * target's restart.
 */
async function holdingProxy(target: string) {
  let copies = 0;
  let holdAt = -1;
  const held: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const holdThis = req.url === "/v2/keyhaven.copyFromUnkey" && ++copies === holdAt;
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string" && k !== "host" && k !== "content-length") headers[k] = v;
      try {
        const answer = await fetch(`${target}${req.url}`, { method: req.method ?? "POST", headers, body: Buffer.concat(chunks) });
        const text = await answer.text();
        if (holdThis) {
          held.push(res);
          return;
        }
        res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
        res.end(text);
      } catch {
        res.destroy();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held: () => held.length,
    copies: () => copies,
    holdAfter: (n: number) => {
      holdAt = copies + n + 1;
    },
    release: () => {
      for (const res of held.splice(0)) res.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held.splice(0)) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A query of the spawned target's store, whichever store it is. */
type Query = (text: string) => Promise<Record<string, unknown>[]>;

describe("leaving hosted Unkey, end to end: copy, compare, verify, adopt, source gone", () => {
  const { run, dir } = commandSuite("import", "keyhaven-unkey-e2e-");
  let source: Harness;
  let target: Harness;
  let s: Tenant;
  let t: Tenant;
  let sourceUrl: string;
  let targetUrl: string;
  let sourceStopped = false;
  let apiId: string;
  const keys: Record<"rec" | "plain" | "viaV1" | "off" | "never" | "gold", { keyId: string; key: string }> = {} as never;

  const v2 = async (h: Harness, rootKey: string, route: string, body: unknown) => {
    const res = await h.post(`/v2/${route}`, body, rootKey);
    expect(res.status, `${route}: ${JSON.stringify(res.body)}`).toBe(200);
    return res.body.data;
  };
  const v1get = async (h: Harness, rootKey: string, route: string, query: Record<string, string>) => {
    const res = await h.get(`/v1/${route}`, query, rootKey);
    expect(res.status, `${route}: ${JSON.stringify(res.body)}`).toBe(200);
    return res.body;
  };
  const up = (route: string, body: unknown) => v2(source, s.rootKey, route, body);
  const down = (route: string, body: unknown) => v2(target, t.rootKey, route, body);
  /** A route read on both sides (v2 or v1), made comparable by `clean`. */
  const both = async (read: (h: Harness, rootKey: string) => Promise<unknown>, clean: (x: any) => unknown = (x) => x) => ({
    source: clean(await read(source, s.rootKey)),
    target: clean(await read(target, t.rootKey)),
  });

  /** What only use changes (lastUsedAt, updatedAt) and the ids keyhaven gives limits are left out. */
  const cleanV2Key = (data: any) => {
    const { updatedAt: _u, lastUsedAt: _l, ...rest } = data;
    if (rest.ratelimits) rest.ratelimits = sortedBy(noLimitIds(rest.ratelimits) as Data[], "name");
    if (rest.identity?.ratelimits)
      rest.identity = { ...rest.identity, ratelimits: sortedBy(noLimitIds(rest.identity.ratelimits) as Data[], "name") };
    if (rest.roles) rest.roles = [...rest.roles].sort();
    if (rest.permissions) rest.permissions = [...rest.permissions].sort();
    return rest;
  };
  /**
   * v1 names the workspace (each side's own) and the same use-only fields, and a refill's lastRefillAt: Unkey's v2
   * API never returns it, so the copy starts the refill's clock at the copy.
   */
  const cleanV1Key = (data: any) => {
    const { workspaceId: _w, updatedAt: _u, lastUsedAt: _l, ...rest } = data;
    if (rest.refill) rest.refill = { ...rest.refill, lastRefillAt: undefined };
    if (rest.ratelimits) rest.ratelimits = sortedBy(noLimitIds(rest.ratelimits) as Data[], "name");
    if (rest.ratelimit?.id) rest.ratelimit = { ...rest.ratelimit, id: undefined };
    if (rest.identity) rest.identity = { ...rest.identity };
    if (rest.roles) rest.roles = [...rest.roles].sort();
    if (rest.permissions) rest.permissions = [...rest.permissions].sort();
    return rest;
  };

  /** The /metrics samples of the target, by series (`name{labels}`). */
  const metric = async (series: string) => {
    const res = await target.app.inject({ method: "GET", url: "/metrics" });
    for (const line of (res.body as string).split("\n")) {
      const m = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
      if (m && m[1] === series) return Number(m[2]);
    }
    return 0;
  };

  beforeAll(async () => {
    // 1. "Hosted Unkey", seeded through its v2 routes.
    source = await createHarness();
    s = await source.tenant();
    sourceUrl = await source.app.listen({ port: 0, host: "127.0.0.1" });
    apiId = await source.createApi(s, { storeEncryptedKeys: true });
    for (const slug of ["docs.read", "docs.write", "billing.read", "billing.write", "admin"]) {
      await up("permissions.createPermission", { name: slug, slug, description: `may ${slug}` });
    }
    await up("permissions.createRole", { name: "reader", description: "reads docs", permissions: ["docs.read", "billing.read"] });
    await up("permissions.createRole", { name: "writer", description: "writes docs", permissions: ["docs.write"] });
    await up("permissions.createRole", { name: "empty" });
    await up("identities.createIdentity", {
      externalId: "acme",
      meta: { plan: "enterprise", seats: 40 },
      ratelimits: [
        { name: "tokens", limit: 100, duration: 60_000, autoApply: false },
        { name: "requests", limit: 10, duration: 1000, autoApply: true },
      ],
    });
    await up("identities.createIdentity", { externalId: "globex", meta: { plan: "free" } });

    keys.rec = await up("keys.createKey", {
      apiId,
      name: "recoverable",
      prefix: "sk",
      recoverable: true,
      roles: ["reader"],
      permissions: ["admin"],
      externalId: "acme",
      meta: { tier: "gold", nested: { a: [1, 2] } },
      expires: 4_000_000_000_000,
      credits: { remaining: 50, refill: { interval: "monthly", amount: 100, refillDay: 5 } },
      ratelimits: [{ name: "burst", limit: 10, duration: 60_000, autoApply: true }],
    });
    keys.plain = await up("keys.createKey", {
      apiId,
      name: "plain",
      roles: ["writer", "reader"],
      permissions: ["billing.write"],
      externalId: "acme",
      meta: { note: "non-recoverable" },
      credits: { remaining: 7, refill: { interval: "daily", amount: 7 } },
      ratelimits: [
        { name: "per-minute", limit: 100, duration: 60_000, autoApply: true },
        { name: "per-day", limit: 5000, duration: 86_400_000, autoApply: false },
      ],
    });
    keys.viaV1 = await up("keys.createKey", { apiId, name: "via-v1", externalId: "globex", expires: 4_100_000_000_000 });
    keys.off = await up("keys.createKey", { apiId, name: "disabled", enabled: false, meta: { why: "churned" } });
    keys.never = await up("keys.createKey", { apiId, name: "never-used", externalId: "globex", credits: { remaining: 1 } });
    keys.gold = await up("keys.createKey", { apiId, recoverable: true, permissions: ["docs.read"] });

    await up("ratelimit.limit", { namespace: "api-calls", identifier: "warmup", limit: 10, duration: 1000 });
    await up("ratelimit.setOverride", { namespace: "api-calls", identifier: "vip", limit: 500, duration: 60_000 });
    await up("ratelimit.setOverride", { namespace: "api-calls", identifier: "partner_*", limit: 50, duration: 1000 });

    // 2. The target, started with the fallback against the source.
    target = await createHarness({ KEYHAVEN_UNKEY_FALLBACK_URL: sourceUrl, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: s.rootKey });
    t = await target.tenant();
    targetUrl = await target.app.listen({ port: 0, host: "127.0.0.1" });
  });
  afterAll(async () => {
    killAll();
    await target?.close();
    if (!sourceStopped) await source?.close();
  });

  it("copies the workspace with the real CLI: every record created, two keys verifiable now, four pending", async () => {
    const { code, out, err } = await run(
      [
        "--from-unkey",
        "--unkey-url",
        sourceUrl,
        "--url",
        targetUrl,
        "--api",
        apiId,
        "--ratelimit-namespace",
        "api-calls",
        "--journal",
        path.join(dir(), "copy.journal"),
        "--quiet",
        "--json",
      ],
      { UNKEY_ROOT_KEY: s.rootKey, KEYHAVEN_ROOT_KEY: t.rootKey },
    );
    expect(code, err).toBe(0);
    expect(JSON.parse(out)).toMatchObject({
      complete: true,
      counts: {
        apis: { created: 1, skipped: 0 },
        permissions: { created: 5, skipped: 0 },
        roles: { created: 3, skipped: 0 },
        identities: { created: 2, skipped: 0 },
        keys: { created: 6, updated: 0, unchanged: 0, skipped: 0 },
        overrides: { created: 2, skipped: 0 },
        verifiable: 2,
        pending: 4,
      },
      skipped: [],
    });
    for (const secret of [s.rootKey, t.rootKey, ...Object.values(keys).map((k) => k.key)]) expect(out + err).not.toContain(secret);
    expect(await down("keyhaven.getCopyStatus", { apiIds: [apiId] })).toEqual([
      { apiId, found: true, keys: 6, verifiable: 2, pending: 4, adopted: 0 },
    ]);
  });

  it("a non-recoverable key verifies VALID on the target through the fallback and is adopted: key.adopt, getCopyStatus, /metrics", async () => {
    // At no cost here: a credit spent in keyhaven would be a difference from upstream in the comparisons below.
    expect(await down("keys.verifyKey", { key: keys.plain.key, credits: { cost: 0 } })).toMatchObject({
      valid: true,
      code: "VALID",
      keyId: keys.plain.keyId,
      name: "plain",
      credits: 7,
      meta: { note: "non-recoverable" },
      identity: expect.objectContaining({ externalId: "acme" }),
    });
    // Unkey was asked with cost 0: nothing spent there.
    expect((await up("keys.getKey", { keyId: keys.plain.keyId })).credits.remaining).toBe(7);
    const [entry, ...more] = await auditEntries(target, { event: "key.adopt" });
    expect(more).toEqual([]);
    expect(entry).toMatchObject({
      workspaceId: t.workspaceId,
      actorKind: "system",
      actorId: "unkey-fallback",
      targets: expect.arrayContaining([{ type: "key", id: keys.plain.keyId }]),
    });
    expect(JSON.stringify(entry)).not.toContain(keys.plain.key);
    expect(await down("keyhaven.getCopyStatus", { apiIds: [apiId] })).toEqual([
      { apiId, found: true, keys: 6, verifiable: 3, pending: 3, adopted: 1 },
    ]);
    expect(await metric("keyhaven_keys_adopted_total")).toBe(1);
    expect(await metric('keyhaven_unkey_fallback_calls_total{outcome="adopted"}')).toBe(1);
    expect(await metric("keyhaven_keys_pending")).toBe(3);
    // The refresh of its state from Unkey's keys.getKey (in the background) has ended before the comparisons.
    await target.services.unkeyFallback!.refreshesSettled();
  });

  it("every key reads the same through v2 keys.getKey and v1 keys.getKey on both sides, ids kept", async () => {
    for (const [name, { keyId }] of Object.entries(keys)) {
      const viaV2 = await both((h, rootKey) => v2(h, rootKey, "keys.getKey", { keyId }), cleanV2Key);
      expect(viaV2.target, `v2 ${name}`).toEqual(viaV2.source);
      expect((viaV2.target as Data).keyId).toBe(keyId);
      const viaV1 = await both((h, rootKey) => v1get(h, rootKey, "keys.getKey", { keyId }), cleanV1Key);
      expect(viaV1.target, `v1 ${name}`).toEqual(viaV1.source);
      expect((viaV1.target as Data).id).toBe(keyId);
      expect((viaV1.target as Data).apiId).toBe(apiId);
    }
    // The recoverable keys' plaintexts, from keyhaven's vault.
    for (const k of [keys.rec, keys.gold]) expect((await down("keys.getKey", { keyId: k.keyId, decrypt: true })).plaintext).toBe(k.key);
    expect(await down("keys.getKey", { keyId: keys.plain.keyId, decrypt: true })).not.toHaveProperty("plaintext");
    // The API's settings and its key list.
    const api = await both((h, rootKey) => v2(h, rootKey, "apis.getApi", { apiId }));
    expect(api.target).toEqual(api.source);
    const listed = await both(
      (h, rootKey) => v2(h, rootKey, "apis.listKeys", { apiId, limit: 100 }),
      (list: Data[]) => sortedBy(list.map(cleanV2Key), "keyId"),
    );
    expect(listed.target).toEqual(listed.source);
  });

  it("identities, roles, permissions and overrides read the same through both APIs", async () => {
    const cleanIdentity = ({ ratelimits, ...rest }: any) => ({
      ...rest,
      ratelimits: sortedBy((noLimitIds(ratelimits) ?? []) as Data[], "name"),
    });
    for (const externalId of ["acme", "globex"]) {
      const viaV2 = await both((h, rootKey) => v2(h, rootKey, "identities.getIdentity", { identity: externalId }), cleanIdentity);
      expect(viaV2.target, externalId).toEqual(viaV2.source);
      const viaV1 = await both(
        (h, rootKey) => v1get(h, rootKey, "identities.getIdentity", { externalId }),
        ({ workspaceId: _w, ...rest }: any) => cleanIdentity(rest),
      );
      expect(viaV1.target, externalId).toEqual(viaV1.source);
    }
    const identities = await both(
      (h, rootKey) => v2(h, rootKey, "identities.listIdentities", { limit: 100 }),
      (list: Data[]) => sortedBy(list.map(cleanIdentity), "id"),
    );
    expect(identities.target).toEqual(identities.source);

    const cleanRole = (r: any) => ({ ...r, permissions: sortedBy(r.permissions ?? [], "id") });
    for (const role of ["reader", "writer", "empty"]) {
      const viaV2 = await both((h, rootKey) => v2(h, rootKey, "permissions.getRole", { role }), cleanRole);
      expect(viaV2.target, role).toEqual(viaV2.source);
    }
    const roles = await both(
      (h, rootKey) => v2(h, rootKey, "permissions.listRoles", { limit: 100 }),
      (list: Data[]) => sortedBy(list.map(cleanRole), "id"),
    );
    expect(roles.target).toEqual(roles.source);
    expect((roles.target as Data[]).length).toBe(3);
    const roleId = ((roles.source as Data[]).find((r) => r.name === "reader") as Data).id as string;
    const v1Role = await both((h, rootKey) => v1get(h, rootKey, "permissions.getRole", { roleId }), cleanRole);
    expect(v1Role.target).toEqual(v1Role.source);

    const permissions = await both(
      (h, rootKey) => v2(h, rootKey, "permissions.listPermissions", { limit: 100 }),
      (list: Data[]) => sortedBy(list, "id"),
    );
    expect(permissions.target).toEqual(permissions.source);
    expect((permissions.target as Data[]).length).toBe(5);
    const v1Permissions = await both(
      (h, rootKey) => v1get(h, rootKey, "permissions.listPermissions", {}),
      (list: Data[]) => sortedBy(list, "id"),
    );
    expect(v1Permissions.target).toEqual(v1Permissions.source);

    // Overrides: the copy keeps identifier, limit and duration (an override's id and namespace id are keyhaven's).
    const cleanOverride = ({ overrideId: _o, namespaceId: _n, id: _i, ...rest }: any) => rest;
    const overrides = await both(
      (h, rootKey) => v2(h, rootKey, "ratelimit.listOverrides", { namespace: "api-calls" }),
      (list: Data[]) => sortedBy(list.map(cleanOverride), "identifier"),
    );
    expect(overrides.target).toEqual(overrides.source);
    expect((overrides.target as Data[]).length).toBe(2);
    const v1Overrides = await both(
      (h, rootKey) => v1get(h, rootKey, "ratelimits.listOverrides", { namespaceName: "api-calls" }),
      (body: any) => sortedBy(body.overrides.map(cleanOverride), "identifier"),
    );
    expect(v1Overrides.target).toEqual(v1Overrides.source);
  });

  it("the recoverable key verifies on the target at once, through v2 and v1, without asking the source", async () => {
    expect(await down("keys.verifyKey", { key: keys.rec.key })).toMatchObject({
      valid: true,
      code: "VALID",
      keyId: keys.rec.keyId,
      credits: 49,
      permissions: expect.arrayContaining(["docs.read", "billing.read", "admin"]),
      identity: expect.objectContaining({ externalId: "acme" }),
    });
    const v1 = await target.post("/v1/keys.verifyKey", { key: keys.rec.key, apiId });
    expect(v1.status).toBe(200);
    expect(v1.body).toMatchObject({ valid: true, code: "VALID", keyId: keys.rec.keyId, ownerId: "acme", remaining: 48 });
    expect(await down("keys.verifyKey", { key: keys.gold.key })).toMatchObject({ valid: true, keyId: keys.gold.keyId });
    expect(await metric('keyhaven_unkey_fallback_calls_total{outcome="adopted"}')).toBe(1);
  });

  it("a non-recoverable key, verified right after the copy, is adopted through the fallback and answered v1 and v2", async () => {
    const v1 = await target.post("/v1/keys.verifyKey", { key: keys.viaV1.key, apiId });
    expect(v1.body).toMatchObject({ valid: true, code: "VALID", keyId: keys.viaV1.keyId });
    expect(await down("keys.verifyKey", { key: keys.off.key })).toMatchObject({ valid: false, code: "DISABLED", keyId: keys.off.keyId });
    expect(await down("keyhaven.getCopyStatus", { apiIds: [apiId] })).toEqual([
      { apiId, found: true, keys: 6, verifiable: 5, pending: 1, adopted: 3 },
    ]);
    const pending = await down("keyhaven.listPendingKeys", { apiId });
    expect(pending).toEqual([expect.objectContaining({ keyId: keys.never.keyId, name: "never-used", externalId: "globex" })]);
    expect(await metric("keyhaven_keys_adopted_total")).toBe(3);
    expect(await metric("keyhaven_keys_pending")).toBe(1);
  });

  it("with the source stopped: the adopted key still VALID, an unknown key and a never-verified pending key NOT_FOUND", async () => {
    await target.services.unkeyFallback!.refreshesSettled();
    await source.close();
    sourceStopped = true;
    expect(await down("keys.verifyKey", { key: keys.plain.key })).toMatchObject({ valid: true, code: "VALID", keyId: keys.plain.keyId });
    const v1 = await target.post("/v1/keys.verifyKey", { key: keys.viaV1.key, apiId });
    expect(v1.body).toMatchObject({ valid: true, keyId: keys.viaV1.keyId });
    // It answers (a generous deadline, no timing figure): the dead source costs the fallback's own deadline at most.
    const unknown = await withinSeconds(target.post("/v2/keys.verifyKey", { key: "sk_thisKeyWasNeverIssuedAnywhere0001" }, t.rootKey), 10);
    expect(unknown.body.data).toEqual({ valid: false, code: "NOT_FOUND" });
    const never = await withinSeconds(target.post("/v2/keys.verifyKey", { key: keys.never.key }, t.rootKey), 10);
    expect(never.body.data).toEqual({ valid: false, code: "NOT_FOUND" });
    const neverV1 = await withinSeconds(target.post("/v1/keys.verifyKey", { key: keys.never.key, apiId }), 10);
    expect(neverV1.body).toMatchObject({ valid: false, code: "NOT_FOUND" });
    expect(await down("keyhaven.getCopyStatus", { apiIds: [apiId] })).toEqual([
      { apiId, found: true, keys: 6, verifiable: 5, pending: 1, adopted: 3 },
    ]);
  });
});

describe.runIf(process.platform === "linux")(
  "leaving hosted Unkey: the target killed with -9 mid-import, restarted, the same command again",
  () => {
    const { run, dir } = commandSuite("import", "keyhaven-unkey-e2e-kill-");
    const TARGET_ROOT_KEY = "khroot_unkey_e2e_target_root_key_0123";
    const templateUrl = inject("templateDatabaseUrl");
    const KEYS = 300;
    let source: Harness;
    let s: Tenant;
    let sourceUrl: string;
    let apiId: string;
    const ids: string[] = [];
    let database: { url: string; drop(): Promise<void> } | undefined;
    let serverEnv: Record<string, string>;
    let server: Cli | undefined;
    let query: Query;
    let closeQuery = async () => {};
    let closeProxy = async () => {};

    const startTarget = async () => {
      server = keyhaven(["serve"], serverEnv);
      await started(server);
    };

    beforeAll(async () => {
      source = await createHarness();
      s = await source.tenant();
      sourceUrl = await source.app.listen({ port: 0, host: "127.0.0.1" });
      apiId = await source.createApi(s, { storeEncryptedKeys: true });
      for (let i = 0; i < KEYS; i++) {
        const res = await source.post("/v2/keys.createKey", { apiId, name: `k${i}`, recoverable: i % 3 === 0, meta: { i } }, s.rootKey);
        expect(res.status).toBe(200);
        ids.push(res.body.data.keyId);
      }
      const port = await freePort();
      serverEnv = { KEYHAVEN_ROOT_KEY: TARGET_ROOT_KEY, HOST: "127.0.0.1", PORT: String(port), LOG_LEVEL: "warn" };
      if (templateUrl) {
        database = await emptyDatabase(templateUrl, "keyhaven_unkey_e2e");
        serverEnv.DATABASE_URL = database.url;
        serverEnv.KEYHAVEN_ENCRYPTION_KEY = Buffer.alloc(32, 7).toString("base64");
        const sql = postgres(database.url, { max: 1, onnotice: () => {} });
        query = async (text) => (await sql.unsafe(text)) as unknown as Record<string, unknown>[];
        closeQuery = () => sql.end();
      } else {
        serverEnv.KEYHAVEN_DATA_DIR = path.join(dir(), "data");
      }
    });
    afterAll(async () => {
      killAll();
      await closeProxy();
      await closeQuery();
      await database?.drop();
      await source?.close();
    });

    it("killed twice (the target, then the target and the CLI), the same command each time: every key once, the right number pending, each id present once", async () => {
      await startTarget();
      const targetUrl = `http://127.0.0.1:${serverEnv.PORT}`;
      const proxy = await holdingProxy(targetUrl);
      closeProxy = proxy.close;
      const journal = path.join(dir(), "kill.journal");
      const args = [
        "--from-unkey",
        "--unkey-url",
        sourceUrl,
        "--url",
        proxy.url,
        "--api",
        apiId,
        "--journal",
        journal,
        "--batch-size",
        "10",
        "--concurrency",
        "1",
        "--attempts",
        "1",
        "--quiet",
        "--json",
      ];
      const env = { UNKEY_ROOT_KEY: s.rootKey, KEYHAVEN_ROOT_KEY: TARGET_ROOT_KEY };
      const lines = () => (existsSync(journal) ? readFileSync(journal, "utf8").split("\n") : []);
      const confirmed = () => lines().filter((l) => l.includes('"stream"')).length;
      const keyBatches = () => lines().filter((l) => l.includes(`"stream":"keys:${apiId}"`)).length;
      const heldWith = (cli: Cli, batches: number) =>
        waitFor(`${batches} batches of keys confirmed and the next held`, () => proxy.held() === 1 && keyBatches() === batches, {
          timeoutMs: 90_000,
          detail: () => `${keyBatches()} batches of keys confirmed, ${proxy.held()} held\n${cli.stderr()}`,
        });
      const killTarget = async () => {
        server!.child.kill("SIGKILL");
        await server!.exited;
      };

      // First run: the API's batch and 8 of the 30 batches of keys answered, the 9th of keys applied and its answer
      // held; kill -9 of the target there. The CLI meets an outage and stops, resumable.
      proxy.holdAfter(9);
      const cli = keyhaven(["import", ...args], env);
      await heldWith(cli, 8);
      await killTarget();
      proxy.release();
      const first = await withinSeconds(cli.exited, 120);
      expect(first.code, cli.stderr()).toBe(3);
      expect(cli.stderr()).toContain("resume with the same command");
      expect(keyBatches()).toBe(8);

      // Second run, the same command: 6 more batches of keys answered, the 7th applied and held; kill -9 of the
      // target and of the CLI at once.
      await startTarget();
      proxy.holdAfter(6);
      const second = keyhaven(["import", ...args], env);
      await heldWith(second, 14);
      second.child.kill("SIGKILL");
      await killTarget();
      await second.exited;
      proxy.release();
      const before = confirmed();
      const sentBefore = proxy.copies();

      // Third run, the same command again: it ends, with exact counts.
      await startTarget();
      const resumed = await run(args, env);
      expect(resumed.code, resumed.err).toBe(0);
      const summary = JSON.parse(resumed.out);
      expect(summary.complete).toBe(true);
      expect(summary.resumedBatches).toBe(before);
      // Only the 16 batches of keys not confirmed went again (the held one among them, answered as the first time by
      // its Idempotency-Key, after a restart): no confirmed batch was sent twice.
      expect(proxy.copies() - sentBefore).toBe(KEYS / 10 - 14);
      expect(summary.counts.keys).toMatchObject({ created: KEYS, updated: 0, unchanged: 0, skipped: 0 });
      expect(summary.counts.verifiable).toBe(KEYS / 3);
      expect(summary.counts.pending).toBe(KEYS - KEYS / 3);

      const status = await fetch(`${targetUrl}/v2/keyhaven.getCopyStatus`, {
        method: "POST",
        headers: { authorization: `Bearer ${TARGET_ROOT_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ apiIds: [apiId] }),
      });
      expect(((await status.json()) as { data: unknown }).data).toEqual([
        { apiId, found: true, keys: KEYS, verifiable: KEYS / 3, pending: KEYS - KEYS / 3, adopted: 0 },
      ]);

      // Straight from the store: each id once, pending exactly where the source had no plaintext to give.
      server!.child.kill("SIGKILL");
      await server!.exited;
      if (!templateUrl) {
        const { openPglite } = await import("../src/storage/client.js");
        const store = await openPglite(serverEnv.KEYHAVEN_DATA_DIR!);
        const { sql: raw } = await import("drizzle-orm");
        query = async (text) => {
          const result = (await store.db.execute(raw.raw(text))) as unknown as { rows?: Record<string, unknown>[] };
          return result.rows ?? (result as unknown as Record<string, unknown>[]);
        };
        closeQuery = () => store.close();
      }
      const rows = await query(`select id, hash is null as pending from keys where api_id = '${apiId}' and deleted_at_m is null`);
      expect(rows.length).toBe(KEYS);
      expect(new Set(rows.map((r) => r.id)).size).toBe(KEYS);
      expect(rows.map((r) => r.id as string).sort()).toEqual([...ids].sort());
      const pendingIds = rows.filter((r) => r.pending === true).map((r) => r.id as string);
      expect(pendingIds.sort()).toEqual(ids.filter((_, i) => i % 3 !== 0).sort());
    }, 240_000);
  },
);
