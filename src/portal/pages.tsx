import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Chart, ColumnHeads, Field, NextPage, SecretOnce, when } from "../console/ui.js";
import type { ListApiKeysRules } from "../core/apis/apis.core.js";
import type { Caller } from "../core/caller.js";
import {
  listPortalKeys,
  PORTAL_SPARK_DAYS,
  portalKeysUsage,
  portalRerollTarget,
  portalVerifications,
  rerollPortalKey,
} from "../core/portals/portals.access.js";
import {
  exchangePortalCode,
  type PortalSession,
  portalSessionCaller,
  portalSessionIdOfCode,
  requireScope,
  signOutPortalSession,
} from "../core/portals/portals.sessions.js";
import { PortalRefusedError } from "../errors.js";
import { originOf } from "../http/origin.js";
import type { Services } from "../services.js";
import { withRequestDeadline } from "../storage/deadline.js";
import { at, PortalLayout, tabsOf } from "./layout.js";
import {
  clearPortalCookie,
  httpError,
  portalErrorPage,
  portalStateOf,
  seeOther,
  sendPage,
  sessionEndedPage,
  setPortalCookie,
} from "./surface.js";

/** As portal.listKeys (v2): a cursor at the next page's first id, no total; never decrypted. */
const PORTAL_PAGE_KEYS_RULES: ListApiKeysRules = { decryptNeedsEncryptingApi: true, cursor: "from", total: false, ratelimits: false };

/** The grace periods a reroll offers: how long the old key keeps verifying. */
export const GRACE_CHOICES = [
  { ms: 0, label: "Now" },
  { ms: 3_600_000, label: "In 1 hour" },
  { ms: 86_400_000, label: "In 24 hours" },
  { ms: 7 * 86_400_000, label: "In 7 days" },
] as const;

/** The windows of the usage tab. */
export const USAGE_RANGES = { "24h": 86_400_000, "7d": 7 * 86_400_000, "30d": 30 * 86_400_000 } as const;
type UsageRange = keyof typeof USAGE_RANGES;

const SERIES = [
  ["valid", "Valid"],
  ["rateLimited", "Rate limited"],
  ["usageExceeded", "Usage exceeded"],
  ["disabled", "Disabled"],
  ["expired", "Expired"],
  ["forbidden", "Forbidden"],
  ["insufficientPermissions", "Insufficient permissions"],
] as const;

type Ctx = {
  deps: Services;
  req: FastifyRequest;
  reply: FastifyReply;
  session: PortalSession;
  caller: Caller;
  csrf: string;
  query: Readonly<Record<string, string | undefined>>;
  form: Readonly<Record<string, unknown>>;
};

function queryOf(req: FastifyRequest): Record<string, string | undefined> {
  const raw = (req.query ?? {}) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, typeof v === "string" ? v : undefined]));
}

/** The first scope-allowed tab of a session. */
function firstTab(session: PortalSession): string {
  return tabsOf(session)[0]?.path ?? "/keys";
}

export function registerPortalPages(app: FastifyInstance, deps: Services): void {
  /** A page of a live session: without one, the page saying the session ended (or never began). */
  const page = (method: "GET" | "POST", url: string, handler: (ctx: Ctx) => Promise<FastifyReply>) =>
    app.route({
      method,
      url,
      handler: async (req, reply) => {
        const { session, csrf } = portalStateOf(req);
        if (session === undefined) return sessionEndedPage(req, reply, deps);
        const caller = portalSessionCaller(session, originOf("portal", deps.config.trustProxy, req));
        const form = method === "POST" ? ((req.body ?? {}) as Record<string, unknown>) : {};
        return withRequestDeadline(deps.store.requestDeadlineMs, () =>
          handler({ deps, req, reply, session, caller, csrf, query: queryOf(req), form }),
        );
      },
    });

  // The URL portal.createSession answers: its code exchanged here, server-side, for the session's cookie; then a
  // redirect, so that the code leaves the address bar (and the history) at once.
  app.get("/", async (req, reply) => {
    const code = queryOf(req).code;
    const state = portalStateOf(req);
    if (code !== undefined) {
      reply.header("Referrer-Policy", "no-referrer");
      const origin = originOf("portal", deps.config.trustProxy, req);
      try {
        if (code.length > 1024) throw new PortalRefusedError({ kind: "portalCodeInvalid" });
        const { accessToken, expiresAt } = await withRequestDeadline(deps.store.requestDeadlineMs, () =>
          exchangePortalCode(deps, code, origin),
        );
        setPortalCookie(req, reply, deps, accessToken, expiresAt);
        return seeOther(reply, at("/"));
      } catch (err) {
        if (!(err instanceof PortalRefusedError)) throw err;
        // A reload of the link after its exchange: the browser already holds that very session's cookie.
        if (state.session !== undefined && (await portalSessionIdOfCode(deps.db, code)) === state.session.id) {
          return seeOther(reply, at("/"));
        }
        return portalErrorPage(req, reply, 401, "This link is invalid, expired or has already been used; ask for a new one.");
      }
    }
    if (state.session === undefined) return sessionEndedPage(req, reply, deps);
    return seeOther(reply, at(firstTab(state.session)));
  });

  page("GET", "/keys", keysPage);
  page("GET", "/keys/:keyId/reroll", rerollConfirmPage);
  page("POST", "/keys/:keyId/reroll", rerollDone);
  page("GET", "/usage", usagePage);
  page("POST", "/sign-out", async ({ deps, req, reply, session }) => {
    await signOutPortalSession(deps, session, originOf("portal", deps.config.trustProxy, req));
    clearPortalCookie(reply);
    return sendPage(
      reply,
      <PortalLayout title="Signed out" session={undefined} csrf="" returnUrl={session.returnUrl ?? undefined}>
        <p>You have signed out of {session.portal.title ?? session.portal.name}. To come back, open the portal from your provider again.</p>
      </PortalLayout>,
    );
  });
}

