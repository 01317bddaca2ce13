import { isIP } from "node:net";
import proxyAddr from "@fastify/proxy-addr";
import type { FastifyRequest } from "fastify";

/** KEYHAVEN_TRUST_PROXY as config.ts parses it (Fastify's `trustProxy`). */
export type TrustProxy = boolean | readonly string[];

const compiled = new WeakMap<readonly string[], (address: string, hop: number) => boolean>();

/** Whether `address` (the socket's peer) is a proxy KEYHAVEN_TRUST_PROXY names, as Fastify decides it for req.ip. */
function trusts(trustProxy: TrustProxy, address: string | undefined): boolean {
  if (address === undefined) return false;
  if (typeof trustProxy === "boolean") return trustProxy;
  let fn = compiled.get(trustProxy);
  if (fn === undefined) {
    fn = proxyAddr.compile([...trustProxy]);
    compiled.set(trustProxy, fn);
  }
  return fn(address, 0);
}

/** The headers a client-facing proxy (Cloudflare, Akamai…) names the client with, as Unkey v1 reads them, in order. */
const CLIENT_HEADERS = ["true-client-ip", "cf-connecting-ip"] as const;

/**
 * The caller's address, the one rule for the IP allow-lists of v1's and v2's keys.verifyKey. Off (KEYHAVEN_TRUST_PROXY
 * unset, the default): the socket's peer, whatever headers say. From a peer that KEYHAVEN_TRUST_PROXY names: the
 * address in True-Client-IP, else CF-Connecting-IP (what Unkey v1 reads and its own tests send), else Fastify's
 * `request.ip`, X-Forwarded-For walked back from the socket's peer through the trusted proxies only, so an entry a
 * client wrote itself before the first trusted hop is never believed. From any other peer no header is believed: any
 * client can send them. A trusted proxy must therefore set or remove those two headers (deploy/nginx.conf removes
 * them; docs/security.md).
 */
export function callerAddress(req: FastifyRequest, trustProxy: TrustProxy): string {
  if (trusts(trustProxy, req.socket?.remoteAddress ?? undefined)) {
    for (const name of CLIENT_HEADERS) {
      const value = req.headers[name];
      const address = typeof value === "string" ? value.trim() : undefined;
      if (address !== undefined && isIP(address) !== 0) return address;
    }
  }
  return req.ip;
}
