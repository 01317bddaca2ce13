import {
  type AnalyticsRow,
  getVerifications,
  OUTCOME_CODES,
  OUTCOME_COUNTERS,
  planVerifications,
} from "../../core/analytics/analytics.core.js";
import {
  type ApiSettings,
  type ApiSummary,
  createApi,
  deleteApi,
  getApiSettings,
  KEY_LIST_FILTERS,
  type KeyListFilter,
  type KeyListRow,
  listApis,
  searchApiKeys,
  updateApi,
} from "../../core/apis/apis.core.js";
import {
  API_DEFAULT_PREFIX_MAX,
  API_DEFAULT_PREFIX_MIN,
  API_NAME_MAX,
  API_NAME_MIN,
  KEY_BYTES_MAX,
  KEY_BYTES_MIN,
} from "../../core/apis/apis.bounds.js";
import { MAX_IP_WHITELIST_LENGTH } from "../../core/apis/apis.ipWhitelist.js";
import { apiPermission, keyPermission } from "../../core/auth/permissions.query.js";
import { Csrf, Layout, to } from "../layout.js";
import { definePage, type FormFields, field, fields, type PageContext } from "../page.js";
import {
  attempt,
  Badge,
  Chart,
  can,
  doneNotice as doneNoticeOf,
  Field,
  NextPage,
  type Notice,
  refusedPage as refused,
  when,
} from "../ui.js";

/** Rows of a page of APIs and of an API's keys. */
export const APIS_PER_PAGE = 50;
export const KEYS_PER_PAGE = 50;
/** The longest search of an API's keys (a name, a start, an owner or an externalId). */
export const MAX_KEY_SEARCH = 256;
/** The bounds of an API's name (the core's, apis.bounds.ts). */
const NAME_MIN = API_NAME_MIN;
const NAME_MAX = API_NAME_MAX;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

type Ctx = PageContext<"rootKey">;

const DONE = {
  created: "API created.",
  saved: "Settings saved.",
  unchanged: "Nothing to save: the settings were as shown.",
  deleted: "API deleted.",
};

/** The status notice of a redirect after a POST (`?done=…`). */
const doneNotice = (ctx: Ctx): Notice => doneNoticeOf(ctx.query.done, DONE);

/** A query string of the non-empty values (for links that keep a list's other parameters). */
export function queryOf(values: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) if (value !== undefined && value !== "") params.set(name, value);
  const text = params.toString();
  return text === "" ? "" : `?${text}`;
}

/**
 * A chart's series by outcome from analytics rows (one per time slice): every outcome counted in the range, or
 * VALID alone when nothing was.
 */
export function outcomeChart(rows: AnalyticsRow[]): { x: number[]; series: { label: string; values: number[] }[] } {
  const counted = OUTCOME_COUNTERS.filter((name) => rows.some((r) => r[name] > 0));
  const shown = counted.length > 0 ? counted : (["valid"] as const);
  return {
    x: rows.map((r) => r.time ?? 0),
    series: shown.map((name) => ({ label: OUTCOME_CODES[name], values: rows.map((r) => r[name]) })),
  };
}

/** A page that says what could not be shown, with the refusal's status (a missing or foreign API: 404). */
const refusedPage = (ctx: Ctx, title: string, why: { status: number; text: string }) =>
  refused(ctx, "apis", title, why, { href: to("/apis"), label: "Back to the APIs" });

const badRequest = (ctx: Ctx, title: string, text: string) => refusedPage(ctx, title, { status: 400, text });

