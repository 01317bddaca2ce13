import { createRootKey, listRootKeys, revokeRootKey } from "../../core/rootKeys/rootKeys.core.js";
import { createWorkspace, enableWorkspace, getWorkspace, listWorkspaces } from "../../core/workspaces/workspaces.core.js";
import { probeDatabase, probeRedis } from "../../http/health.js";
import { packageVersion } from "../../wire/v1/openapi.js";
import { Csrf, Layout, to } from "../layout.js";
import { definePage, field, fields, type PageAnswer, type PageContext } from "../page.js";
import {
  attempt,
  Badge,
  ColumnHeads,
  doneNotice,
  errorNotice,
  Field,
  nameTooLong,
  NextPage,
  type Notice,
  PageLink,
  paramsOf,
  refusedPage,
  when,
} from "../ui.js";
import { auditPage } from "./audit.pages.js";
import { MAX_ROOT_KEY_NAME, PermissionPicker, permissionsOf, ROOT_KEYS_PAGE, RootKeyCreatedPage, RootKeysTable } from "./rootKeys.pages.js";

/** Workspaces per page of the operator's list. */
export const WORKSPACES_PAGE = 50;
/** A workspace's name: 1 to this many characters (as v1's workspaces.createWorkspace). */
export const MAX_WORKSPACE_NAME = 256;

type Ctx = PageContext<"operator">;

const workspacePath = (id: string) => `/operator/workspaces/${encodeURIComponent(id)}`;

const DONE = {
  created: "The workspace is created. It has no root key yet: create one below to use it.",
  disabled: "The workspace is disabled: every root key of it is refused, in the API and the console.",
  enabled: "The workspace is enabled again.",
  revoked: "The root key is revoked.",
};

