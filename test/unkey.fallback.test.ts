import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../src/clock.js";
import { hashKey } from "../src/crypto/hash.js";
import { auditEntries } from "./audit-entries.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";
import { waitFor } from "./wait.js";

/**
 * The Unkey fallback (issue 36 §2): a keyhaven configured with KEYHAVEN_UNKEY_FALLBACK_URL adopts a pending key (a
 * key copied from hosted Unkey without its hash) on its first verification. "Hosted Unkey" is a second keyhaven
 * serving its v2 routes over a port, seeded through them as test/cli.fromUnkey.test.ts seeds its source; a stand-in
 * (node:http) answers what keyhaven-as-Unkey never does: no answer, a 500, a malformed body, a keyId of our choosing.
 */

/** A pending key as the copy from Unkey leaves it: the source's id, every setting, no hash (H1 writes these). */
async function insertPendingKey(h: Harness, workspaceId: string, apiId: string, keyId: string, fields: { name?: string } = {}) {
  const name = fields.name === undefined ? "null" : `'${fields.name}'`;
  await h.sql(
    `insert into keys (id, workspace_id, api_id, hash, start, name, created_at_m)
     values ('${keyId}', '${workspaceId}', '${apiId}', null, 'sk_', ${name}, ${h.clock.now()})`,
  );
  await h.services.unkeyFallback?.refreshPendingCounts();
}

const keyRow = async (h: Harness, keyId: string) =>
  (
    await h.sql<{ hash: string | null; adopted_at_m: string | null; name: string | null; remaining_requests: number | null }>(
      `select hash, adopted_at_m, name, remaining_requests from keys where id = '${keyId}'`,
    )
  )[0]!;

/** The /metrics samples of `h`, by series (`name{labels}`). */
async function metricsOf(h: Harness): Promise<{ text: string; value(series: string): number }> {
  const res = await h.app.inject({ method: "GET", url: "/metrics" });
  const text = res.body as string;
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m) values.set(m[1]!, Number(m[2]));
  }
  return { text, value: (series) => values.get(series) ?? 0 };
}

/** A logger for the app that keeps every line it writes. */
function capturingLogger() {
  const lines: string[] = [];
  return { lines, logger: { level: "trace", stream: { write: (line: string) => lines.push(line) } } };
}

type StandInMode = "hang" | "500" | "malformed" | "huge" | "unknown" | { keyId: string; meta?: Record<string, unknown> };