/** The table of APIs with their key counts (the APIs page and the overview). */
export function ApisTable({ apis }: { apis: ApiSummary[] }) {
  if (apis.length === 0) return <p>No APIs yet.</p>;
  return (
    <table>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Id</th>
          <th scope="col">Keys</th>
          <th scope="col">Created</th>
        </tr>
      </thead>
      <tbody>
        {apis.map((api) => (
          <tr key={api.id}>
            <td>
              <a href={to(`/apis/${encodeURIComponent(api.id)}`)}>{api.name}</a>
            </td>
            <td class="mono">{api.id}</td>
            <td>{api.keys}</td>
            <td>{when(api.createdAtM)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

const mayCreateApi = (ctx: Ctx) => can(ctx, { or: ["*", "api.*.create_api"] });

async function apisListPage(ctx: Ctx, notice: Notice, status: number, name: string) {
  const cursor = ctx.query.cursor;
  const page = await attempt(() => listApis(ctx.deps, ctx.caller, { limit: APIS_PER_PAGE, cursor }));
  if (!page.ok) return refusedPage(ctx, "APIs", page);
  return {
    html: (
      <Layout title="APIs" session={ctx.session} csrf={ctx.csrf} nav="apis" notice={notice}>
        {mayCreateApi(ctx) && (
          <form method="post" action={to("/apis")} class="card narrow">
            <h2>New API</h2>
            <Csrf token={ctx.csrf} />
            <Field id="api-name" label="Name" hint={`${NAME_MIN} to ${NAME_MAX} characters, for people; names need not be unique.`}>
              <input id="api-name" name="name" type="text" required minLength={NAME_MIN} maxLength={NAME_MAX} value={name} />
            </Field>
            <button type="submit">Create API</button>
          </form>
        )}
        <h2>Your APIs</h2>
        <ApisTable apis={page.value.apis} />
        <NextPage href={page.value.cursor === undefined ? undefined : to(`/apis${queryOf({ cursor: page.value.cursor })}`)} />
      </Layout>
    ),
    status,
  };
}

/** The API page's filter links, each keeping the search. */
function FilterLinks({ apiId, q, filter }: { apiId: string; q: string; filter: KeyListFilter }) {
  return (
    <nav class="actions" aria-label="Filter keys">
      {KEY_LIST_FILTERS.map((f) => (
        <a
          key={f}
          href={to(`/apis/${encodeURIComponent(apiId)}${queryOf({ q, filter: f === "all" ? undefined : f })}`)}
          aria-current={f === filter ? "true" : undefined}
        >
          {f}
        </a>
      ))}
    </nav>
  );
}

const keyLink = (keyId: string) => to(`/keys/${encodeURIComponent(keyId)}`);

function KeysTable({ keys, now }: { keys: KeyListRow[]; now: number }) {
  if (keys.length === 0) return <p>No keys match.</p>;
  return (
    <table>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Start</th>
          <th scope="col">Owner</th>
          <th scope="col">State</th>
          <th scope="col">Expires</th>
          <th scope="col">Created</th>
          <th scope="col">Last used</th>
        </tr>
      </thead>
      <tbody>
        {keys.map((k) => {
          const expired = k.expires !== null && k.expires.getTime() <= now;
          return (
            <tr key={k.id}>
              <td>
                <a href={keyLink(k.id)}>{k.name ?? k.id}</a>
              </td>
              <td class="mono">{k.start}</td>
              <td>{k.externalId ?? k.ownerId ?? ""}</td>
              <td>
                {k.pending ? (
                  <span class="badge">pending</span>
                ) : (
                  <Badge on={k.enabled && !expired} yes="enabled" no={expired ? "expired" : "disabled"} />
                )}
              </td>
              <td>{k.expires === null ? "never" : when(k.expires.getTime())}</td>
              <td>{when(k.createdAtM)}</td>
              <td>{when(k.lastUsedAtM)}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** The last `days` whole UTC days (today's included): start and end of the range and its daily slices. */
function lastDays(now: number, days: number) {
  const end = now - (now % DAY_MS) + DAY_MS;
  return { start: end - days * DAY_MS, end };
}

async function apiPage(ctx: Ctx, apiId: string) {
  const api = await attempt(() => getApiSettings(ctx.deps, ctx.caller, apiId));
  if (!api.ok) return refusedPage(ctx, api.status === 404 ? "API not found" : "API", api);
  const q = (ctx.query.q ?? "").trim();
  if (q.length > MAX_KEY_SEARCH) return badRequest(ctx, api.value.name, `The search is longer than ${MAX_KEY_SEARCH} characters.`);
  const filter = (ctx.query.filter ?? "all") as KeyListFilter;
  if (!KEY_LIST_FILTERS.includes(filter)) {
    return badRequest(ctx, api.value.name, `The filter must be one of ${KEY_LIST_FILTERS.join(", ")}.`);
  }
  const now = ctx.deps.clock.now();
  const { start, end } = lastDays(now, 7);
  const [keys, daily, top] = await Promise.all([
    attempt(() =>
      searchApiKeys(ctx.deps, ctx.caller, {
        apiId,
        search: q === "" ? undefined : q,
        filter,
        cursor: ctx.query.cursor,
        limit: KEYS_PER_PAGE,
      }),
    ),
    attempt(() => {
      const query = { apiId, start, end, groupBy: ["day" as const], order: "asc" as const };
      return getVerifications(ctx.deps, ctx.caller, query, planVerifications(query, now));
    }),
    attempt(() => {
      const query = { apiId, start, end, groupBy: ["key" as const], orderBy: "total" as const, order: "desc" as const, limit: 10 };
      return getVerifications(ctx.deps, ctx.caller, query, planVerifications(query, now));
    }),
  ]);
  const topIds = top.ok ? top.value.map((r) => r.keyId!).filter((id) => id !== undefined) : [];
  const names =
    topIds.length === 0
      ? undefined
      : await attempt(() => searchApiKeys(ctx.deps, ctx.caller, { apiId, filter: "all", ids: topIds, limit: topIds.length }));
  const nameOf = new Map(names?.ok ? names.value.keys.map((k) => [k.id, k.name ?? k.id]) : []);
  const base = `/apis/${encodeURIComponent(apiId)}`;
  const mayCreateKey = can(ctx, keyPermission(ctx.caller.access, ctx.caller.workspaceId, apiId, null, "create_key"));
  const notice = doneNotice(ctx) ?? (keys.ok ? undefined : { kind: "error" as const, text: keys.text });
  return {
    html: (
      <Layout title={api.value.name} session={ctx.session} csrf={ctx.csrf} nav="apis" notice={notice}>
        <p class="actions">
          <span class="mono">{apiId}</span>
          {mayCreateKey && <a href={to(`${base}/keys/new`)}>New key</a>}
          <a href={to(`${base}/settings`)}>Settings</a>
          <a href={to(`${base}/portal`)}>Portal</a>
        </p>
        <h2>Keys</h2>
        <form method="get" action={to(base)} class="row">
          <Field id="key-search" label="Search" hint="A prefix of the name or of the key's start, or an owner's externalId.">
            <input id="key-search" name="q" type="search" maxLength={MAX_KEY_SEARCH} value={q} />
          </Field>
          <Field id="key-filter" label="Show">
            <select id="key-filter" name="filter">
              {KEY_LIST_FILTERS.map((f) => (
                <option key={f} value={f} selected={f === filter}>
                  {f}
                </option>
              ))}
            </select>
          </Field>
          <div>
            <button type="submit">Search</button>
          </div>
        </form>
        <FilterLinks apiId={apiId} q={q} filter={filter} />
        {keys.ok && (
          <>
            <KeysTable keys={keys.value.keys} now={now} />
            <NextPage
              href={
                keys.value.cursor === undefined
                  ? undefined
                  : to(`${base}${queryOf({ q, filter: filter === "all" ? undefined : filter, cursor: keys.value.cursor })}`)
              }
            />
          </>
        )}
        <h2>Verifications, last 7 days</h2>
        {daily.ok ? <Chart label="Verifications per day by outcome" {...outcomeChart(daily.value)} /> : <p>{daily.text}</p>}
        <h2>Top keys, last 7 days</h2>
        {!top.ok ? (
          <p>{top.text}</p>
        ) : top.value.length === 0 ? (
          <p>No verifications in the last 7 days.</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">Verifications</th>
                <th scope="col">Valid</th>
              </tr>
            </thead>
            <tbody>
              {top.value.map((r) => (
                <tr key={r.keyId}>
                  <td>
                    <a href={keyLink(r.keyId!)}>{nameOf.get(r.keyId!) ?? r.keyId}</a>
                  </td>
                  <td>{r.total}</td>
                  <td>{r.valid}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Layout>
    ),
    status: keys.ok ? 200 : keys.status,
  };
}

/** The settings form's fields, as the form shows and sends them (text; the checkbox "on" or absent). */
const SETTINGS_FIELDS = ["name", "defaultPrefix", "defaultBytes", "deleteProtection", "ipWhitelist"] as const;
type SettingsField = (typeof SETTINGS_FIELDS)[number];
type SettingsForm = Record<SettingsField, string>;

/** An API's settings as the form shows them: absent ones as empty fields. */
const settingsFormOf = (api: ApiSettings): SettingsForm => ({
  name: api.name,
  defaultPrefix: api.defaultPrefix ?? "",
  defaultBytes: api.defaultBytes === null ? "" : String(api.defaultBytes),
  deleteProtection: api.deleteProtection ? "on" : "",
  ipWhitelist: api.ipWhitelist ?? "",
});

/**
 * A submitted settings form, each field as the form shows it; undefined for a field the form did not carry. An
 * unchecked box is not sent at all: `deleteProtection_shown` tells that the box was on the form, so its absence
 * means off.
 */
function submittedSettings(form: FormFields): Partial<SettingsForm> {
  const sent: Partial<SettingsForm> = {};
  for (const name of ["name", "defaultPrefix", "defaultBytes", "ipWhitelist"] as const) {
    if (form[name] !== undefined) sent[name] = field(form, name);
  }
  if (field(form, "deleteProtection_shown") === "1") sent.deleteProtection = fields(form, "deleteProtection").length > 0 ? "on" : "";
  return sent;
}

/**
 * What the form changed, for updateApi: each field whose value differs from the one the form was shown with
 * (`was_<field>`, else the API's current one), so that two people saving different fields do not undo each other.
 * Empty fields remove what may be absent (prefix, byte length, allow-list). A string: why the form cannot be read.
 */
function settingsChanges(form: FormFields, api: ApiSettings) {
  const sent = submittedSettings(form);
  const current = settingsFormOf(api);
  const changes: {
    name?: string;
    defaultPrefix?: string | null;
    defaultBytes?: number | null;
    deleteProtection?: boolean;
    ipWhitelist?: string | null;
  } = {};
  for (const name of SETTINGS_FIELDS) {
    const value = sent[name];
    const was = form[`was_${name}`] === undefined ? current[name] : field(form, `was_${name}`);
    if (value === undefined || value === was) continue;
    if (name === "name") changes.name = value;
    else if (name === "defaultPrefix") changes.defaultPrefix = value === "" ? null : value;
    else if (name === "deleteProtection") changes.deleteProtection = value === "on";
    else if (name === "ipWhitelist") changes.ipWhitelist = value === "" ? null : value;
    else if (value === "") changes.defaultBytes = null;
    else if (/^\d{1,4}$/.test(value)) changes.defaultBytes = Number(value);
    else return `The default byte length must be a whole number from ${KEY_BYTES_MIN} to ${KEY_BYTES_MAX} (got "${value.slice(0, 40)}").`;
  }
  return changes;
}

function SettingsView({ ctx, api, form, confirm }: { ctx: Ctx; api: ApiSettings; form: SettingsForm; confirm: string }) {
  const base = `/apis/${encodeURIComponent(api.id)}`;
  const shown = settingsFormOf(api);
  return (
    <>
      <p class="actions">
        <a href={to(base)}>Back to the API's keys</a>
        <a href={to(`${base}/portal`)}>Its portal</a>
      </p>
      <h2>Settings</h2>
      <dl class="fields">
        <dt>Name</dt>
        <dd>{api.name}</dd>
        <dt>Id</dt>
        <dd class="mono">{api.id}</dd>
        <dt>Default prefix</dt>
        <dd>{api.defaultPrefix ?? "none"}</dd>
        <dt>Default byte length</dt>
        <dd>{api.defaultBytes ?? "16 (the default)"}</dd>
        <dt>Recoverable keys</dt>
        <dd>{api.storeEncryptedKeys ? "stored encrypted" : "not stored"}</dd>
        <dt>Delete protection</dt>
        <dd>
          <Badge on={api.deleteProtection} yes="on" no="off" />
        </dd>
        <dt>IP allow-list</dt>
        <dd>{api.ipWhitelist ?? "none (every caller may verify)"}</dd>
        <dt>Created</dt>
        <dd>{when(api.createdAtM)}</dd>
      </dl>
      {can(ctx, apiPermission(api.id, "update_api")) && (
        <form method="post" action={to(`${base}/settings`)} class="card">
          <h2>Change the settings</h2>
          <Csrf token={ctx.csrf} />
          {SETTINGS_FIELDS.map((name) => (
            <input key={name} type="hidden" name={`was_${name}`} value={shown[name]} />
          ))}
          <Field id="api-settings-name" label="Name" hint={`${NAME_MIN} to ${NAME_MAX} characters, for people.`}>
            <input id="api-settings-name" name="name" type="text" required minLength={NAME_MIN} maxLength={NAME_MAX} value={form.name} />
          </Field>
          <Field
            id="api-settings-prefix"
            label="Default prefix"
            hint={`${API_DEFAULT_PREFIX_MIN} to ${API_DEFAULT_PREFIX_MAX} characters put before keys created without a prefix (prefix_…); empty for none.`}
          >
            <input
              id="api-settings-prefix"
              name="defaultPrefix"
              type="text"
              maxLength={API_DEFAULT_PREFIX_MAX}
              value={form.defaultPrefix}
            />
          </Field>
          <Field
            id="api-settings-bytes"
            label="Default byte length"
            hint={`${KEY_BYTES_MIN} to ${KEY_BYTES_MAX} random bytes in keys created without a length; empty for 16.`}
          >
            <input
              id="api-settings-bytes"
              name="defaultBytes"
              type="number"
              min={KEY_BYTES_MIN}
              max={KEY_BYTES_MAX}
              step={1}
              value={form.defaultBytes}
            />
          </Field>
          <input type="hidden" name="deleteProtection_shown" value="1" />
          <label class="check" for="api-settings-protect">
            <input id="api-settings-protect" name="deleteProtection" type="checkbox" value="on" checked={form.deleteProtection === "on"} />
            Delete protection: refuse to delete this API
          </label>
          <Field
            id="ip-whitelist"
            label="IP allow-list: addresses allowed to verify this API's keys"
            hint="Comma-separated IPv4/IPv6 addresses and CIDR ranges (10.0.0.0/8, 2001:db8::/32); empty lets every caller verify."
          >
            <textarea id="ip-whitelist" name="ipWhitelist" maxLength={MAX_IP_WHITELIST_LENGTH}>
              {form.ipWhitelist}
            </textarea>
          </Field>
          <p class="hint">Whether keys are stored encrypted is set when the API is created.</p>
          <button type="submit">Save settings</button>
        </form>
      )}
      {can(ctx, apiPermission(api.id, "delete_api")) && (
        <form method="post" action={to(`${base}/delete`)} class="card" data-confirm="Delete this API and all its keys?">
          <h2>Delete this API</h2>
          <Csrf token={ctx.csrf} />
          <p>Deleting the API deletes all its keys: they stop verifying at once.</p>
          {api.deleteProtection && <p class="hint">This API is protected from deletion: the deletion will be refused.</p>}
          <Field id="delete-confirm" label="Type the API's name to confirm">
            <input id="delete-confirm" name="confirm" type="text" required autocomplete="off" value={confirm} />
          </Field>
          <button type="submit" class="danger">
            Delete API
          </button>
        </form>
      )}
    </>
  );
}

/** The settings page; `values`: what was submitted, shown again beside a refusal (the settings form, the confirmation). */
async function settingsPage(ctx: Ctx, apiId: string, notice: Notice, status: number, values: { form?: FormFields; confirm?: string }) {
  const api = await attempt(() => getApiSettings(ctx.deps, ctx.caller, apiId));
  if (!api.ok) return refusedPage(ctx, api.status === 404 ? "API not found" : "API settings", api);
  const form = { ...settingsFormOf(api.value), ...(values.form ? submittedSettings(values.form) : {}) };
  return {
    html: (
      <Layout title={`${api.value.name}: settings`} session={ctx.session} csrf={ctx.csrf} nav="apis" notice={notice}>
        <SettingsView ctx={ctx} api={api.value} form={form} confirm={values.confirm ?? ""} />
      </Layout>
    ),
    status,
  };
}

const apiIdOf = (ctx: Ctx) => (ctx.req.params as { apiId: string }).apiId;

export const apisPages = [
  definePage({
    method: "GET",
    path: "/apis",
    audience: "rootKey",
    handler: (ctx) => apisListPage(ctx, doneNotice(ctx), 200, ""),
  }),
  definePage({
    method: "POST",
    path: "/apis",
    audience: "rootKey",
    handler: async (ctx) => {
      const name = field(ctx.form, "name");
      if (name.length < NAME_MIN || name.length > NAME_MAX) {
        const text = `The name must be ${NAME_MIN} to ${NAME_MAX} characters long.`;
        return apisListPage(ctx, { kind: "error", text }, 400, name);
      }
      const created = await attempt(() => createApi(ctx.deps, ctx.caller, { name }));
      if (!created.ok) return apisListPage(ctx, { kind: "error", text: created.text }, created.status, name);
      return { redirect: `/apis/${encodeURIComponent(created.value)}?done=created` };
    },
  }),
  definePage({
    method: "GET",
    path: "/apis/:apiId",
    audience: "rootKey",
    handler: (ctx) => apiPage(ctx, apiIdOf(ctx)),
  }),
  definePage({
    method: "GET",
    path: "/apis/:apiId/settings",
    audience: "rootKey",
    handler: (ctx) => settingsPage(ctx, apiIdOf(ctx), doneNotice(ctx), 200, {}),
  }),
  definePage({
    method: "POST",
    path: "/apis/:apiId/settings",
    audience: "rootKey",
    handler: async (ctx) => {
      const apiId = apiIdOf(ctx);
      const api = await attempt(() => getApiSettings(ctx.deps, ctx.caller, apiId));
      if (!api.ok) return refusedPage(ctx, api.status === 404 ? "API not found" : "API settings", api);
      const changes = settingsChanges(ctx.form, api.value);
      if (typeof changes === "string") return settingsPage(ctx, apiId, { kind: "error", text: changes }, 400, { form: ctx.form });
      if (Object.keys(changes).length === 0) return { redirect: `/apis/${encodeURIComponent(apiId)}/settings?done=unchanged` };
      // The core checks the permission and every bound (apis.bounds.ts); its refusal is shown beside the form.
      const saved = await attempt(() => updateApi(ctx.deps, ctx.caller, { apiId, ...changes }));
      if (!saved.ok) return settingsPage(ctx, apiId, { kind: "error", text: saved.text }, saved.status, { form: ctx.form });
      return { redirect: `/apis/${encodeURIComponent(apiId)}/settings?done=saved` };
    },
  }),
  definePage({
    method: "POST",
    path: "/apis/:apiId/delete",
    audience: "rootKey",
    handler: async (ctx) => {
      const apiId = apiIdOf(ctx);
      const api = await attempt(() => getApiSettings(ctx.deps, ctx.caller, apiId));
      if (!api.ok) return refusedPage(ctx, api.status === 404 ? "API not found" : "API settings", api);
      const confirm = field(ctx.form, "confirm");
      if (confirm !== api.value.name.trim()) {
        const text = "Type the API's name exactly to confirm its deletion.";
        return settingsPage(ctx, apiId, { kind: "error", text }, 400, { confirm });
      }
      const deleted = await attempt(() => deleteApi(ctx.deps, ctx.caller, apiId));
      if (!deleted.ok) return settingsPage(ctx, apiId, { kind: "error", text: deleted.text }, deleted.status, { confirm });
      return { redirect: "/apis?done=deleted" };
    },
  }),
];
