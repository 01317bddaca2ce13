import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConsoleClient, signedIn, signedInTenant, textOf } from "./console-client.js";
import type { Harness, Tenant } from "./helper.js";

const roleIdOf = (location: string | undefined) => /\/console\/roles\/(role_[^?]+)\?done=created$/.exec(location ?? "")?.[1];

describe("console roles and permissions pages", () => {
  let h: Harness;
  let t: Tenant;
  let c: ConsoleClient;
  beforeAll(async () => {
    ({ h, t, c } = await signedInTenant());
  });
  afterAll(() => h?.close());

  const v2 = (path: string, body: unknown, key = t.rootKey) => h.post(`/v2/${path}`, body, key);

  it("creates permissions and a role, connects them by checkbox, and shows them on the pages and by v2", async () => {
    expect((await c.get("/console/permissions")).status).toBe(200);
    const read = await c.post("/console/permissions", { name: "Read docs", slug: "docs.read", description: "reads" });
    expect(read.status).toBe(303);
    expect(read.location).toBe("/console/permissions?done=created");
    expect((await c.post("/console/permissions", { name: "docs.write" })).status).toBe(303);
    const list = textOf((await c.get("/console/permissions?done=created")).html);
    expect(list).toContain("Permission created.");
    expect(list).toContain("docs.read Read docs reads");
    expect(list).toContain("docs.write docs.write");

    expect((await c.get("/console/roles")).status).toBe(200);
    const created = await c.post("/console/roles", { name: "editor", description: "edits" });
    const roleId = roleIdOf(created.location)!;
    expect(roleId).toBeDefined();
    const page = await c.get(`/console/roles/${roleId}?done=created`);
    expect(page.status).toBe(200);
    expect(textOf(page.html)).toContain("Role created.");
    expect(page.html).toContain('value="docs.read"');

    const saved = await c.post(`/console/roles/${roleId}`, {
      shown: ["docs.read", "docs.write"],
      permissions: ["docs.read", "docs.write"],
    });
    expect(saved.location).toBe(`/console/roles/${roleId}?done=saved`);
    let role = await v2("permissions.getRole", { role: roleId });
    expect(role.body.data.permissions.map((p: { slug: string }) => p.slug).sort()).toEqual(["docs.read", "docs.write"]);
    expect(textOf((await c.get("/console/roles")).html)).toContain("editor edits docs.read, docs.write");

    // Unchecking one disconnects it; a permission the form did not offer (not in `shown`) is kept.
    expect((await v2("permissions.createPermission", { name: "hidden", slug: "hidden.one" })).status).toBe(200);
    expect((await v2("permissions.setRolePermissions", { roleId, permissions: ["docs.read", "docs.write", "hidden.one"] })).status).toBe(
      200,
    );
    await c.post(`/console/roles/${roleId}`, { shown: ["docs.read", "docs.write"], permissions: ["docs.write"] });
    role = await v2("permissions.getRole", { role: roleId });
    expect(role.body.data.permissions.map((p: { slug: string }) => p.slug).sort()).toEqual(["docs.write", "hidden.one"]);
  });

  it("deletes a role and a permission", async () => {
    const roleId = roleIdOf((await c.post("/console/roles", { name: "doomed" })).location)!;
    expect((await c.post(`/console/roles/${roleId}/delete`)).location).toBe("/console/roles?done=deleted");
    expect((await v2("permissions.getRole", { role: roleId })).status).toBe(404);
    const gone = await c.get(`/console/roles/${roleId}`);
    expect(gone.status).toBe(404);
    expect(textOf(gone.html)).toContain("The requested role does not exist.");

    await c.post("/console/permissions", { name: "doomed.perm" });
    const permissionId = (await v2("permissions.getPermission", { permission: "doomed.perm" })).body.data.id;
    const deleted = await c.post(`/console/permissions/${permissionId}/delete`);
    expect(deleted.location).toBe("/console/permissions?done=deleted");
    expect((await v2("permissions.getPermission", { permission: permissionId })).status).toBe(404);
    expect((await c.post(`/console/permissions/${permissionId}/delete`)).status).toBe(404);
  });

  it("refuses bad input with a 400 naming the field, and a taken name with 409", async () => {
    const empty = await c.post("/console/roles", { name: "" });
    expect(empty.status).toBe(400);
    expect(textOf(empty.html)).toContain("Name must not be empty.");
    const badSlug = await c.post("/console/permissions", { name: "Has spaces" });
    expect(badSlug.status).toBe(400);
    expect(textOf(badSlug.html)).toContain("Name (the slug) must hold only letters, digits and _ : - . *.");
    expect(badSlug.html).toContain('value="Has spaces"');
    const taken = await c.post("/console/roles", { name: "editor" });
    expect(taken.status).toBe(409);
    const roleId = (await v2("permissions.getRole", { role: "editor" })).body.data.id;
    const badBox = await c.post(`/console/roles/${roleId}`, { shown: ["docs.read"], permissions: ["no spaces allowed"] });
    expect(badBox.status).toBe(400);
    expect(textOf(badBox.html)).toContain("Each permission must hold only letters");
    expect((await v2("permissions.listRoles", {})).body.data.map((r: { name: string }) => r.name)).not.toContain("");
  });

  it("renders markup in names escaped", async () => {
    const evil = "<script>alert(1)</script>";
    const roleId = roleIdOf((await c.post("/console/roles", { name: evil, description: evil })).location)!;
    for (const path of ["/console/roles", `/console/roles/${roleId}`]) {
      const { html } = await c.get(path);
      expect(html, path).not.toContain(evil);
      expect(html, path).toContain("&lt;script>alert(1)&lt;/script>");
    }
  });

  it("hides the actions from a root key that may only read, and refuses them with 403 changing nothing", async () => {
    const roleId = (await v2("permissions.getRole", { role: "editor" })).body.data.id;
    const permissionId = (await v2("permissions.getPermission", { permission: "docs.read" })).body.data.id;
    const reader = await signedIn(h.app, await h.rootKey(t.workspaceId, ["rbac.*.read_role", "rbac.*.read_permission"]));
    const roles = await reader.get("/console/roles");
    expect(roles.status).toBe(200);
    expect(roles.html).not.toContain("Create role");
    const role = await reader.get(`/console/roles/${roleId}`);
    expect(role.status).toBe(200);
    expect(role.html).not.toContain("Save permissions");
    expect(role.html).not.toContain("Delete role");
    const permissions = await reader.get("/console/permissions");
    expect(permissions.html).not.toContain("Create permission");
    expect(permissions.html).not.toContain("Delete permission");

    const create = await reader.post("/console/roles", { name: "refused" });
    expect(create.status).toBe(403);
    expect(textOf(create.html)).toContain("rbac.*.create_role");
    expect((await v2("permissions.getRole", { role: "refused" })).status).toBe(404);
    const connect = await reader.post(`/console/roles/${roleId}`, { shown: ["docs.read", "docs.write"], permissions: [] });
    expect(connect.status).toBe(403);
    expect((await v2("permissions.getRole", { role: roleId })).body.data.permissions.length).toBe(2);
    expect((await reader.post(`/console/roles/${roleId}/delete`)).status).toBe(403);
    expect((await reader.post("/console/permissions", { name: "refused.perm" })).status).toBe(403);
    const delPermission = await reader.post(`/console/permissions/${permissionId}/delete`);
    expect(delPermission.status).toBe(403);
    expect(textOf(delPermission.html)).toContain("rbac.*.delete_permission");
    expect((await v2("permissions.getPermission", { permission: permissionId })).status).toBe(200);

    const nobody = await signedIn(h.app, await h.rootKey(t.workspaceId, ["api.*.read_api"]));
    expect((await nobody.get("/console/roles")).status).toBe(403);
    expect((await nobody.get("/console/permissions")).status).toBe(403);
  });

  it("writes no inline script or style attribute in its pages", async () => {
    const roleId = (await v2("permissions.getRole", { role: "editor" })).body.data.id;
    for (const path of ["/console/roles", `/console/roles/${roleId}`, "/console/roles/role_missing", "/console/permissions"]) {
      const { html } = await c.get(path);
      for (const script of html.match(/<script\b[^>]*>[\s\S]*?<\/script>/g) ?? []) {
        expect(script, path).toMatch(/^<script src="\/console\/assets\/[0-9a-f]{16}\/[a-z.]+" defer><\/script>$/);
      }
      expect(html, path).not.toMatch(/\sstyle=|\son[a-z]+=|<style/i);
    }
  });
});
