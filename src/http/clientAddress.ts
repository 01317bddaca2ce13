import type { FastifyRequest } from "fastify";

/**
 * The caller's address, the one rule for the IP allow-lists of v1's and v2's keys.verifyKey: Fastify's
 * `request.ip` under KEYHAVEN_TRUST_PROXY (app.ts passes it as `trustProxy`). Off (the default): the socket's peer,
 * whatever headers say. Proxy addresses or ranges: X-Forwarded-For, walked back from the socket's peer through the
 * trusted proxies only, so an entry a client wrote itself before the first trusted hop is never believed. No other
 * header (True-Client-IP, CF-Connecting-IP, the first X-Forwarded-For entry) names the caller: any client can send
 * them, and a proxy that should be believed is one KEYHAVEN_TRUST_PROXY names (docs/security.md).
 */
export function callerAddress(req: FastifyRequest): string {
  return req.ip;
}
