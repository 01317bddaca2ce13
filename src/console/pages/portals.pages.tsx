import { z } from "zod";
import { getApiSettings } from "../../core/apis/apis.core.js";
import {
  createPortal,
  deletePortal,
  getPortalOfApi,
  MAX_PORTAL_NAME,
  MAX_PORTAL_TITLE,
  MAX_PORTAL_URL,
  portalPermission,
  updatePortal,
} from "../../core/portals/portals.manage.js";
import { createPortalSession, EXCHANGE_CODE_TTL_MS, PORTAL_SCOPES, type PortalScope } from "../../core/portals/portals.sessions.js";
import { requirePermission } from "../../core/principal.js";
import { isStorableText } from "../../storage/lookupText.js";
import type { PortalRow } from "../../storage/portals/portals.repository.js";
import { portalBaseUrl, portalSettingsInput } from "../../wire/v2/keyhaven/portals.schemas.js";
import { Csrf, Layout, to } from "../layout.js";
import { definePage, type FormFields, field, fields, type PageAnswer, type PageContext } from "../page.js";
import {
  attempt,
  Badge,
  can,
  DangerCard,
  doneNotice,
  errorNotice as error,
  Field,
  type Notice,
  PageLink,
  paramsOf,
  parseWith,
  refusedPage,
  when,
} from "../ui.js";

type Ctx = PageContext<"rootKey">;

const DONE = {
  created: "Portal created.",
  saved: "Portal settings saved.",
  unchanged: "Nothing to save: the settings were as shown.",
  enabled: "Portal enabled.",
  disabled: "Portal disabled: it mints no session, and its sessions stop working.",
  deleted: "Portal deleted, with its sessions.",
};

/** The scopes a preview session is offered with, ticked (what a customer mostly sees: their keys and their usage). */
const DEFAULT_PREVIEW_SCOPES: readonly PortalScope[] = ["keys:read", "analytics:read"];

const apiPath = (apiId: string) => `/apis/${encodeURIComponent(apiId)}`;
const portalPath = (apiId: string) => `${apiPath(apiId)}/portal`;
const apiIdOf = (ctx: Ctx) => paramsOf(ctx, "apiId").apiId;

/** Text a PostgreSQL column can hold (no NUL, no unpaired surrogate): v2's JSON parser refuses the rest; a form, here. */
const storable = (schema: z.ZodString) =>
  schema.refine(isStorableText, { error: "must not contain the NUL character or unpaired surrogates" });

/** The settings form's fields, as the form shows and sends them (text; an empty optional field removes it). */
const SETTINGS_FIELDS = ["slug", "name", "returnUrl", "title", "accentColor", "logoUrl"] as const;
type SettingsField = (typeof SETTINGS_FIELDS)[number];
type SettingsForm = Record<SettingsField, string>;

/**
 * The form's fields read with v2's bounds (portals.schemas.ts), so that the console accepts what createPortal and
 * updatePortal accept; the core then checks the rest (the slug's letters, the URLs' schemes, the colour).
 */
const settingsForm = z.object({
  slug: storable(portalSettingsInput.slug),
  name: storable(portalSettingsInput.name),
  returnUrl: storable(z.string().max(MAX_PORTAL_URL)),
  title: storable(z.string().max(MAX_PORTAL_TITLE)),
  accentColor: storable(z.string().max(7)),
  logoUrl: storable(z.string().max(MAX_PORTAL_URL)),
});
const LABELS: Record<SettingsField, string> = {
  slug: "The slug",
  name: "The name",
  returnUrl: "The return URL",
  title: "The title",
  accentColor: "The accent colour",
  logoUrl: "The logo URL",
};
const labelOf = (path: readonly PropertyKey[]) => LABELS[String(path[0]) as SettingsField] ?? "A field";

const EMPTY: SettingsForm = { slug: "", name: "", returnUrl: "", title: "", accentColor: "", logoUrl: "" };

