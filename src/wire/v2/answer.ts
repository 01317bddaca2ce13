import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from "fastify-type-provider-zod";
import { DomainError } from "../../errors.js";
import { ApiError } from "../../http/errors.js";
import { findDependencyFailure } from "../../storage/dependency.js";
import { V2Error, type V2ValidationIssue, v2ErrorBody, v2ErrorContentType, v2ErrorOf } from "./errors.js";

/** A v2 route's path, as the error handler and the not-found handler tell v2 requests apart. */
export const isV2Path = (url: string): boolean => url.startsWith("/v2/") || url === "/v2";

/** zod's issue codes, as the JSON-schema keyword v2's validator names in `location`. */
const KEYWORDS: Record<string, string> = {
  invalid_type: "type",
  too_small: "minLength",
  too_big: "maxLength",
  unrecognized_keys: "additionalProperties",
  invalid_format: "pattern",
  invalid_value: "enum",
  invalid_union: "oneOf",
  not_multiple_of: "multipleOf",
};

/**
 * A body that fails the route's schema, as v2 answers it (contract §1.3): always 400 and `application/json`,
 * `detail` naming the route, `errors` with the first problem's schema location and message.
 */
function validationError(err: FastifyError, path: string): V2Error {
  const first = err.validation?.[0];
  const issues: V2ValidationIssue[] = [];
  if (first) {
    const steps = first.instancePath.split("/").filter(Boolean);
    const missing = first.keyword === "invalid_type" && (first.params as { input?: unknown } | undefined)?.input === undefined;
    const keyword = missing ? "required" : (KEYWORDS[first.keyword] ?? first.keyword);
    const location = [...steps.map((s) => `/properties/${s}`), `/${keyword}`].join("");
    issues.push({ location, message: `${steps.join(".") || "body"}: ${first.message ?? "invalid input"}` });
  }
  return new V2Error(400, "unkey/application/invalid_input", `POST request body for '${path}' failed to validate schema`, issues);
}

/** The v2 error every failure of a v2 request becomes. */
function v2ErrorOfAny(err: FastifyError, req: FastifyRequest): { error: V2Error; validation: boolean } {
  const path = req.url.split("?")[0] ?? "";
  if (err instanceof V2Error) return { error: err, validation: false };
  if (err instanceof DomainError) return { error: v2ErrorOf(err), validation: false };
  if (hasZodFastifySchemaValidationErrors(err)) return { error: validationError(err, path), validation: true };
  if (err instanceof ApiError && err.status === 400) {
    // The body parser's refusals (not JSON, a wrong content type): v2's validator answers these as schema failures.
    return {
      error: new V2Error(400, "unkey/application/invalid_input", `POST request body for '${path}' failed to validate schema`, [
        { location: "body", message: err.message },
      ]),
      validation: true,
    };
  }
  if (err.statusCode === 413) {
    const limit = req.routeOptions.bodyLimit ?? 0;
    const detail = `The request body exceeds the maximum allowed size of ${limit} bytes.`;
    return { error: new V2Error(413, "user/bad_request/request_body_too_large", detail, []), validation: false };
  }
  if (!isResponseSerializationError(err) && err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    return { error: new V2Error(400, "unkey/application/invalid_input", err.message, []), validation: false };
  }
  const unavailable = findDependencyFailure(err);
  if (unavailable)
    return { error: new V2Error(503, "unkey/application/service_unavailable", unavailable.publicMessage), validation: false };
  req.log.error({ err }, "unhandled error");
  return { error: new V2Error(500, "unkey/application/unexpected_error", "An unexpected error occurred."), validation: false };
}

/** Answers a failed v2 request in v2's error envelope. */
export function answerV2Error(err: FastifyError, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const { error, validation } = v2ErrorOfAny(err, req);
  return reply
    .code(error.status)
    .header("content-type", v2ErrorContentType(req.headers.accept, validation))
    .send(JSON.stringify(v2ErrorBody(error, req.id)));
}

/** A v2 path no route serves (v2's own server answers a bare text 404; keyhaven keeps its envelope). */
export function answerV2NotFound(req: FastifyRequest, reply: FastifyReply, allowed: string[]): FastifyReply {
  const path = req.url.split("?")[0] ?? "";
  const error =
    allowed.length > 0
      ? new V2Error(405, "unkey/application/invalid_input", `${req.method} is not allowed on ${path}; use ${allowed.join(" or ")}`)
      : new V2Error(404, "unkey/application/invalid_input", `No route ${req.method} ${path}.`);
  if (allowed.length > 0) reply.header("Allow", allowed.join(", "));
  return reply
    .code(error.status)
    .header("content-type", v2ErrorContentType(req.headers.accept, false))
    .send(JSON.stringify(v2ErrorBody(error, req.id)));
}
