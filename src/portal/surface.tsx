import { createHmac } from "node:crypto";
import cookie from "@fastify/cookie";
import formbody from "@fastify/formbody";
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { VNode } from "preact";
import { renderToString } from "preact-render-to-string";
import { servedOverHttps } from "../console/surface.js";
import { refusalText } from "../console/ui.js";
import { type PortalSession, resolvePortalSession, returnUrlOfToken } from "../core/portals/portals.sessions.js";
import { secretsEqual } from "../crypto/hash.js";
import { sentFromOwnPages } from "../http/origin.js";
import { PortalRefusedError } from "../errors.js";
import type { Services } from "../services.js";
import { withRequestDeadline } from "../storage/deadline.js";
import { portalAssets } from "./assets.js";
import { expiredReturnUrl, PortalLayout } from "./layout.js";
import { registerPortalPages } from "./pages.js";

/** The largest form the portal page accepts: its forms hold a token and a number. */
export const PORTAL_BODY_LIMIT = 16 * 1024;

/**
 * The portal session's cookie: `__Host-` (Secure, Path=/, no Domain) when served over https, else a plain name on
 * Path=/portal. Neither is the console's cookie nor v2's `portal_session`, so a portal page's session reaches no
 * console page and no API route, and theirs reach no portal page.
 */
export const PORTAL_SECURE_COOKIE = "__Host-keyhaven_portal";
export const PORTAL_PLAIN_COOKIE = "keyhaven_portal";

/**
 * The portal page's Content-Security-Policy: the console's (scripts, styles and connections from this origin only, no
 * inline script or style, no framing, forms posting only here), with images from any https URL for the portal's logo.
 */
export const PORTAL_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: https:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

/** What the surface's hooks know of a request before any page: its live session, its token, its CSRF token. */
export type PortalRequestState = {
  session: PortalSession | undefined;
  /** The cookie's token, whether or not its session still works ("" without one). */
  token: string;
  csrf: string;
};

const states = new WeakMap<FastifyRequest, PortalRequestState>();

export function portalStateOf(req: FastifyRequest): PortalRequestState {
  return states.get(req) ?? { session: undefined, token: "", csrf: "" };
}

/** A session's CSRF token: derived from its access token (never stored), so it changes with every session. */
export function portalCsrfOf(token: string): string {
  return createHmac("sha256", token).update("keyhaven portal csrf").digest("base64url");
}

/** Sends `html` as a whole page (the surface's hooks set the security headers and no-store). */
export function sendPage(reply: FastifyReply, html: VNode, status = 200): FastifyReply {
  return reply
    .code(status)
    .type("text/html; charset=utf-8")
    .send(`<!doctype html>${renderToString(html)}`);
}

/** A 303 to a portal path (POST-redirect-GET; after the exchange, so the code leaves the address bar). */
export function seeOther(reply: FastifyReply, location: string): FastifyReply {
  return reply.code(303).header("Location", location).send("");
}

/** Sets the session cookie, HttpOnly and SameSite=Strict, until the token expires. */
export function setPortalCookie(req: FastifyRequest, reply: FastifyReply, deps: Services, token: string, expiresAtM: number): void {
  const secure = servedOverHttps(req, deps.config.publicUrl);
  const maxAge = Math.max(0, Math.floor((expiresAtM - deps.clock.now()) / 1000));
  reply.setCookie(secure ? PORTAL_SECURE_COOKIE : PORTAL_PLAIN_COOKIE, token, {
    httpOnly: true,
    sameSite: "strict",
    secure,
    path: secure ? "/" : "/portal",
    maxAge,
  });
}

/** Clears the session cookie (both names: the page may have been reached over http and https). */
export function clearPortalCookie(reply: FastifyReply): void {
  reply.clearCookie(PORTAL_SECURE_COOKIE, { path: "/", secure: true, httpOnly: true, sameSite: "strict" });
  reply.clearCookie(PORTAL_PLAIN_COOKIE, { path: "/portal", httpOnly: true, sameSite: "strict" });
}

/**
 * The customer portal page (issue 39 §2), under `/portal` on the API's listener: its form parser, the console's web
 * security (headers, CSP, CSRF and Origin checks on every POST), its own cookie, its HTML error pages and 404, its
 * assets, the portal's theme sheet and its pages (pages.tsx). Every page calls the core as the session's caller.
 */