async function keysPage({ deps, reply, session, caller, csrf, query }: Ctx): Promise<FastifyReply> {
  if (!session.scopes.some((s) => s.startsWith("keys:"))) throw new PortalRefusedError({ kind: "portalScopeMissing", scope: "keys:read" });
  const canList = session.scopes.includes("keys:read");
  const canReroll = session.scopes.includes("keys:reroll");
  const cursor = query.cursor !== undefined && query.cursor !== "" && query.cursor.length <= 1024 ? query.cursor : undefined;
  const keysPage = canList ? await listPortalKeys(deps, session, caller, { limit: 50, cursor }, PORTAL_PAGE_KEYS_RULES) : undefined;
  const keys = keysPage?.keys ?? [];
  const usage =
    canList && session.scopes.includes("analytics:read")
      ? await portalKeysUsage(
          deps,
          session,
          keys.map((k) => k.id),
        )
      : undefined;
  return sendPage(
    reply,
    <PortalLayout title="Your API keys" session={session} csrf={csrf} tab="keys">
      {!canList && <p>This session may not list your keys.</p>}
      {canList && keys.length === 0 && <p>You have no keys yet.</p>}
      {keys.length > 0 && (
        <table>
          <caption>Your keys</caption>
          <ColumnHeads
            names={[
              "Name",
              "Start",
              "Created",
              "Last used",
              "Expires",
              "Credits left",
              usage !== undefined && `Verifications, last ${PORTAL_SPARK_DAYS} days`,
              canReroll && "Actions",
            ]}
          />
          <tbody>
            {keys.map((k) => (
              <tr key={k.id}>
                <td>{k.name ?? <span class="muted">unnamed</span>}</td>
                <td>
                  <code>{k.start}…</code>
                </td>
                <td>{when(k.createdAtM)}</td>
                <td>{when(k.lastUsedAtM)}</td>
                <td>{k.expires ? when(k.expires.getTime()) : "never"}</td>
                <td>{k.remaining === null ? "unlimited" : String(k.remaining)}</td>
                {usage !== undefined && (
                  <td>
                    <Sparkline values={usage.get(k.id) ?? []} />
                  </td>
                )}
                {canReroll && (
                  <td>
                    <a href={at(`/keys/${encodeURIComponent(k.id)}/reroll`)} aria-label={`Reroll ${k.name ?? k.start}`}>
                      Reroll
                    </a>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <NextPage href={keysPage?.cursor === undefined ? undefined : at(`/keys?cursor=${encodeURIComponent(keysPage.cursor)}`)} />
    </PortalLayout>,
  );
}

/** A key's usage as a small line, drawn on the server (no script needed), its numbers in its label. */
export function Sparkline({ values }: { values: readonly number[] }) {
  const width = 112;
  const height = 28;
  const max = Math.max(1, ...values);
  const step = values.length > 1 ? (width - 4) / (values.length - 1) : 0;
  const points = values.map((v, i) => `${(2 + i * step).toFixed(1)},${(height - 2 - (v / max) * (height - 4)).toFixed(1)}`).join(" ");
  const total = values.reduce((a, b) => a + b, 0);
  return (
    <svg
      class="spark"
      viewBox={`0 0 ${width} ${height}`}
      role="img"
      aria-label={`${total} verification${total === 1 ? "" : "s"} in the last ${values.length} days, by day: ${values.join(", ")}`}
    >
      <line x1="0" y1={height - 1} x2={width} y2={height - 1} />
      <polyline points={points} />
    </svg>
  );
}

function keyIdOf(req: FastifyRequest): string {
  return ((req.params as { keyId?: string }).keyId ?? "").slice(0, 255);
}

async function rerollConfirmPage({ deps, req, reply, session, csrf }: Ctx): Promise<FastifyReply> {
  const target = await portalRerollTarget(deps, session, keyIdOf(req));
  const label = target.name ?? (target.start === null ? target.id : `${target.start}…`);
  return sendPage(
    reply,
    <PortalLayout title={`Reroll ${label}`} session={session} csrf={csrf} tab="keys">
      <form method="post" action={at(`/keys/${encodeURIComponent(target.id)}/reroll`)} class="card">
        <p>
          A new key replaces <strong>{label}</strong>
          {target.start !== null && target.name !== null && (
            <>
              {" "}
              (<code>{target.start}…</code>)
            </>
          )}
          , with the same settings. The new key is shown only once, on the next page.
        </p>
        <input type="hidden" name="_csrf" value={csrf} />
        <Field id="grace" label="The old key stops verifying" hint="Keep it working a while if your systems still use it.">
          <select id="grace" name="grace">
            {GRACE_CHOICES.map((c) => (
              <option key={c.ms} value={String(c.ms)} selected={c.ms === 3_600_000}>
                {c.label}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit">Reroll key</button>
      </form>
      <p>
        <a href={at("/keys")}>Back to your keys</a>
      </p>
    </PortalLayout>,
  );
}

async function rerollDone({ deps, req, reply, session, caller, csrf, form }: Ctx): Promise<FastifyReply> {
  const grace = GRACE_CHOICES.find((c) => String(c.ms) === form.grace);
  if (grace === undefined) throw httpError(400, "Choose when the old key stops verifying.");
  const created = await rerollPortalKey(deps, session, caller, { keyId: keyIdOf(req), expiration: grace.ms });
  return sendPage(
    reply,
    <PortalLayout title="Your new key" session={session} csrf={csrf} tab="keys" notice={{ kind: "ok", text: "The key was rerolled." }}>
      <SecretOnce id="new-key" label="Your new key." value={created.key} />
      <p>
        {grace.ms === 0
          ? "The old key has stopped verifying."
          : `The old key keeps verifying until ${when(deps.clock.now() + grace.ms)} (rounded up to the minute), then stops.`}
      </p>
      <p>
        <a href={at("/keys")}>Back to your keys</a>
      </p>
    </PortalLayout>,
  );
}

async function usagePage({ deps, reply, session, csrf, query }: Ctx): Promise<FastifyReply> {
  requireScope(session, "analytics:read");
  const range: UsageRange = query.range !== undefined && Object.hasOwn(USAGE_RANGES, query.range) ? (query.range as UsageRange) : "7d";
  const endTime = deps.clock.now();
  const window = Math.min(USAGE_RANGES[range], deps.config.analyticsRetentionDays * 86_400_000);
  const points = await portalVerifications(deps, session, { startTime: endTime - window, endTime });
  const total = points.reduce((a, p) => a + p.total, 0);
  const shown = SERIES.filter(([counter]) => counter === "valid" || points.some((p) => p[counter] > 0));
  return sendPage(
    reply,
    <PortalLayout title="Usage" session={session} csrf={csrf} tab="usage">
      <nav aria-label="Time range">
        <ul class="ranges">
          {(Object.keys(USAGE_RANGES) as UsageRange[]).map((r) => (
            <li key={r}>
              <a href={at(`/usage?range=${r}`)} aria-current={r === range ? "page" : undefined}>
                {r === "24h" ? "Last 24 hours" : r === "7d" ? "Last 7 days" : "Last 30 days"}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <p id="usage-total">{`${total} ${total === 1 ? "verification" : "verifications"} of your keys in this period, by outcome.`}</p>
      <Chart
        label="Verifications by outcome"
        x={points.map((p) => p.time)}
        series={shown.map(([counter, label]) => ({ label, values: points.map((p) => p[counter]) }))}
      />
    </PortalLayout>,
  );
}