/** A stand-in hosted Unkey: answers keys.verifyKey by `mode`, keys.getKey with a 404; counts and keeps requests. */
async function standIn() {
  const state = { mode: "unknown" as StandInMode, verifyCalls: 0, aborted: 0, authorizations: new Set<string>(), bodies: [] as unknown[] };
  const server = http.createServer((req, res) => {
    state.authorizations.add(String(req.headers.authorization));
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url !== "/v2/keys.verifyKey") {
        res.statusCode = 404;
        res.end("{}");
        return;
      }
      state.verifyCalls++;
      state.bodies.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      const mode = state.mode;
      res.setHeader("content-type", "application/json");
      if (mode === "hang") {
        // Never answers: the client's deadline must end the call.
        res.on("close", () => state.aborted++);
        return;
      }
      if (mode === "500") {
        res.statusCode = 500;
        res.end(JSON.stringify({ error: { type: "https://unkey.com/docs/errors/unkey/application/unexpected_error", detail: "boom" } }));
        return;
      }
      if (mode === "malformed") {
        res.end(JSON.stringify({ meta: {}, data: { valid: "yes", code: 7 } }));
        return;
      }
      if (mode === "huge") {
        // Valid, but far longer than any verifyKey answer: read no further than the bound.
        res.end(JSON.stringify({ meta: {}, data: { valid: false, code: "NOT_FOUND", padding: "x".repeat(400_000) } }));
        return;
      }
      if (mode === "unknown") {
        res.end(JSON.stringify({ meta: { requestId: "req_1" }, data: { valid: false, code: "NOT_FOUND" } }));
        return;
      }
      const data = { valid: true, code: "VALID", keyId: mode.keyId, enabled: true, ...(mode.meta && { meta: mode.meta }) };
      res.end(JSON.stringify({ meta: { requestId: "req_2" }, data }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    state,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("the Unkey fallback against a keyhaven as hosted Unkey", () => {
  let source: Harness;
  let s: Tenant;
  let sourceApi: string;
  let sourceStopped = false;
  let target: Harness;
  let t: Tenant;
  let targetApi: string;
  const log = capturingLogger();
  /** Non-recoverable keys of the source: Unkey would never return their hash or plaintext. */
  let withCredits: { keyId: string; key: string };
  let viaV1: { keyId: string; key: string };
  let disabled: { keyId: string; key: string };

  const sourceV2 = async (route: string, body: unknown) => {
    const res = await source.post(`/v2/${route}`, body, s.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data;
  };
  const verifyV2 = async (key: string) => {
    const res = await target.post("/v2/keys.verifyKey", { key }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data;
  };

  beforeAll(async () => {
    source = await createHarness();
    s = await source.tenant();
    const url = await source.app.listen({ port: 0, host: "127.0.0.1" });
    sourceApi = await source.createApi(s);
    withCredits = await sourceV2("keys.createKey", {
      apiId: sourceApi,
      name: "customer-a",
      meta: { plan: "pro" },
      credits: { remaining: 10, refill: { interval: "daily", amount: 10 } },
      ratelimits: [{ name: "per-minute", limit: 100, duration: 60_000, autoApply: true }],
    });
    viaV1 = await sourceV2("keys.createKey", { apiId: sourceApi, name: "customer-b" });
    disabled = await sourceV2("keys.createKey", { apiId: sourceApi, name: "customer-c", enabled: false });

    target = await createHarness({ KEYHAVEN_UNKEY_FALLBACK_URL: url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: s.rootKey }, { logger: log.logger });
    t = await target.tenant();
    targetApi = await target.createApi(t);
    await insertPendingKey(target, t.workspaceId, targetApi, withCredits.keyId, { name: "stale-name" });
    await insertPendingKey(target, t.workspaceId, targetApi, viaV1.keyId);
    // Copied while it was enabled: Unkey's answer says otherwise now.
    await insertPendingKey(target, t.workspaceId, targetApi, disabled.keyId);
  });
  afterAll(async () => {
    await target?.close();
    if (!sourceStopped) await source?.close();
  });

  it("adopts a pending key on its first v2 verification: VALID by keyhaven's rules, with Unkey's state, recorded and counted", async () => {
    expect((await metricsOf(target)).value("keyhaven_keys_pending")).toBe(3);
    const answer = await verifyV2(withCredits.key);
    expect(answer).toMatchObject({ valid: true, code: "VALID", keyId: withCredits.keyId, name: "customer-a", meta: { plan: "pro" } });
    // keyhaven spent the use, from what Unkey said was left; Unkey was asked with cost 0 and spent nothing.
    expect(answer.credits).toBe(9);
    expect((await sourceV2("keys.getKey", { keyId: withCredits.keyId })).credits.remaining).toBe(10);

    const row = await keyRow(target, withCredits.keyId);
    expect(row.hash).toBe(hashKey(withCredits.key));
    expect(Number(row.adopted_at_m)).toBeGreaterThan(0);
    expect(row.name).toBe("customer-a");

    const [entry, ...more] = await auditEntries(target, { event: "key.adopt" });
    expect(more).toEqual([]);
    expect(entry).toMatchObject({
      workspaceId: t.workspaceId,
      actorKind: "system",
      actorId: "unkey-fallback",
      surface: "v2",
      targets: [
        { type: "key", id: withCredits.keyId },
        { type: "api", id: targetApi },
      ],
    });
    expect(entry!.requestId).toBeTruthy();
    expect(entry!.clientAddress).toBe("127.0.0.1");

    const metrics = await metricsOf(target);
    expect(metrics.value("keyhaven_keys_adopted_total")).toBe(1);
    expect(metrics.value('keyhaven_unkey_fallback_calls_total{outcome="adopted"}')).toBe(1);
    expect(metrics.value("keyhaven_keys_pending")).toBe(2);
  });

  it("then refreshes the refill and rate limits from Unkey's keys.getKey in the background, as a key.update by the same actor", async () => {
    await target.services.unkeyFallback!.refreshesSettled();
    const [update, ...more] = await auditEntries(target, { event: "key.update" });
    expect(more).toEqual([]);
    expect(update).toMatchObject({
      actorKind: "system",
      actorId: "unkey-fallback",
      surface: "v2",
      details: { fields: ["refill", "ratelimits"] },
    });
    const [row] = await target.sql<{ refill_amount: number; refill_day: number | null }>(
      `select refill_amount, refill_day from keys where id = '${withCredits.keyId}'`,
    );
    expect(row).toEqual({ refill_amount: 10, refill_day: null });
    const answer = await verifyV2(withCredits.key);
    expect(answer).toMatchObject({ valid: true, credits: 8 });
    expect(answer.ratelimits).toEqual([expect.objectContaining({ name: "per-minute", limit: 100, duration: 60_000, autoApply: true })]);
  });

  it("adopts on a v1 verification too (by the apiId's workspace, without a root key)", async () => {
    const res = await target.post("/v1/keys.verifyKey", { key: viaV1.key, apiId: targetApi });
    expect(res.body).toMatchObject({ valid: true, code: "VALID", keyId: viaV1.keyId, name: "customer-b" });
    expect((await keyRow(target, viaV1.keyId)).hash).toBe(hashKey(viaV1.key));
    const adoptions = await auditEntries(target, { event: "key.adopt" });
    expect(adoptions.map((e) => [e.targets[0]!.id, e.surface])).toEqual([
      [withCredits.keyId, "v2"],
      [viaV1.keyId, "v1"],
    ]);
    expect((await metricsOf(target)).value("keyhaven_keys_pending")).toBe(1);
  });

  it("adopts a key whatever Unkey's code for it, and answers from the state adopted: a key disabled upstream is DISABLED", async () => {
    expect(await verifyV2(disabled.key)).toMatchObject({ valid: false, code: "DISABLED", keyId: disabled.keyId, enabled: false });
    expect((await keyRow(target, disabled.keyId)).hash).toBe(hashKey(disabled.key));
    expect((await metricsOf(target)).value("keyhaven_keys_pending")).toBe(0);
  });

  it("with the source stopped: adopted keys still verify, an unknown key is NOT_FOUND (counted as an error)", async () => {
    // The background refresh of the v1 adoption would otherwise fail against a stopped source.
    await target.services.unkeyFallback!.refreshesSettled();
    await source.close();
    sourceStopped = true;
    expect(await verifyV2(withCredits.key)).toMatchObject({ valid: true, code: "VALID", credits: 7 });
    expect((await target.post("/v1/keys.verifyKey", { key: viaV1.key })).body).toMatchObject({ valid: true, keyId: viaV1.keyId });

    // A workspace with pending keys again, so that the unknown key is asked about, and Unkey does not answer.
    await insertPendingKey(target, t.workspaceId, targetApi, `key_${randomBytes(8).toString("hex")}`);
    const started = performance.now();
    expect(await verifyV2(`sk_${randomBytes(16).toString("hex")}`)).toEqual({ valid: false, code: "NOT_FOUND" });
    // Within the verification's bound (the store's statement deadline), whatever the machine's load.
    expect(performance.now() - started).toBeLessThan(target.config.databaseStatementTimeoutMs);
    const metrics = await metricsOf(target);
    expect(metrics.value('keyhaven_unkey_fallback_errors_total{reason="network"}')).toBe(1);
    expect(metrics.value('keyhaven_unkey_fallback_calls_total{outcome="failed"}')).toBe(1);
  });

  it("writes the Unkey root key in no log line, audit entry or metric", async () => {
    expect(log.lines.length).toBeGreaterThan(0);
    expect(log.lines.join("\n")).not.toContain(s.rootKey);
    expect(JSON.stringify(await auditEntries(target))).not.toContain(s.rootKey);
    expect((await metricsOf(target)).text).not.toContain(s.rootKey);
  });
});

describe("the Unkey fallback against a stand-in: failures, the negative cache, the cap, keys never overwritten", () => {
  const unkeyRootKey = `unkey_root_${randomBytes(12).toString("hex")}`;
  const clock = new ManualClock();
  const log = capturingLogger();
  let unkey: Awaited<ReturnType<typeof standIn>>;
  let h: Harness;

  /** A workspace with one pending key (so that its misses are asked about) and its own bucket. */
  const pendingTenant = async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const pendingId = `key_${randomBytes(8).toString("hex")}`;
    await insertPendingKey(h, t.workspaceId, apiId, pendingId);
    return { t, apiId, pendingId };
  };
  const verify = async (t: Tenant, key: string) => {
    const res = await h.post("/v2/keys.verifyKey", { key }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data;
  };
  const randomKey = () => `sk_${randomBytes(16).toString("hex")}`;

  beforeAll(async () => {
    unkey = await standIn();
    h = await createHarness(
      {
        KEYHAVEN_UNKEY_FALLBACK_URL: unkey.url,
        KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: unkeyRootKey,
        KEYHAVEN_UNKEY_FALLBACK_TIMEOUT_MS: "300",
        KEYHAVEN_UNKEY_FALLBACK_RATE: "5",
      },
      { clock, logger: log.logger },
    );
  });
  afterAll(async () => {
    await h?.close();
    await unkey?.close();
  });

  it.each([
    ["hang", "timeout"],
    ["500", "status"],
    ["malformed", "malformed"],
  ] as const)("an Unkey that answers %s: NOT_FOUND within the bound, counted by reason (%s), nothing written", async (mode, reason) => {
    const { t, pendingId } = await pendingTenant();
    unkey.state.mode = mode;
    const calls = unkey.state.verifyCalls;
    const before = await auditEntries(h);
    const started = performance.now();
    expect(await verify(t, randomKey())).toEqual({ valid: false, code: "NOT_FOUND" });
    expect(performance.now() - started).toBeLessThan(h.config.databaseStatementTimeoutMs);
    expect(unkey.state.verifyCalls).toBe(calls + 1);
    expect((await metricsOf(h)).value(`keyhaven_unkey_fallback_errors_total{reason="${reason}"}`)).toBe(1);
    expect((await keyRow(h, pendingId)).hash).toBeNull();
    expect(await auditEntries(h)).toEqual(before);
    if (mode === "hang") await waitFor("the stand-in's request closed by the deadline", () => unkey.state.aborted === 1);
  });

  it("reads no more of an answer than its bound, and stores nothing the store refuses: the key stays pending", async () => {
    const { t, pendingId } = await pendingTenant();
    unkey.state.mode = "huge";
    const malformed = (await metricsOf(h)).value('keyhaven_unkey_fallback_errors_total{reason="malformed"}');
    expect(await verify(t, randomKey())).toEqual({ valid: false, code: "NOT_FOUND" });
    expect((await metricsOf(h)).value('keyhaven_unkey_fallback_errors_total{reason="malformed"}')).toBe(malformed + 1);
    // PostgreSQL's jsonb holds no NUL character: the adoption is refused, the verification answered as a miss.
    unkey.state.mode = { keyId: pendingId, meta: { note: "a\u0000b" } };
    expect(await verify(t, randomKey())).toEqual({ valid: false, code: "NOT_FOUND" });
    expect((await metricsOf(h)).value('keyhaven_unkey_fallback_errors_total{reason="adoption_refused"}')).toBe(1);
    expect((await keyRow(h, pendingId)).hash).toBeNull();
  });

  it("asks about an unknown key once: the second verification of it is answered from the negative cache", async () => {
    const { t } = await pendingTenant();
    unkey.state.mode = "unknown";
    const key = randomKey();
    const calls = unkey.state.verifyCalls;
    expect(await verify(t, key)).toEqual({ valid: false, code: "NOT_FOUND" });
    expect(await verify(t, key)).toEqual({ valid: false, code: "NOT_FOUND" });
    expect(unkey.state.verifyCalls).toBe(calls + 1);
    const metrics = await metricsOf(h);
    expect(metrics.value('keyhaven_unkey_fallback_skipped_total{reason="negative_cache"}')).toBe(1);
    expect(metrics.value('keyhaven_unkey_fallback_calls_total{outcome="unknown"}')).toBe(1);
    // Once the negative TTL has passed, it is asked about again.
    clock.advance(h.config.unkeyFallback!.negativeTtlMs + 1);
    expect(await verify(t, key)).toEqual({ valid: false, code: "NOT_FOUND" });
    expect(unkey.state.verifyCalls).toBe(calls + 2);
  });

  it("caps a workspace's calls: many random keys cause at most KEYHAVEN_UNKEY_FALLBACK_RATE calls (business time stands still)", async () => {
    const { t } = await pendingTenant();
    unkey.state.mode = "unknown";
    const calls = unkey.state.verifyCalls;
    const skipped = (await metricsOf(h)).value('keyhaven_unkey_fallback_skipped_total{reason="rate_limited"}');
    const answers = await Promise.all(Array.from({ length: 30 }, () => verify(t, randomKey())));
    expect(answers.every((a) => a.code === "NOT_FOUND")).toBe(true);
    expect(unkey.state.verifyCalls - calls).toBe(5);
    expect((await metricsOf(h)).value('keyhaven_unkey_fallback_skipped_total{reason="rate_limited"}') - skipped).toBe(25);
    // Another workspace has a bucket of its own.
    const other = await pendingTenant();
    expect(await verify(other.t, randomKey())).toEqual({ valid: false, code: "NOT_FOUND" });
    expect(unkey.state.verifyCalls - calls).toBe(6);
  });

  it("never overwrites a key that verifies already, whatever Unkey answers", async () => {
    const { t, apiId } = await pendingTenant();
    const created = (await h.post("/v2/keys.createKey", { apiId }, t.rootKey)).body.data as { keyId: string; key: string };
    unkey.state.mode = { keyId: created.keyId };
    const before = await keyRow(h, created.keyId);
    const calls = unkey.state.verifyCalls;
    expect(await verify(t, randomKey())).toEqual({ valid: false, code: "NOT_FOUND" });
    expect(unkey.state.verifyCalls).toBe(calls + 1);
    expect(await keyRow(h, created.keyId)).toEqual(before);
    expect(await verify(t, created.key)).toMatchObject({ valid: true, keyId: created.keyId });
    expect(await auditEntries(h, { event: "key.adopt" })).toEqual([]);
    expect((await metricsOf(h)).value('keyhaven_unkey_fallback_calls_total{outcome="not_pending"}')).toBe(1);
  });

  it("never adopts a pending key of another workspace than the root key's", async () => {
    const mine = await pendingTenant();
    const theirs = await pendingTenant();
    unkey.state.mode = { keyId: theirs.pendingId };
    const key = randomKey();
    expect(await verify(mine.t, key)).toEqual({ valid: false, code: "NOT_FOUND" });
    expect((await keyRow(h, theirs.pendingId)).hash).toBeNull();
    expect(await auditEntries(h, { event: "key.adopt" })).toEqual([]);
    expect((await metricsOf(h)).value('keyhaven_unkey_fallback_calls_total{outcome="not_allowed"}')).toBe(1);
    // Nor is it kept from its own workspace: a verification there adopts it.
    expect(await verify(theirs.t, key)).toMatchObject({ valid: true, keyId: theirs.pendingId });
    await h.services.unkeyFallback!.refreshesSettled();
  });

  it("adopts only for a root key that may verify the key (v2's verify_key), and answers by keyhaven's rules", async () => {
    const { t, apiId, pendingId } = await pendingTenant();
    unkey.state.mode = { keyId: pendingId };
    const key = randomKey();
    const readOnly = await h.rootKey(t.workspaceId, [`api.${apiId}.read_key`]);
    const refused = await h.post("/v2/keys.verifyKey", { key }, readOnly);
    expect(refused.body.data).toEqual({ valid: false, code: "NOT_FOUND" });
    expect((await keyRow(h, pendingId)).hash).toBeNull();
    // Not remembered as unknown: the next caller, who may verify it, has it adopted at once.
    const mayVerify = await h.rootKey(t.workspaceId, [`api.${apiId}.verify_key`]);
    const adopted = await h.post("/v2/keys.verifyKey", { key }, mayVerify);
    expect(adopted.body.data).toMatchObject({ valid: true, code: "VALID", keyId: pendingId });
    expect((await keyRow(h, pendingId)).hash).toBe(hashKey(key));
    await h.services.unkeyFallback!.refreshesSettled();
  });

  it("adopts once when verifications of the key arrive together: one call to Unkey, one entry, every answer VALID", async () => {
    const { t, pendingId } = await pendingTenant();
    unkey.state.mode = { keyId: pendingId };
    const key = randomKey();
    const calls = unkey.state.verifyCalls;
    const before = (await auditEntries(h, { event: "key.adopt" })).length;
    const answers = await Promise.all(Array.from({ length: 6 }, () => verify(t, key)));
    expect(answers.map((a) => [a.code, a.keyId])).toEqual(Array.from({ length: 6 }, () => ["VALID", pendingId]));
    expect(unkey.state.verifyCalls).toBe(calls + 1);
    expect((await auditEntries(h, { event: "key.adopt" })).length).toBe(before + 1);
    await h.services.unkeyFallback!.refreshesSettled();
  });

  it("asks nothing for a workspace without pending keys, nor for a key keyhaven knows", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    unkey.state.mode = "unknown";
    const calls = unkey.state.verifyCalls;
    expect(await verify(t, randomKey())).toEqual({ valid: false, code: "NOT_FOUND" });
    const created = (await h.post("/v2/keys.createKey", { apiId }, t.rootKey)).body.data as { key: string };
    expect(await verify(t, created.key)).toMatchObject({ valid: true });
    const { t: withPending, apiId: pendingApi } = await pendingTenant();
    const known = (await h.post("/v2/keys.createKey", { apiId: pendingApi }, withPending.rootKey)).body.data as { key: string };
    expect(await verify(withPending, known.key)).toMatchObject({ valid: true });
    expect(unkey.state.verifyCalls).toBe(calls);
  });

  it("counts pending keys again in the background, so that keys copied by another process are asked about", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    const before = (await metricsOf(h)).value("keyhaven_keys_pending");
    // Written behind the fallback's back (as another replica's copy would be): only the periodic count sees it.
    await h.sql(
      `insert into keys (id, workspace_id, api_id, hash, start, created_at_m)
       values ('key_${randomBytes(8).toString("hex")}', '${t.workspaceId}', '${apiId}', null, 'sk_', ${clock.now()})`,
    );
    await waitFor("the pending key counted", async () => (await metricsOf(h)).value("keyhaven_keys_pending") === before + 1);
    expect(h.services.unkeyFallback!.hasPending(t.workspaceId)).toBe(true);
  });

  it("knows at once of the pending keys keyhaven.copyFromUnkey leaves, before any recount", async () => {
    const t = await h.tenant();
    const apiId = await h.createApi(t);
    expect(h.services.unkeyFallback!.hasPending(t.workspaceId)).toBe(false);
    const keyId = `key_${randomBytes(8).toString("hex")}`;
    const copied = await h.post(
      "/v2/keyhaven.copyFromUnkey",
      { keys: [{ id: keyId, apiId, start: "sk_", createdAt: clock.now(), enabled: true }] },
      t.rootKey,
    );
    expect(copied.status, JSON.stringify(copied.body)).toBe(200);
    expect(copied.body.data.keys).toMatchObject({ created: 1, pending: 1 });
    expect(h.services.unkeyFallback!.hasPending(t.workspaceId)).toBe(true);
  });

  it("sends the Unkey root key only to Unkey, in the Authorization header, and logs it nowhere", async () => {
    expect([...unkey.state.authorizations]).toEqual([`Bearer ${unkeyRootKey}`]);
    // Asked with cost 0, so that asking spends nothing upstream.
    expect(unkey.state.bodies.length).toBeGreaterThan(0);
    for (const body of unkey.state.bodies) expect(body).toEqual({ key: expect.any(String), credits: { cost: 0 } });
    expect(log.lines.length).toBeGreaterThan(0);
    expect(log.lines.join("\n")).not.toContain(unkeyRootKey);
    expect(JSON.stringify(await auditEntries(h))).not.toContain(unkeyRootKey);
    expect((await metricsOf(h)).text).not.toContain(unkeyRootKey);
  });
});

describe("the Unkey fallback switched off", () => {
  let unkey: Awaited<ReturnType<typeof standIn>>;
  beforeAll(async () => {
    unkey = await standIn();
  });
  afterAll(() => unkey?.close());

  it.each([
    ["after KEYHAVEN_UNKEY_FALLBACK_UNTIL", { KEYHAVEN_UNKEY_FALLBACK_UNTIL: "2020-01-01" }],
    ["without KEYHAVEN_UNKEY_FALLBACK_URL", undefined],
  ] as const)("%s: a pending key's plaintext is NOT_FOUND and Unkey is never called", async (_, until) => {
    const env =
      until === undefined ? {} : { KEYHAVEN_UNKEY_FALLBACK_URL: unkey.url, KEYHAVEN_UNKEY_FALLBACK_ROOT_KEY: "unkey_root_x", ...until };
    const h = await createHarness(env);
    try {
      expect(h.services.unkeyFallback === undefined).toBe(until === undefined);
      const t = await h.tenant();
      const apiId = await h.createApi(t);
      const keyId = `key_${randomBytes(8).toString("hex")}`;
      await insertPendingKey(h, t.workspaceId, apiId, keyId);
      unkey.state.mode = { keyId };
      const res = await h.post("/v2/keys.verifyKey", { key: `sk_${randomBytes(16).toString("hex")}` }, t.rootKey);
      expect(res.body.data).toEqual({ valid: false, code: "NOT_FOUND" });
      const v1 = await h.post("/v1/keys.verifyKey", { key: `sk_${randomBytes(16).toString("hex")}`, apiId });
      expect(v1.body).toMatchObject({ valid: false, code: "NOT_FOUND" });
      expect(unkey.state.verifyCalls).toBe(0);
      expect((await keyRow(h, keyId)).hash).toBeNull();
      const metrics = await metricsOf(h);
      if (until === undefined) expect(metrics.text).not.toContain("keyhaven_unkey_fallback");
    } finally {
      await h.close();
    }
  });
});
