import { getVerifications, OUTCOME_COUNTERS, type OutcomeCounter, planVerifications } from "../../core/analytics/analytics.core.js";
import { getApi } from "../../core/apis/apis.core.js";
import { keyPermission } from "../../core/auth/permissions.query.js";
import { apiForNewKey, createKey as createKeyCore, V2_CREATE_KEY_RULES } from "../../core/keys/keys.create.js";
import { deleteKey as deleteKeyCore } from "../../core/keys/keys.delete.js";
import { getKey, readKeyRatelimits } from "../../core/keys/keys.read.js";
import { revealKey } from "../../core/keys/keys.reveal.js";
import { rerollKey as rerollKeyCore } from "../../core/keys/keys.reroll.js";
import { updateKey as updateKeyCore, V2_UPDATE_KEY_RULES } from "../../core/keys/keys.update.js";
import { keyPermissionsOf, keyRolesOf } from "../../core/rbac/rbac.keyLinks.js";
import { KEY_PAGE_LOG_ROWS, type LoggedVerification, latestKeyVerifications } from "../../core/verification/verification.log.js";
import { listPermissionsPage, listRolesPage } from "../../core/rbac/rbac.rolesPermissions.js";
import type { ApiKeySettings } from "../../storage/apis/apis.repository.js";
import type { KeyObjectRow } from "../../storage/keys/keyObjects.repository.js";
import type { NamedRatelimit } from "../../storage/keys/keys.ratelimit.repository.js";
import { createKey as createKeyRpc } from "../../wire/v2/keys/v2.keys.createKey.js";
import { rerollKey as rerollKeyRpc } from "../../wire/v2/keys/v2.keys.rerollKey.js";
import { updateKeyCommand, updateKeyInput } from "../../wire/v2/keys/v2.keys.updateKey.js";
import { Csrf, Layout, to } from "../layout.js";
import { definePage, type FormFields, field, fields, type PageContext } from "../page.js";
import {
  attempt,
  Badge,
  can,
  Chart,
  ColumnHeads,
  doneNotice,
  Field,
  isWholeNumber,
  type Notice,
  PageLink,
  paramsOf,
  type Parsed,
  parseMetaJson,
  parseWith,
  refusedPage,
  SecretOnce,
  when,
} from "../ui.js";

type Ctx = PageContext<"rootKey">;

/** Roles and permissions offered as checkboxes: at most this many of the workspace's (plus the key's own). */
const CHOICES = 100;
/** Rate limit rows a form may send (v2 takes at most 50). */
const MAX_RATELIMIT_ROWS = 50;
const DAY_MS = 86_400_000;

const DONE = { updated: "The key was updated." };

/** The grace periods the reroll form offers, in ms (0: the old key stops verifying now). */
const GRACE = [
  { ms: 0, label: "Now" },
  { ms: 3_600_000, label: "1 hour" },
  { ms: 86_400_000, label: "24 hours" },
  { ms: 604_800_000, label: "7 days" },
] as const;

// ---------------------------------------------------------------------------------------------------------------
// Form values: what a form shows and sends, as strings (checkbox groups as arrays).

/** A bad field of a form: the words the page shows (status 400). */
class FormProblem extends Error {}

/** A whole number typed in a form, or undefined when left empty. */
function wholeNumber(form: FormFields, name: string, label: string): number | undefined {
  const value = field(form, name);
  if (value === "") return undefined;
  if (!isWholeNumber(value)) throw new FormProblem(`${label} must be a whole number (got "${value.slice(0, 40)}").`);
  return Number(value);
}

/** The value of a form read, or its words as a FormProblem. */
function readOrThrow<T>(read: Parsed<T>): T {
  if (!read.ok) throw new FormProblem(read.text);
  return read.value;
}

/** A JSON object typed in a textarea, or undefined when left empty. */
const metaOf = (form: FormFields): Record<string, unknown> | undefined => readOrThrow(parseMetaJson(field(form, "meta")));

/** A datetime-local value, read as UTC, in unix ms; undefined when left empty. */
function expiresOf(form: FormFields): number | undefined {
  const value = field(form, "expires");
  if (value === "") return undefined;
  const ms = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/.test(value) ? Date.parse(`${value}Z`) : Number.NaN;
  if (Number.isNaN(ms))
    throw new FormProblem(`Expires must be a date and time such as 2030-01-31T12:00 (UTC); got "${value.slice(0, 40)}".`);
  return ms;
}

/** A time as a datetime-local input shows it (UTC, to the second). */
const localUtc = (ms: number): string => new Date(ms).toISOString().slice(0, 19);

/** The refill the form asks for (undefined: none); a daily refill has no day. */
function refillOf(form: FormFields): { interval: "daily" | "monthly"; amount: number; refillDay?: number } | undefined {
  const interval = field(form, "refill_interval");
  if (interval === "") return undefined;
  if (interval !== "daily" && interval !== "monthly") throw new FormProblem("Refill interval must be none, daily or monthly.");
  const amount = wholeNumber(form, "refill_amount", "Refill amount");
  if (amount === undefined) throw new FormProblem("Refill amount is required when the key is refilled.");
  if (interval === "daily") return { interval, amount };
  const refillDay = wholeNumber(form, "refill_day", "Refill day");
  return refillDay === undefined ? { interval, amount } : { interval, amount, refillDay };
}

