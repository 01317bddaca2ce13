import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listRootKeys } from "../src/core/rootKeys/rootKeys.core.js";
import { type ConsoleClient, consoleClient, signedIn, signedInTenant, textOf } from "./console-client.js";
import { ADMIN_TOKEN, type Harness, type Tenant } from "./helper.js";
import { waitFor } from "./wait.js";

const XSS = "<script>alert(1)</script>";

/** A v2 call through the app, as a client of the API would make it. */
async function v2(h: Harness, path: string, body: unknown, rootKey: string) {
  const res = await h.app.inject({
    method: "POST",
    url: path,
    headers: { authorization: `Bearer ${rootKey}`, "content-type": "application/json" },
    payload: JSON.stringify(body),
  });
  return { status: res.statusCode, body: res.json() as any };
}

/** The secret a "created" page shows once, in its SecretOnce. */
const secretOf = (html: string) => /<code id="new-root-key">([^<]+)<\/code>/.exec(html)?.[1];

describe("console ops pages: root keys, audit, imports, operator", () => {
  let h: Harness;
  let t: Tenant;
  let c: ConsoleClient;
  let op: ConsoleClient;
  beforeAll(async () => {
    ({ h, t, c } = await signedInTenant({ KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN }));
    op = await signedIn(h.app, ADMIN_TOKEN);
    await op.get("/console/operator/workspaces"); // its CSRF token (signedIn's "/console/" only redirects the operator)
  });
  afterAll(() => h?.close());

  it("serves each page to its audience and refuses the other", async () => {
    for (const path of ["/console/root-keys", "/console/root-keys/new", "/console/audit", "/console/imports"]) {
      expect((await c.get(path)).status, path).toBe(200);
      const refused = await op.get(path);
      expect(refused.status, path).toBe(403);
      expect(textOf(refused.html)).toContain("This page needs a root key session.");
    }
    for (const path of [
      "/console/operator/workspaces",
      `/console/operator/workspaces/${t.workspaceId}`,
      "/console/operator/status",
      "/console/operator/audit",
    ]) {
      expect((await op.get(path)).status, path).toBe(200);
      const refused = await c.get(path);
      expect(refused.status, path).toBe(403);
      expect(textOf(refused.html)).toContain("This page is the operator's");
    }
  });

  it("creates a root key shown once that works in the API, lists it without its secret, and revokes it", async () => {
    const form = await c.get("/console/root-keys/new");
    expect(form.html).toContain('value="api.*.create_api"');
    expect(form.html).toContain('value="rbac.*.create_root_key"');
    const created = await c.post("/console/root-keys/new", {
      name: XSS,
      permission: ["api.*.create_api", "api.*.read_api"],
      extra: "api.api_x.read_key, audit.*.read_logs",
    });
    expect(created.status, created.html).toBe(200);
    const secret = secretOf(created.html)!;
    expect(secret).toMatch(/^khroot_/);
    const made = await v2(h, "/v2/apis.createApi", { name: "from-console-key" }, secret);
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    await h.jobs.lastUsed.flush();

    const list = await c.get("/console/root-keys");
    expect(list.status).toBe(200);
    expect(list.html).not.toContain(secret);
    expect(list.html).not.toContain(XSS);
    expect(list.html).toContain("&lt;script>alert(1)&lt;/script>");
    const text = textOf(list.html);
    expect(text).toContain("api.*.create_api api.*.read_api api.api_x.read_key audit.*.read_logs");
    const keyId = /<form method="post" action="\/console\/root-keys\/([^/]+)\/revoke">/.exec(
      list.html.slice(list.html.indexOf("&lt;script>")),
    )?.[1];
    const listed = await listRootKeys(h.services, { workspaceId: t.workspaceId, limit: 100 });
    const ours = listed.items.find((k) => k.name === XSS)!;
    expect(keyId ?? ours.id).toBe(ours.id);
    // Its last authentication (the createApi above), in the list's "Last used" column.
    expect(ours.lastUsedAtM).toEqual(expect.any(Number));
    expect(text).toContain("Last used");
    expect(text).toContain(`${new Date(ours.lastUsedAtM!).toISOString().slice(0, 19).replace("T", " ")} UTC`);

    const revoked = await c.post(`/console/root-keys/${ours.id}/revoke`);
    expect(revoked.status).toBe(303);
    expect(revoked.location).toBe("/console/root-keys?done=revoked");
    expect(textOf((await c.get(revoked.location!)).html)).toContain("The root key is revoked");
    expect((await v2(h, "/v2/apis.createApi", { name: "after-revoke" }, secret)).status).toBe(401);
    expect((await c.post(`/console/root-keys/${ours.id}/revoke`)).status).toBe(404);
  });

  it("refuses a root key lacking the root key permissions with 403, hides the actions, and creates nothing", async () => {
    const weak = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    const before = (await listRootKeys(h.services, { workspaceId: t.workspaceId, limit: 100 })).items.length;
    const list = await weak.get("/console/root-keys");
    expect(list.status).toBe(403);
    expect(textOf(list.html)).toContain("rbac.*.read_root_key");
    expect(list.html).not.toContain('href="/console/root-keys/new"');
    expect((await weak.get("/console/root-keys/new")).status).toBe(403);
    const posted = await weak.post("/console/root-keys/new", { name: "nope", permission: "api.*.read_api" });
    expect(posted.status).toBe(403);
    expect(textOf(posted.html)).toContain("rbac.*.create_root_key");
    expect((await weak.post(`/console/root-keys/${t.rootKeyId}/revoke`)).status).toBe(403);
    expect((await listRootKeys(h.services, { workspaceId: t.workspaceId, limit: 100 })).items.length).toBe(before);

    // May create and list, not revoke; and may grant only what it holds.
    const creator = await signedIn(
      h.app,
      await h.rootKey(t.workspaceId, ["rbac.*.create_root_key", "rbac.*.read_root_key", "api.*.read_api"]),
    );
    const page = await creator.get("/console/root-keys");
    expect(page.status).toBe(200);
    expect(page.html).not.toContain("/revoke");
    const picker = await creator.get("/console/root-keys/new");
    expect(picker.html).toContain('value="api.*.read_api"');
    expect(picker.html).not.toContain('value="*"');
    const beyond = await creator.post("/console/root-keys/new", { permission: "api.*.read_api", extra: "*" });
    expect(beyond.status).toBe(403);
    expect(textOf(beyond.html)).toContain("it does not hold *");
    expect(beyond.html).not.toContain("new-root-key");
    expect((await creator.post("/console/root-keys/new", { permission: "api.*.read_api" })).status).toBe(200);
  });

  it("answers bad root key input with 400 and the reason", async () => {
    const long = await c.post("/console/root-keys/new", { extra: `api.${"x".repeat(520)}.read_key` });
    expect(long.status).toBe(400);
    expect(textOf(long.html)).toContain("is longer than 512 characters");
    const name = await c.post("/console/root-keys/new", { name: "n".repeat(300) });
    expect(name.status).toBe(400);
    expect(textOf(name.html)).toContain("at most 256");
  });

  it("revoking the session's own root key ends the session", async () => {
    const own = await h.rootKey(t.workspaceId, ["*"]);
    const self = await signedIn(h.app, own);
    const ownId = /root key (rk_[A-Za-z0-9]+)/.exec(textOf((await self.get("/console/")).html))![1]!;
    const res = await self.post(`/console/root-keys/${ownId}/revoke`);
    expect(res.status).toBe(303);
    expect(res.location).toBe("/console/sign-in");
    self.cookie ??= "x".repeat(43);
    expect((await self.get("/console/root-keys")).status).toBe(303);
  });

  it("lists the audit log newest first with the root key as actor, and filters narrow it", async () => {
    const name = `audited-${randomBytes(3).toString("hex")}`;
    const made = await v2(h, "/v2/apis.createApi", { name }, t.rootKey);
    expect(made.status).toBe(200);
    const apiId = made.body.data.apiId as string;
    const page = await c.get("/console/audit");
    expect(page.status).toBe(200);
    const text = textOf(page.html);
    expect(text).toContain("api.create");
    expect(text).toContain(`root_key ${t.rootKeyId}`);
    expect(text).toContain(apiId);

    const narrowed = textOf((await c.get(`/console/audit?event=api.create&actor=${t.rootKeyId}&target=${apiId}`)).html);
    expect(narrowed).toContain(apiId);
    const rowsOf = (html: string, event: string) =>
      (html.match(new RegExp(`<td class="mono">${event.replace(".", "\\.")}</td>`, "g")) ?? []).length;
    expect(rowsOf(page.html, "console.sign_in")).toBeGreaterThan(0);
    const narrowedHtml = (await c.get(`/console/audit?event=api.create&actor=${t.rootKeyId}`)).html;
    expect(rowsOf(narrowedHtml, "console.sign_in")).toBe(0);
    expect(rowsOf(narrowedHtml, "api.create")).toBeGreaterThan(0);
    expect(textOf((await c.get(`/console/audit?event=key.create&target=${apiId}`)).html)).toContain("No audit entries.");
    expect(textOf((await c.get("/console/audit?until=2000-01-01T00:00")).html)).toContain("No audit entries.");
    expect(textOf((await c.get(`/console/audit?since=2000-01-01T00:00&target=${apiId}`)).html)).toContain(apiId);

    for (const [query, words] of [
      ["since=yesterday", '"yesterday" is not a date and time'],
      ["since=2024-02-30T00:00", "is not a date and time"],
      ["since=2024-01-02T00:00&until=2024-01-01T00:00", "since must be before until"],
      ["event=api.nope", 'There is no audit event "api.nope"'],
      ["cursor=%3Cbad%3E", "not a cursor"],
    ] as const) {
      const bad = await c.get(`/console/audit?${query}`);
      expect(bad.status, query).toBe(400);
      expect(textOf(bad.html), query).toContain(words);
    }
    const blind = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    const refused = await blind.get("/console/audit");
    expect(refused.status).toBe(403);
    expect(textOf(refused.html)).toContain("audit.*.read_logs");
  });

  it("pages the audit log by cursor, keeping the filters", async () => {
    const w = await h.tenant();
    for (let i = 0; i < 52; i++) await h.post("/v1/permissions.createRole", { name: `role-${i}` }, w.rootKey);
    const reader = await signedIn(h.app, w.rootKey);
    const first = await reader.get("/console/audit?event=role.create");
    const next = /href="(\/console\/audit\?[^"]+)">Next page/.exec(first.html)?.[1]?.replace(/&amp;/g, "&");
    expect(next).toContain("event=role.create");
    const second = await reader.get(next!);
    expect(second.status).toBe(200);
    expect((second.html.match(/<td class="mono">role\.create<\/td>/g) ?? []).length).toBe(2);
    expect(second.html).not.toContain("Next page");
  });

  it("shows enqueued migrations with their counts and errors, and the copy status per API", async () => {
    const apiId = await h.createApi(t, { name: XSS });
    const migrationId = `mig_${randomBytes(4).toString("hex")}`;
    const hash = randomBytes(32).toString("base64");
    const body = (id: string) => ({ migrationId: id, apiId, keys: [{ hash: { value: hash, variant: "sha256_base64" }, start: "abcd" }] });
    expect((await h.post("/v1/migrations.enqueueKeys", body(migrationId), t.rootKey)).status).toBe(202);
    const failing = `${migrationId}_again`;
    const done = async (id: string) =>
      (await h.sql<{ status: string }>(`select status from migration_batches where migration_id = '${id}'`)).every(
        (b) => b.status !== "pending",
      );
    await waitFor("the first batch", () => done(migrationId));
    expect((await h.post("/v1/migrations.enqueueKeys", body(failing), t.rootKey)).status).toBe(202);
    await waitFor("the second batch", () => done(failing));

    const list = await c.get("/console/imports");
    expect(list.status).toBe(200);
    expect(list.html).toContain(`href="/console/imports/${migrationId}"`);
    expect(list.html).not.toContain(XSS);
    const text = textOf(list.html);
    expect(text).toContain(`${XSS} ${apiId} 1 1 0 0`);

    const detail = await c.get(`/console/imports/${failing}`);
    expect(detail.status).toBe(200);
    expect(textOf(detail.html)).toContain("1 enqueued, 0 imported, 1 failed");
    expect(textOf(detail.html)).toMatch(/Errors Batch Key \(index in its batch\) Code Why \d+ 0 \S+ \S/);
    // Its batch failed key by key (nothing a retry could change): the core queues none again.
    expect(detail.html).toContain("Retry failed batches");
    const retried = await c.post(`/console/imports/${failing}/retry`);
    expect(retried.status).toBe(303);
    expect(textOf((await c.get(retried.location!)).html)).toContain("Queued again 0 failed batches.");

    const missing = await c.get("/console/imports/no_such_migration");
    expect(missing.status).toBe(404);
    const reader = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    expect((await reader.get(`/console/imports/${failing}`)).status).toBe(200);
    const refused = await reader.post(`/console/imports/${failing}/retry`);
    expect(refused.status).toBe(403);
    expect(textOf(refused.html)).toContain("api.*.create_key");
    const none = await signedIn(h.app, await h.rootKey(t.workspaceId, []));
    expect((await none.get("/console/imports")).status).toBe(403);
  });

  it("lets the operator create a workspace, give it a root key, disable and enable it", async () => {
    const created = await op.post("/console/operator/workspaces", { name: XSS });
    expect(created.status).toBe(303);
    const path = created.location!.replace(/\?.*$/, "");
    expect(path).toMatch(/^\/console\/operator\/workspaces\/ws_/);
    const workspaceId = path.split("/").pop()!;
    const page = await op.get(created.location!);
    expect(page.status).toBe(200);
    expect(page.html).not.toContain(XSS);
    expect(page.html).toContain("&lt;script>alert(1)&lt;/script>");
    expect(textOf(page.html)).toContain("No root keys yet");
    expect(textOf((await op.get("/console/operator/workspaces")).html)).toContain(`${workspaceId} ${XSS} enabled`);

    const made = await op.post(`${path}/root-keys`, { name: "first", permission: "*" });
    expect(made.status).toBe(200);
    const secret = secretOf(made.html)!;
    expect((await op.get(path)).html).not.toContain(secret);
    expect(textOf((await op.get(path)).html)).toContain("first");
    const member = await signedIn(h.app, secret);
    expect((await member.get("/console/root-keys")).status).toBe(200);

    const disabled = await op.post(`${path}/disable`);
    expect(disabled.status).toBe(303);
    expect(textOf((await op.get(disabled.location!)).html)).toContain("The workspace is disabled");
    expect((await member.get("/console/root-keys")).status).toBe(303);
    const again = await consoleClient(h.app).post("/console/sign-in", { secret });
    expect(again.status).toBe(403);
    expect((await v2(h, "/v2/apis.createApi", { name: "after-disable" }, secret)).status).toBe(403);

    expect((await op.post(`${path}/enable`)).status).toBe(303);
    expect((await v2(h, "/v2/apis.createApi", { name: "after-disable" }, secret)).status).toBe(200);

    const audit = textOf((await op.get(`/console/operator/audit?workspace=${workspaceId}`)).html);
    expect(audit).toContain("workspace.create");
    expect(audit).toContain("rootKey.create");
    expect(audit).toContain("operator admin");
  });

  it("answers the operator's bad input and unknown workspaces clearly", async () => {
    const empty = await op.post("/console/operator/workspaces", { name: "  " });
    expect(empty.status).toBe(400);
    expect(textOf(empty.html)).toContain("Enter a name");
    const long = await op.post("/console/operator/workspaces", { name: "w".repeat(300) });
    expect(long.status).toBe(400);
    expect((await op.get("/console/operator/workspaces/ws_nope")).status).toBe(404);
    expect((await op.post("/console/operator/workspaces/ws_nope/disable")).status).toBe(404);
    expect((await op.post("/console/operator/workspaces/ws_nope/root-keys", { permission: "*" })).status).toBe(404);
  });

  it("shows the store, Redis and the version on the status page", async () => {
    const text = textOf((await op.get("/console/operator/status")).html);
    expect(text).toContain(h.onPostgres ? "PostgreSQL" : "PGlite");
    expect(text).toMatch(/Store reachable up/);
    expect(text).toMatch(/Version \d+\.\d+\.\d+/);
  });

  it("writes no inline script or style attribute in any of its pages", async () => {
    const paths: [ConsoleClient, string][] = [
      ...["/console/root-keys", "/console/root-keys/new", "/console/audit", "/console/imports", "/console/imports/nope"].map(
        (p) => [c, p] as [ConsoleClient, string],
      ),
      ...[
        "/console/operator/workspaces",
        `/console/operator/workspaces/${t.workspaceId}`,
        "/console/operator/status",
        "/console/operator/audit",
      ].map((p) => [op, p] as [ConsoleClient, string]),
    ];
    for (const [client, path] of paths) {
      const { html } = await client.get(path);
      for (const script of html.match(/<script\b[^>]*>[\s\S]*?<\/script>/g) ?? []) {
        expect(script, path).toMatch(/^<script src="\/console\/assets\/[0-9a-f]{16}\/[a-z.]+" defer><\/script>$/);
      }
      expect(html, path).not.toMatch(/\sstyle=|\son[a-z]+=|<style/i);
    }
  });
});
