import type { ComponentChildren } from "preact";
import { rootKeyHolds } from "../../core/auth/permissions.urn.js";
import { CREATE_ROOT_KEY, createRootKey, DELETE_ROOT_KEY, listOwnRootKeys, revokeRootKey } from "../../core/rootKeys/rootKeys.core.js";
import { Csrf, Layout, type NavId, to } from "../layout.js";
import { definePage, type FormFields, field, fields, type PageAnswer, type PageContext } from "../page.js";
import { PLAIN_COOKIE, SECURE_COOKIE } from "../surface.js";
import {
  attempt,
  can,
  ColumnHeads,
  doneNotice,
  errorNotice,
  Field,
  nameTooLong,
  NextPage,
  type Notice,
  PageLink,
  paramsOf,
  RowAction,
  SecretOnce,
  when,
} from "../ui.js";

/** Root keys per page of the list. */
export const ROOT_KEYS_PAGE = 50;
/** A root key's name: at most this many characters (as v1's admin route). */
export const MAX_ROOT_KEY_NAME = 256;

/**
 * The root key permissions keyhaven checks, by resource (docs/api.md): the picker's checkboxes, each the wildcard
 * `<resource>.*.<action>`. A permission of one resource (`api.<apiId>.read_key`) or a URN goes in the text field.
 */
export const PERMISSION_CATALOG: readonly { resource: string; label: string; actions: readonly string[] }[] = [
  {
    resource: "api",
    label: "APIs and keys",
    actions: [
      "create_api",
      "read_api",
      "update_api",
      "delete_api",
      "create_key",
      "read_key",
      "update_key",
      "delete_key",
      "encrypt_key",
      "decrypt_key",
      "verify_key",
      "read_analytics",
    ],
  },
  {
    resource: "ratelimit",
    label: "Rate limits",
    actions: ["create_namespace", "read_namespace", "limit", "set_override", "read_override", "delete_override"],
  },
  {
    resource: "rbac",
    label: "Roles, permissions and root keys",
    actions: [
      "create_permission",
      "read_permission",
      "delete_permission",
      "create_role",
      "read_role",
      "delete_role",
      "add_permission_to_key",
      "remove_permission_from_key",
      "add_role_to_key",
      "remove_role_from_key",
      "add_permission_to_role",
      "remove_permission_from_role",
      "create_root_key",
      "read_root_key",
      "delete_root_key",
    ],
  },
  { resource: "identity", label: "Identities", actions: ["create_identity", "read_identity", "update_identity", "delete_identity"] },
  { resource: "audit", label: "Audit log", actions: ["read_logs"] },
  { resource: "webhook", label: "Webhooks", actions: ["manage_webhooks"] },
  {
    resource: "portal",
    label: "Portals",
    actions: ["create_portal", "read_portal", "update_portal", "delete_portal", "create_portal_session"],
  },
];

/** The permissions a root key form asks for: the boxes ticked and the text field's words (spaces, commas, lines). */
export function permissionsOf(form: FormFields): string[] {
  const extra = field(form, "extra")
    .split(/[\s,]+/)
    .filter((p) => p !== "");
  return [...new Set([...fields(form, "permission"), ...extra])];
}

const idOf = (permission: string) => `perm-${permission.replace(/[^A-Za-z0-9_-]/g, "-")}`;

/**
 * The permission picker of a root key form: `*`, then each resource's wildcard permissions, as checkboxes (only
 * those `grantable` says the signed-in one may grant), and a text field for any other permission.
 */
export function PermissionPicker({
  grantable,
  checked,
  extra,
}: {
  grantable: (permission: string) => boolean;
  checked: ReadonlySet<string>;
  extra: string;
}) {
  const box = (permission: string) => (
    <label class="check" for={idOf(permission)} key={permission}>
      <input id={idOf(permission)} type="checkbox" name="permission" value={permission} checked={checked.has(permission)} />
      <code>{permission}</code>
    </label>
  );
  return (
    <div>
      {grantable("*") && (
        <fieldset>
          <legend>Everything</legend>
          {box("*")}
        </fieldset>
      )}
      {PERMISSION_CATALOG.map((group) => {
        const names = group.actions.map((a) => `${group.resource}.*.${a}`).filter(grantable);
        if (names.length === 0) return null;
        return (
          <fieldset key={group.resource}>
            <legend>{group.label}</legend>
            {names.map(box)}
          </fieldset>
        );
      })}
      <Field
        id="extra"
        label="Other permissions"
        hint="Separated by spaces, commas or lines, e.g. api.api_123.read_key or a URN; each 1 to 512 characters."
      >
        <textarea id="extra" name="extra" rows={3}>
          {extra}
        </textarea>
      </Field>
    </div>
  );
}

