import cookie from "@fastify/cookie";
import formbody from "@fastify/formbody";
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { csrfTokenOf } from "../core/console/console.sessions.js";
import { secretsEqual } from "../crypto/hash.js";
import { originOf, sentFromOwnPages } from "../http/origin.js";
import type { Services } from "../services.js";
import { withRequestDeadline } from "../storage/deadline.js";
import { assets } from "./assets.js";
import { Layout } from "./layout.js";
import { consoleStateOf, type DenyPage, redirect, registerPages, sendHtml, setConsoleState } from "./page.js";
import { consolePages } from "./pages.js";
import { refusalText } from "./ui.js";

/** The largest form the console accepts: far beyond any of its forms (a key's meta is bounded by the core). */
export const CONSOLE_BODY_LIMIT = 256 * 1024;

/** The session cookie: `__Host-` (Secure, Path=/, no Domain) when served over https, else a plain name. */
export const SECURE_COOKIE = "__Host-keyhaven_session";
export const PLAIN_COOKIE = "keyhaven_session";

/**
 * The console's Content-Security-Policy: scripts, styles and connections from this origin only (no inline script or
 * style attribute anywhere), no plugins, no framing, forms posting only here.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

/** Whether `req` reached the console over https (directly, or through a trusted proxy's X-Forwarded-Proto). */
export function servedOverHttps(req: FastifyRequest, publicUrl: string | undefined): boolean {
  return req.protocol === "https" || (publicUrl?.startsWith("https://") ?? false);
}

/**
 * The web console (issue 37), registered under `/console` on the API's listener or on its own (app.ts): its form
 * parser, security headers, sessions (cookie → ConsoleSessions), CSRF and Origin checks on every POST, its HTML error
 * pages and 404, its assets and its pages (pages.ts). Every action calls the core with the session's caller.
 */
export const consoleSurface: FastifyPluginAsync<{ deps: Services }> = async (app, { deps }) => {
  // Read the files now: a broken installation fails at start, not on a user's first page.
  assets();
  app.removeAllContentTypeParsers();
  await app.register(formbody, { bodyLimit: CONSOLE_BODY_LIMIT });
  app.addContentTypeParser("*", (req, _payload, done) => {
    done(httpError(415, `The console accepts forms only (got ${String(req.headers["content-type"] ?? "none").slice(0, 100)})`), undefined);
  });
  await app.register(cookie);

  app.addHook("onRequest", async (req, reply) => {
    reply.header("Content-Security-Policy", CONSOLE_CSP);
    reply.header("X-Content-Type-Options", "nosniff");
    reply.header("X-Frame-Options", "DENY");
    reply.header("Referrer-Policy", "same-origin");
    reply.header("Cross-Origin-Opener-Policy", "same-origin");
    reply.header("Cache-Control", "no-store");
    if (req.url.startsWith("/console/assets/")) return;
    const token = req.cookies[SECURE_COOKIE] ?? req.cookies[PLAIN_COOKIE];
    const origin = originOf("console", deps.config.trustProxy, req);
    const session =
      token === undefined
        ? undefined
        : await withRequestDeadline(deps.store.requestDeadlineMs, () => deps.consoleSessions.resolve(token, origin));
    setConsoleState(req, { session, csrf: session && token ? csrfTokenOf(token) : "", prefix: "/console" });
  });

  // Every state-changing request: from a page of this console (Origin, else Referer), and with the session's CSRF token.
  app.addHook("preHandler", async (req) => {
    if (req.method !== "POST") return;
    if (!sentFromOwnPages(req, deps.config.publicUrl)) {
      throw httpError(403, "This form was sent from another site (its Origin is not this console's); nothing was changed.");
    }
    const state = consoleStateOf(req);
    if (state.session === undefined) return;
    const sent = (req.body as Record<string, unknown> | undefined)?._csrf ?? req.headers["x-csrf-token"];
    if (typeof sent !== "string" || !secretsEqual(sent, state.csrf)) {
      throw httpError(403, "This form's security token is missing or out of date; reload the page and try again. Nothing was changed.");
    }
  });

  app.get("/assets/:digest/:name", async (req, reply) => {
    const { digest, name } = req.params as { digest: string; name: string };
    const asset = assets().get(name);
    if (!asset || asset.digest !== digest) return notFound(req, reply);
    return reply.header("Cache-Control", "public, max-age=31536000, immutable").type(asset.type).send(asset.body);
  });

  const deny: DenyPage = (req, reply, why) => {
    if (why === "signIn") {
      const next = req.method === "GET" ? `?next=${encodeURIComponent(req.url)}` : "";
      return redirect(req, reply, `/console/sign-in${next}`);
    }
    const text =
      why === "operatorOnly" ? "This page is the operator's: sign in with the operator token." : "This page needs a root key session.";
    return errorPage(req, reply, 403, text);
  };
  registerPages(app, deps, consolePages, deny);

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const { status, text } = answerOf(err);
    if (status >= 500) req.log.error({ err }, "console request failed");
    return errorPage(req, reply, status, text);
  });
  app.setNotFoundHandler((req, reply) => notFound(req, reply));
};

function notFound(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  return errorPage(req, reply, 404, "There is no such page in the console.");
}

/** An error as a page, in the layout (its session's navigation kept), with the request id to quote. */
function errorPage(req: FastifyRequest, reply: FastifyReply, status: number, text: string): FastifyReply {
  const { session, csrf } = consoleStateOf(req);
  const title = status === 404 ? "Not found" : status === 403 ? "Not allowed" : status >= 500 ? "Something went wrong" : "Not done";
  return sendHtml(
    reply,
    <Layout title={title} session={session} csrf={csrf} notice={{ kind: "error", text }}>
      <p class="muted">
        Request id <code>{req.id}</code>
      </p>
      <p>
        <a href="/console/">Back to the console</a>
      </p>
    </Layout>,
    status,
  );
}

/** The status and sentence of a failure: the core's refusals in v2's words; Fastify's own (413, 415, …) as they are. */
function answerOf(err: FastifyError): { status: number; text: string } {
  const refused = refusalText(err);
  if (refused) return refused;
  const status = typeof err.statusCode === "number" ? err.statusCode : 500;
  if (status === 413) return { status, text: "This form is too large for the console." };
  if (status >= 400 && status < 500) return { status, text: err.message };
  return { status: 500, text: "The console could not answer this request; it has been logged." };
}

function httpError(status: number, message: string): FastifyError {
  return Object.assign(new Error(message), { statusCode: status, code: "CONSOLE", name: "ConsoleError" }) as FastifyError;
}
