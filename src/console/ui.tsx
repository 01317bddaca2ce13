import type { ComponentChildren } from "preact";
import { rootKeySatisfies } from "../core/auth/permissions.urn.js";
import type { PermissionQuery } from "../errors.js";
import { DomainError } from "../errors.js";
import { findDependencyFailure } from "../storage/dependency.js";
import { v2ErrorOf } from "../wire/v2/errors.js";
import type { Audience, PageContext } from "./page.js";

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
