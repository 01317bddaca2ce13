import { z } from "zod";
import { anyOfOne } from "../../core/auth/permissions.query.js";
import {
  createPermission,
  createRole,
  deletePermission,
  deleteRole,
  getRoleWithPermissions,
  listPermissionsPage,
  listRolesPage,
  type RoleWithPermissions,
  setPermissionsOfRole,
} from "../../core/rbac/rbac.rolesPermissions.js";
import { slugInput } from "../../wire/v2/permissions/permissions.schemas.js";
import { Csrf, Layout, to } from "../layout.js";
import { definePage, field, fields, type PageAnswer, type PageContext } from "../page.js";
import {
  attempt,
  can,
  ColumnHeads,
  cursorOf,
  DangerCard,
  doneNotice,
  errorNotice as error,
  Field,
  NextPage,
  type Notice,
  PageLink,
  paramsOf,
  parseWith,
  refusedPage,
  RowAction,
} from "../ui.js";

type Ctx = PageContext<"rootKey">;

const PAGE = 50;
/** The workspace's permissions a role's page offers as checkboxes; the role keeps those it has beyond them. */
const CHECKBOXES = 200;
/** v2's bound on the slugs of one role (setRolePermissions). */
const MAX_SLUGS = 1000;

const ROLE_DONE = { created: "Role created.", saved: "Permissions of the role saved.", deleted: "Role deleted." };
const PERMISSION_DONE = { created: "Permission created.", deleted: "Permission deleted." };

// v2's bounds on a role's and a permission's fields (permissions.createRole, permissions.createPermission).
const roleName = z.string().min(1).max(128);
const permissionName = z.string().min(1).max(512);
const description = z.string().max(512);

const roleIdOf = (ctx: Ctx) => paramsOf(ctx, "roleId").roleId;
const rolePath = (id: string) => `/roles/${encodeURIComponent(id)}`;

type RoleDraft = { name: string; description: string };

