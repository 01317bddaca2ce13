import { AUDIT_EVENTS } from "../../core/audit/audit.events.js";
import {
  type AuditEntry,
  type AuditLogQuery,
  type AuditReader,
  decodeAuditCursor,
  listAuditLogs,
  READ_AUDIT_LOGS,
} from "../../core/audit/audit.read.js";
import { Layout, to } from "../layout.js";
import { definePage, type PageAnswer, type PageContext } from "../page.js";
import { attempt, ColumnHeads, Field, NextPage, when } from "../ui.js";

/** Entries per page of the console's audit log. */
export const AUDIT_PAGE = 50;

const DATETIME_LOCAL = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,3})?)?$/;

/** A datetime-local value read as UTC: unix ms, or undefined when it is not one. */
export function utcOf(value: string): number | undefined {
  const m = DATETIME_LOCAL.exec(value);
  if (!m) return undefined;
  const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6] ?? 0));
  // Date.UTC rolls over (Feb 30 → Mar 2): a value that does not come back the same is no date.
  const back = new Date(ms).toISOString();
  return back.slice(0, 16) === value.slice(0, 16) ? ms : undefined;
}

/** The filters of the audit page, as typed (to fill the form again) and as the core's query. */
export type AuditFilters = { text: Record<string, string>; query: AuditLogQuery };

const FILTER_NAMES = ["event", "actor", "target", "since", "until", "workspace"] as const;

/** Reads the audit page's query string: the core's query, or the sentence saying which filter is wrong. */
export function auditFiltersOf(
  q: Readonly<Record<string, string | undefined>>,
  withWorkspace: boolean,
): AuditFilters | { problem: string } {
  const text: Record<string, string> = {};
  for (const name of FILTER_NAMES) text[name] = (q[name] ?? "").trim();
  const query: { -readonly [K in keyof AuditLogQuery]: AuditLogQuery[K] } = { limit: AUDIT_PAGE };
  if (text.event) {
    if (!(AUDIT_EVENTS as readonly string[]).includes(text.event)) return { problem: `There is no audit event "${text.event}".` };
    query.events = [text.event];
  }
  for (const [name, key] of [
    ["actor", "actorId"],
    ["target", "targetId"],
    ["workspace", "workspaceId"],
  ] as const) {
    const value = text[name]!;
    if (value === "" || (name === "workspace" && !withWorkspace)) continue;
    if (value.length > 255) return { problem: `The ${name} filter has ${value.length} characters; at most 255 are allowed.` };
    query[key] = value;
  }
  for (const name of ["since", "until"] as const) {
    const value = text[name]!;
    if (value === "") continue;
    const ms = utcOf(value);
    if (ms === undefined) return { problem: `"${value}" is not a date and time (YYYY-MM-DDTHH:MM, in UTC) for ${name}.` };
    query[name] = ms;
  }
  if (query.since !== undefined && query.until !== undefined && query.since >= query.until) {
    return { problem: "since must be before until." };
  }
  const cursor = q.cursor;
  if (cursor !== undefined && cursor !== "") {
    if (decodeAuditCursor(cursor) === undefined) return { problem: "That is not a cursor of this list: start again from the first page." };
    query.cursor = cursor;
  }
  return { text, query };
}

/** The query string of a list with these filters (and a cursor), for its next page's link. */
function searchOf(text: Record<string, string>, cursor: string): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(text)) if (value !== "") params.set(name, value);
  params.set("cursor", cursor);
  return params.toString();
}

