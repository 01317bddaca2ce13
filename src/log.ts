import { DrizzleQueryError } from "drizzle-orm/errors";
import { stdSerializers } from "pino";

/**
 * What of a database driver's error may be logged: its message and the names of what failed, never `detail`
 * (PostgreSQL writes the offending values there, e.g. `Key (hash)=(…) already exists`), the query's parameters or
 * its text.
 */
const SAFE_DRIVER_FIELDS = ["code", "severity", "routine", "schema_name", "table_name", "column_name", "constraint_name"] as const;

/** A failed query, as it is logged: the driver's message and code, not the query. */
class DatabaseError extends Error {
  override name = "DatabaseError";
}

/**
 * The error as it may be logged or shown. drizzle wraps a failed query in an error whose message and `params` carry
 * every parameter of the query (key hashes, ciphertexts); this keeps only the driver's own message and code.
 */
export function safeError(err: unknown): Error {
  if (!(err instanceof DrizzleQueryError)) return err instanceof Error ? err : new Error(String(err));
  const cause = err.cause as (Error & Record<string, unknown>) | undefined;
  const safe = new DatabaseError(`database query failed: ${cause?.message ?? "unknown error"}`) as DatabaseError & Record<string, unknown>;
  if (cause) for (const field of SAFE_DRIVER_FIELDS) if (cause[field] !== undefined) safe[field] = cause[field];
  // The wrapper's stack starts with its message (query and parameters, over several lines): keep only the frames.
  const frames = (err.stack ?? "").split("\n").filter((line) => /^\s+at /.test(line));
  safe.stack = [`${safe.name}: ${safe.message}`, ...frames].join("\n");
  return safe;
}

/** pino's `err` serializer, through safeError: the only way an error reaches a log line. */
export function serializeError(err: unknown) {
  return stdSerializers.err(safeError(err));
}

/** A one-line description of an unexpected error for users (stored or sent): the SQLSTATE, never values. */
export function describeUnexpected(err: unknown): string {
  if (err instanceof DrizzleQueryError) {
    const code = (err.cause as { code?: unknown } | undefined)?.code;
    if (typeof code !== "string") return "unexpected database error";
    // Node's and postgres.js's connection errors (ECONNREFUSED, CONNECTION_CLOSED…) are not SQLSTATEs.
    const sqlstate = /^[0-9A-Z]{5}$/.test(code) && code !== "EPIPE";
    return `unexpected database error (${sqlstate ? `SQLSTATE ${code}` : code.replace(/[^A-Z0-9_]/g, "")})`;
  }
  return "unexpected error";
}

/** Query parameters whose value may be a credential: the portal page's exchange code (`?code=pst_…`), and the like. */
const SECRET_QUERY_PARAMETER = /([?&](?:code|token|access_token|key|secret)=)[^&#]*/gi;

/** A request's URL as it may be logged: the values of query parameters that may be credentials replaced. */
export function loggableUrl(url: string): string {
  return url.replace(SECRET_QUERY_PARAMETER, "$1[redacted]");
}

/**
 * pino's `req` serializer: Fastify's fields (method, url, host, remote address and port), the URL through
 * loggableUrl (a portal link carries its single-use code in the query string).
 */
export function serializeRequest(req: {
  method: string;
  url: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number | undefined } | undefined;
}) {
  return { method: req.method, url: loggableUrl(req.url), host: req.host, remoteAddress: req.ip, remotePort: req.socket?.remotePort };
}
