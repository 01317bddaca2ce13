import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConsoleClient, signedIn, signedInTenant, textOf } from "./console-client.js";
import type { Harness, Tenant } from "./helper.js";

const namespaceIdOf = (location: string | undefined) => /\/console\/ratelimits\/(rlns_[^?]+)\?done=set$/.exec(location ?? "")?.[1];

describe("console rate-limit pages", () => {
  let h: Harness;
  let t: Tenant;
  let c: ConsoleClient;
  let namespaceId: string;
  beforeAll(async () => {
    ({ h, t, c } = await signedInTenant());
    const limited = await h.post("/v2/ratelimit.limit", { namespace: "api.calls", identifier: "u1", limit: 5, duration: 60000 }, t.rootKey);
    expect(limited.status).toBe(200);
    namespaceId = (await h.sql<{ id: string }>(`select id from ratelimit_namespaces where name = 'api.calls'`))[0]!.id;
  });
  afterAll(() => h?.close());

  const overridesOf = async (namespace: string) =>
    (await h.post("/v2/ratelimit.listOverrides", { namespace }, t.rootKey)).body.data as { identifier: string; limit: number }[];

  it("lists the namespaces and a namespace's overrides; sets and deletes an override, which limit then applies", async () => {
    const list = await c.get("/console/ratelimits");
    expect(list.status).toBe(200);
    expect(list.html).toContain(`href="/console/ratelimits/${namespaceId}"`);
    const page = await c.get(`/console/ratelimits/${namespaceId}`);
    expect(page.status).toBe(200);
    expect(textOf(page.html)).toContain("Namespace api.calls");

    const set = await c.post(`/console/ratelimits/${namespaceId}/overrides`, {
      identifier: "u1",
      limit: "0",
      duration: "60000",
      async: "on",
    });
    expect(set.location).toBe(`/console/ratelimits/${namespaceId}?done=set`);
    expect(textOf((await c.get(set.location!)).html)).toContain("Override set.");
    expect(textOf((await c.get(`/console/ratelimits/${namespaceId}`)).html)).toContain("u1 0 60000 async");
    expect(await overridesOf("api.calls")).toMatchObject([{ identifier: "u1", limit: 0, duration: 60000 }]);
    const refusedByOverride = await h.post(
      "/v2/ratelimit.limit",
      { namespace: "api.calls", identifier: "u1", limit: 5, duration: 60000 },
      t.rootKey,
    );
    expect(refusedByOverride.body.data.success).toBe(false);

    const deleted = await c.post(`/console/ratelimits/${namespaceId}/overrides/delete`, { identifier: "u1" });
    expect(deleted.location).toBe(`/console/ratelimits/${namespaceId}?done=deleted`);
    expect(await overridesOf("api.calls")).toEqual([]);
    const again = await c.post(`/console/ratelimits/${namespaceId}/overrides/delete`, { identifier: "u1" });
    expect(again.status).toBe(404);
  });

  it("adds an override by namespace name, creating the namespace (recorded as ratelimit.set_override)", async () => {
    const res = await c.post("/console/ratelimits", { namespace: "fresh.ns", identifier: "team_*", limit: "100", duration: "1000" });
    const id = namespaceIdOf(res.location)!;
    expect(id).toBeDefined();
    expect(textOf((await c.get(`/console/ratelimits/${id}`)).html)).toContain("team_* 100 1000 exact");
    expect(await overridesOf("fresh.ns")).toMatchObject([{ identifier: "team_*", limit: 100, duration: 1000 }]);
    const audit = await h.sql<{ event: string; surface: string }>(
      `select event, surface from audit_log where workspace_id = '${t.workspaceId}' and targets @> '[{"id":"${id}"}]'`,
    );
    expect(audit).toEqual([{ event: "ratelimit.set_override", surface: "console" }]);
    // An existing namespace named again gets the override, no second namespace.
    const same = await c.post("/console/ratelimits", { namespace: "fresh.ns", identifier: "u2", limit: "1", duration: "1000" });
    expect(namespaceIdOf(same.location)).toBe(id);
  });

  it("refuses bad input with a 400 naming the field, and a missing namespace with 404", async () => {
    const negative = await c.post(`/console/ratelimits/${namespaceId}/overrides`, { identifier: "u3", limit: "-1", duration: "60000" });
    expect(negative.status).toBe(400);
    expect(textOf(negative.html)).toContain("Limit must be at least 0.");
    expect(negative.html).toContain('value="u3"');
    const short = await c.post(`/console/ratelimits/${namespaceId}/overrides`, { identifier: "u3", limit: "1", duration: "999" });
    expect(textOf(short.html)).toContain("Duration (ms) must be at least 1000.");
    const words = await c.post("/console/ratelimits", { namespace: "x", identifier: "u3", limit: "ten", duration: "1000" });
    expect(words.status).toBe(400);
    expect(textOf(words.html)).toContain("Limit must be a whole number.");
    const noName = await c.post("/console/ratelimits", { namespace: "", identifier: "u3", limit: "1", duration: "1000" });
    expect(textOf(noName.html)).toContain("Namespace name must not be empty.");
    expect((await h.sql(`select 1 from ratelimit_namespaces where name = 'x'`)).length).toBe(0);
    expect(await overridesOf("api.calls")).toEqual([]);
    const missing = await c.get("/console/ratelimits/rlns_missing");
    expect(missing.status).toBe(404);
    expect((await c.post("/console/ratelimits/rlns_missing/overrides", { identifier: "u", limit: "1", duration: "1000" })).status).toBe(
      404,
    );
  });

  it("renders markup in an identifier escaped", async () => {
    const evil = "<script>alert(1)</script>";
    await c.post(`/console/ratelimits/${namespaceId}/overrides`, { identifier: evil, limit: "1", duration: "1000" });
    const { html } = await c.get(`/console/ratelimits/${namespaceId}`);
    expect(html).not.toContain(evil);
    expect(html).toContain("&lt;script>alert(1)&lt;/script>");
  });

  it("hides the actions from a root key that may only read, and refuses them with 403 changing nothing", async () => {
    const reader = await signedIn(h.app, await h.rootKey(t.workspaceId, ["ratelimit.*.read_namespace", "ratelimit.*.read_override"]));
    const list = await reader.get("/console/ratelimits");
    expect(list.status).toBe(200);
    expect(list.html).not.toContain("Add override");
    const page = await reader.get(`/console/ratelimits/${namespaceId}`);
    expect(page.status).toBe(200);
    expect(page.html).not.toContain("Set override");
    expect(page.html).not.toContain("Delete the override");
    const before = await overridesOf("api.calls");
    const set = await reader.post(`/console/ratelimits/${namespaceId}/overrides`, { identifier: "u9", limit: "1", duration: "1000" });
    expect(set.status).toBe(403);
    expect(textOf(set.html)).toContain("ratelimit.*.set_override");
    const del = await reader.post(`/console/ratelimits/${namespaceId}/overrides/delete`, { identifier: before[0]!.identifier });
    expect(del.status).toBe(403);
    expect(await overridesOf("api.calls")).toEqual(before);

    // May set overrides but not create namespaces: a new name is refused and nothing is created.
    const setter = await signedIn(h.app, await h.rootKey(t.workspaceId, ["ratelimit.*.set_override", "ratelimit.*.read_namespace"]));
    const create = await setter.post("/console/ratelimits", { namespace: "not.created", identifier: "u", limit: "1", duration: "1000" });
    expect(create.status).toBe(403);
    expect(textOf(create.html)).toContain("ratelimit.*.create_namespace");
    expect((await h.sql(`select 1 from ratelimit_namespaces where name = 'not.created'`)).length).toBe(0);

    const nobody = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    expect((await nobody.get("/console/ratelimits")).status).toBe(403);
    expect((await nobody.get(`/console/ratelimits/${namespaceId}`)).status).toBe(403);
  });

  it("writes no inline script or style attribute in its pages", async () => {
    for (const path of ["/console/ratelimits", `/console/ratelimits/${namespaceId}`, "/console/ratelimits/rlns_missing"]) {
      const { html } = await c.get(path);
      for (const script of html.match(/<script\b[^>]*>[\s\S]*?<\/script>/g) ?? []) {
        expect(script, path).toMatch(/^<script src="\/console\/assets\/[0-9a-f]{16}\/[a-z.]+" defer><\/script>$/);
      }
      expect(html, path).not.toMatch(/\sstyle=|\son[a-z]+=|<style/i);
    }
  });
});