/** How many rate limit rows the form has. */
function ratelimitRows(form: FormFields, atLeast: number): number {
  const n = Number(field(form, "rl_rows"));
  return Number.isInteger(n) && n >= 1 ? Math.min(n, MAX_RATELIMIT_ROWS) : atLeast;
}

/** The rate limit rows the form sends (rows without a name are left out). */
function ratelimitsOf(form: FormFields): { name: string; limit: number; duration: number; autoApply: boolean }[] {
  const rows: { name: string; limit: number; duration: number; autoApply: boolean }[] = [];
  for (let i = 0; i < ratelimitRows(form, 1); i++) {
    const name = field(form, `rl_${i}_name`);
    if (name === "") continue;
    const limit = wholeNumber(form, `rl_${i}_limit`, `Rate limit ${i + 1}: limit`);
    const duration = wholeNumber(form, `rl_${i}_duration`, `Rate limit ${i + 1}: duration`);
    if (limit === undefined || duration === undefined)
      throw new FormProblem(`Rate limit ${i + 1} ("${name}") needs a limit and a duration.`);
    rows.push({ name, limit, duration, autoApply: field(form, `rl_${i}_autoApply`) === "on" });
  }
  return rows;
}

/** A field's name in a schema's issue, as the form labels it. */
function labelOf(path: readonly PropertyKey[]): string {
  const [head, second, third] = path;
  if (head === "ratelimits" && typeof second === "number") return `Rate limit ${second + 1}${third ? `: ${String(third)}` : ""}`;
  if (head === "roles" || head === "permissions") return head === "roles" ? "Roles" : "Permissions";
  const labels: Record<string, string> = {
    name: "Name",
    prefix: "Prefix",
    byteLength: "Byte length",
    externalId: "Owner (external id)",
    meta: "Meta",
    expires: "Expires",
    enabled: "Enabled",
    "credits.remaining": "Credits remaining",
    "credits.refill.amount": "Refill amount",
    "credits.refill.refillDay": "Refill day",
    "credits.refill.interval": "Refill interval",
    recoverable: "Recoverable",
    expiration: "Grace period",
  };
  const key = path.map(String).join(".");
  return labels[key] ?? key;
}

/** A schema issue's field as the form labels it, before the issue's words ("Credits remaining: must be …"). */
const fieldOf = (path: readonly PropertyKey[]): string => `${labelOf(path)}:`;

