import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listAuditLogs } from "../src/core/audit/audit.read.js";
import { callerOf } from "./caller-of.js";
import { type ConsoleClient, signedIn, signedInTenant, textOf } from "./console-client.js";
import type { Harness, Tenant } from "./helper.js";

// The console's key pages (src/console/pages/keys.pages.tsx): the new key form (the plaintext shown once), the key
// page (details, verifications, edit, reroll, delete, reveal), driven over HTTP, their effects checked through v1's
// and v2's keys.verifyKey and the audit log.

/** The plaintext a SecretOnce shows (id `new-key`). */
const secretOf = (html: string): string => {
  const match = /<code id="new-key">([^<]+)<\/code>/.exec(html);
  if (!match) throw new Error(`no secret in the page: ${textOf(html).slice(0, 400)}`);
  return match[1]!;
};
/** The new key's id, from the link to its page. */
const keyIdOf = (html: string): string => /href="\/console\/keys\/(key_[A-Za-z0-9]+)"/.exec(html)![1]!;

describe("console key pages", () => {
  let h: Harness;
  let t: Tenant;
  let c: ConsoleClient;
  let apiId: string;
  let recoverableApiId: string;
  const role = "support_agent";

  beforeAll(async () => {
    ({ h, t, c } = await signedInTenant());
    apiId = await h.createApi(t);
    recoverableApiId = await h.createApi(t, { storeEncryptedKeys: true });
    expect((await h.post("/v2/permissions.createRole", { name: role }, t.rootKey)).status).toBe(200);
    expect((await h.post("/v2/permissions.createPermission", { name: "Read docs", slug: "docs.read" }, t.rootKey)).status).toBe(200);
  });
  afterAll(() => h?.close());

  const v1Verify = async (key: string) => (await h.post("/v1/keys.verifyKey", { key })).body;
  const v2Verify = async (key: string) => {
    const res = await h.post("/v2/keys.verifyKey", { key }, t.rootKey);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.data;
  };

  /** Creates a key through the page; its id and plaintext. */
  async function createThroughPage(fields: Record<string, string | string[]>, api = apiId) {
    await c.get(`/console/apis/${api}/keys/new`);
    const res = await c.post(`/console/apis/${api}/keys/new`, { enabled: "on", rl_rows: "2", ...fields });
    expect(res.status, textOf(res.html).slice(0, 500)).toBe(200);
    return { key: secretOf(res.html), keyId: keyIdOf(res.html), page: res };
  }

  it("shows the new key form with the workspace's roles and permissions", async () => {
    const page = await c.get(`/console/apis/${apiId}/keys/new`);
    expect(page.status).toBe(200);
    expect(page.html).toContain('name="meta"');
    expect(page.html).toContain(`value="${role}"`);
    expect(page.html).toContain('value="docs.read"');
    expect(page.html).toContain('for="rl_0_name"');
    // This API stores no encrypted keys: no recoverable checkbox.
    expect(page.html).not.toContain('name="recoverable"');
    expect((await c.get(`/console/apis/${recoverableApiId}/keys/new`)).html).toContain('name="recoverable"');
  });

  it("creates a key with credits, a rate limit and a role, shows it once, and counts its verifications", async () => {
    const { key, keyId, page } = await createThroughPage({
      name: "checkout",
      externalId: "customer_1",
      meta: '{"plan":"pro"}',
      remaining: "10",
      refill_interval: "daily",
      refill_amount: "10",
      rl_0_name: "requests",
      rl_0_limit: "100",
      rl_0_duration: "60000",
      rl_0_autoApply: "on",
      roles: [role],
    });
    expect(page.html).toContain('data-copy="#new-key"');
    expect(page.headers.location).toBeUndefined();

    await h.jobs.lastUsed.flush();
    expect(textOf((await c.get(`/console/keys/${keyId}`)).html)).toMatch(/Last used never/);
    const before = h.clock.now();
    const v1 = await v1Verify(key);
    expect(v1).toMatchObject({ valid: true, remaining: 9, ownerId: "customer_1" });
    const v2 = await v2Verify(key);
    expect(v2).toMatchObject({ valid: true, code: "VALID", credits: 8 });
    expect(v2.roles).toEqual([role]);

    const after = h.clock.now();
    await h.jobs.analytics.flush();
    await h.jobs.lastUsed.flush();
    await h.jobs.verificationLog.flush();
    const keyPage = await c.get(`/console/keys/${keyId}`);
    expect(keyPage.status).toBe(200);
    expect(keyPage.html).not.toContain(key);
    const text = textOf(keyPage.html);
    expect(text).toContain("8 remaining, refilled to 10 daily");
    expect(text).toContain("customer_1");
    expect(text).toContain(role);
    expect(text).toContain("requests");
    expect(keyPage.html).toContain("&quot;plan&quot;: &quot;pro&quot;");
    expect(keyPage.html).toContain('data-chart="');
    // The last verification's time, to the second (the last-used flush's, not the hourly counts').
    const shown = /Last used (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) UTC/.exec(text)?.[1];
    expect(shown).toBeDefined();
    const shownAt = Date.parse(`${shown!.replace(" ", "T")}Z`);
    expect(shownAt).toBeGreaterThanOrEqual(before - (before % 1000));
    expect(shownAt).toBeLessThanOrEqual(after);
    // The chart's table counts the two valid verifications today.
    expect(/"label":"valid","values":\[[0,]*2\]/.test(keyPage.html.replace(/&quot;/g, '"'))).toBe(true);
    // The verification log's newest rows: both verifications, each with its outcome, credit spent and region.
    const latest = /<table id="latest-verifications">([\s\S]*?)<\/table>/.exec(keyPage.html)?.[1];
    expect(latest, "the latest verifications' table").toBeDefined();
    const rows = [...latest!.matchAll(/<tr[^>]*>([\s\S]*?)<\/tr>/g)].map((m) => textOf(m[1]!).trim());
    expect(rows[0]).toBe("Time Outcome Tags Credits spent Latency (ms) Region");
    expect(rows.slice(1)).toHaveLength(2);
    for (const row of rows.slice(1)) {
      expect(row).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC VALID none 1 \d+\.\d{2} /);
      expect(row.endsWith(` ${h.config.region}`)).toBe(true);
    }
  });

  it("refuses bad input with a precise message, keeping what was typed", async () => {
    await c.get(`/console/apis/${apiId}/keys/new`);
    const badJson = await c.post(`/console/apis/${apiId}/keys/new`, { name: "kept-name", meta: '{"plan": pro}', enabled: "on" });
    expect(badJson.status).toBe(400);
    expect(textOf(badJson.html)).toContain("Meta is not valid JSON");
    expect(badJson.html).toContain('value="kept-name"');
    const negative = await c.post(`/console/apis/${apiId}/keys/new`, { remaining: "-3", enabled: "on" });
    expect(negative.status).toBe(400);
    expect(textOf(negative.html)).toContain("Credits remaining:");
    const array = await c.post(`/console/apis/${apiId}/keys/new`, { meta: "[1,2]", enabled: "on" });
    expect(array.status).toBe(400);
    expect(textOf(array.html)).toContain("Meta must be a JSON object");
    const shortRl = await c.post(`/console/apis/${apiId}/keys/new`, {
      rl_rows: "1",
      rl_0_name: "per_second",
      rl_0_limit: "5",
      rl_0_duration: "10",
    });
    expect(shortRl.status).toBe(400);
    expect(textOf(shortRl.html)).toContain("Rate limit 1: duration");
  });

  it("edits meta (valid and invalid JSON) and disables the key", async () => {
    const { key, keyId } = await createThroughPage({ name: "to-edit", meta: '{"a":1}', remaining: "5" });
    /** The edit form as the page shows it, with `changes` (a field set to undefined is left out, as an unticked box). */
    const form = async (changes: Record<string, string | undefined>) => {
      const page = await c.get(`/console/keys/${keyId}`);
      const was = /name="was" value="([^"]*)"/
        .exec(page.html)![1]!
        .replace(/&quot;/g, '"')
        .replace(/&amp;/g, "&");
      const all: Record<string, string | string[] | undefined> = {
        was,
        ...JSON.parse(was),
        roles_shown: "1",
        permissions_shown: "1",
        ...changes,
      };
      return Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined)) as Record<string, string | string[]>;
    };

    const bad = await c.post(`/console/keys/${keyId}`, await form({ meta: "{not json" }));
    expect(bad.status).toBe(400);
    expect(textOf(bad.html)).toContain("Meta is not valid JSON");
    expect(bad.html).toContain("{not json");

    const ok = await c.post(`/console/keys/${keyId}`, await form({ meta: '{"b": 2}' }));
    expect(ok.status).toBe(303);
    expect(ok.location).toBe(`/console/keys/${keyId}?done=updated`);
    const after = await c.get(ok.location!);
    expect(textOf(after.html)).toContain("The key was updated.");
    expect(after.html).toContain("&quot;b&quot;: 2");
    const got = await h.post("/v2/keys.getKey", { keyId }, t.rootKey);
    expect(got.body.data.meta).toEqual({ b: 2 });
    // Untouched fields stayed as they were.
    expect(got.body.data).toMatchObject({ name: "to-edit", credits: { remaining: 5 } });

    expect((await v1Verify(key)).valid).toBe(true);
    const disabled = await c.post(`/console/keys/${keyId}`, await form({ enabled: undefined }));
    expect(disabled.status).toBe(303);
    expect(await v1Verify(key)).toMatchObject({ valid: false, code: "DISABLED" });
    expect(textOf((await c.get(`/console/keys/${keyId}`)).html)).toContain("disabled");

    // Expiry (UTC), credits, a role and a permission, then expiry cleared; a bad date is refused in words.
    const badDate = await c.post(`/console/keys/${keyId}`, await form({ expires: "tomorrow" }));
    expect(badDate.status).toBe(400);
    expect(textOf(badDate.html)).toContain("Expires must be a date and time");
    const more = await c.post(
      `/console/keys/${keyId}`,
      await form({ expires: "2099-01-31T12:00", remaining: "42", refill_interval: "monthly", refill_amount: "50", refill_day: "3" }),
    );
    expect(more.status).toBe(303);
    const rbac = { ...(await form({})), roles: [role], permissions: ["docs.read"] };
    expect((await c.post(`/console/keys/${keyId}`, rbac)).status).toBe(303);
    const edited = (await h.post("/v2/keys.getKey", { keyId }, t.rootKey)).body.data;
    expect(edited).toMatchObject({
      expires: Date.UTC(2099, 0, 31, 12),
      credits: { remaining: 42, refill: { interval: "monthly", amount: 50, refillDay: 3 } },
      roles: [role],
      permissions: ["docs.read"],
    });
    expect((await c.post(`/console/keys/${keyId}`, await form({ expires: "" }))).status).toBe(303);
    expect((await h.post("/v2/keys.getKey", { keyId }, t.rootKey)).body.data.expires).toBeUndefined();
    // A refusal of the core (a monthly refill without its day) is shown beside the form, with v2's words.
    const noDay = await c.post(`/console/keys/${keyId}`, await form({ refill_day: "" }));
    expect(noDay.status).toBe(400);
    expect(textOf(noDay.html)).toContain("`refillDay` must be provided");
  });

  it("rerolls: the old key verifies during the grace period, the new one verifies", async () => {
    const { key, keyId } = await createThroughPage({ name: "to-reroll" });
    await c.get(`/console/keys/${keyId}`);
    const res = await c.post(`/console/keys/${keyId}/reroll`, { expiration: "3600000" });
    expect(res.status).toBe(200);
    const newKey = secretOf(res.html);
    const newKeyId = keyIdOf(res.html.replace(`/console/keys/${keyId}"`, ""));
    expect(newKeyId).not.toBe(keyId);
    expect((await v1Verify(key)).valid).toBe(true);
    expect((await v2Verify(newKey)).valid).toBe(true);
    const newPage = await c.get(`/console/keys/${newKeyId}`);
    expect(newPage.status).toBe(200);
    expect(newPage.html).not.toContain(newKey);
    expect(textOf(newPage.html)).toContain("to-reroll");

    const bad = await c.post(`/console/keys/${keyId}/reroll`, { expiration: "-5" });
    expect(bad.status).toBe(400);
    expect(textOf(bad.html)).toContain("Grace period:");
  });

  it("soft deletes a key: it stops verifying, its page is gone", async () => {
    const { key, keyId } = await createThroughPage({ name: "to-delete" });
    await c.get(`/console/keys/${keyId}`);
    const res = await c.post(`/console/keys/${keyId}/delete`, {});
    expect(res.status).toBe(303);
    expect(res.location).toBe(`/console/apis/${apiId}?done=deleted`);
    expect(await v1Verify(key)).toMatchObject({ valid: false, code: "NOT_FOUND" });
    expect((await h.sql(`select deleted_at_m from keys where id = '${keyId}'`))[0]!.deleted_at_m).not.toBeNull();
    expect((await c.get(`/console/keys/${keyId}`)).status).toBe(404);
  });

  it("answers 404 for a missing key and for another workspace's", async () => {
    const missing = await c.get("/console/keys/key_doesnotexist");
    expect(missing.status).toBe(404);
    expect(textOf(missing.html)).toContain("Key not found");
    const other = await h.tenant();
    const otherApi = await h.createApi(other);
    const foreign = await h.importKey(other, otherApi);
    expect((await c.get(`/console/keys/${foreign.keyId}`)).status).toBe(404);
    expect((await c.get(`/console/apis/${otherApi}/keys/new`)).status).toBe(404);
  });

  it("reveals a recoverable key with decrypt_key, audited without the plaintext; refuses without it", async () => {
    const { key, keyId } = await createThroughPage({ name: "recoverable", recoverable: "on" }, recoverableApiId);
    const page = await c.get(`/console/keys/${keyId}`);
    expect(page.html).toContain(`action="/console/keys/${keyId}/reveal"`);
    expect(page.html).not.toContain(key);
    const revealed = await c.post(`/console/keys/${keyId}/reveal`, {});
    expect(revealed.status).toBe(200);
    expect(secretOf(revealed.html)).toBe(key);

    const audit = await listAuditLogs(
      h.services,
      { caller: callerOf({ workspaceId: t.workspaceId, permissions: new Set(["*"]) }) },
      {
        events: ["key.reveal"],
      },
    );
    expect(audit.entries).toHaveLength(1);
    expect(audit.entries[0]!.targets.map((x) => x.id)).toEqual([keyId, recoverableApiId]);
    expect(audit.entries[0]!.actor.id).toBe(t.rootKeyId);
    expect(JSON.stringify(audit.entries)).not.toContain(key);
    expect((await h.sql<{ n: number }>(`select count(*)::int as n from audit_log where description like '%${key}%'`))[0]!.n).toBe(0);

    const reader = await h.rootKey(t.workspaceId, ["api.*.read_key", "api.*.read_api", "api.*.update_key"]);
    const r = await signedIn(h.app, reader);
    const readerPage = await r.get(`/console/keys/${keyId}`);
    expect(readerPage.status).toBe(200);
    expect(readerPage.html).not.toContain("/reveal");
    const refused = await r.post(`/console/keys/${keyId}/reveal`, {});
    expect(refused.status).toBe(403);
    expect(textOf(refused.html)).toContain("This root key may not reveal this key.");
    expect(refused.html).not.toContain(key);
    const again = await listAuditLogs(
      h.services,
      { caller: callerOf({ workspaceId: t.workspaceId, permissions: new Set(["*"]) }) },
      {
        events: ["key.reveal"],
      },
    );
    expect(again.entries).toHaveLength(1);
  });

  it("refuses a root key without create_key: 403, the form hidden, nothing created", async () => {
    const reader = await h.rootKey(t.workspaceId, ["api.*.read_key", "api.*.read_api"]);
    const r = await signedIn(h.app, reader);
    const page = await r.get(`/console/apis/${apiId}/keys/new`);
    expect(page.status).toBe(403);
    expect(textOf(page.html)).toContain("This root key cannot create keys in this API");
    expect(page.html).not.toContain('name="meta"');
    const before = (await h.sql<{ n: number }>(`select count(*)::int as n from keys where api_id = '${apiId}'`))[0]!.n;
    const res = await r.post(`/console/apis/${apiId}/keys/new`, { name: "nope", enabled: "on" });
    expect(res.status).toBe(403);
    expect(textOf(res.html)).toContain("cannot create keys");
    expect((await h.sql<{ n: number }>(`select count(*)::int as n from keys where api_id = '${apiId}'`))[0]!.n).toBe(before);
    // Its key page hides the actions it may not take.
    const { keyId } = await createThroughPage({ name: "visible" });
    const keyPage = await r.get(`/console/keys/${keyId}`);
    expect(keyPage.status).toBe(200);
    expect(keyPage.html).not.toContain("/reroll");
    expect(keyPage.html).not.toContain("/delete");
    expect(keyPage.html).not.toContain('name="was"');
  });

  it("escapes a name holding markup", async () => {
    const evil = "<script>alert(1)</script>";
    const { keyId } = await createThroughPage({ name: evil });
    const page = await c.get(`/console/keys/${keyId}`);
    expect(page.status).toBe(200);
    expect(page.html).not.toContain(evil);
    expect(page.html).toContain("<dd>&lt;script>alert(1)&lt;/script></dd>");
  });

  it("writes no inline script or style attribute in its pages", async () => {
    const { keyId } = await createThroughPage({ name: "plain" });
    for (const path of [`/console/apis/${apiId}/keys/new`, `/console/keys/${keyId}`, "/console/keys/key_missing"]) {
      const { html } = await c.get(path);
      for (const script of html.match(/<script\b[^>]*>[\s\S]*?<\/script>/g) ?? []) {
        expect(script, path).toMatch(/^<script src="\/console\/assets\/[0-9a-f]{16}\/[a-z.]+" defer><\/script>$/);
      }
      expect(html, path).not.toMatch(/\sstyle=|\son[a-z]+=|<style/i);
    }
  });
});
