import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { VNode } from "preact";
import { renderToString } from "preact-render-to-string";
import type { ConsoleSession } from "../core/console/console.sessions.js";
import type { Caller } from "../core/caller.js";
import type { Services } from "../services.js";
import { withRequestDeadline } from "../storage/deadline.js";

/**
 * Who may open a page: anybody (sign-in), any signed-in session, a root key session (the workspace's pages), or an
 * operator session (workspaces, status).
 */
export type Audience = "none" | "session" | "rootKey" | "operator";

type SessionOf<A extends Audience> = A extends "rootKey"
  ? Extract<ConsoleSession, { kind: "root_key" }>
  : A extends "operator"
    ? Extract<ConsoleSession, { kind: "operator" }>
    : A extends "session"
      ? ConsoleSession
      : ConsoleSession | undefined;

/** A form's fields as @fastify/formbody parses them: a repeated name (checkboxes) gives an array. */
export type FormFields = Readonly<Record<string, string | string[] | undefined>>;

export type PageContext<A extends Audience> = {
  deps: Services;
  req: FastifyRequest;
  reply: FastifyReply;
  session: SessionOf<A>;
  /** The session's CSRF token, for the forms the page renders ("" without a session). */
  csrf: string;
  /** The request's query string. */
  query: Readonly<Record<string, string | undefined>>;
  /** A POST's form fields ({} for a GET). */
  form: FormFields;
  /** The root key session's caller (what every core call of a workspace page acts as). */
  caller: A extends "rootKey" ? Caller : undefined;
  /** Whether the request came from htmx (a fragment may be answered instead of a whole page). */
  htmx: boolean;
};

/** What a page handler answers: a page (or fragment) with a status, or a redirect (POST-redirect-GET). */
export type PageAnswer = { html: VNode; status?: number } | { redirect: string };

export type PageRoute<A extends Audience = Audience> = {
  method: "GET" | "POST";
  /** Under the surface's prefix, e.g. `/apis/:apiId`. */
  path: string;
  audience: A;
  handler: (ctx: PageContext<A>) => Promise<PageAnswer>;
};

/** One page route of the console (a page module exports a list of these; pages.ts lists the modules). */
export function definePage<A extends Audience>(route: PageRoute<A>): PageRoute<A> {
  return route;
}

/** The console's state of a request, set by the surface's hooks (surface.ts) before any page handler. */
export type ConsoleRequestState = { session: ConsoleSession | undefined; csrf: string; prefix: string };

const states = new WeakMap<FastifyRequest, ConsoleRequestState>();

export function setConsoleState(req: FastifyRequest, state: ConsoleRequestState): void {
  states.set(req, state);
}

export function consoleStateOf(req: FastifyRequest): ConsoleRequestState {
  return states.get(req) ?? { session: undefined, csrf: "", prefix: "/console" };
}

/** Sends `html` as a whole page: a doctype, UTF-8, never cached (the surface sets the security headers). */
export function sendHtml(reply: FastifyReply, html: VNode, status = 200): FastifyReply {
  return reply
    .code(status)
    .type("text/html; charset=utf-8")
    .send(`<!doctype html>${renderToString(html)}`);
}

/** Registers `routes` on the surface `app` (the console plugin's context), each within the request deadline. */
export function registerPages(app: FastifyInstance, deps: Services, routes: readonly PageRoute[], deny: DenyPage): void {
  for (const route of routes) {
    app.route({
      method: route.method,
      url: route.path,
      handler: async (req, reply) => {
        const state = consoleStateOf(req);
        const session = state.session;
        const refused = refusalFor(route.audience, session);
        if (refused) return deny(req, reply, refused);
        const ctx = {
          deps,
          req,
          reply,
          session,
          csrf: state.csrf,
          query: (req.query ?? {}) as Record<string, string | undefined>,
          form: (route.method === "POST" ? (req.body ?? {}) : {}) as FormFields,
          caller: session?.kind === "root_key" ? session.caller : undefined,
          htmx: req.headers["hx-request"] === "true",
        } as PageContext<Audience>;
        const started = performance.now();
        const answer = await withRequestDeadline(deps.store.requestDeadlineMs, () => route.handler(ctx));
        if ("redirect" in answer) return redirect(req, reply, `${state.prefix}${answer.redirect}`);
        const page = `<!doctype html>${renderToString(answer.html)}`;
        // The page's own time (its core calls and the rendering), for docs/benchmarks.md and a browser's devtools.
        reply.header("Server-Timing", `page;dur=${(performance.now() - started).toFixed(1)}`);
        return reply
          .code(answer.status ?? 200)
          .type("text/html; charset=utf-8")
          .send(page);
      },
    });
  }
}

export type DenyPage = (req: FastifyRequest, reply: FastifyReply, why: "signIn" | "operatorOnly" | "rootKeyOnly") => FastifyReply;

function refusalFor(audience: Audience, session: ConsoleSession | undefined): "signIn" | "operatorOnly" | "rootKeyOnly" | undefined {
  if (audience === "none") return undefined;
  if (session === undefined) return "signIn";
  if (audience === "rootKey" && session.kind !== "root_key") return "rootKeyOnly";
  if (audience === "operator" && session.kind !== "operator") return "operatorOnly";
  return undefined;
}

/** A 303 to `location` (POST-redirect-GET), or htmx's HX-Redirect for a request htmx made. */
export function redirect(req: FastifyRequest, reply: FastifyReply, location: string): FastifyReply {
  if (req.headers["hx-request"] === "true") return reply.code(200).header("HX-Redirect", location).send("");
  return reply.code(303).header("Location", location).send("");
}

/** The first value of a form field, trimmed ("" when absent). */
export function field(form: FormFields, name: string): string {
  const value = form[name];
  return (Array.isArray(value) ? (value[0] ?? "") : (value ?? "")).trim();
}

/** Every value of a form field (checkboxes, a multi-select). */
export function fields(form: FormFields, name: string): string[] {
  const value = form[name];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}
