import type { FastifyInstance } from "fastify";
import { codeToStatus, type ErrorCode, errorCodes } from "../../http/errors.js";

/** Cause and fix of each error code: the page every `error.docs` URL points to. */
export const errorReference: Record<ErrorCode, { cause: string; fix: string }> = {
  BAD_REQUEST: {
    cause:
      "The request is malformed: invalid JSON, a wrong Content-Type, or a field that fails validation. The message names the first failing field as `path: message` (for an array body the path starts with the element's index).",
    fix: "Send `Content-Type: application/json` with a body that matches the route's schema (see /openapi.json, or /docs) and correct the named field.",
  },
  UNAUTHORIZED: {
    cause:
      "No root key was sent (`key required`), the key is unknown (`key not found`), or a customer's API key was used where a root key is needed (`root key required`). It is answered with HTTP 403, as v1 clients expect.",
    fix: "Send `Authorization: Bearer <root key>`. Root keys are printed on first start, set with KEYHAVEN_ROOT_KEY, or created through the operator route rootKeys.createRootKey.",
  },
  FORBIDDEN: {
    cause:
      "The workspace of the root key (or of the verified key) is disabled, or an operator route was called while KEYHAVEN_ADMIN_TOKEN is not configured.",
    fix: "Ask the operator to enable the workspace (workspaces.updateWorkspace with enabled: true), or configure KEYHAVEN_ADMIN_TOKEN.",
  },
  // DISABLED, USAGE_EXCEEDED, EXPIRED and RATE_LIMITED are v1 error codes that keyhaven answers only as outcomes of a
  // verification (HTTP 200, `valid: false`): root keys have no such states here, and no route answers HTTP 429.
  DISABLED: {
    cause:
      "The key is disabled (`enabled: false`). keyhaven answers this code only as the outcome of `keys.verifyKey` (HTTP 200, `valid: false`), never as an error; it is listed because v1 defines it as one.",
    fix: "Enable the key again (keys.updateKey with `enabled: true`), or use another key.",
  },
  INSUFFICIENT_PERMISSIONS: {
    cause:
      "The root key lacks the permission the operation needs. Permissions are matched literally: `*`, `api.*.create_key`, `api.<apiId>.create_key` and so on.",
    fix: "Create a root key with the permission named in the message.",
  },
  USAGE_EXCEEDED: {
    cause:
      "The key has fewer remaining uses than the verification costs. keyhaven answers this code only as the outcome of `keys.verifyKey` (HTTP 200, `valid: false`), never as an error.",
    fix: "Add uses (keys.updateRemaining), wait for the key's refill, or use another key.",
  },
  EXPIRED: {
    cause:
      "The key's `expires` has passed. keyhaven answers this code only as the outcome of `keys.verifyKey` (HTTP 200, `valid: false`), never as an error.",
    fix: "Set a later expiry (keys.updateKey), or issue a new key.",
  },
  NOT_FOUND: {
    cause:
      "The resource does not exist, was deleted, or belongs to another workspace (which is answered exactly as if it did not exist). Also returned for unknown paths.",
    fix: "Check the id and that the root key belongs to the workspace that owns the resource.",
  },
  METHOD_NOT_ALLOWED: {
    cause: "The path exists but not with this HTTP method. Reads are GET with query parameters; writes are POST with a JSON body.",
    fix: "Use the method named in the message and in the `Allow` header.",
  },
  CONFLICT: {
    cause:
      "The request would create something that already exists: a key whose hash is already stored (in any workspace, including deleted keys), two identical keys in one import, or a role or permission name taken in the workspace. An import names the index of the offending key, never its hash; nothing of the request was written. Or a request with the same `Idempotency-Key` is still being answered.",
    fix: "Remove or change the offending element and send the request again; for imports, keys already imported should be skipped. For an `Idempotency-Key` still in use, retry the same request once the first has answered.",
  },
  UNPROCESSABLE_ENTITY: {
    cause:
      "A keyhaven addition: the request's `Idempotency-Key` was used, within the last 24 hours and by the same caller, for another request (another route or another body). Nothing was changed.",
    fix: "Send a new Idempotency-Key for a new request; to retry the first request, send it again exactly as it was.",
  },
  PRECONDITION_FAILED: {
    cause:
      "Something the request relies on is missing: roles or permissions named by an import (they are listed), or an encryption key for storing plaintext keys (KEYHAVEN_ENCRYPTION_KEY).",
    fix: "Create the listed roles and permissions first, or configure KEYHAVEN_ENCRYPTION_KEY.",
  },
  DELETE_PROTECTED: {
    cause: "The API has delete protection enabled.",
    fix: "Turn delete protection off for the API before deleting it.",
  },
  PAYLOAD_TOO_LARGE: {
    cause:
      "The request body is larger than the route reads (a keyhaven addition; v1 had no such code): 1 MiB for the " +
      "import routes, 256 KiB for those that take meta or lists of roles and permissions, 64 KiB for the others. " +
      "The message and the route's entry in /openapi.json give its limit in bytes.",
    fix: "Send smaller requests; imports take at most 100 keys per call anyway.",
  },
  REQUEST_TIMEOUT: {
    cause:
      "The client did not send the whole request in time: its headers within KEYHAVEN_HEADERS_TIMEOUT_MS, or its headers and body within KEYHAVEN_REQUEST_TIMEOUT_MS (a keyhaven addition; v1 had no such code). The connection is closed and nothing of the request was done.",
    fix: "Send the request again, at once and whole; check for a stalled proxy or network between the client and keyhaven.",
  },
  RATE_LIMITED: {
    cause:
      "A rate limit of the key, of its identity, or named in the request refused the verification. keyhaven answers this code only as the outcome of `keys.verifyKey` (HTTP 200, `valid: false`); no route answers HTTP 429, and root keys are not rate limited.",
    fix: "Retry after the window resets (`ratelimit.reset` in the answer, unix ms).",
  },
  INTERNAL_SERVER_ERROR: {
    cause: "An unexpected error inside keyhaven. Nothing of the request was committed unless it completed.",
    fix: "Retry; if it persists, report it with the request id (also in the Unkey-Request-Id header and the server log).",
  },
  SERVICE_UNAVAILABLE: {
    cause:
      "A keyhaven addition: PostgreSQL or Redis could not serve the request within its deadline (unreachable, frozen, or out of disk), or `GET /v1/readiness` found this replica unable to serve; the message names which. The replica keeps trying and serves again by itself once they are back.",
    fix: "Retry later, or on another replica. Operators: check that the database (DATABASE_URL) and Redis (REDIS_URL) are running, reachable from this replica and not out of disk.",
  },
};