type RootKeySession = PageContext<"rootKey">;

/** The root key form, with what was sent and why it was refused (when it was). */
function NewRootKeyPage({ ctx, notice }: { ctx: RootKeySession; notice?: { kind: "ok" | "error"; text: string } | undefined }) {
  const held = ctx.session.rootKey.permissions;
  const all = held.has("*");
  const sent = new Set(fields(ctx.form, "permission"));
  return (
    <Layout title="New root key" session={ctx.session} csrf={ctx.csrf} nav="rootKeys" notice={notice}>
      <form method="post" action={to("/root-keys/new")} class="card">
        <Csrf token={ctx.csrf} />
        <Field id="name" label="Name" hint="To recognise it in the list and the audit log (optional).">
          <input id="name" name="name" maxLength={MAX_ROOT_KEY_NAME} value={field(ctx.form, "name")} />
        </Field>
        <h2>Permissions</h2>
        {!all && <p class="hint">A root key can grant only permissions it holds itself: the others are not offered.</p>}
        <PermissionPicker grantable={(p) => all || rootKeyHolds(held, p)} checked={sent} extra={field(ctx.form, "extra")} />
        <button type="submit">Create root key</button>
      </form>
    </Layout>
  );
}

async function listPage(ctx: RootKeySession, notice?: Notice, status?: number): Promise<PageAnswer> {
  const cursor = ctx.query.cursor || undefined;
  const listed = await attempt(() => listOwnRootKeys(ctx.deps, ctx.caller, { limit: ROOT_KEYS_PAGE, cursor }));
  const shown = notice ?? (listed.ok ? doneNotice(ctx.query.done, DONE) : errorNotice(listed.text));
  const mayRevoke = can(ctx, { or: ["*", DELETE_ROOT_KEY] });
  return {
    status: status ?? (listed.ok ? 200 : listed.status),
    html: (
      <Layout title="Root keys" session={ctx.session} csrf={ctx.csrf} nav="rootKeys" notice={shown}>
        {can(ctx, { or: ["*", CREATE_ROOT_KEY] }) && (
          <p class="actions">
            <a href={to("/root-keys/new")}>New root key</a>
          </p>
        )}
        {listed.ok && (
          <>
            <RootKeysTable
              keys={listed.value.items}
              csrf={ctx.csrf}
              revokeBase={mayRevoke ? "/root-keys" : undefined}
              ownId={ctx.session.rootKey.rootKeyId}
            />
            {listed.value.items.length === 0 && <p class="muted">No root keys.</p>}
            <NextPage
              href={listed.value.cursor === undefined ? undefined : to(`/root-keys?cursor=${encodeURIComponent(listed.value.cursor)}`)}
            />
          </>
        )}
      </Layout>
    ),
  };
}

const DONE = { revoked: "The root key is revoked: every request made with it is refused from now on." };

/** The page of a root key just created (the workspace's or the operator's): the key, shown once, and a link back. */
export function RootKeyCreatedPage({
  session,
  csrf,
  nav,
  text,
  secret,
  children,
}: {
  session: PageContext<"rootKey" | "operator">["session"];
  csrf: string;
  nav: NavId;
  text: string;
  secret: string;
  children: ComponentChildren;
}) {
  return (
    <Layout title="Root key created" session={session} csrf={csrf} nav={nav} notice={{ kind: "ok", text }}>
      <SecretOnce id="new-root-key" label="The new root key." value={secret} />
      {children}
    </Layout>
  );
}

