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