const formOfPortal = (p: PortalRow): SettingsForm => ({
  slug: p.slug,
  name: p.name,
  returnUrl: p.returnUrl ?? "",
  title: p.brandingTitle ?? "",
  accentColor: p.accentColor ?? "",
  logoUrl: p.logoUrl ?? "",
});

/** The settings fields a form sent (undefined for one it did not carry). */
function submitted(form: FormFields): Partial<SettingsForm> {
  const sent: Partial<SettingsForm> = {};
  for (const name of SETTINGS_FIELDS) if (form[name] !== undefined) sent[name] = field(form, name);
  return sent;
}

const orNull = (value: string) => (value === "" ? null : value);

/**
 * What the edit form changed, for updatePortal: each field whose value differs from the one the form was shown with
 * (`was_<field>`, else the portal's current one), as the API's settings page does, so that two people saving
 * different fields do not undo each other. A string: why the form cannot be read.
 */
function settingsChanges(form: FormFields, portal: PortalRow) {
  const current = formOfPortal(portal);
  const sent = { ...current, ...submitted(form) };
  const parsed = parseWith(settingsForm, sent, labelOf);
  if (!parsed.ok) return parsed.text;
  const changed = (name: SettingsField) => {
    const was = form[`was_${name}`] === undefined ? current[name] : field(form, `was_${name}`);
    return form[name] !== undefined && parsed.value[name] !== was;
  };
  const v = parsed.value;
  const branding = {
    ...(changed("title") && { title: orNull(v.title) }),
    ...(changed("accentColor") && { accentColor: orNull(v.accentColor) }),
    ...(changed("logoUrl") && { logoUrl: orNull(v.logoUrl) }),
  };
  return {
    ...(changed("slug") && { slug: v.slug }),
    ...(changed("name") && { name: v.name }),
    ...(changed("returnUrl") && { returnUrl: orNull(v.returnUrl) }),
    ...(Object.keys(branding).length > 0 && { branding }),
  };
}

/** The portal fields of a create or edit form (`prefix` keeps the two forms' ids apart). */
function SettingsFields({ prefix, form }: { prefix: string; form: SettingsForm }) {
  return (
    <>
      <Field
        id={`${prefix}-slug`}
        label="Slug"
        hint="3 to 64 lowercase letters, digits and single hyphens, unique in the workspace; sessions name the portal by it."
      >
        <input id={`${prefix}-slug`} name="slug" type="text" required maxLength={64} value={form.slug} />
      </Field>
      <Field id={`${prefix}-name`} label="Name" hint={`1 to ${MAX_PORTAL_NAME} characters, shown on the portal page.`}>
        <input id={`${prefix}-name`} name="name" type="text" required maxLength={MAX_PORTAL_NAME} value={form.name} />
      </Field>
      <Field id={`${prefix}-return`} label="Return URL" hint="http or https: where the page's return link goes; empty for none.">
        <input id={`${prefix}-return`} name="returnUrl" type="url" maxLength={MAX_PORTAL_URL} value={form.returnUrl} />
      </Field>
      <Field
        id={`${prefix}-title`}
        label="Branding title"
        hint={`The page's title (default: the name), at most ${MAX_PORTAL_TITLE} characters.`}
      >
        <input id={`${prefix}-title`} name="title" type="text" maxLength={MAX_PORTAL_TITLE} value={form.title} />
      </Field>
      <Field id={`${prefix}-accent`} label="Accent colour" hint="As #rrggbb; empty for the default.">
        <input id={`${prefix}-accent`} name="accentColor" type="text" maxLength={7} placeholder="#rrggbb" value={form.accentColor} />
      </Field>
      <Field id={`${prefix}-logo`} label="Logo URL" hint="An https URL of the logo shown on the page; empty for none.">
        <input id={`${prefix}-logo`} name="logoUrl" type="url" maxLength={MAX_PORTAL_URL} value={form.logoUrl} />
      </Field>
    </>
  );
}