export const rootKeysPages = [
  definePage({ method: "GET", path: "/root-keys", audience: "rootKey", handler: (ctx) => listPage(ctx) }),
  definePage({
    method: "GET",
    path: "/root-keys/new",
    audience: "rootKey",
    handler: async (ctx) => {
      if (!can(ctx, { or: ["*", CREATE_ROOT_KEY] })) {
        const text = `Creating root keys needs the permission "${CREATE_ROOT_KEY}" (or "*"), which this root key does not hold.`;
        return { status: 403, html: <NewRootKeyPage ctx={ctx} notice={{ kind: "error", text }} /> };
      }
      return { html: <NewRootKeyPage ctx={ctx} /> };
    },
  }),
  definePage({
    method: "POST",
    path: "/root-keys/new",
    audience: "rootKey",
    handler: async (ctx) => {
      const name = field(ctx.form, "name");
      const tooLong = nameTooLong(name, MAX_ROOT_KEY_NAME);
      if (tooLong !== undefined) return { status: 400, html: <NewRootKeyPage ctx={ctx} notice={errorNotice(tooLong)} /> };
      const created = await attempt(() =>
        createRootKey(ctx.deps, ctx.caller, {
          workspaceId: ctx.caller.workspaceId,
          name: name === "" ? undefined : name,
          permissions: permissionsOf(ctx.form),
        }),
      );
      if (!created.ok) return { status: created.status, html: <NewRootKeyPage ctx={ctx} notice={{ kind: "error", text: created.text }} /> };
      return {
        html: (
          <RootKeyCreatedPage
            session={ctx.session}
            csrf={ctx.csrf}
            nav="rootKeys"
            text={`Root key ${created.value.keyId} is created.`}
            secret={created.value.key}
          >
            <PageLink href={to("/root-keys")} label="Back to the root keys" />
          </RootKeyCreatedPage>
        ),
      };
    },
  }),
  definePage({
    method: "POST",
    path: "/root-keys/:rootKeyId/revoke",
    audience: "rootKey",
    handler: async (ctx) => {
      const { rootKeyId } = paramsOf(ctx, "rootKeyId");
      const revoked = await attempt(() => revokeRootKey(ctx.deps, ctx.caller, rootKeyId));
      if (!revoked.ok) return listPage(ctx, { kind: "error", text: revoked.text }, revoked.status);
      if (rootKeyId === ctx.session.rootKey.rootKeyId) {
        // This session's own root key: the session is worth nothing now (the next request would find it so).
        ctx.reply.clearCookie(SECURE_COOKIE, { path: "/", secure: true });
        ctx.reply.clearCookie(PLAIN_COOKIE, { path: "/" });
        return { redirect: "/sign-in" };
      }
      return { redirect: "/root-keys?done=revoked" };
    },
  }),
];

/**
 * Root keys as a table (never a secret or hash): the workspace's own page and the operator's workspace page. With
 * `revokeBase`, each row has a Revoke form posting to `<revokeBase>/<id>/revoke`; `ownId` marks the session's key.
 */
export function RootKeysTable({
  keys,
  csrf,
  revokeBase,
  ownId,
}: {
  keys: readonly {
    id: string;
    name: string | null;
    start: string;
    createdAtM: number;
    lastUsedAtM: number | null;
    permissions: readonly string[];
  }[];
  csrf: string;
  revokeBase: string | undefined;
  ownId?: string;
}) {
  return (
    <table>
      <ColumnHeads names={["Id", "Name", "Starts with", "Created", "Last used", "Permissions", revokeBase !== undefined && "Actions"]} />
      <tbody>
        {keys.map((k) => (
          <tr key={k.id}>
            <td class="mono">
              {k.id}
              {k.id === ownId && <span class="muted"> (this session)</span>}
            </td>
            <td>{k.name ?? ""}</td>
            <td class="mono">{k.start}…</td>
            <td>{when(k.createdAtM)}</td>
            <td>{when(k.lastUsedAtM)}</td>
            <td>{k.permissions.length === 0 ? <span class="muted">none</span> : <code>{k.permissions.join(" ")}</code>}</td>
            {revokeBase !== undefined && (
              <td>
                <RowAction
                  action={to(`${revokeBase}/${encodeURIComponent(k.id)}/revoke`)}
                  csrf={csrf}
                  text="Revoke"
                  label={`Revoke root key ${k.id}`}
                />
              </td>
            )}
          </tr>
        ))}
      </tbody>
    </table>
  );
}