async function rolesPage(ctx: Ctx, opts: { notice?: Notice; status?: number; draft?: RoleDraft } = {}): Promise<PageAnswer> {
  const cursor = cursorOf(ctx.query.cursor);
  const listed = await attempt(() => listRolesPage(ctx.deps, ctx.caller, { fromId: cursor, limit: PAGE + 1 }));
  const rows = listed.ok ? listed.value.slice(0, PAGE) : [];
  const next = listed.ok ? listed.value[PAGE]?.id : undefined;
  const notice = opts.notice ?? (listed.ok ? doneNotice(ctx.query.done, ROLE_DONE) : error(listed.text));
  const draft = opts.draft ?? { name: "", description: "" };
  return {
    status: opts.status ?? (listed.ok ? 200 : listed.status),
    html: (
      <Layout title="Roles" session={ctx.session} csrf={ctx.csrf} nav="rbac" notice={notice}>
        <PageLink href={to("/permissions")} label="Permissions" />
        <h2>Roles</h2>
        {listed.ok &&
          (rows.length === 0 ? (
            <p class="muted">No roles yet.</p>
          ) : (
            <table>
              <ColumnHeads names={["Name", "Description", "Permissions"]} />
              <tbody>
                {rows.map((role) => (
                  <tr key={role.id}>
                    <td>
                      <a href={to(rolePath(role.id))}>{role.name}</a>
                    </td>
                    <td>{role.description ?? ""}</td>
                    <td>{role.permissions.length === 0 ? "none" : role.permissions.map((p) => p.slug).join(", ")}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
        <NextPage href={next === undefined ? undefined : to(`/roles?cursor=${encodeURIComponent(next)}`)} />
        {can(ctx, anyOfOne("rbac.*.create_role")) && (
          <form method="post" action={to("/roles")} class="card narrow">
            <h2>New role</h2>
            <Csrf token={ctx.csrf} />
            <Field id="name" label="Name" hint="Unique in the workspace (1 to 128 characters).">
              <input id="name" name="name" type="text" value={draft.name} required maxLength={128} />
            </Field>
            <Field id="description" label="Description">
              <input id="description" name="description" type="text" value={draft.description} maxLength={512} />
            </Field>
            <button type="submit">Create role</button>
          </form>
        )}
      </Layout>
    ),
  };
}

async function rolePage(ctx: Ctx, opts: { notice?: Notice; status?: number; checked?: string[] } = {}): Promise<PageAnswer> {
  const found = await attempt(() => getRoleWithPermissions(ctx.deps, ctx.caller, roleIdOf(ctx), "id"));
  if (!found.ok) return refusedPage(ctx, "rbac", "Role", found, { href: to("/roles"), label: "All roles" });
  const role = found.value;
  const offered = await attempt(() => listPermissionsPage(ctx.deps, ctx.caller, { limit: CHECKBOXES + 1 }));
  const checkboxes = offered.ok ? offered.value.slice(0, CHECKBOXES) : [];
  const shown = new Set(checkboxes.map((p) => p.slug));
  const beyond = role.permissions.filter((p) => !shown.has(p.slug));
  const checked = new Set(opts.checked ?? role.permissions.map((p) => p.slug));
  const mayChange = can(ctx, { or: ["*", { and: ["rbac.*.add_permission_to_role", "rbac.*.remove_permission_from_role"] }] });
  const path = rolePath(role.id);
  return {
    status: opts.status ?? 200,
    html: (
      <Layout
        title={`Role ${role.name}`}
        session={ctx.session}
        csrf={ctx.csrf}
        nav="rbac"
        notice={opts.notice ?? doneNotice(ctx.query.done, ROLE_DONE)}
      >
        <PageLink href={to("/roles")} label="All roles" />
        <h2>Details</h2>
        <dl class="fields">
          <dt>Role id</dt>
          <dd class="mono">{role.id}</dd>
          <dt>Name</dt>
          <dd>{role.name}</dd>
          <dt>Description</dt>
          <dd>{role.description ?? ""}</dd>
          <dt>Permissions</dt>
          <dd>{role.permissions.length === 0 ? "none" : role.permissions.map((p) => p.slug).join(", ")}</dd>
        </dl>
        {mayChange && (
          <form method="post" action={to(path)} class="card">
            <h2>Permissions of the role</h2>
            <Csrf token={ctx.csrf} />
            {!offered.ok ? (
              <p class="notice error">{offered.text}</p>
            ) : checkboxes.length === 0 ? (
              <p class="muted">
                The workspace has no permissions yet: <a href={to("/permissions")}>create one</a>.
              </p>
            ) : (
              <fieldset>
                <legend>Connected permissions</legend>
                {checkboxes.map((p) => (
                  <label class="check" for={`perm-${p.id}`} key={p.id}>
                    <input type="hidden" name="shown" value={p.slug} />
                    <input id={`perm-${p.id}`} name="permissions" type="checkbox" value={p.slug} checked={checked.has(p.slug)} />
                    <span class="mono">{p.slug}</span>
                    {p.description && <span class="muted">{p.description}</span>}
                  </label>
                ))}
              </fieldset>
            )}
            {offered.ok && offered.value.length > CHECKBOXES && (
              <p class="hint">{`Only the first ${CHECKBOXES} permissions are offered here; the role keeps those it has beyond them.`}</p>
            )}
            {beyond.length > 0 && <p class="hint">{`Kept as they are: ${beyond.map((p) => p.slug).join(", ")}.`}</p>}
            {offered.ok && checkboxes.length > 0 && <button type="submit">Save permissions</button>}
          </form>
        )}
        {can(ctx, anyOfOne("rbac.*.delete_role")) && (
          <DangerCard action={to(`${path}/delete`)} csrf={ctx.csrf} heading="Delete" button="Delete role">
            <p>Deletes the role for good, with its links to keys and permissions.</p>
          </DangerCard>
        )}
      </Layout>
    ),
  };
}

type PermissionDraft = { name: string; slug: string; description: string };

async function permissionsPage(ctx: Ctx, opts: { notice?: Notice; status?: number; draft?: PermissionDraft } = {}): Promise<PageAnswer> {
  const cursor = cursorOf(ctx.query.cursor);
  const listed = await attempt(() => listPermissionsPage(ctx.deps, ctx.caller, { fromId: cursor, limit: PAGE + 1 }));
  const rows = listed.ok ? listed.value.slice(0, PAGE) : [];
  const next = listed.ok ? listed.value[PAGE]?.id : undefined;
  const notice = opts.notice ?? (listed.ok ? doneNotice(ctx.query.done, PERMISSION_DONE) : error(listed.text));
  const draft = opts.draft ?? { name: "", slug: "", description: "" };
  const mayDelete = can(ctx, anyOfOne("rbac.*.delete_permission"));
  return {
    status: opts.status ?? (listed.ok ? 200 : listed.status),
    html: (
      <Layout title="Permissions" session={ctx.session} csrf={ctx.csrf} nav="rbac" notice={notice}>
        <PageLink href={to("/roles")} label="Roles" />
        <h2>Permissions</h2>
        {listed.ok &&
          (rows.length === 0 ? (
            <p class="muted">No permissions yet.</p>
          ) : (
            <table>
              <ColumnHeads names={["Slug", "Name", "Description", mayDelete && "Actions"]} />
              <tbody>
                {rows.map((p) => (
                  <tr key={p.id}>
                    <td class="mono">{p.slug}</td>
                    <td>{p.name}</td>
                    <td>{p.description ?? ""}</td>
                    {mayDelete && (
                      <td>
                        <RowAction
                          action={to(`/permissions/${encodeURIComponent(p.id)}/delete`)}
                          csrf={ctx.csrf}
                          text="Delete"
                          label={`Delete permission ${p.slug}`}
                        />
                      </td>
                    )}
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
        <NextPage href={next === undefined ? undefined : to(`/permissions?cursor=${encodeURIComponent(next)}`)} />
        {can(ctx, { or: ["*", "rbac.*.create_permission"] }) && (
          <form method="post" action={to("/permissions")} class="card narrow">
            <h2>New permission</h2>
            <Csrf token={ctx.csrf} />
            <Field id="name" label="Name" hint="For people (1 to 512 characters).">
              <input id="name" name="name" type="text" value={draft.name} required maxLength={512} />
            </Field>
            <Field
              id="slug"
              label="Slug"
              hint="What keys hold and verifications ask for: letters, digits and _ : - . * (empty: the name). Unique in the workspace."
            >
              <input id="slug" name="slug" type="text" value={draft.slug} maxLength={128} />
            </Field>
            <Field id="description" label="Description">
              <input id="description" name="description" type="text" value={draft.description} maxLength={512} />
            </Field>
            <button type="submit">Create permission</button>
          </form>
        )}
      </Layout>
    ),
  };
}

/** The slugs a role's form asks for: those checked, and those it has that the form did not offer (kept). */
function slugsOfRoleForm(role: RoleWithPermissions, checked: string[], shown: string[]): string[] {
  const offered = new Set(shown);
  return [...new Set([...role.permissions.filter((p) => !offered.has(p.slug)).map((p) => p.slug), ...checked])];
}

export const rbacPages = [
  definePage({ method: "GET", path: "/roles", audience: "rootKey", handler: (ctx) => rolesPage(ctx) }),
  definePage({
    method: "POST",
    path: "/roles",
    audience: "rootKey",
    handler: async (ctx) => {
      const draft = { name: field(ctx.form, "name"), description: field(ctx.form, "description") };
      const name = parseWith(roleName, draft.name, "Name");
      if (!name.ok) return rolesPage(ctx, { notice: error(name.text), status: 400, draft });
      const desc = parseWith(description, draft.description, "Description");
      if (!desc.ok) return rolesPage(ctx, { notice: error(desc.text), status: 400, draft });
      const created = await attempt(() =>
        createRole(ctx.deps, ctx.caller, { name: name.value, description: desc.value === "" ? undefined : desc.value }),
      );
      if (!created.ok) return rolesPage(ctx, { notice: error(created.text), status: created.status, draft });
      return { redirect: `${rolePath(created.value.roleId)}?done=created` };
    },
  }),
  definePage({ method: "GET", path: "/roles/:roleId", audience: "rootKey", handler: (ctx) => rolePage(ctx) }),
  definePage({
    method: "POST",
    path: "/roles/:roleId",
    audience: "rootKey",
    handler: async (ctx) => {
      const checked = fields(ctx.form, "permissions");
      const shown = fields(ctx.form, "shown");
      const slugs = parseWith(z.array(slugInput).max(MAX_SLUGS), [...checked, ...shown], "Each permission");
      if (!slugs.ok) return rolePage(ctx, { notice: error(slugs.text), status: 400, checked });
      const found = await attempt(() => getRoleWithPermissions(ctx.deps, ctx.caller, roleIdOf(ctx), "id"));
      if (!found.ok) return refusedPage(ctx, "rbac", "Role", found, { href: to("/roles"), label: "All roles" });
      const set = await attempt(() =>
        setPermissionsOfRole(ctx.deps, ctx.caller, { roleId: found.value.id, permissions: slugsOfRoleForm(found.value, checked, shown) }),
      );
      if (!set.ok) return rolePage(ctx, { notice: error(set.text), status: set.status, checked });
      return { redirect: `${rolePath(found.value.id)}?done=saved` };
    },
  }),
  definePage({
    method: "POST",
    path: "/roles/:roleId/delete",
    audience: "rootKey",
    handler: async (ctx) => {
      const deleted = await attempt(() => deleteRole(ctx.deps, ctx.caller, roleIdOf(ctx), "id"));
      if (!deleted.ok) {
        if (deleted.status === 404) return refusedPage(ctx, "rbac", "Role", deleted, { href: to("/roles"), label: "All roles" });
        return rolePage(ctx, { notice: error(deleted.text), status: deleted.status });
      }
      return { redirect: "/roles?done=deleted" };
    },
  }),
  definePage({ method: "GET", path: "/permissions", audience: "rootKey", handler: (ctx) => permissionsPage(ctx) }),
  definePage({
    method: "POST",
    path: "/permissions",
    audience: "rootKey",
    handler: async (ctx) => {
      const draft = { name: field(ctx.form, "name"), slug: field(ctx.form, "slug"), description: field(ctx.form, "description") };
      const name = parseWith(permissionName, draft.name, "Name");
      if (!name.ok) return permissionsPage(ctx, { notice: error(name.text), status: 400, draft });
      const slug = parseWith(slugInput, draft.slug === "" ? draft.name : draft.slug, draft.slug === "" ? "Name (the slug)" : "Slug");
      if (!slug.ok) return permissionsPage(ctx, { notice: error(slug.text), status: 400, draft });
      const desc = parseWith(description, draft.description, "Description");
      if (!desc.ok) return permissionsPage(ctx, { notice: error(desc.text), status: 400, draft });
      const created = await attempt(() =>
        createPermission(ctx.deps, ctx.caller, {
          name: name.value,
          slug: slug.value,
          description: desc.value === "" ? undefined : desc.value,
        }),
      );
      if (!created.ok) return permissionsPage(ctx, { notice: error(created.text), status: created.status, draft });
      return { redirect: "/permissions?done=created" };
    },
  }),
  definePage({
    method: "POST",
    path: "/permissions/:permissionId/delete",
    audience: "rootKey",
    handler: async (ctx) => {
      const permissionId = paramsOf(ctx, "permissionId").permissionId;
      const deleted = await attempt(() => deletePermission(ctx.deps, ctx.caller, permissionId, "id"));
      if (!deleted.ok) return permissionsPage(ctx, { notice: error(deleted.text), status: deleted.status });
      return { redirect: "/permissions?done=deleted" };
    },
  }),
];