/** The API's pages: its keys, its settings and its portal (this one). */
function ApiTabs({ apiId }: { apiId: string }) {
  return (
    <nav class="actions" aria-label="The API's pages">
      <span class="mono">{apiId}</span>
      <a href={to(apiPath(apiId))}>Keys</a>
      <a href={to(`${apiPath(apiId)}/settings`)}>Settings</a>
      <a href={to(portalPath(apiId))} aria-current="page">
        Portal
      </a>
    </nav>
  );
}

type PortalPageOpts = { notice?: Notice; status?: number; draft?: SettingsForm; edit?: FormFields; preview?: PreviewDraft };
type PreviewDraft = { externalId: string; scopes: readonly string[] };

/** The portal tab: the create form (no portal yet), or the portal's settings, state, preview session and deletion. */
async function portalPage(ctx: Ctx, opts: PortalPageOpts = {}): Promise<PageAnswer> {
  const apiId = apiIdOf(ctx);
  const back = { href: to("/apis"), label: "Back to the APIs" };
  const api = await attempt(() => getApiSettings(ctx.deps, ctx.caller, apiId));
  if (!api.ok) return refusedPage(ctx, "apis", api.status === 404 ? "API not found" : "Portal", api, back);
  const found = await attempt(() => getPortalOfApi(ctx.deps, ctx.caller, apiId));
  const title = `${api.value.name}: portal`;
  if (!found.ok) {
    return refusedPage(ctx, "apis", title, found, { href: to(apiPath(apiId)), label: "Back to the API's keys" });
  }
  const portal = found.value;
  const notice = opts.notice ?? doneNotice(ctx.query.done, DONE);
  return {
    status: opts.status ?? 200,
    html: (
      <Layout title={title} session={ctx.session} csrf={ctx.csrf} nav="apis" notice={notice}>
        <ApiTabs apiId={apiId} />
        {portal === undefined ? (
          <NoPortal ctx={ctx} apiId={apiId} draft={opts.draft ?? EMPTY} />
        ) : (
          <PortalView ctx={ctx} portal={portal} edit={opts.edit} preview={opts.preview} />
        )}
      </Layout>
    ),
  };
}

function NoPortal({ ctx, apiId, draft }: { ctx: Ctx; apiId: string; draft: SettingsForm }) {
  if (!can(ctx, portalPermission("create_portal"))) {
    return <p>This API has no portal. Creating one needs portal.*.create_portal.</p>;
  }
  return (
    <>
      <p>This API has no portal yet: a page where the owners of its keys see and reroll their keys and read their usage.</p>
      <form method="post" action={to(portalPath(apiId))} class="card">
        <h2>New portal</h2>
        <Csrf token={ctx.csrf} />
        <SettingsFields prefix="new-portal" form={draft} />
        <button type="submit">Create portal</button>
      </form>
    </>
  );
}

