import type { ComponentChildren } from "preact";
import type { z } from "zod";
import { rootKeySatisfies } from "../core/auth/permissions.urn.js";
import type { PermissionQuery } from "../errors.js";
import { DomainError } from "../errors.js";
import { findDependencyFailure } from "../storage/dependency.js";
import { v2ErrorOf } from "../wire/v2/errors.js";
import { Csrf, Layout, type NavId } from "./layout.js";
import type { Audience, PageAnswer, PageContext } from "./page.js";

/** The notice a page shows above its content: a change done, or why something was refused. */
export type Notice = { kind: "ok" | "error"; text: string } | undefined;

/** An error notice of `text`. */
export const errorNotice = (text: string): Notice => ({ kind: "error", text });

/** The notice of a `?done=` a page redirected to after a change (POST-redirect-GET), from the page's own words. */
export function doneNotice(done: string | undefined, words: Readonly<Record<string, string>>): { kind: "ok"; text: string } | undefined {
  const text = done === undefined || !Object.hasOwn(words, done) ? undefined : words[done];
  return text === undefined ? undefined : { kind: "ok", text };
}

/**
 * The route's path parameters that `names` names (`paramsOf(ctx, "keyId").keyId`): Fastify sets each one the route's
 * path has, so each is a string ("" only for one the path lacks).
 */
export function paramsOf<K extends string>(ctx: PageContext<Audience>, ...names: K[]): Record<K, string> {
  const params = ctx.req.params as Partial<Record<string, string>>;
  return Object.fromEntries(names.map((name) => [name, params[name] ?? ""])) as Record<K, string>;
}

/** A cursor from the query string, bounded as v2 bounds one (a longer one is ignored). */
export function cursorOf(raw: string | undefined): string | undefined {
  return raw !== undefined && raw !== "" && raw.length <= 1024 ? raw : undefined;
}

/**
 * A page that says only why it cannot show what was asked (a missing or foreign id, a refused read), with the
 * refusal's status and a link back.
 */