/** Runs `read`, turning a FormProblem into its words. */
function formRead<T>(read: () => T): Parsed<T> {
  try {
    return { ok: true, value: read() };
  } catch (err) {
    if (err instanceof FormProblem) return { ok: false, text: err.message };
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Roles and permissions to offer.

type Choices = { roles: string[] | undefined; permissions: { slug: string; name: string }[] | undefined; more: boolean };

/** The workspace's roles and permissions the caller may read (a bounded page of each); undefined when it may not. */
async function choicesOf(ctx: Ctx): Promise<Choices> {
  const [roles, permissions] = await Promise.all([
    attempt(() => listRolesPage(ctx.deps, ctx.caller, { limit: CHOICES + 1 })),
    attempt(() => listPermissionsPage(ctx.deps, ctx.caller, { limit: CHOICES + 1 })),
  ]);
  return {
    roles: roles.ok ? roles.value.slice(0, CHOICES).map((r) => r.name) : undefined,
    permissions: permissions.ok ? permissions.value.slice(0, CHOICES).map((p) => ({ slug: p.slug, name: p.name })) : undefined,
    more: (roles.ok && roles.value.length > CHOICES) || (permissions.ok && permissions.value.length > CHOICES),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Form parts shared by the new key form and the edit form.

function Checkbox({ id, name, value, checked, label }: { id: string; name: string; value?: string; checked: boolean; label: string }) {
  return (
    <label class="check" for={id}>
      <input type="checkbox" id={id} name={name} value={value ?? "on"} checked={checked} />
      {label}
    </label>
  );
}

function CreditsFields({ form }: { form: FormFields }) {
  const interval = field(form, "refill_interval");
  return (
    <fieldset class="card">
      <legend>Credits</legend>
      <div class="row">
        <Field id="remaining" label="Credits remaining" hint="Uses left; empty: unlimited.">
          <input id="remaining" name="remaining" type="number" min={0} value={field(form, "remaining")} />
        </Field>
        <Field id="refill_interval" label="Refill interval">
          <select id="refill_interval" name="refill_interval">
            <option value="" selected={interval === ""}>
              No refill
            </option>
            <option value="daily" selected={interval === "daily"}>
              Daily
            </option>
            <option value="monthly" selected={interval === "monthly"}>
              Monthly
            </option>
          </select>
        </Field>
        <Field id="refill_amount" label="Refill amount" hint="What the credits are set to at each refill.">
          <input id="refill_amount" name="refill_amount" type="number" min={1} value={field(form, "refill_amount")} />
        </Field>
        <Field id="refill_day" label="Refill day" hint="Day of the month (monthly refills only).">
          <input id="refill_day" name="refill_day" type="number" min={1} max={31} value={field(form, "refill_day")} />
        </Field>
      </div>
    </fieldset>
  );
}

function RatelimitFields({ form, rows }: { form: FormFields; rows: number }) {
  return (
    <fieldset class="card">
      <legend>Rate limits</legend>
      <input type="hidden" name="rl_rows" value={String(rows)} />
      <p class="hint">A row without a name is left out. Duration in milliseconds (1000 to 2592000000).</p>
      {Array.from({ length: rows }, (_, i) => (
        <div class="row" key={i}>
          <Field id={`rl_${i}_name`} label={`Rate limit ${i + 1}: name`}>
            <input id={`rl_${i}_name`} name={`rl_${i}_name`} type="text" maxLength={128} value={field(form, `rl_${i}_name`)} />
          </Field>
          <Field id={`rl_${i}_limit`} label="Limit">
            <input id={`rl_${i}_limit`} name={`rl_${i}_limit`} type="number" min={1} value={field(form, `rl_${i}_limit`)} />
          </Field>
          <Field id={`rl_${i}_duration`} label="Duration (ms)">
            <input id={`rl_${i}_duration`} name={`rl_${i}_duration`} type="number" min={1000} value={field(form, `rl_${i}_duration`)} />
          </Field>
          <div class="field">
            <Checkbox
              id={`rl_${i}_autoApply`}
              name={`rl_${i}_autoApply`}
              checked={field(form, `rl_${i}_autoApply`) === "on"}
              label="Apply to every verification"
            />
          </div>
        </div>
      ))}
    </fieldset>
  );
}

function RbacFields({ form, choices, own }: { form: FormFields; choices: Choices; own: { roles: string[]; permissions: string[] } }) {
  const chosenRoles = new Set(fields(form, "roles"));
  const chosenPermissions = new Set(fields(form, "permissions"));
  // The key's own come first, so that a long list never drops (and so removes) one the key has.
  const roles = [...new Set([...own.roles, ...(choices.roles ?? [])])];
  const permissions = new Map<string, string>(own.permissions.map((slug) => [slug, slug]));
  for (const p of choices.permissions ?? []) permissions.set(p.slug, p.name);
  return (
    <>
      {choices.roles !== undefined && (
        <fieldset class="card">
          <legend>Roles</legend>
          <input type="hidden" name="roles_shown" value="1" />
          {roles.length === 0 && <p class="muted">The workspace has no roles.</p>}
          {roles.map((name, i) => (
            <Checkbox key={name} id={`role_${i}`} name="roles" value={name} checked={chosenRoles.has(name)} label={name} />
          ))}
        </fieldset>
      )}
      {choices.permissions !== undefined && (
        <fieldset class="card">
          <legend>Permissions</legend>
          <input type="hidden" name="permissions_shown" value="1" />
          {permissions.size === 0 && <p class="muted">The workspace has no permissions.</p>}
          {[...permissions].map(([slug, name], i) => (
            <Checkbox
              key={slug}
              id={`permission_${i}`}
              name="permissions"
              value={slug}
              checked={chosenPermissions.has(slug)}
              label={name === slug ? slug : `${name} (${slug})`}
            />
          ))}
        </fieldset>
      )}
      {choices.more && <p class="hint">Only the first {CHOICES} roles and permissions of the workspace are listed.</p>}
    </>
  );
}

/** The fields the new key form and the edit form share. */
function CommonFields({ form }: { form: FormFields }) {
  return (
    <>
      <Field id="name" label="Name">
        <input id="name" name="name" type="text" maxLength={255} value={field(form, "name")} />
      </Field>
      <Field
        id="externalId"
        label="Owner (external id)"
        hint="Links the key to the identity with this id (created if needed); empty: none."
      >
        <input id="externalId" name="externalId" type="text" maxLength={255} value={field(form, "externalId")} />
      </Field>
      <Field id="meta" label="Meta (JSON object)" hint='For example {"plan": "pro"}; empty: none.'>
        <textarea id="meta" name="meta">
          {field(form, "meta")}
        </textarea>
      </Field>
      <Field id="expires" label="Expires (UTC)" hint="Empty: never expires.">
        <input id="expires" name="expires" type="datetime-local" step={1} value={field(form, "expires")} />
      </Field>
      <div class="field">
        <Checkbox
          id="enabled"
          name="enabled"
          checked={field(form, "enabled") === "on"}
          label="Enabled (a disabled key verifies as DISABLED)"
        />
      </div>
    </>
  );
}

// ---------------------------------------------------------------------------------------------------------------
// The new key page.

type NewKeyView = { apiId: string; apiName: string | undefined; api: ApiKeySettings | undefined; choices: Choices | undefined };

async function newKeyView(ctx: Ctx, apiId: string): Promise<{ ok: true; view: NewKeyView } | { ok: false; status: number; text: string }> {
  const api = await attempt(() => apiForNewKey(ctx.deps, ctx.caller, apiId));
  const named = await attempt(() => getApi(ctx.deps, ctx.caller, apiId));
  if (!api.ok) {
    const text = api.status === 403 ? `This root key cannot create keys in this API. ${api.text}` : api.text;
    return { ok: false, status: api.status, text };
  }
  return { ok: true, view: { apiId, apiName: named.ok ? named.value.name : undefined, api: api.value, choices: await choicesOf(ctx) } };
}

function NewKeyPage({ ctx, view, form, notice }: { ctx: Ctx; view: NewKeyView; form: FormFields; notice?: Notice }) {
  const { api, choices } = view;
  const title = `New key in ${view.apiName ?? view.apiId}`;
  return (
    <Layout title={title} session={ctx.session} csrf={ctx.csrf} nav="apis" notice={notice}>
      <PageLink href={to(`/apis/${view.apiId}`)} label="Back to the API" />
      {api === undefined || choices === undefined ? (
        <p>This root key cannot create keys in this API: the form is not shown.</p>
      ) : (
        <form method="post" action={to(`/apis/${view.apiId}/keys/new`)} class="card">
          <Csrf token={ctx.csrf} />
          <h2>Key</h2>
          <CommonFields form={form} />
          <div class="row">
            <Field id="prefix" label="Prefix" hint={`Letters, digits and _; default: ${api.defaultPrefix ?? "none"}.`}>
              <input id="prefix" name="prefix" type="text" maxLength={16} value={field(form, "prefix")} />
            </Field>
            <Field id="byteLength" label="Byte length" hint={`16 to 255 random bytes; default: ${api.defaultBytes ?? 16}.`}>
              <input id="byteLength" name="byteLength" type="number" min={16} max={255} value={field(form, "byteLength")} />
            </Field>
          </div>
          {api.storeEncryptedKeys ? (
            <div class="field">
              <Checkbox
                id="recoverable"
                name="recoverable"
                checked={field(form, "recoverable") === "on"}
                label="Recoverable (also store the key encrypted, so that it can be revealed later)"
              />
            </div>
          ) : (
            <p class="hint">This API does not store keys encrypted: its keys cannot be recoverable.</p>
          )}
          <h2>Limits</h2>
          <CreditsFields form={form} />
          <RatelimitFields form={form} rows={ratelimitRows(form, 2)} />
          <h2>Roles and permissions</h2>
          <RbacFields form={form} choices={choices} own={{ roles: [], permissions: [] }} />
          <button type="submit">Create key</button>
        </form>
      )}
    </Layout>
  );
}

/** The new key form as v2's keys.createKey body. */
function createBody(form: FormFields, apiId: string, choices: Choices): unknown {
  const remaining = wholeNumber(form, "remaining", "Credits remaining");
  const refill = refillOf(form);
  const ratelimits = ratelimitsOf(form);
  const roles = choices.roles !== undefined ? fields(form, "roles") : [];
  const permissions = choices.permissions !== undefined ? fields(form, "permissions") : [];
  const text = (name: string) => (field(form, name) === "" ? undefined : field(form, name));
  return {
    apiId,
    name: text("name"),
    prefix: text("prefix"),
    byteLength: wholeNumber(form, "byteLength", "Byte length"),
    externalId: text("externalId"),
    meta: metaOf(form),
    expires: expiresOf(form),
    enabled: field(form, "enabled") === "on",
    ...(field(form, "recoverable") === "on" && { recoverable: true }),
    ...((remaining !== undefined || refill !== undefined) && { credits: { remaining: remaining ?? null, ...(refill && { refill }) } }),
    ...(ratelimits.length > 0 && { ratelimits }),
    ...(roles.length > 0 && { roles }),
    ...(permissions.length > 0 && { permissions }),
  };
}

function CreatedPage({
  ctx,
  title,
  intro,
  created,
  back,
}: {
  ctx: Ctx;
  title: string;
  intro: string;
  created: { keyId: string; key: string };
  back?: { href: string; label: string };
}) {
  return (
    <Layout title={title} session={ctx.session} csrf={ctx.csrf} nav="apis" notice={{ kind: "ok", text: intro }}>
      <SecretOnce id="new-key" label="The new key:" value={created.key} />
      <p>
        Key id <code>{created.keyId}</code>. <a href={to(`/keys/${created.keyId}`)}>Open the new key's page</a>
      </p>
      {back && (
        <p>
          <a href={back.href}>{back.label}</a>
        </p>
      )}
    </Layout>
  );
}

// ---------------------------------------------------------------------------------------------------------------
// The key page.

type KeyView = {
  row: KeyObjectRow;
  ratelimits: { key: NamedRatelimit[]; identity: NamedRatelimit[] };
  ownRoles: string[];
  ownPermissions: string[];
  choices: Choices;
  chart: { x: number[]; series: { label: string; values: number[] }[] } | { refused: string };
  /** The key's newest rows of the verification log; `off` when there is no log. */
  log: LoggedVerification[] | { refused: string } | "off";
};

async function keyView(ctx: Ctx, keyId: string): Promise<{ ok: true; view: KeyView } | { ok: false; status: number; text: string }> {
  const { deps, caller } = ctx;
  const found = await attempt(() => getKey(deps, caller, { keyId }, { permissions: "effective-slugs", decryptNeedsEncryptingApi: true }));
  if (!found.ok) return found;
  const row = found.value.row;
  const [ratelimits, ownRoles, ownPermissions, choices] = await Promise.all([
    readKeyRatelimits(deps, row),
    keyRolesOf(deps, caller, row.id),
    keyPermissionsOf(deps, caller, row.id),
    choicesOf(ctx),
  ]);
  const chart = await chartOf(ctx, row);
  const logged = await attempt(() => latestKeyVerifications(deps, caller, { id: row.id, apiId: row.apiId }));
  const log = !logged.ok ? { refused: logged.text } : (logged.value ?? "off");
  return {
    ok: true,
    view: {
      row,
      ratelimits,
      ownRoles: ownRoles.map((r) => r.name),
      ownPermissions: ownPermissions.map((p) => p.slug),
      choices,
      chart,
      log,
    },
  };
}

/** The key's verifications of the last 7 days (daily, by outcome). */
async function chartOf(ctx: Ctx, row: KeyObjectRow): Promise<KeyView["chart"]> {
  const now = ctx.deps.clock.now();
  const start = now - (now % DAY_MS) - 6 * DAY_MS;
  const daily = { apiId: row.apiId, keyIds: [row.id], start, groupBy: ["day" as const], order: "asc" as const };
  const days = await attempt(() => getVerifications(ctx.deps, ctx.caller, daily, planVerifications(daily, now)));
  if (!days.ok) return { refused: days.text };
  // Today's row is there only once it counts something: the chart always shows the seven days, today included.
  const today = now - (now % DAY_MS);
  const rows = days.value.at(-1)?.time === today ? days.value : [...days.value, { time: today, ...emptyCounts() }];
  const x = rows.map((r) => r.time ?? 0);
  const shown = OUTCOME_COUNTERS.filter((c) => c === "valid" || rows.some((r) => r[c] > 0));
  return { x, series: shown.map((c) => ({ label: c, values: rows.map((r) => r[c]) })) };
}

/** Zero verifications of every outcome. */
const emptyCounts = () =>
  ({ total: 0, ...Object.fromEntries(OUTCOME_COUNTERS.map((c) => [c, 0])) }) as Record<OutcomeCounter | "total", number>;

/** The edit form's values for a key as it is. */
function formOfKey(view: KeyView): FormFields {
  const { row } = view;
  const values: Record<string, string | string[]> = {
    name: row.name ?? "",
    externalId: row.identityExternalId ?? row.ownerId ?? "",
    meta: row.meta !== null && Object.keys(row.meta as object).length > 0 ? JSON.stringify(row.meta, null, 2) : "",
    expires: row.expires ? localUtc(row.expires.getTime()) : "",
    enabled: row.enabled ? "on" : "",
    remaining: row.remaining === null ? "" : String(row.remaining),
    refill_interval: row.refillAmount === null ? "" : row.refillDay === null ? "daily" : "monthly",
    refill_amount: row.refillAmount === null ? "" : String(row.refillAmount),
    refill_day: row.refillDay === null ? "" : String(row.refillDay),
    roles: view.ownRoles,
    permissions: view.ownPermissions,
    rl_rows: String(view.ratelimits.key.length + 1),
  };
  view.ratelimits.key.forEach((rl, i) => {
    values[`rl_${i}_name`] = rl.name;
    values[`rl_${i}_limit`] = String(rl.limit);
    values[`rl_${i}_duration`] = String(rl.duration);
    values[`rl_${i}_autoApply`] = rl.autoApply ? "on" : "";
  });
  return values;
}

/** The groups of the edit form, compared with what the form showed to send only what the user changed. */
const EDIT_GROUPS = {
  name: ["name"],
  externalId: ["externalId"],
  meta: ["meta"],
  expires: ["expires"],
  enabled: ["enabled"],
  credits: ["remaining", "refill_interval", "refill_amount", "refill_day"],
  roles: ["roles"],
  permissions: ["permissions"],
} as const;

/** A group's values as one string (checkbox groups in any order). */
function groupText(form: FormFields, names: readonly string[]): string {
  return JSON.stringify(names.map((n) => (n === "roles" || n === "permissions" ? [...fields(form, n)].sort() : field(form, n))));
}

function ratelimitsText(form: FormFields): string {
  const rows: string[][] = [];
  for (let i = 0; i < ratelimitRows(form, 1); i++) {
    if (field(form, `rl_${i}_name`) === "") continue;
    rows.push(["name", "limit", "duration", "autoApply"].map((f) => field(form, `rl_${i}_${f}`)));
  }
  return JSON.stringify(rows);
}

/** What the edit form showed (its `was` field), as form values. */
function wasOf(form: FormFields): FormFields {
  try {
    const was = JSON.parse(field(form, "was")) as unknown;
    return typeof was === "object" && was !== null ? (was as FormFields) : {};
  } catch {
    return {};
  }
}

/** The edit form's changes as v2's keys.updateKey body: only the groups the user changed. */
function updateBody(form: FormFields, keyId: string): Record<string, unknown> {
  const was = wasOf(form);
  const changed = (group: keyof typeof EDIT_GROUPS) => groupText(form, EDIT_GROUPS[group]) !== groupText(was, EDIT_GROUPS[group]);
  const orNull = (name: string) => (field(form, name) === "" ? null : field(form, name));
  const body: Record<string, unknown> = { keyId };
  if (changed("name")) body.name = orNull("name");
  if (changed("externalId")) body.externalId = orNull("externalId");
  if (changed("meta")) body.meta = metaOf(form) ?? null;
  if (changed("expires")) body.expires = expiresOf(form) ?? null;
  if (changed("enabled")) body.enabled = field(form, "enabled") === "on";
  if (changed("credits")) {
    const remaining = wholeNumber(form, "remaining", "Credits remaining");
    const refill = refillOf(form);
    body.credits = remaining === undefined && refill === undefined ? null : { remaining: remaining ?? null, refill: refill ?? null };
  }
  if (ratelimitsText(form) !== ratelimitsText(was)) body.ratelimits = ratelimitsOf(form);
  if (field(form, "roles_shown") === "1" && changed("roles")) body.roles = fields(form, "roles");
  if (field(form, "permissions_shown") === "1" && changed("permissions")) body.permissions = fields(form, "permissions");
  return body;
}

function RatelimitTable({ caption, rows }: { caption: string; rows: NamedRatelimit[] }) {
  if (rows.length === 0) return null;
  return (
    <table>
      <caption>{caption}</caption>
      <ColumnHeads names={["Name", "Limit", "Duration (ms)", "Applied to every verification"]} />
      <tbody>
        {rows.map((rl) => (
          <tr key={rl.id}>
            <td>{rl.name}</td>
            <td>{rl.limit}</td>
            <td>{rl.duration}</td>
            <td>{rl.autoApply ? "yes" : "no"}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function creditsText(row: KeyObjectRow): string {
  if (row.remaining === null) return "unlimited";
  const refill =
    row.refillAmount === null
      ? ", no refill"
      : row.refillDay === null
        ? `, refilled to ${row.refillAmount} daily`
        : `, refilled to ${row.refillAmount} on day ${row.refillDay} of each month`;
  return `${row.remaining} remaining${refill}`;
}

/** The key's newest verifications, one row each, as the verification log holds them (written about once a second). */
function LatestVerifications({ log }: { log: KeyView["log"] }) {
  if (log === "off") return <p class="muted">The verification log is off (KEYHAVEN_VERIFICATION_LOG_DAYS=0 or KEYHAVEN_ANALYTICS=off).</p>;
  if ("refused" in log) return <p class="muted">Not shown: {log.refused}</p>;
  if (log.length === 0) return <p class="muted">None logged yet.</p>;
  return (
    <table id="latest-verifications">
      <caption>The key's {KEY_PAGE_LOG_ROWS} newest verifications, newest first</caption>
      <ColumnHeads names={["Time", "Outcome", "Tags", "Credits spent", "Latency (ms)", "Region"]} />
      <tbody>
        {log.map((v, i) => (
          <tr key={`${v.requestId}-${i}`}>
            <td>{when(v.timeM)}</td>
            <td>{v.outcome}</td>
            <td>{v.tags.length > 0 ? v.tags.join(", ") : "none"}</td>
            <td>{v.spentCredits}</td>
            <td>{v.latency.toFixed(2)}</td>
            <td>{v.region}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function KeyPage({ ctx, view, form, notice }: { ctx: Ctx; view: KeyView; form?: FormFields; notice?: Notice }) {
  const { row } = view;
  const { caller } = ctx;
  const may = (action: string, keyId: string | null = row.id) =>
    can(ctx, keyPermission(caller.access, caller.workspaceId, row.apiId, keyId, action));
  const shown = form ?? formOfKey(view);
  const recoverable = row.encrypted !== null;
  return (
    <Layout title={`Key ${row.name ?? row.id}`} session={ctx.session} csrf={ctx.csrf} nav="apis" notice={notice}>
      <PageLink href={to(`/apis/${row.apiId}`)} label="Back to the API" />
      <h2>Details</h2>
      <dl class="fields">
        <dt>Id</dt>
        <dd>
          <code>{row.id}</code>
        </dd>
        <dt>Start</dt>
        <dd>
          <code>{row.start}</code>
        </dd>
        <dt>API</dt>
        <dd>
          <a href={to(`/apis/${row.apiId}`)}>{row.apiId}</a>
        </dd>
        <dt>Name</dt>
        <dd>{row.name ?? "none"}</dd>
        <dt>Owner (external id)</dt>
        <dd>{row.identityExternalId ?? row.ownerId ?? "none"}</dd>
        <dt>Identity</dt>
        <dd>{row.identityId ? <a href={to(`/identities/${row.identityId}`)}>{row.identityId}</a> : "none"}</dd>
        <dt>Meta</dt>
        <dd>{row.meta !== null && Object.keys(row.meta as object).length > 0 ? <pre>{JSON.stringify(row.meta, null, 2)}</pre> : "none"}</dd>
        <dt>Created</dt>
        <dd>{when(row.createdAtM)}</dd>
        <dt>Updated</dt>
        <dd>{row.updatedAtM ? when(row.updatedAtM) : "never"}</dd>
        <dt>Expires</dt>
        <dd>{row.expires ? when(row.expires.getTime()) : "never"}</dd>
        <dt>Enabled</dt>
        <dd>
          <Badge on={row.enabled} yes="enabled" no="disabled" />
        </dd>
        <dt>Credits</dt>
        <dd id="credits">{creditsText(row)}</dd>
        <dt>Roles</dt>
        <dd>{row.roles.length > 0 ? row.roles.join(", ") : "none"}</dd>
        <dt>Permissions</dt>
        <dd>{row.permissions.length > 0 ? row.permissions.join(", ") : "none"}</dd>
        <dt>Recoverable</dt>
        <dd>{recoverable ? "yes (stored encrypted)" : "no"}</dd>
        <dt>Last used</dt>
        <dd id="last-used">{row.lastUsedAtM ? when(row.lastUsedAtM) : "never"}</dd>
      </dl>
      <RatelimitTable caption="The key's rate limits" rows={view.ratelimits.key} />
      <RatelimitTable caption="Its identity's rate limits" rows={view.ratelimits.identity} />

      <h2>Verifications, last 7 days</h2>
      {"refused" in view.chart ? (
        <p class="muted">Not shown: {view.chart.refused}</p>
      ) : (
        <Chart label="Verifications by outcome per day" x={view.chart.x} series={view.chart.series} />
      )}

      <h2>Latest verifications</h2>
      <LatestVerifications log={view.log} />

      {may("update_key") && (
        <>
          <h2>Edit</h2>
          <form method="post" action={to(`/keys/${row.id}`)} class="card">
            <Csrf token={ctx.csrf} />
            <input type="hidden" name="was" value={form ? field(form, "was") : JSON.stringify(formOfKey(view))} />
            <CommonFields form={shown} />
            <CreditsFields form={shown} />
            <RatelimitFields form={shown} rows={ratelimitRows(shown, 1)} />
            <RbacFields form={shown} choices={view.choices} own={{ roles: view.ownRoles, permissions: view.ownPermissions }} />
            <button type="submit">Save changes</button>
          </form>
        </>
      )}

      {may("create_key", null) && (
        <>
          <h2>Reroll</h2>
          <form method="post" action={to(`/keys/${row.id}/reroll`)} class="card narrow" data-confirm="Replace this key with a new one?">
            <Csrf token={ctx.csrf} />
            <p>A new key with the same settings replaces this one, which keeps verifying for the grace period.</p>
            <Field id="expiration" label="The old key stops verifying">
              <select id="expiration" name="expiration">
                {GRACE.map((g) => (
                  <option key={g.ms} value={String(g.ms)} selected={g.ms === 3_600_000}>
                    {g.ms === 0 ? "Now" : `In ${g.label}`}
                  </option>
                ))}
              </select>
            </Field>
            <button type="submit">Reroll key</button>
          </form>
        </>
      )}

      {recoverable && may("decrypt_key") && (
        <>
          <h2>Reveal</h2>
          <form method="post" action={to(`/keys/${row.id}/reveal`)} class="card narrow">
            <Csrf token={ctx.csrf} />
            <p>Shows the key itself, once. Each reveal is recorded in the audit log.</p>
            <button type="submit" class="secondary">
              Reveal key
            </button>
          </form>
        </>
      )}

      {may("delete_key") && (
        <>
          <h2>Delete</h2>
          <form method="post" action={to(`/keys/${row.id}/delete`)} class="card narrow" data-confirm="Delete this key?">
            <Csrf token={ctx.csrf} />
            <p>The key stops verifying at once.</p>
            <div class="field">
              <Checkbox
                id="permanent"
                name="permanent"
                checked={false}
                label="Permanently (remove the row, so that the key can be imported again)"
              />
            </div>
            <button type="submit" class="danger">
              Delete key
            </button>
          </form>
        </>
      )}
    </Layout>
  );
}

/** The page of a key that is not found or may not be read. */
const keyRefused = (ctx: Ctx, refused: { status: number; text: string }) =>
  refusedPage(ctx, "apis", refused.status === 404 ? "Key not found" : "Not allowed", refused, {
    href: to("/apis"),
    label: "Back to the APIs",
  });

/** The new key page of an API the root key may not create keys in: the refusal, and no form. */
function newKeyRefused(ctx: Ctx, apiId: string, refused: { status: number; text: string }) {
  const empty: NewKeyView = { apiId, apiName: undefined, api: undefined, choices: undefined };
  return { html: <NewKeyPage ctx={ctx} view={empty} form={{}} notice={{ kind: "error", text: refused.text }} />, status: refused.status };
}

/** The key page again, with `notice` (and what the user typed), or the not-found page when the key is gone. */
async function keyPageAgain(ctx: Ctx, keyId: string, status: number, text: string, form?: FormFields) {
  const view = await keyView(ctx, keyId);
  if (!view.ok) return keyRefused(ctx, view);
  return { html: <KeyPage ctx={ctx} view={view.view} form={form} notice={{ kind: "error", text }} />, status };
}

export const keysPages = [
  definePage({
    method: "GET",
    path: "/apis/:apiId/keys/new",
    audience: "rootKey",
    handler: async (ctx) => {
      const { apiId } = paramsOf(ctx, "apiId");
      const view = await newKeyView(ctx, apiId);
      if (!view.ok) return newKeyRefused(ctx, apiId, view);
      return { html: <NewKeyPage ctx={ctx} view={view.view} form={{ enabled: "on" }} /> };
    },
  }),
  definePage({
    method: "POST",
    path: "/apis/:apiId/keys/new",
    audience: "rootKey",
    handler: async (ctx) => {
      const { apiId } = paramsOf(ctx, "apiId");
      const view = await newKeyView(ctx, apiId);
      if (!view.ok) return newKeyRefused(ctx, apiId, view);
      const again = (status: number, text: string) => ({
        html: <NewKeyPage ctx={ctx} view={view.view} form={ctx.form} notice={{ kind: "error", text }} />,
        status,
      });
      const body = formRead(() => readOrThrow(parseWith(createKeyRpc.input, createBody(ctx.form, apiId, view.view.choices!), fieldOf)));
      if (!body.ok) return again(400, body.text);
      // As v2's keys.createKey handler: `credits` becomes remaining and refill.
      const { credits, ...settings } = body.value;
      const created = await attempt(() =>
        createKeyCore(
          ctx.deps,
          ctx.caller,
          { ...settings, remaining: credits?.remaining ?? undefined, refill: credits?.refill },
          V2_CREATE_KEY_RULES,
        ),
      );
      if (!created.ok) return again(created.status, created.text);
      return {
        html: (
          <CreatedPage
            ctx={ctx}
            title="Key created"
            intro={`The key ${created.value.keyId} was created.`}
            created={created.value}
            back={{ href: to(`/apis/${apiId}`), label: "Back to the API" }}
          />
        ),
      };
    },
  }),
  definePage({
    method: "GET",
    path: "/keys/:keyId",
    audience: "rootKey",
    handler: async (ctx) => {
      const { keyId } = paramsOf(ctx, "keyId");
      const view = await keyView(ctx, keyId);
      if (!view.ok) return keyRefused(ctx, view);
      return { html: <KeyPage ctx={ctx} view={view.view} notice={doneNotice(ctx.query.done, DONE)} /> };
    },
  }),
  definePage({
    method: "POST",
    path: "/keys/:keyId",
    audience: "rootKey",
    handler: async (ctx) => {
      const { keyId } = paramsOf(ctx, "keyId");
      const body = formRead(() => readOrThrow(parseWith(updateKeyInput, updateBody(ctx.form, keyId), fieldOf)));
      if (!body.ok) return keyPageAgain(ctx, keyId, 400, body.text, ctx.form);
      const updated = await attempt(() => updateKeyCore(ctx.deps, ctx.caller, updateKeyCommand(body.value), V2_UPDATE_KEY_RULES));
      if (!updated.ok) return keyPageAgain(ctx, keyId, updated.status, updated.text, ctx.form);
      return { redirect: `/keys/${encodeURIComponent(keyId)}?done=updated` };
    },
  }),
  definePage({
    method: "POST",
    path: "/keys/:keyId/reroll",
    audience: "rootKey",
    handler: async (ctx) => {
      const { keyId } = paramsOf(ctx, "keyId");
      const expiration = formRead(() =>
        readOrThrow(
          parseWith(rerollKeyRpc.input, { keyId, expiration: wholeNumber(ctx.form, "expiration", "Grace period") ?? 0 }, fieldOf),
        ),
      );
      if (!expiration.ok) return keyPageAgain(ctx, keyId, 400, expiration.text);
      const created = await attempt(() => rerollKeyCore(ctx.deps, ctx.caller, expiration.value, "plain"));
      if (!created.ok) return keyPageAgain(ctx, keyId, created.status, created.text);
      const grace = GRACE.find((g) => g.ms === expiration.value.expiration);
      const until =
        expiration.value.expiration === 0
          ? "stopped verifying"
          : `keeps verifying for ${grace?.label ?? `${expiration.value.expiration} ms`}`;
      return {
        html: (
          <CreatedPage
            ctx={ctx}
            title="Key rerolled"
            intro={`The key ${keyId} was replaced by ${created.value.keyId}; the old key ${until}.`}
            created={created.value}
            back={{ href: to(`/keys/${keyId}`), label: "The old key's page" }}
          />
        ),
      };
    },
  }),
  definePage({
    method: "POST",
    path: "/keys/:keyId/delete",
    audience: "rootKey",
    handler: async (ctx) => {
      const { keyId } = paramsOf(ctx, "keyId");
      const found = await attempt(() =>
        getKey(ctx.deps, ctx.caller, { keyId: keyId }, { permissions: "direct-names", decryptNeedsEncryptingApi: false }),
      );
      if (!found.ok) return keyRefused(ctx, found);
      const permanent = field(ctx.form, "permanent") === "on";
      const deleted = await attempt(() => deleteKeyCore(ctx.deps, ctx.caller, { keyId: keyId, permanent }));
      if (!deleted.ok) return keyPageAgain(ctx, keyId, deleted.status, deleted.text);
      return { redirect: `/apis/${encodeURIComponent(found.value.row.apiId)}?done=deleted` };
    },
  }),
  definePage({
    method: "POST",
    path: "/keys/:keyId/reveal",
    audience: "rootKey",
    handler: async (ctx) => {
      const { keyId } = paramsOf(ctx, "keyId");
      const revealed = await attempt(() => revealKey(ctx.deps, ctx.caller, keyId));
      if (!revealed.ok) {
        const text = revealed.status === 403 ? `This root key may not reveal this key. ${revealed.text}` : revealed.text;
        return keyPageAgain(ctx, keyId, revealed.status, text);
      }
      return {
        html: (
          <Layout
            title="Key revealed"
            session={ctx.session}
            csrf={ctx.csrf}
            nav="apis"
            notice={{ kind: "ok", text: "This reveal was recorded in the audit log." }}
          >
            <SecretOnce id="new-key" label={`The key ${revealed.value.keyId}:`} value={revealed.value.plaintext} />
            <PageLink href={to(`/keys/${revealed.value.keyId}`)} label="Back to the key's page" />
          </Layout>
        ),
      };
    },
  }),
];