function PortalView({ ctx, portal, edit, preview }: { ctx: Ctx; portal: PortalRow; edit?: FormFields; preview?: PreviewDraft }) {
  const path = portalPath(portal.apiId);
  const shown = formOfPortal(portal);
  const form = { ...shown, ...(edit ? submitted(edit) : {}) };
  const pageUrl = `${portalBaseUrl(ctx.deps, ctx.req)}/`;
  const mayUpdate = can(ctx, portalPermission("update_portal", portal.id));
  return (
    <>
      <h2>Portal</h2>
      <dl class="fields">
        <dt>Portal id</dt>
        <dd class="mono">{portal.id}</dd>
        <dt>Slug</dt>
        <dd class="mono">{portal.slug}</dd>
        <dt>Name</dt>
        <dd>{portal.name}</dd>
        <dt>State</dt>
        <dd>
          <Badge on={portal.enabled} yes="enabled" no="disabled" />
        </dd>
        <dt>Page URL</dt>
        <dd class="mono">{pageUrl}</dd>
        <dt>Return URL</dt>
        <dd class="mono">{portal.returnUrl ?? "none"}</dd>
        <dt>Branding title</dt>
        <dd>{portal.brandingTitle ?? "none (the name)"}</dd>
        <dt>Accent colour</dt>
        <dd class="mono">{portal.accentColor ?? "none (the default)"}</dd>
        <dt>Logo URL</dt>
        <dd class="mono">{portal.logoUrl ?? "none"}</dd>
        <dt>Created</dt>
        <dd>{when(portal.createdAtM)}</dd>
        <dt>Updated</dt>
        <dd>{when(portal.updatedAtM)}</dd>
      </dl>
      <p class="hint">
        The page is opened only through a session's link: your backend mints one per customer with v2's portal.createSession.
      </p>
      {mayUpdate && (
        <form method="post" action={to(`${path}/enabled`)} class="card">
          <h2>{portal.enabled ? "Disable" : "Enable"}</h2>
          <Csrf token={ctx.csrf} />
          <input type="hidden" name="portalId" value={portal.id} />
          <input type="hidden" name="enabled" value={portal.enabled ? "false" : "true"} />
          <p>
            {portal.enabled
              ? "A disabled portal mints no session, and its sessions stop working until it is enabled again."
              : "The portal is disabled: enabling it lets its sessions work again and new ones be minted."}
          </p>
          <button type="submit" class={portal.enabled ? "danger" : undefined}>
            {portal.enabled ? "Disable portal" : "Enable portal"}
          </button>
        </form>
      )}
      <PreviewForm ctx={ctx} portal={portal} draft={preview} />
      {mayUpdate && (
        <form method="post" action={to(`${path}/settings`)} class="card">
          <h2>Change the settings</h2>
          <Csrf token={ctx.csrf} />
          <input type="hidden" name="portalId" value={portal.id} />
          {SETTINGS_FIELDS.map((name) => (
            <input key={name} type="hidden" name={`was_${name}`} value={shown[name]} />
          ))}
          <SettingsFields prefix="portal" form={form} />
          <button type="submit">Save settings</button>
        </form>
      )}
      {can(ctx, portalPermission("delete_portal", portal.id)) && (
        <DangerCard
          action={to(`${path}/delete`)}
          csrf={ctx.csrf}
          heading="Delete"
          button="Delete portal"
          confirm="Delete this portal and end all its sessions?"
        >
          <input type="hidden" name="portalId" value={portal.id} />
          <p>Deletes the portal and every session of it: links already sent stop working. The API and its keys stay.</p>
        </DangerCard>
      )}
    </>
  );
}

/** The preview session's form, or why there is none (not a root key, not allowed, the portal disabled). */
function PreviewForm({ ctx, portal, draft }: { ctx: Ctx; portal: PortalRow; draft: PreviewDraft | undefined }) {
  const heading = <h2>Open a preview session</h2>;
  if (ctx.caller.actor.kind !== "root_key") {
    return (
      <div class="card">
        {heading}
        <p>Only a root key mints portal sessions: sign in with a root key holding create_portal_session to open one.</p>
      </div>
    );
  }
  if (!can(ctx, portalPermission("create_portal_session", portal.id))) {
    return (
      <div class="card">
        {heading}
        <p>Opening a preview session needs portal.*.create_portal_session or portal.{portal.id}.create_portal_session.</p>
      </div>
    );
  }
  if (!portal.enabled) {
    return (
      <div class="card">
        {heading}
        <p>The portal is disabled: enable it to open a preview session.</p>
      </div>
    );
  }
  const checked = new Set(draft?.scopes ?? DEFAULT_PREVIEW_SCOPES);
  return (
    <form method="post" action={to(`${portalPath(portal.apiId)}/sessions`)} class="card">
      {heading}
      <Csrf token={ctx.csrf} />
      <input type="hidden" name="portalId" value={portal.id} />
      <p>
        A session marked as a preview (its page shows a banner), as the end user of this externalId would see the portal; each scope must be
        within this root key's own permissions on the API.
      </p>
      <Field id="preview-external-id" label="End user (externalId)" hint="The externalId of the identity whose keys the page shows.">
        <input id="preview-external-id" name="externalId" type="text" required maxLength={256} value={draft?.externalId ?? ""} />
      </Field>
      <fieldset>
        <legend>Scopes</legend>
        {PORTAL_SCOPES.map((scope) => (
          <label class="check" for={`scope-${scope.replace(":", "-")}`} key={scope}>
            <input id={`scope-${scope.replace(":", "-")}`} name="scopes" type="checkbox" value={scope} checked={checked.has(scope)} />
            <span class="mono">{scope}</span>
          </label>
        ))}
      </fieldset>
      <button type="submit">Open a preview session</button>
    </form>
  );
}