export function refusedPage(
  ctx: PageContext<Audience>,
  nav: NavId,
  title: string,
  refused: { status: number; text: string },
  back: { href: string; label: string },
): PageAnswer & { status: number } {
  return {
    status: refused.status,
    html: (
      <Layout title={title} session={ctx.session} csrf={ctx.csrf} nav={nav} notice={{ kind: "error", text: refused.text }}>
        <PageLink href={back.href} label={back.label} />
      </Layout>
    ),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Form values read through v2's own schemas (so the console accepts what v2 accepts), worded for a person.

export type Parsed<T> = { ok: true; value: T } | { ok: false; text: string };

/** One issue of a schema, in words: "must be at least 1000", "must hold only letters, …". */
function issueWords(issue: z.core.$ZodIssue): string {
  if (issue.code === "too_small") {
    const min = Number(issue.minimum);
    if (issue.origin === "string") return min <= 1 ? "must not be empty" : `must be at least ${min} characters`;
    if (issue.origin === "array") return `must have at least ${min}`;
    return `must be at least ${min}`;
  }
  if (issue.code === "too_big") {
    const max = Number(issue.maximum);
    if (issue.origin === "string") return `must be at most ${max} characters`;
    if (issue.origin === "array") return `must have at most ${max}`;
    return `must be at most ${max}`;
  }
  if (issue.code === "invalid_type" && (issue.expected === "int" || issue.expected === "number")) return "must be a whole number";
  return issue.message;
}

/**
 * `value` read by `schema`, or its first issue as "<label> <words>.": `label` names the field, or names it from the
 * issue's path (a form of many fields read by one schema).
 */
export function parseWith<S extends z.ZodType>(
  schema: S,
  value: unknown,
  label: string | ((path: readonly PropertyKey[]) => string),
): Parsed<z.output<S>> {
  const result = schema.safeParse(value);
  if (result.success) return { ok: true, value: result.data };
  const issue = result.error.issues[0]!;
  return { ok: false, text: `${typeof label === "string" ? label : label(issue.path)} ${issueWords(issue)}.` };
}

/** Whether `raw` is a whole number as a form types one. */
export const isWholeNumber = (raw: string): boolean => /^-?\d{1,16}$/.test(raw);

/** A whole number typed in a form: NaN for anything else (the schema then says "must be a whole number"). */
export function wholeNumber(raw: string): number {
  return isWholeNumber(raw) ? Number(raw) : Number.NaN;
}

/** Meta typed as JSON: a JSON object, or undefined for an empty field. */
export function parseMetaJson(raw: string): Parsed<Record<string, unknown> | undefined> {
  if (raw === "") return { ok: true, value: undefined };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (err) {
    return { ok: false, text: `Meta is not valid JSON: ${(err as Error).message}.` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, text: 'Meta must be a JSON object, such as {"plan": "pro"}.' };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

/** A name typed in a form longer than `max` characters: the words refusing it; undefined when it fits. */
export function nameTooLong(name: string, max: number): string | undefined {
  return name.length > max ? `The name has ${name.length} characters; at most ${max} are allowed.` : undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Forms of one button.

/** A card with one dangerous action (delete, disable): its heading, what it does, and its button. */
export function DangerCard({
  action,
  csrf,
  heading,
  children,
  button,
  confirm,
}: {
  action: string;
  csrf: string;
  heading: string;
  children: ComponentChildren;
  button: string;
  confirm?: string;
}) {
  return (
    <form method="post" action={action} class="card" data-confirm={confirm}>
      <h2>{heading}</h2>
      <Csrf token={csrf} />
      {children}
      <button type="submit" class="danger">
        {button}
      </button>
    </form>
  );
}

/** A table row's action: a form of one button posting to `action` (with `hidden` fields), labelled for screen readers. */
export function RowAction({
  action,
  csrf,
  text,
  label,
  hidden,
}: {
  action: string;
  csrf: string;
  text: string;
  label: string;
  hidden?: Readonly<Record<string, string>>;
}) {
  return (
    <form method="post" action={action}>
      <Csrf token={csrf} />
      {Object.entries(hidden ?? {}).map(([name, value]) => (
        <input key={name} type="hidden" name={name} value={value} />
      ))}
      <button type="submit" class="danger" aria-label={label}>
        {text}
      </button>
    </form>
  );
}

/**
 * What the console shows for a refusal of the core: v2's sentence for it (the console words nothing itself that v2
 * already words), or undefined when `err` is not a refusal (the surface's error page answers it).
 */
export function refusalText(err: unknown): { status: number; text: string } | undefined {
  if (findDependencyFailure(err)) return { status: 503, text: "The store is not answering right now; try again in a moment." };
  if (err instanceof DomainError) {
    const worded = v2ErrorOf(err);
    return { status: worded.status, text: worded.detail };
  }
  return undefined;
}

/**
 * Runs a core call for a form: its result, or the refusal's words for the page to show beside the form (re-rendered
 * with what the user typed). Anything else is thrown on to the surface's error page.
 */
export async function attempt<T>(work: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; status: number; text: string }> {
  try {
    return { ok: true, value: await work() };
  } catch (err) {
    const refused = refusalText(err);
    if (!refused) throw err;
    return { ok: false, ...refused };
  }
}

/**
 * Whether the session may do what `query` asks, to hide an action the page knows it would refuse. Only a hint: the
 * core checks again on every action (the operator holds everything).
 */
export function can(ctx: PageContext<Audience>, query: PermissionQuery): boolean {
  const session = ctx.session;
  if (session === undefined) return false;
  if (session.kind === "operator") return true;
  return rootKeySatisfies(query, session.rootKey.permissions);
}

/** A time for people: ISO 8601 in UTC to the second, or "never". */
export function when(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "never";
  return `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

/** One series of a chart: its label and one value per x. */
export type ChartSeries = { label: string; values: number[] };

/**
 * A time series chart: drawn by uPlot (assets/console/console.js reads `data-chart`), with the same numbers in a
 * table below for screen readers and for browsers without JavaScript.
 */
export function Chart({ label, x, series }: { label: string; x: number[]; series: ChartSeries[] }) {
  const data = JSON.stringify({ x: x.map((ms) => Math.floor(ms / 1000)), series });
  return (
    <figure class="chart-figure">
      <div class="chart" data-chart={data} role="img" aria-label={label} />
      <details>
        <summary>{label}: the numbers</summary>
        <table>
          <thead>
            <tr>
              <th scope="col">Time (UTC)</th>
              {series.map((s) => (
                <th scope="col" key={s.label}>
                  {s.label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {x.map((t, i) => (
              <tr key={t}>
                <td>{when(t)}</td>
                {series.map((s) => (
                  <td key={s.label}>{s.values[i] ?? 0}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </figure>
  );
}

/** A secret shown once (a new key, a new root key, a revealed key): with a copy button, and a warning it is not kept. */
export function SecretOnce({ id, label, value }: { id: string; label: string; value: string }) {
  return (
    <div class="card">
      <p>
        <strong>{label}</strong> It is shown only this once: copy it now.
      </p>
      <div class="secret">
        <code id={id}>{value}</code>
        <button type="button" class="secondary" data-copy={`#${id}`}>
          Copy
        </button>
      </div>
    </div>
  );
}

/** A link of its own line to another page: back to where a page came from (the list, the API), or to its sibling. */
export function PageLink({ href, label }: { href: string; label: string }) {
  return (
    <p>
      <a href={href}>{label}</a>
    </p>
  );
}

/** A table's head, a column a name (`false` leaves one out, such as the Actions of a session that may not act). */
export function ColumnHeads({ names }: { names: readonly (string | false)[] }) {
  return (
    <thead>
      <tr>
        {names.map(
          (name) =>
            name !== false && (
              <th scope="col" key={name}>
                {name}
              </th>
            ),
        )}
      </tr>
    </thead>
  );
}

/** A link to the next page of a cursor-paged list (keeping the list's other query parameters). */
export function NextPage({ href }: { href: string | undefined }) {
  if (href === undefined) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <a href={href}>Next page →</a>
    </nav>
  );
}

/** A label with its control, and a hint below. */
export function Field({ id, label, hint, children }: { id: string; label: string; hint?: string; children: ComponentChildren }) {
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {children}
      {hint && <p class="hint">{hint}</p>}
    </div>
  );
}

export function Badge({ on, yes, no }: { on: boolean; yes: string; no: string }) {
  return <span class={`badge ${on ? "on" : "off"}`}>{on ? yes : no}</span>;
}
