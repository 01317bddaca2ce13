import { z } from "zod";
import {
  deleteOverride,
  getNamespace,
  listNamespaces,
  listOverrides,
  type OverrideInput,
  setOverride,
  setOverrideInNamespaceNamed,
} from "../../core/ratelimits/ratelimits.core.js";
import { identifierInput, limitInput, overrideDurationInput } from "../../wire/v2/ratelimit/ratelimit.schemas.js";
import { Csrf, Layout, to } from "../layout.js";
import { definePage, type FormFields, field, type PageAnswer, type PageContext } from "../page.js";
import {
  attempt,
  Badge,
  can,
  ColumnHeads,
  cursorOf,
  doneNotice,
  errorNotice as error,
  Field,
  NextPage,
  type Notice,
  PageLink,
  paramsOf,
  type Parsed,
  parseWith,
  refusedPage,
  RowAction,
  wholeNumber,
} from "../ui.js";

type Ctx = PageContext<"rootKey">;

const PAGE = 50;
const DONE = { set: "Override set.", deleted: "Override deleted." };

/** A namespace's name as v1's limit takes one (v2 names it by id or name, at most 512 characters). */
const namespaceName = z.string().min(1).max(512);

const namespaceIdOf = (ctx: Ctx) => paramsOf(ctx, "namespaceId").namespaceId;
const namespacePath = (id: string) => `/ratelimits/${encodeURIComponent(id)}`;
const mayOverride = (ctx: Ctx, action: string, namespaceId?: string) =>
  can(ctx, { or: ["*", ...(namespaceId !== undefined ? [`ratelimit.${namespaceId}.${action}`] : []), `ratelimit.*.${action}`] });

type OverrideDraft = { namespace: string; identifier: string; limit: string; duration: string; async: boolean };
const blankDraft: OverrideDraft = { namespace: "", identifier: "", limit: "", duration: "", async: false };

function draftOfForm(form: FormFields): OverrideDraft {
  return {
    namespace: field(form, "namespace"),
    identifier: field(form, "identifier"),
    limit: field(form, "limit"),
    duration: field(form, "duration"),
    async: field(form, "async") !== "",
  };
}

/** An override as typed, read by v2's setOverride schema (limit 0 rejects every call; a window of at least 1 s). */
function parseOverride(draft: OverrideDraft): Parsed<OverrideInput> {
  const identifier = parseWith(identifierInput, draft.identifier, "Identifier");
  if (!identifier.ok) return identifier;
  const limit = parseWith(limitInput(0), wholeNumber(draft.limit), "Limit");
  if (!limit.ok) return limit;
  const duration = parseWith(overrideDurationInput, wholeNumber(draft.duration), "Duration (ms)");
  if (!duration.ok) return duration;
  return { ok: true, value: { identifier: identifier.value, limit: limit.value, duration: duration.value, async: draft.async } };
}

function OverrideFields({ draft }: { draft: OverrideDraft }) {
  return (
    <>
      <Field id="identifier" label="Identifier" hint="An identifier, or a pattern where * stands for any run of characters.">
        <input id="identifier" name="identifier" type="text" value={draft.identifier} required maxLength={512} />
      </Field>
      <div class="row">
        <Field id="limit" label="Limit" hint="Calls per window; 0 rejects every call.">
          <input id="limit" name="limit" type="number" value={draft.limit} required min={0} />
        </Field>
        <Field id="duration" label="Duration (ms)" hint="The window, at least 1000.">
          <input id="duration" name="duration" type="number" value={draft.duration} required min={1000} />
        </Field>
      </div>
      <label class="check" for="async">
        <input id="async" name="async" type="checkbox" value="on" checked={draft.async} />
        Async (answer from the local count, synchronised later)
      </label>
    </>
  );
}