const escapeHtml = (s: string) => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);
const inlineCode = (s: string) => escapeHtml(s).replace(/`([^`]+)`/g, "<code>$1</code>");

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}code{background:#f2f2f2;padding:0 .2em}</style>
</head><body>${body}</body></html>`;
}

function entry(code: ErrorCode): string {
  const { cause, fix } = errorReference[code];
  return `<section id="${code}"><h2><code>${code}</code> (HTTP ${codeToStatus[code]})</h2>
<p><strong>Cause.</strong> ${inlineCode(cause)}</p><p><strong>Fix.</strong> ${inlineCode(fix)}</p></section>`;
}

export function registerErrorReference(app: FastifyInstance): void {
  app.get("/docs/errors", async (_req, reply) =>
    reply
      .type("text/html; charset=utf-8")
      .send(page("keyhaven error codes", `<h1>keyhaven error codes</h1>${errorCodes.map(entry).join("")}`)),
  );
  app.get<{ Params: { code: string } }>("/docs/errors/:code", async (req, reply) => {
    const code = req.params.code.toUpperCase() as ErrorCode;
    if (!errorCodes.includes(code)) return reply.callNotFound();
    return reply
      .type("text/html; charset=utf-8")
      .send(page(`keyhaven error ${code}`, `<p><a href="/docs/errors">All error codes</a></p>${entry(code)}`));
  });
}
