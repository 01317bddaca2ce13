import type { FastifyRequest } from "fastify";
import { callerAddress, type TrustProxy } from "./clientAddress.js";

/**
 * Where a request to an HTTP surface came from, for the audit log (core/caller.ts Origin has this shape): the
 * surface that answered it, its id, the client's address by the one rule (callerAddress, trusting proxies only as
 * configured) and its user agent, cut to 512 characters.
 */
export type RequestOrigin<S extends string> = {
  readonly surface: S;
  readonly requestId: string;
  readonly clientAddress: string;
  readonly userAgent: string | undefined;
};

/** The origin of `req`, a request to the surface `surface` (every HTTP surface's one rule). */
export function originOf<S extends string>(surface: S, trustProxy: TrustProxy, req: FastifyRequest): RequestOrigin<S> {
  const userAgent = req.headers["user-agent"];
  return {
    surface,
    requestId: req.id,
    clientAddress: callerAddress(req, trustProxy),
    userAgent: typeof userAgent === "string" ? userAgent.slice(0, 512) : undefined,
  };
}

/**
 * Whether a POST came from this site's own pages (the console's and the portal page's forms): its Origin (else its
 * Referer's) is the host it was sent to, or KEYHAVEN_PUBLIC_URL. `null` (a page of `Referrer-Policy: no-referrer`, a
 * sandboxed frame) is never this site.
 */
export function sentFromOwnPages(req: FastifyRequest, publicUrl: string | undefined): boolean {
  let sent = req.headers.origin;
  if (sent === undefined && typeof req.headers.referer === "string") {
    try {
      sent = new URL(req.headers.referer).origin;
    } catch {
      return false;
    }
  }
  if (sent === undefined || sent === "null") return false;
  const own = `${req.protocol}://${req.host}`;
  return sent === own || (publicUrl !== undefined && sent === publicUrl);
}