export const portalSurface: FastifyPluginAsync<{ deps: Services }> = async (app, { deps }) => {
  portalAssets();
  app.removeAllContentTypeParsers();
  await app.register(formbody, { bodyLimit: PORTAL_BODY_LIMIT });
  app.addContentTypeParser("*", (req, _payload, done) => {
    done(httpError(415, `The portal accepts forms only (got ${String(req.headers["content-type"] ?? "none").slice(0, 100)})`), undefined);
  });
  await app.register(cookie);

  app.addHook("onRequest", async (req, reply) => {
    reply.header("Content-Security-Policy", PORTAL_CSP);
    reply.header("X-Content-Type-Options", "nosniff");
    reply.header("X-Frame-Options", "DENY");
    // No page of the portal tells another site where it came from; the exchange's own answer (its URL holds the code)
    // sends no referrer at all (pages.tsx). Not no-referrer everywhere: a page of that policy makes the browser send
    // `Origin: null` with its forms (the Fetch standard), which the Origin check below must refuse.
    reply.header("Referrer-Policy", "same-origin");
    reply.header("Cross-Origin-Opener-Policy", "same-origin");
    reply.header("Cache-Control", "no-store");
    if (req.url.startsWith("/portal/assets/")) return;
    const token = (req.cookies[PORTAL_SECURE_COOKIE] ?? req.cookies[PORTAL_PLAIN_COOKIE] ?? "").trim();
    let session: PortalSession | undefined;
    if (token !== "") {
      try {
        session = await withRequestDeadline(deps.store.requestDeadlineMs, () => resolvePortalSession(deps, token));
      } catch (err) {
        if (!(err instanceof PortalRefusedError)) throw err;
      }
    }
    states.set(req, { session, token, csrf: session ? portalCsrfOf(token) : "" });
  });

  // Every state-changing request: from a page of this site (Origin, else Referer), and with the session's CSRF token.
  app.addHook("preHandler", async (req) => {
    if (req.method !== "POST") return;
    if (!sentFromOwnPages(req, deps.config.publicUrl)) {
      throw httpError(403, "This form was sent from another site (its Origin is not this portal's); nothing was changed.");
    }
    const state = portalStateOf(req);
    if (state.session === undefined) return;
    const sent = (req.body as Record<string, unknown> | undefined)?._csrf;
    if (typeof sent !== "string" || !secretsEqual(sent, state.csrf)) {
      throw httpError(403, "This form's security token is missing or out of date; reload the page and try again. Nothing was changed.");
    }
  });

  app.get("/assets/:digest/:name", async (req, reply) => {
    const { digest, name } = req.params as { digest: string; name: string };
    const asset = portalAssets().get(name);
    if (!asset || asset.digest !== digest) return portalNotFound(req, reply);
    return reply.header("Cache-Control", "public, max-age=31536000, immutable").type(asset.type).send(asset.body);
  });

  // The portal's accent colour, as a style sheet (the CSP allows no inline style): for its own sessions only.
  app.get("/theme/:file", async (req, reply) => {
    const { file } = req.params as { file: string };
    const { session } = portalStateOf(req);
    const color = session?.portal.accentColor;
    const css =
      session && file === `${session.portal.id}.css` && color && /^#[0-9a-fA-F]{6}$/.test(color) ? `:root { --accent: ${color}; }\n` : "";
    return reply.type("text/css; charset=utf-8").send(css);
  });

  registerPortalPages(app, deps);

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const { status, text } = answerOf(err);
    if (status >= 500) req.log.error({ err }, "portal request failed");
    return portalErrorPage(req, reply, status, text);
  });
  app.setNotFoundHandler((req, reply) => portalNotFound(req, reply));
};

export function portalNotFound(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  return portalErrorPage(req, reply, 404, "There is no such page in this portal.");
}

/** An error as a page in the portal's frame (its session's tabs kept), with the request id to quote. */
export function portalErrorPage(req: FastifyRequest, reply: FastifyReply, status: number, text: string): FastifyReply {
  const { session, csrf } = portalStateOf(req);
  const title = status === 404 ? "Not found" : status === 403 ? "Not allowed" : status >= 500 ? "Something went wrong" : "Not done";
  return sendPage(
    reply,
    <PortalLayout title={title} session={session} csrf={csrf} notice={{ kind: "error", text }}>
      <p class="muted">
        Request id <code>{req.id}</code>
      </p>
      {session && (
        <p>
          <a href="/portal/">Back to the portal</a>
        </p>
      )}
    </PortalLayout>,
    status,
  );
}

/**
 * The page of a request without a working session: an ended one (its cookie cleared) offers the way back its return
 * link names, with `reason=session_expired`; none at all says how to get in.
 */
export async function sessionEndedPage(req: FastifyRequest, reply: FastifyReply, deps: Services): Promise<FastifyReply> {
  const { token } = portalStateOf(req);
  const known = token === "" ? undefined : await withRequestDeadline(deps.store.requestDeadlineMs, () => returnUrlOfToken(deps.db, token));
  const back = known === undefined ? undefined : expiredReturnUrl(known);
  if (token !== "") clearPortalCookie(reply);
  return sendPage(
    reply,
    <PortalLayout
      title={token === "" ? "Not signed in" : "Your session has ended"}
      session={undefined}
      csrf=""
      returnUrl={back}
      notice={{
        kind: "error",
        text:
          token === ""
            ? "Open the portal from the link your provider gave you."
            : "This portal session has expired or was ended. Go back and open the portal again.",
      }}
    >
      {back && (
        <p>
          <a href={back} rel="noreferrer">
            Go back to sign in again
          </a>
        </p>
      )}
    </PortalLayout>,
    401,
  );
}

/** The status and sentence of a failure: the core's refusals in v2's words; Fastify's own (413, 415, …) as they are. */
function answerOf(err: FastifyError): { status: number; text: string } {
  const refused = refusalText(err);
  if (refused) return refused;
  const status = typeof err.statusCode === "number" ? err.statusCode : 500;
  if (status === 413) return { status, text: "This form is too large." };
  if (status >= 400 && status < 500) return { status, text: err.message };
  return { status: 500, text: "The portal could not answer this request; it has been logged." };
}

export function httpError(status: number, message: string): FastifyError {
  return Object.assign(new Error(message), { statusCode: status, code: "PORTAL", name: "PortalError" }) as FastifyError;
}