function Filters({ action, text, withWorkspace }: { action: string; text: Record<string, string>; withWorkspace: boolean }) {
  return (
    <form method="get" action={to(action)} class="card">
      <div class="row">
        <Field id="event" label="Event">
          <select id="event" name="event">
            <option value="">Any event</option>
            {AUDIT_EVENTS.map((e) => (
              <option key={e} value={e} selected={text.event === e}>
                {e}
              </option>
            ))}
          </select>
        </Field>
        <Field id="actor" label="Actor id">
          <input id="actor" name="actor" value={text.actor ?? ""} maxLength={255} />
        </Field>
        <Field id="target" label="Target id">
          <input id="target" name="target" value={text.target ?? ""} maxLength={255} />
        </Field>
        {withWorkspace && (
          <Field id="workspace" label="Workspace id">
            <input id="workspace" name="workspace" value={text.workspace ?? ""} maxLength={255} />
          </Field>
        )}
        <Field id="since" label="Since (UTC)">
          <input id="since" name="since" type="datetime-local" step={1} value={text.since ?? ""} />
        </Field>
        <Field id="until" label="Until (UTC, exclusive)">
          <input id="until" name="until" type="datetime-local" step={1} value={text.until ?? ""} />
        </Field>
        <button type="submit">Filter</button>
      </div>
    </form>
  );
}

function Entries({ entries, withWorkspace }: { entries: AuditEntry[]; withWorkspace: boolean }) {
  if (entries.length === 0) return <p class="muted">No audit entries.</p>;
  return (
    <table>
      <ColumnHeads names={["Time", withWorkspace && "Workspace", "Event", "Actor", "Targets", "Description", "Origin"]} />
      <tbody>
        {entries.map((e) => (
          <tr key={e.id}>
            <td>{when(e.time)}</td>
            {withWorkspace && <td class="mono">{e.workspaceId ?? "none"}</td>}
            <td class="mono">{e.event}</td>
            <td>
              {e.actor.type} <span class="mono">{e.actor.id}</span>
              {e.actor.name !== e.actor.id && <> ({e.actor.name})</>}
            </td>
            <td>
              {e.targets.map((t) => (
                <div key={`${t.type}:${t.id}`}>
                  {t.type} <span class="mono">{t.id}</span>
                  {t.name !== undefined && <> ({t.name})</>}
                </div>
              ))}
            </td>
            <td>{e.description}</td>
            <td>
              {e.context.surface}
              {e.context.location !== undefined && <div class="muted">{e.context.location}</div>}
              {e.context.requestId !== undefined && <div class="muted mono">{e.context.requestId}</div>}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The audit log page, for a root key session (its workspace) or the operator (every workspace, or one). */
export async function auditPage(ctx: PageContext<"rootKey"> | PageContext<"operator">, path: string): Promise<PageAnswer> {
  const operator = ctx.session.kind === "operator";
  const filters = auditFiltersOf(ctx.query, operator);
  const reader: AuditReader = ctx.session.kind === "operator" ? { operator: true } : { caller: ctx.session.caller };
  const text = "text" in filters ? filters.text : Object.fromEntries(FILTER_NAMES.map((n) => [n, ctx.query[n] ?? ""]));
  const listed = "problem" in filters ? undefined : await attempt(() => listAuditLogs(ctx.deps, reader, filters.query));
  const problem = "problem" in filters ? { status: 400, text: filters.problem } : listed && !listed.ok ? listed : undefined;
  return {
    status: problem?.status ?? 200,
    html: (
      <Layout
        title="Audit log"
        session={ctx.session}
        csrf={ctx.csrf}
        nav="audit"
        notice={problem ? { kind: "error", text: problem.text } : undefined}
      >
        <p class="hint">
          Newest first. {operator ? "Every workspace's entries, or one's." : `Reading it needs "${READ_AUDIT_LOGS}" (or "*").`} Times are
          UTC.
        </p>
        <Filters action={path} text={text} withWorkspace={operator} />
        {listed?.ok && (
          <>
            <Entries entries={listed.value.entries} withWorkspace={operator} />
            <NextPage href={listed.value.cursor === undefined ? undefined : to(`${path}?${searchOf(text, listed.value.cursor)}`)} />
          </>
        )}
      </Layout>
    ),
  };
}

export const auditPages = [definePage({ method: "GET", path: "/audit", audience: "rootKey", handler: (ctx) => auditPage(ctx, "/audit") })];
