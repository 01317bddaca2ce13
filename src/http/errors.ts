import type { ErrorDetails } from "../errors.js";

export const errorCodes = [
  "BAD_REQUEST",
  "UNAUTHORIZED",
  "FORBIDDEN",
  "DISABLED",
  "INSUFFICIENT_PERMISSIONS",
  "USAGE_EXCEEDED",
  "EXPIRED",
  "NOT_FOUND",
  "METHOD_NOT_ALLOWED",
  "CONFLICT",
  "PRECONDITION_FAILED",
  "UNPROCESSABLE_ENTITY",
  "DELETE_PROTECTED",
  "PAYLOAD_TOO_LARGE",
  "REQUEST_TIMEOUT",
  "RATE_LIMITED",
  "INTERNAL_SERVER_ERROR",
  "SERVICE_UNAVAILABLE",
] as const;

export type ErrorCode = (typeof errorCodes)[number];

// UNAUTHORIZED is 403, not 401, because v1 clients expect it. PAYLOAD_TOO_LARGE is a keyhaven addition.
export const codeToStatus: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 403,
  FORBIDDEN: 403,
  DISABLED: 403,
  INSUFFICIENT_PERMISSIONS: 403,
  USAGE_EXCEEDED: 403,
  EXPIRED: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  PRECONDITION_FAILED: 412,
  // keyhaven addition: an Idempotency-Key reused for another request (another route or body).
  UNPROCESSABLE_ENTITY: 422,
  DELETE_PROTECTED: 412,
  PAYLOAD_TOO_LARGE: 413,
  // keyhaven addition: a client that did not finish sending its request in time (KEYHAVEN_*_TIMEOUT_MS).
  REQUEST_TIMEOUT: 408,
  RATE_LIMITED: 429,
  INTERNAL_SERVER_ERROR: 500,
  // keyhaven addition: GET /v1/readiness, and any route while PostgreSQL (or Redis) cannot serve (naming which). A
  // replica shutting down serves what reaches it (app.ts), so shutting down is not a reason for it.
  SERVICE_UNAVAILABLE: 503,
};

/**
 * keyhaven additions to the envelope, for programs: which of the request's items a refusal is about, read by the
 * import CLI instead of the message's wording (v1 clients ignore fields they do not know).
 * - `keyIndex`: the index, in the request's array, of the key refused.
 * - `reason`: `KEY_EXISTS` (a key of the request exists already) or `DUPLICATE_IN_REQUEST` (the key at `keyIndex`
 *   repeats the one at `sameAsKeyIndex`).
 * - `missingRoles` / `missingPermissions`: the names a 412 of an import is about.
 */
/** Extra envelope fields of a refusal (keyhaven extension; v1 clients ignore them): the core's ErrorDetails. */
export type ErrorFields = ErrorDetails;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Extra envelope fields (ErrorFields); none for most errors. */
    readonly fields?: ErrorFields,
  ) {
    super(message);
    this.status = codeToStatus[code];
  }
}

export type ErrorEnvelope = {
  error: { code: ErrorCode; docs: string; message: string; requestId: string } & ErrorFields;
};

/** The one place that writes an error body. `docs` is this server's own error reference for the code. */
export function errorEnvelope(code: ErrorCode, message: string, requestId: string, origin: string, fields?: ErrorFields): ErrorEnvelope {
  return { error: { code, docs: `${origin}/docs/errors/${code}`, message, requestId, ...fields } };
}
