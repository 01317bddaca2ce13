/** The client commands' one way to call a keyhaven server: a JSON POST with a bearer token. */

import type { ErrorFields } from "../http/errors.js";

export const DEFAULT_URL = "http://127.0.0.1:8080";

export type CallResult =
  | { kind: "ok"; status: number; body: unknown }
  /** The server answered with an error envelope (or a non-JSON error body). */
  | {
      kind: "error";
      status: number;
      code: string;
      message: string;
      fields: ErrorFields;
      retryAfterMs: number | undefined;
      /** The body as parsed JSON (undefined if it was not JSON), for a caller that reads another envelope (Unkey v2's). */
      body: unknown;
    }
  /** No answer: connection refused or reset, DNS failure, timeout. Whether the request was processed is unknown. */
  | { kind: "network"; message: string };

/** Parses `--url`: an http(s) origin, optionally with a path prefix; a trailing slash is dropped. */
export function parseBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`--url: not a URL: ${value}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`--url: must be http:// or https://: ${value}`);
  if (url.username || url.password) throw new Error("--url: must not contain credentials; use --root-key or --admin-token");
  return url.toString().replace(/\/+$/, "");
}

export async function postJson(
  baseUrl: string,
  path: string,
  token: string,
  body: string,
  timeoutMs: number,
  signal?: AbortSignal,
  /** More request headers (an Idempotency-Key); never the Authorization, which `token` sets. */
  headers: Record<string, string> = {},
): Promise<CallResult> {
  return callJson(`${baseUrl}${path}`, token, { method: "POST", body, headers }, timeoutMs, signal);
}

/** GETs `path` with `query` as its query string, with the bearer token and a deadline; never throws. */
export async function getJson(
  baseUrl: string,
  path: string,
  token: string,
  query: Record<string, string>,
  timeoutMs: number,
): Promise<CallResult> {
  const search = new URLSearchParams(query).toString();
  return callJson(`${baseUrl}${path}${search ? `?${search}` : ""}`, token, { method: "GET", headers: {} }, timeoutMs, undefined);
}

async function callJson(
  url: string,
  token: string,
  request: { method: "GET" | "POST"; body?: string; headers: Record<string, string> },
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<CallResult> {
  let res: Response;
  let text: string;
  try {
    const signals = [AbortSignal.timeout(timeoutMs), ...(signal ? [signal] : [])];
    res = await fetch(url, {
      method: request.method,
      headers: {
        ...request.headers,
        authorization: `Bearer ${token}`,
        ...(request.body !== undefined && { "content-type": "application/json" }),
      },
      ...(request.body !== undefined && { body: request.body }),
      signal: AbortSignal.any(signals),
    });
    text = await res.text();
  } catch (err) {
    return { kind: "network", message: describeNetworkError(err) };
  }
  let parsed: unknown;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (res.ok) return { kind: "ok", status: res.status, body: parsed };
  const envelope = (parsed as { error?: Record<string, unknown> } | undefined)?.error;
  return {
    kind: "error",
    status: res.status,
    code: typeof envelope?.code === "string" ? envelope.code : (v2Code(envelope?.type) ?? `HTTP_${res.status}`),
    message:
      typeof envelope?.message === "string"
        ? envelope.message
        : typeof envelope?.detail === "string"
          ? envelope.detail
          : text.slice(0, 200) || res.statusText,
    fields: errorFields(envelope),
    retryAfterMs: retryAfter(res.headers.get("retry-after")),
    body: parsed,
  };
}

/** A v2 error's code, from its `type` (`https://unkey.com/docs/errors/<code>`): v1 has `code`, v2 `type` and `detail`. */
function v2Code(type: unknown): string | undefined {
  if (typeof type !== "string") return undefined;
  const code = /\/docs\/errors\/([a-z_/]{1,200})$/.exec(type)?.[1];
  return code;
}

/** The envelope's structured fields (errors.ts ErrorFields), each kept only when it has the documented type. */
export function errorFields(envelope: Record<string, unknown> | undefined): ErrorFields {
  const fields: ErrorFields = {};
  if (!envelope || typeof envelope !== "object") return fields;
  const index = (v: unknown) => (typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : undefined);
  const names = (v: unknown) => (Array.isArray(v) && v.every((n) => typeof n === "string") ? (v as string[]) : undefined);
  const keyIndex = index(envelope.keyIndex);
  if (keyIndex !== undefined) fields.keyIndex = keyIndex;
  const sameAsKeyIndex = index(envelope.sameAsKeyIndex);
  if (sameAsKeyIndex !== undefined) fields.sameAsKeyIndex = sameAsKeyIndex;
  if (envelope.reason === "KEY_EXISTS" || envelope.reason === "DUPLICATE_IN_REQUEST") fields.reason = envelope.reason;
  const missingRoles = names(envelope.missingRoles);
  if (missingRoles) fields.missingRoles = missingRoles;
  const missingPermissions = names(envelope.missingPermissions);
  if (missingPermissions) fields.missingPermissions = missingPermissions;
  return fields;
}

/** Worth trying again: a timeout (408), a rate limit (429) or a server error. */
export function isTransientStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/**
 * The wait before attempt `attempt + 1`: full jitter under a ceiling of `baseMs` doubling per attempt up to 10 s, but
 * never less than the server's Retry-After, itself capped at `maxRetryAfterMs` (a server asking for an hour is not
 * waited on for an hour: the attempts run out instead).
 */
export function backoffDelay(attempt: number, baseMs: number, retryAfterMs: number | undefined, maxRetryAfterMs = 30_000): number {
  const ceiling = Math.min(10_000, baseMs * 2 ** (attempt - 1));
  return Math.max(Math.random() * ceiling, Math.min(retryAfterMs ?? 0, maxRetryAfterMs));
}

/** Whether `value` can be sent as (part of) an HTTP header value: no control characters, Latin-1 only. */
export function isHeaderSafe(value: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is this regex's purpose
  return !/[\u0000-\u0008\u000a-\u001f\u007f]|[^\u0000-\u00ff]/.test(value);
}

function retryAfter(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/**
 * What went wrong, without echoing an error raised before the request left: such a message (an invalid header value,
 * say) can quote the root key. Errors from the network carry a `cause` (ECONNREFUSED, a reset socket…).
 */
function describeNetworkError(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === "TimeoutError") return "no answer before the timeout";
  if (e?.name === "AbortError") return "aborted";
  const cause = e?.cause;
  if (cause?.code) return `${cause.code}${cause.message ? ` (${cause.message})` : ""}`;
  if (cause?.message) return cause.message;
  if (e?.message === "fetch failed") return "fetch failed";
  return `the request could not be sent (${e?.name ?? "error"}; a root key or URL not valid in HTTP?)`;
}