async function workspacesPage(ctx: Ctx, notice?: Notice, status?: number): Promise<PageAnswer> {
  const listed = await attempt(() => listWorkspaces(ctx.deps, { limit: WORKSPACES_PAGE, cursor: ctx.query.cursor || undefined }));
  return {
    status: status ?? (listed.ok ? 200 : listed.status),
    html: (
      <Layout
        title="Workspaces"
        session={ctx.session}
        csrf={ctx.csrf}
        nav="workspaces"
        notice={notice ?? (listed.ok ? undefined : errorNotice(listed.text))}
      >
        <form method="post" action={to("/operator/workspaces")} class="card">
          <Csrf token={ctx.csrf} />
          <h2>New workspace</h2>
          <div class="row">
            <Field id="name" label="Name">
              <input id="name" name="name" required maxLength={MAX_WORKSPACE_NAME} value={field(ctx.form, "name")} />
            </Field>
            <button type="submit">Create workspace</button>
          </div>
        </form>
        <h2>All workspaces</h2>
        {listed.ok && (
          <>
            <table>
              <ColumnHeads names={["Id", "Name", "State", "Created"]} />
              <tbody>
                {listed.value.items.map((w) => (
                  <tr key={w.id}>
                    <td class="mono">
                      <a href={to(workspacePath(w.id))}>{w.id}</a>
                    </td>
                    <td>{w.name}</td>
                    <td>
                      <Badge on={w.enabled} yes="enabled" no="disabled" />
                    </td>
                    <td>{when(w.createdAtM)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            {listed.value.items.length === 0 && <p class="muted">No workspaces.</p>}
            <NextPage
              href={
                listed.value.cursor === undefined ? undefined : to(`/operator/workspaces?cursor=${encodeURIComponent(listed.value.cursor)}`)
              }
            />
          </>
        )}
      </Layout>
    ),
  };
}

async function workspacePage(ctx: Ctx, notice?: Notice, status?: number): Promise<PageAnswer> {
  const { workspaceId } = paramsOf(ctx, "workspaceId");
  const found = await attempt(() => getWorkspace(ctx.deps, workspaceId));
  if (!found.ok) return refusedPage(ctx, "workspaces", "Workspace", found, { href: to("/operator/workspaces"), label: "All workspaces" });
  const w = found.value;
  const keys = await listRootKeys(ctx.deps, { workspaceId, limit: ROOT_KEYS_PAGE, cursor: ctx.query.cursor || undefined });
  const base = workspacePath(workspaceId);
  return {
    status: status ?? 200,
    html: (
      <Layout
        title={`Workspace ${w.name}`}
        session={ctx.session}
        csrf={ctx.csrf}
        nav="workspaces"
        notice={notice ?? doneNotice(ctx.query.done, DONE)}
      >
        <PageLink href={to("/operator/workspaces")} label="All workspaces" />
        <dl class="fields">
          <dt>Id</dt>
          <dd class="mono">{w.id}</dd>
          <dt>Name</dt>
          <dd>{w.name}</dd>
          <dt>State</dt>
          <dd>
            <Badge on={w.enabled} yes="enabled" no="disabled" />
          </dd>
          <dt>Created</dt>
          <dd>{when(w.createdAtM)}</dd>
        </dl>
        <form method="post" action={to(`${base}/${w.enabled ? "disable" : "enable"}`)} class="actions">
          <Csrf token={ctx.csrf} />
          <button type="submit" class={w.enabled ? "danger" : undefined}>
            {w.enabled ? "Disable workspace" : "Enable workspace"}
          </button>
          <span class="hint">
            {w.enabled ? "A disabled workspace refuses every root key of it (its data is kept)." : "Its root keys work again."}
          </span>
        </form>
        <h2>Root keys</h2>
        <RootKeysTable keys={keys.items} csrf={ctx.csrf} revokeBase={`${base}/root-keys`} />
        {keys.items.length === 0 && <p class="muted">No root keys yet: create one below, then sign in to the console with it.</p>}
        <NextPage href={keys.cursor === undefined ? undefined : to(`${base}?cursor=${encodeURIComponent(keys.cursor)}`)} />
        <form method="post" action={to(`${base}/root-keys`)} class="card">
          <Csrf token={ctx.csrf} />
          <h2>New root key</h2>
          <Field id="name" label="Name" hint="Optional.">
            <input id="name" name="name" maxLength={MAX_ROOT_KEY_NAME} value={field(ctx.form, "name")} />
          </Field>
          <h3>Permissions</h3>
          <PermissionPicker grantable={() => true} checked={new Set(fields(ctx.form, "permission"))} extra={field(ctx.form, "extra")} />
          <button type="submit">Create root key</button>
        </form>
      </Layout>
    ),
  };
}

async function statusPage(ctx: Ctx): Promise<PageAnswer> {
  const [database, redis] = await Promise.all([probeDatabase(ctx.deps), probeRedis(ctx.deps)]);
  const unready = database.state === "up" ? ctx.deps.store.state.unreadyReason() : undefined;
  return {
    html: (
      <Layout title="Status" session={ctx.session} csrf={ctx.csrf} nav="status">
        <dl class="fields">
          <dt>Version</dt>
          <dd class="mono">{packageVersion}</dd>
          <dt>Store</dt>
          <dd>{ctx.deps.store.kind === "pglite" ? "PGlite (embedded)" : "PostgreSQL"}</dd>
          <dt>Store reachable</dt>
          <dd>
            <Badge on={database.state === "up"} yes="up" no="down" />
            {database.state === "down" && <> the store {database.reason}</>}
            {unready !== undefined && <> {unready}</>}
          </dd>
          <dt>Redis</dt>
          <dd>
            {redis.state === "not configured" ? (
              <span class="muted">not configured (rate limits counted in memory)</span>
            ) : (
              <>
                <Badge on={redis.state === "up"} yes="up" no="down" />
                {redis.state === "down" && <> Redis {redis.reason}</>}
              </>
            )}
          </dd>
        </dl>
        <p class="hint">As /v1/readiness probes them: the store's epoch statement and Redis PING, each within 1 s.</p>
      </Layout>
    ),
  };
}

export const operatorPages = [
  definePage({ method: "GET", path: "/operator/workspaces", audience: "operator", handler: (ctx) => workspacesPage(ctx) }),
  definePage({
    method: "POST",
    path: "/operator/workspaces",
    audience: "operator",
    handler: async (ctx) => {
      const name = field(ctx.form, "name");
      if (name === "") return workspacesPage(ctx, { kind: "error", text: "Enter a name for the workspace." }, 400);
      const tooLong = nameTooLong(name, MAX_WORKSPACE_NAME);
      if (tooLong !== undefined) return workspacesPage(ctx, errorNotice(tooLong), 400);
      const created = await attempt(() => createWorkspace(ctx.deps, ctx.session.caller(""), { name }));
      if (!created.ok) return workspacesPage(ctx, { kind: "error", text: created.text }, created.status);
      return { redirect: `${workspacePath(created.value)}?done=created` };
    },
  }),
  definePage({ method: "GET", path: "/operator/workspaces/:workspaceId", audience: "operator", handler: (ctx) => workspacePage(ctx) }),
  ...(["disable", "enable"] as const).map((action) =>
    definePage({
      method: "POST",
      path: `/operator/workspaces/:workspaceId/${action}`,
      audience: "operator",
      handler: async (ctx) => {
        const { workspaceId } = paramsOf(ctx, "workspaceId");
        const input = { workspaceId, enabled: action === "enable" };
        const changed = await attempt(() => enableWorkspace(ctx.deps, ctx.session.caller(workspaceId), input));
        if (!changed.ok) return workspacePage(ctx, { kind: "error", text: changed.text }, changed.status);
        return { redirect: `${workspacePath(workspaceId)}?done=${action}d` };
      },
    }),
  ),
  definePage({
    method: "POST",
    path: "/operator/workspaces/:workspaceId/root-keys",
    audience: "operator",
    handler: async (ctx) => {
      const { workspaceId } = paramsOf(ctx, "workspaceId");
      const name = field(ctx.form, "name");
      const tooLong = nameTooLong(name, MAX_ROOT_KEY_NAME);
      if (tooLong !== undefined) return workspacePage(ctx, errorNotice(tooLong), 400);
      const created = await attempt(() =>
        createRootKey(ctx.deps, ctx.session.caller(workspaceId), {
          workspaceId,
          name: name === "" ? undefined : name,
          permissions: permissionsOf(ctx.form),
        }),
      );
      if (!created.ok) return workspacePage(ctx, { kind: "error", text: created.text }, created.status);
      return {
        html: (
          <RootKeyCreatedPage
            session={ctx.session}
            csrf={ctx.csrf}
            nav="workspaces"
            text={`Root key ${created.value.keyId} of workspace ${workspaceId} is created.`}
            secret={created.value.key}
          >
            <p>Sign in to the console with it to manage the workspace, or send it as the Bearer token of the API.</p>
            <PageLink href={to(workspacePath(workspaceId))} label="Back to the workspace" />
          </RootKeyCreatedPage>
        ),
      };
    },
  }),
  definePage({
    method: "POST",
    path: "/operator/workspaces/:workspaceId/root-keys/:rootKeyId/revoke",
    audience: "operator",
    handler: async (ctx) => {
      const { workspaceId, rootKeyId } = paramsOf(ctx, "workspaceId", "rootKeyId");
      const revoked = await attempt(() => revokeRootKey(ctx.deps, ctx.session.caller(workspaceId), rootKeyId));
      if (!revoked.ok) return workspacePage(ctx, { kind: "error", text: revoked.text }, revoked.status);
      return { redirect: `${workspacePath(workspaceId)}?done=revoked` };
    },
  }),
  definePage({ method: "GET", path: "/operator/status", audience: "operator", handler: (ctx) => statusPage(ctx) }),
  definePage({ method: "GET", path: "/operator/audit", audience: "operator", handler: (ctx) => auditPage(ctx, "/operator/audit") }),
];