async function namespacesPage(ctx: Ctx, opts: { notice?: Notice; status?: number; draft?: OverrideDraft } = {}): Promise<PageAnswer> {
  const listed = await attempt(() => listNamespaces(ctx.deps, ctx.caller, { limit: PAGE, cursor: cursorOf(ctx.query.cursor) }));
  const notice = opts.notice ?? (listed.ok ? doneNotice(ctx.query.done, DONE) : error(listed.text));
  const draft = opts.draft ?? blankDraft;
  return {
    status: opts.status ?? (listed.ok ? 200 : listed.status),
    html: (
      <Layout title="Rate limits" session={ctx.session} csrf={ctx.csrf} nav="ratelimits" notice={notice}>
        <h2>Namespaces</h2>
        <p class="hint">A namespace is created by the first limit call that names it, or by adding an override to it below.</p>
        {listed.ok &&
          (listed.value.namespaces.length === 0 ? (
            <p class="muted">No namespaces yet.</p>
          ) : (
            <table>
              <ColumnHeads names={["Name", "Namespace id"]} />
              <tbody>
                {listed.value.namespaces.map((n) => (
                  <tr key={n.id}>
                    <td>
                      <a href={to(namespacePath(n.id))}>{n.name}</a>
                    </td>
                    <td class="mono">{n.id}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          ))}
        {listed.ok && (
          <NextPage
            href={listed.value.cursor === undefined ? undefined : to(`/ratelimits?cursor=${encodeURIComponent(listed.value.cursor)}`)}
          />
        )}
        {mayOverride(ctx, "set_override") && (
          <form method="post" action={to("/ratelimits")} class="card narrow">
            <h2>Add an override</h2>
            <Csrf token={ctx.csrf} />
            <Field
              id="namespace"
              label="Namespace name"
              hint="A namespace the workspace lacks is created (needs ratelimit.*.create_namespace)."
            >
              <input id="namespace" name="namespace" type="text" value={draft.namespace} required maxLength={512} />
            </Field>
            <OverrideFields draft={draft} />
            <button type="submit">Add override</button>
          </form>
        )}
      </Layout>
    ),
  };
}

async function namespacePage(ctx: Ctx, opts: { notice?: Notice; status?: number; draft?: OverrideDraft } = {}): Promise<PageAnswer> {
  const found = await attempt(() => getNamespace(ctx.deps, ctx.caller, namespaceIdOf(ctx)));
  if (!found.ok) return refusedPage(ctx, "ratelimits", "Namespace", found, { href: to("/ratelimits"), label: "All namespaces" });
  const namespace = found.value;
  const listed = await attempt(() =>
    listOverrides(ctx.deps, ctx.caller, { namespaceId: namespace.id }, { limit: PAGE + 1, fromId: cursorOf(ctx.query.cursor) }),
  );
  const rows = listed.ok ? listed.value.overrides.slice(0, PAGE) : [];
  const next = listed.ok ? listed.value.overrides[PAGE]?.id : undefined;
  const mayDelete = mayOverride(ctx, "delete_override", namespace.id);
  const path = namespacePath(namespace.id);
  return {
    status: opts.status ?? 200,
    html: (
      <Layout
        title={`Namespace ${namespace.name}`}
        session={ctx.session}
        csrf={ctx.csrf}
        nav="ratelimits"
        notice={opts.notice ?? doneNotice(ctx.query.done, DONE)}
      >
        <PageLink href={to("/ratelimits")} label="All namespaces" />
        <dl class="fields">
          <dt>Namespace id</dt>
          <dd class="mono">{namespace.id}</dd>
        </dl>
        <h2>Overrides</h2>
        {!listed.ok ? (
          <p class="notice error">{listed.text}</p>
        ) : rows.length === 0 ? (
          <p class="muted">No overrides: every identifier gets the limit its calls ask for.</p>
        ) : (
          <table>
            <ColumnHeads names={["Identifier", "Limit", "Duration (ms)", "Async", mayDelete && "Actions"]} />
            <tbody>
              {rows.map((o) => (
                <tr key={o.id}>
                  <td class="mono">{o.identifier}</td>
                  <td>{o.limit}</td>
                  <td>{o.duration}</td>
                  <td>
                    <Badge on={o.async} yes="async" no="exact" />
                  </td>
                  {mayDelete && (
                    <td>
                      <RowAction
                        action={to(`${path}/overrides/delete`)}
                        csrf={ctx.csrf}
                        hidden={{ identifier: o.identifier }}
                        text="Delete"
                        label={`Delete the override of ${o.identifier}`}
                      />
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <NextPage href={next === undefined ? undefined : to(`${path}?cursor=${encodeURIComponent(next)}`)} />
        {mayOverride(ctx, "set_override", namespace.id) && (
          <form method="post" action={to(`${path}/overrides`)} class="card narrow">
            <h2>Set an override</h2>
            <Csrf token={ctx.csrf} />
            <p class="hint">Replaces the override of the same identifier, if any.</p>
            <OverrideFields draft={opts.draft ?? blankDraft} />
            <button type="submit">Set override</button>
          </form>
        )}
      </Layout>
    ),
  };
}

export const ratelimitsPages = [
  definePage({ method: "GET", path: "/ratelimits", audience: "rootKey", handler: (ctx) => namespacesPage(ctx) }),
  definePage({
    method: "POST",
    path: "/ratelimits",
    audience: "rootKey",
    handler: async (ctx) => {
      const draft = draftOfForm(ctx.form);
      const name = parseWith(namespaceName, draft.namespace, "Namespace name");
      if (!name.ok) return namespacesPage(ctx, { notice: error(name.text), status: 400, draft });
      const override = parseOverride(draft);
      if (!override.ok) return namespacesPage(ctx, { notice: error(override.text), status: 400, draft });
      const set = await attempt(() => setOverrideInNamespaceNamed(ctx.deps, ctx.caller, name.value, override.value));
      if (!set.ok) return namespacesPage(ctx, { notice: error(set.text), status: set.status, draft });
      return { redirect: `${namespacePath(set.value.namespaceId)}?done=set` };
    },
  }),
  definePage({ method: "GET", path: "/ratelimits/:namespaceId", audience: "rootKey", handler: (ctx) => namespacePage(ctx) }),
  definePage({
    method: "POST",
    path: "/ratelimits/:namespaceId/overrides",
    audience: "rootKey",
    handler: async (ctx) => {
      const draft = draftOfForm(ctx.form);
      const override = parseOverride(draft);
      if (!override.ok) return namespacePage(ctx, { notice: error(override.text), status: 400, draft });
      const namespaceId = namespaceIdOf(ctx);
      const set = await attempt(() => setOverride(ctx.deps, ctx.caller, { namespaceId }, override.value));
      if (!set.ok) {
        if (set.status === 404)
          return refusedPage(ctx, "ratelimits", "Namespace", set, { href: to("/ratelimits"), label: "All namespaces" });
        return namespacePage(ctx, { notice: error(set.text), status: set.status, draft });
      }
      return { redirect: `${namespacePath(namespaceId)}?done=set` };
    },
  }),
  definePage({
    method: "POST",
    path: "/ratelimits/:namespaceId/overrides/delete",
    audience: "rootKey",
    handler: async (ctx) => {
      const identifier = parseWith(identifierInput, field(ctx.form, "identifier"), "Identifier");
      if (!identifier.ok) return namespacePage(ctx, { notice: error(identifier.text), status: 400 });
      const namespaceId = namespaceIdOf(ctx);
      const deleted = await attempt(() => deleteOverride(ctx.deps, ctx.caller, { namespaceId }, identifier.value));
      if (!deleted.ok) return namespacePage(ctx, { notice: error(deleted.text), status: deleted.status });
      return { redirect: `${namespacePath(namespaceId)}?done=deleted` };
    },
  }),
];