const previewForm = z.object({
  externalId: storable(z.string().min(1).max(256)),
  scopes: z.array(z.enum(PORTAL_SCOPES)).min(1),
});
const previewLabels: Record<string, string> = { externalId: "The externalId", scopes: "The scopes" };

/**
 * The API's portal for a POST, checked to be the one the form was shown for (`portalId`): a portal deleted and
 * created again meanwhile is not changed by a form of the old one. A page answer when it cannot be had.
 */
async function portalOfForm(ctx: Ctx): Promise<{ portal: PortalRow } | { answer: PageAnswer }> {
  const apiId = apiIdOf(ctx);
  const api = await attempt(() => getApiSettings(ctx.deps, ctx.caller, apiId));
  if (!api.ok) return { answer: refusedPage(ctx, "apis", "Portal", api, { href: to("/apis"), label: "Back to the APIs" }) };
  const found = await attempt(() => getPortalOfApi(ctx.deps, ctx.caller, apiId));
  if (!found.ok) return { answer: await portalPage(ctx) };
  if (found.value === undefined) {
    return { answer: await portalPage(ctx, { notice: error("This API has no portal (it was deleted meanwhile)."), status: 404 }) };
  }
  if (field(ctx.form, "portalId") !== found.value.id) {
    const text = "The portal was changed since this page was shown (deleted and created again): nothing was done. Check it and try again.";
    return { answer: await portalPage(ctx, { notice: error(text), status: 409 }) };
  }
  return { portal: found.value };
}

