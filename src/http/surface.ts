import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { isResponseSerializationError } from "fastify-type-provider-zod";
import { sha256Hex } from "../crypto/hash.js";
import { findDependencyFailure } from "../storage/dependency.js";
import { ApiError, type ErrorCode, type ErrorFields, errorEnvelope } from "./errors.js";
import { parseJsonBody } from "./jsonBody.js";

/**
 * What every surface (a Fastify plugin under its prefix: wire/v1/surface.ts, wire/v2/surface.ts) is given by app.ts:
 * the origin of `error.docs` links.
 */
export type SurfaceOptions = { origin: () => string };

/**
 * The JSON body guard of one surface's context (Fastify encapsulates content-type parsers per plugin): JSON only,
 * refused by parseJsonBody before it can cost much or reach PostgreSQL, and the same rule for query strings.
 * `lookupOnly` fields (v2) are read from the route's config only when the surface says so.
 */
export function acceptJsonBodies(app: FastifyInstance, { lookupOnly }: { lookupOnly: boolean }): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) => {
    try {
      // A request with an Idempotency-Key is told apart from another by its raw body (wire/idempotency.ts).
      if (req.headers["idempotency-key"] !== undefined) bodyDigests.set(req, sha256Hex(body as string));
      const fields = lookupOnly ? (req.routeOptions.config as { lookupOnly?: readonly string[] } | undefined)?.lookupOnly : undefined;
      done(null, parseJsonBody(body as string, fields));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  app.addContentTypeParser("*", (req, _payload, done) => {
    done(new ApiError("BAD_REQUEST", `Content-Type must be application/json, got ${req.headers["content-type"] ?? "none"}`), undefined);
  });
  // The body parser refuses these in JSON; query strings get the same rule, for every GET route of the surface.
  app.addHook("preValidation", (req, _reply, done) => {
    for (const [name, value] of Object.entries((req.query ?? {}) as Record<string, unknown>)) {
      for (const v of Array.isArray(value) ? value : [value]) {
        if (typeof v === "string" && (v.includes("\u0000") || !v.isWellFormed())) {
          return done(new ApiError("BAD_REQUEST", `${name}: must not contain the NUL character or unpaired surrogates`));
        }
      }
    }
    done();
  });
}

const bodyDigests = new WeakMap<FastifyRequest, string>();

/** The sha256 of the raw JSON body of a request sent with an Idempotency-Key (of "" when it had none). */
export function bodyDigestOf(req: FastifyRequest): string {
  return bodyDigests.get(req) ?? sha256Hex("");
}

/** An answer in the shared envelope (http/errors.ts). */
export const sendEnvelope = (
  reply: FastifyReply,
  req: FastifyRequest,
  origin: () => string,
  code: ErrorCode,
  message: string,
  fields?: ErrorFields,
  status?: number,
) => reply.code(status ?? new ApiError(code, message).status).send(errorEnvelope(code, message, req.id, origin(), fields));

/**
 * The failures every surface answering in the envelope shares (and the host's own routes: /docs, /metrics, health):
 * ApiError, Fastify's client errors, a too-large body, PostgreSQL or Redis unavailable, anything else a 500.
 */
export function answerInEnvelope(err: FastifyError, req: FastifyRequest, reply: FastifyReply, origin: () => string, bodyLimit: number) {
  if (err instanceof ApiError) return sendEnvelope(reply, req, origin, err.code, err.message, err.fields, err.status);
  if (err.statusCode === 413) {
    return sendEnvelope(
      reply,
      req,
      origin,
      "PAYLOAD_TOO_LARGE",
      `Request body is larger than ${req.routeOptions.bodyLimit ?? bodyLimit} bytes`,
    );
  }
  if (!isResponseSerializationError(err) && err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    // Fastify's own client errors (bad content length, unsupported media type, ...).
    const code: ErrorCode = err.statusCode === 404 ? "NOT_FOUND" : err.statusCode === 405 ? "METHOD_NOT_ALLOWED" : "BAD_REQUEST";
    return sendEnvelope(
      reply,
      req,
      origin,
      code,
      err.message,
      undefined,
      err.statusCode === 404 || err.statusCode === 405 ? err.statusCode : 400,
    );
  }
  // PostgreSQL or Redis could not serve: logged once per change of state by the store or the limiter.
  const unavailable = findDependencyFailure(err);
  if (unavailable) return sendEnvelope(reply, req, origin, "SERVICE_UNAVAILABLE", unavailable.publicMessage);
  req.log.error({ err }, "unhandled error");
  return sendEnvelope(reply, req, origin, "INTERNAL_SERVER_ERROR", "internal server error");
}

/** A path no route serves, outside every surface's prefix: a 404 in the envelope. */
export function answerNoRoute(req: FastifyRequest, reply: FastifyReply, origin: () => string) {
  const path = req.url.split("?")[0] ?? "";
  return sendEnvelope(reply, req, origin, "NOT_FOUND", `no route ${req.method} ${path}`);
}