export const portalsPages = [
  definePage({ method: "GET", path: "/apis/:apiId/portal", audience: "rootKey", handler: (ctx) => portalPage(ctx) }),
  definePage({
    method: "POST",
    path: "/apis/:apiId/portal",
    audience: "rootKey",
    handler: async (ctx) => {
      const apiId = apiIdOf(ctx);
      const draft = { ...EMPTY, ...submitted(ctx.form) };
      const parsed = parseWith(settingsForm, draft, labelOf);
      if (!parsed.ok) return portalPage(ctx, { notice: error(parsed.text), status: 400, draft });
      const v = parsed.value;
      const created = await attempt(() =>
        createPortal(ctx.deps, ctx.caller, {
          apiId,
          slug: v.slug,
          name: v.name,
          returnUrl: orNull(v.returnUrl),
          branding: { title: orNull(v.title), accentColor: orNull(v.accentColor), logoUrl: orNull(v.logoUrl) },
        }),
      );
      if (!created.ok) return portalPage(ctx, { notice: error(created.text), status: created.status, draft });
      return { redirect: `${portalPath(apiId)}?done=created` };
    },
  }),
  definePage({
    method: "POST",
    path: "/apis/:apiId/portal/settings",
    audience: "rootKey",
    handler: async (ctx) => {
      const of = await portalOfForm(ctx);
      if ("answer" in of) return of.answer;
      const { portal } = of;
      const changes = settingsChanges(ctx.form, portal);
      if (typeof changes === "string") return portalPage(ctx, { notice: error(changes), status: 400, edit: ctx.form });
      if (Object.keys(changes).length === 0) return { redirect: `${portalPath(portal.apiId)}?done=unchanged` };
      // The core checks the permission and the rules (the slug, the URLs, the colour); its refusal is shown beside the form.
      const saved = await attempt(() => updatePortal(ctx.deps, ctx.caller, { portalId: portal.id, ...changes }));
      if (!saved.ok) return portalPage(ctx, { notice: error(saved.text), status: saved.status, edit: ctx.form });
      return { redirect: `${portalPath(portal.apiId)}?done=saved` };
    },
  }),
  definePage({
    method: "POST",
    path: "/apis/:apiId/portal/enabled",
    audience: "rootKey",
    handler: async (ctx) => {
      const of = await portalOfForm(ctx);
      if ("answer" in of) return of.answer;
      const sent = field(ctx.form, "enabled");
      if (sent !== "true" && sent !== "false") {
        return portalPage(ctx, { notice: error('The form must say whether to enable the portal ("true" or "false").'), status: 400 });
      }
      const enabled = sent === "true";
      const saved = await attempt(() => updatePortal(ctx.deps, ctx.caller, { portalId: of.portal.id, enabled }));
      if (!saved.ok) return portalPage(ctx, { notice: error(saved.text), status: saved.status });
      return { redirect: `${portalPath(of.portal.apiId)}?done=${enabled ? "enabled" : "disabled"}` };
    },
  }),
  definePage({
    method: "POST",
    path: "/apis/:apiId/portal/sessions",
    audience: "rootKey",
    handler: async (ctx) => {
      const of = await portalOfForm(ctx);
      if ("answer" in of) return of.answer;
      const { portal } = of;
      const draft: PreviewDraft = { externalId: field(ctx.form, "externalId"), scopes: fields(ctx.form, "scopes") };
      const parsed = parseWith(previewForm, draft, (path) => previewLabels[String(path[0])] ?? "A field");
      if (!parsed.ok) return portalPage(ctx, { notice: error(parsed.text), status: 400, preview: draft });
      const minted = await attempt(() => {
        // createPortalSession answers a missing create_portal_session as a missing portal (v2's masking); the console
        // says which permission is missing instead, as it does for every other refusal. The core checks it again.
        requirePermission(ctx.caller, portalPermission("create_portal_session", portal.id));
        return createPortalSession(
          ctx.deps,
          ctx.caller,
          { portal: portal.id, externalId: parsed.value.externalId, scopes: parsed.value.scopes, preview: true },
          portalBaseUrl(ctx.deps, ctx.req),
        );
      });
      if (!minted.ok) return portalPage(ctx, { notice: error(minted.text), status: minted.status, preview: draft });
      // The URL carries a single-use code: it is shown on this answer only, never in a redirect or a console URL.
      return {
        html: (
          <Layout
            title="Preview session"
            session={ctx.session}
            csrf={ctx.csrf}
            nav="apis"
            notice={{ kind: "ok", text: "Preview session opened." }}
          >
            <div class="card">
              <p>
                <strong>The preview session's link:</strong> it holds a single-use code valid {EXCHANGE_CODE_TTL_MS / 60_000} minutes and is
                shown only this once. Open it to see the portal as {parsed.value.externalId} would.
              </p>
              <div class="secret">
                <a id="preview-url" class="mono" href={minted.value.url} target="_blank" rel="noopener noreferrer">
                  {minted.value.url}
                </a>
                <button type="button" class="secondary" data-copy="#preview-url">
                  Copy
                </button>
              </div>
            </div>
            <p>
              Session id <code>{minted.value.id}</code> (not a credential); scopes {parsed.value.scopes.join(", ")}.
            </p>
            <PageLink href={to(portalPath(portal.apiId))} label="Back to the portal" />
          </Layout>
        ),
      };
    },
  }),
  definePage({
    method: "POST",
    path: "/apis/:apiId/portal/delete",
    audience: "rootKey",
    handler: async (ctx) => {
      const of = await portalOfForm(ctx);
      if ("answer" in of) return of.answer;
      const deleted = await attempt(() => deletePortal(ctx.deps, ctx.caller, of.portal.id));
      if (!deleted.ok) return portalPage(ctx, { notice: error(deleted.text), status: deleted.status });
      return { redirect: `${portalPath(of.portal.apiId)}?done=deleted` };
    },
  }),
];
