/**
 * A reading client of Unkey's v2 HTTP API, as hosted Unkey serves it (shared/reference/v2-wire-contract.md), for
 * `keyhaven import --from-unkey`: an API, its keys page by page, the identities, permissions, roles and the
 * overrides of a rate-limit namespace. It loads neither the server nor the store.
 *
 * Options (UnkeyClientOptions):
 * - `rootKey` (required): see resolveUnkeyRootKey (unkey.rootKey.ts). It is sent only in the Authorization header
 *   and is cut out of every error this client raises, whatever the server answered.
 * - `baseUrl`: Unkey's origin (default https://api.unkey.com); see parseUnkeyUrl.
 * - `timeoutMs` (default 30 s): the deadline of each attempt, answer body included.
 * - `attempts` (default 6): attempts per request on 408, 429, 5xx, timeouts and connection errors, then an
 *   `unavailable` error. Waits between attempts: `backoffMs` (default 250) doubling to 10 s with full jitter, never
 *   less than the answer's Retry-After (seconds or an HTTP date), which is capped at `maxRetryAfterMs` (default 30 s).
 *   Other 4xx are not retried: a `refused` error with Unkey's code (its problem+json `type`) and detail.
 * - `pageSize` (default 100, Unkey's maximum): the `limit` of each page of the list routes.
 * - `signal`: stops the waits and the requests in flight (an `aborted` error).
 * - `label`: the server's name in messages (default "Unkey"; `--check` reads keyhaven with this client too).
 * - `onRetry`: told of each retry (route, attempt, why, wait), for a progress display.
 *
 * A 2xx answer whose body the contract does not allow is a `malformed` error naming the route and the field; fields
 * the contract does not document are ignored. `listKeys(apiId, { decrypt: true })` with a root key that may not
 * decrypt (403) or an Unkey that cannot (412) throws UnkeyDecryptRefused, so the importer can read again without.
 */
import type { z } from "zod";
import { backoffDelay, isHeaderSafe, isTransientStatus, postJson } from "../http.js";
import {
  apiSchema,
  envelopeOf,
  identitySchema,
  keySchema,
  overrideSchema,
  permissionSchema,
  roleSchema,
  type UnkeyApi,
  type UnkeyIdentity,
  type UnkeyKey,
  type UnkeyOverride,
  type UnkeyPermission,
  type UnkeyRole,
} from "../../unkey/unkey.schemas.js";

export const DEFAULT_UNKEY_URL = "https://api.unkey.com";

export type UnkeyClientOptions = {
  rootKey: string;
  baseUrl?: string;
  timeoutMs?: number;
  attempts?: number;
  backoffMs?: number;
  maxRetryAfterMs?: number;
  pageSize?: number;
  signal?: AbortSignal;
  /** Who the server is, in messages: "Unkey" by default; "keyhaven" when this client reads keyhaven's v2 routes. */
  label?: string;
  onRetry?: (retry: { route: string; attempt: number; attempts: number; reason: string; delayMs: number }) => void;
};

/** One page of a list route: its items, the cursor it was asked with and the one of the next page (if any). */
export type UnkeyPage<T> = { items: T[]; cursor: string | undefined; nextCursor: string | undefined };

/**
 * `refused`: Unkey answered a 4xx other than 408/429 (`status`, `code` = its problem type, e.g.
 * `unkey/data/api_not_found`, `detail`); `unavailable`: transient failures until the attempts ran out;
 * `malformed`: a 2xx whose body breaks the contract; `aborted`: the caller's signal.
 */
export type UnkeyErrorKind = "refused" | "unavailable" | "malformed" | "aborted";

const TYPE_PREFIX = "https://unkey.com/docs/errors/";

export class UnkeyError extends Error {
  override readonly name: string = "UnkeyError";
  constructor(
    readonly kind: UnkeyErrorKind,
    /** The v2 route, e.g. `apis.listKeys`. */
    readonly route: string,
    message: string,
    readonly info: { status?: number; code?: string; detail?: string; requestId?: string; attempts?: number } = {},
  ) {
    super(message);
  }
  get status() {
    return this.info.status;
  }
  get code() {
    return this.info.code;
  }
}

/**
 * `decrypt: true` was refused: `forbidden` (403, the root key may not decrypt) or `unavailable` (412: Unkey has no
 * vault, or the API stores no encrypted keys). The keys can still be read without their plaintexts.
 */
export class UnkeyDecryptRefused extends UnkeyError {
  override readonly name = "UnkeyDecryptRefused";
  constructor(
    readonly reason: "forbidden" | "unavailable",
    error: UnkeyError,
  ) {
    super("refused", error.route, `${error.message} (decrypt: true refused; the keys can be read without plaintexts)`, error.info);
  }
}

/** Parses `--unkey-url`: an http(s) origin, optionally with a path prefix, without credentials; no trailing slash. */
export function parseUnkeyUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new Error(`--unkey-url: not a URL: ${value}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`--unkey-url: must be http:// or https://: ${value}`);
  // Not echoed: credentials in a URL are a secret too.
  if (url.username || url.password) throw new Error("--unkey-url: must not contain credentials (the root key goes in UNKEY_ROOT_KEY)");
  return url.toString().replace(/\/+$/, "");
}

export class UnkeyClient {
  private readonly baseUrl: string;
  private readonly rootKey: string;
  private readonly timeoutMs: number;
  private readonly attempts: number;
  private readonly backoffMs: number;
  private readonly maxRetryAfterMs: number;
  private readonly pageSize: number;
  private readonly label: string;

  constructor(private readonly options: UnkeyClientOptions) {
    this.label = options.label ?? "Unkey";
    this.rootKey = options.rootKey;
    if (this.rootKey.trim() === "") throw new Error("UnkeyClient: an Unkey root key is required");
    if (!isHeaderSafe(this.rootKey)) throw new Error("UnkeyClient: the root key cannot be sent in an HTTP header (the value is not shown)");
    this.baseUrl = parseUnkeyUrl(options.baseUrl ?? DEFAULT_UNKEY_URL);
    this.timeoutMs = positive("timeoutMs", options.timeoutMs ?? 30_000);
    this.attempts = positive("attempts", options.attempts ?? 6);
    this.backoffMs = positive("backoffMs", options.backoffMs ?? 250);
    this.maxRetryAfterMs = positive("maxRetryAfterMs", options.maxRetryAfterMs ?? 30_000);
    this.pageSize = positive("pageSize", options.pageSize ?? 100);
    if (this.pageSize > 100) throw new Error("UnkeyClient: pageSize must be at most 100 (Unkey's limit)");
  }

  /** apis.getApi: the API's id and name. */
  async getApi(apiId: string): Promise<UnkeyApi> {
    return (await this.call("apis.getApi", { apiId }, apiSchema)).data;
  }

  /** apis.listKeys, every page until `hasMore` is false. `from`: a cursor to start at (a page's `cursor`). */
  listKeys(apiId: string, options: { decrypt?: boolean; from?: string } = {}): AsyncIterable<UnkeyPage<UnkeyKey>> {
    const decrypt = options.decrypt === true;
    return this.pages("apis.listKeys", { apiId, ...(decrypt && { decrypt: true }) }, keySchema, options.from, (err) => {
      if (!decrypt || err.kind !== "refused") return err;
      if (err.status === 403 && err.code === "unkey/authorization/insufficient_permissions")
        return new UnkeyDecryptRefused("forbidden", err);
      if (err.status === 412) return new UnkeyDecryptRefused("unavailable", err);
      return err;
    });
  }

  /** identities.listIdentities: every identity of the workspace, with meta and rate limits. */
  listIdentities(options: { from?: string } = {}): AsyncIterable<UnkeyPage<UnkeyIdentity>> {
    return this.pages("identities.listIdentities", {}, identitySchema, options.from);
  }

  /** permissions.listPermissions. */
  listPermissions(options: { from?: string } = {}): AsyncIterable<UnkeyPage<UnkeyPermission>> {
    return this.pages("permissions.listPermissions", {}, permissionSchema, options.from);
  }

  /** permissions.listRoles: each role with its permissions. */
  listRoles(options: { from?: string } = {}): AsyncIterable<UnkeyPage<UnkeyRole>> {
    return this.pages("permissions.listRoles", {}, roleSchema, options.from);
  }

  /** ratelimit.listOverrides of one namespace (by name or id). */
  listOverrides(namespace: string, options: { from?: string } = {}): AsyncIterable<UnkeyPage<UnkeyOverride>> {
    return this.pages("ratelimit.listOverrides", { namespace }, overrideSchema, options.from);
  }

  private async *pages<T extends z.ZodType>(
    route: string,
    body: Record<string, unknown>,
    item: T,
    from: string | undefined,
    mapError: (err: UnkeyError) => UnkeyError = (err) => err,
  ): AsyncGenerator<UnkeyPage<z.output<T>>> {
    let cursor = from;
    const seen = new Set<string>();
    for (;;) {
      let answer: z.output<ReturnType<typeof envelopeOf<z.ZodArray<T>>>>;
      try {
        answer = await this.call(route, { ...body, limit: this.pageSize, ...(cursor !== undefined && { cursor }) }, item.array());
      } catch (err) {
        throw err instanceof UnkeyError ? mapError(err) : err;
      }
      const pagination = answer.pagination;
      if (!pagination) throw this.malformed(route, "pagination: missing");
      let nextCursor: string | undefined;
      if (pagination.hasMore) {
        nextCursor = pagination.cursor;
        if (nextCursor === undefined || nextCursor === "") throw this.malformed(route, "pagination.cursor: missing while hasMore is true");
        // The cursor is the first id of the next page (inclusive): one seen before would page forever.
        if (nextCursor === cursor || seen.has(nextCursor)) throw this.malformed(route, "pagination.cursor: repeats an earlier page's");
        seen.add(nextCursor);
      }
      yield { items: answer.data as z.output<T>[], cursor, nextCursor };
      if (nextCursor === undefined) return;
      cursor = nextCursor;
    }
  }

  /** One request, retried per the options; the parsed envelope of a 2xx answer. */
  private async call<T extends z.ZodType>(route: string, body: unknown, data: T) {
    const json = JSON.stringify(body);
    const signal = this.options.signal;
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw this.error("aborted", route, `${this.label} ${route}: aborted`);
      const res = await postJson(this.baseUrl, `/v2/${route}`, this.rootKey, json, this.timeoutMs, signal);
      if (signal?.aborted) throw this.error("aborted", route, `${this.label} ${route}: aborted`);
      if (res.kind === "ok") {
        const parsed = envelopeOf(data).safeParse(res.body);
        if (parsed.success) return parsed.data;
        throw this.malformed(route, describeIssue(parsed.error.issues[0], res.body), res.status);
      }
      // What the server said is shown as text of a bounded length, without the root key or control characters.
      const problem = res.kind === "error" ? problemOf(res.body) : undefined;
      const code = problem?.code !== undefined ? this.clean(problem.code, 200) : undefined;
      const requestId = problem?.requestId !== undefined ? this.clean(problem.requestId, 100) : undefined;
      const detail = res.kind === "error" ? this.clean(problem?.detail ?? res.message, 500) : undefined;
      const why = res.kind === "network" ? res.message : `${res.status}${code ? ` ${code}` : ""}: ${detail}`;
      const info: UnkeyError["info"] = { attempts: attempt };
      if (res.kind === "error") info.status = res.status;
      if (code !== undefined) info.code = code;
      if (detail !== undefined) info.detail = detail;
      if (requestId !== undefined) info.requestId = requestId;
      const request = requestId ? ` (request ${requestId})` : "";
      if (res.kind === "error" && !isTransientStatus(res.status)) {
        throw this.error("refused", route, `${this.label} ${route} answered ${why}${request}`, info);
      }
      if (attempt >= this.attempts) {
        throw this.error("unavailable", route, `${this.label} ${route}: ${why}${request} (after ${attempt} attempts)`, info);
      }
      const delayMs = backoffDelay(attempt, this.backoffMs, res.kind === "error" ? res.retryAfterMs : undefined, this.maxRetryAfterMs);
      this.options.onRetry?.({ route, attempt, attempts: this.attempts, reason: this.redact(why), delayMs });
      await sleep(delayMs, signal);
    }
  }

  private malformed(route: string, what: string, status = 200): UnkeyError {
    return this.error("malformed", route, `${this.label} ${route} answered ${status} with a body the v2 contract does not allow: ${what}`, {
      status,
    });
  }

  private error(kind: UnkeyErrorKind, route: string, message: string, info: UnkeyError["info"] = {}): UnkeyError {
    return new UnkeyError(kind, route, this.redact(message), info);
  }

  /** Whatever a server echoes, the root key never reaches a message. */
  private redact(text: string): string {
    return text.split(this.rootKey).join("[the Unkey root key]");
  }

  /** A server's text for a terminal: the root key cut out first, control characters (escapes) as spaces, `max` long. */
  private clean(text: string, max: number): string {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: removing control characters is this regex's purpose
    const plain = this.redact(text).replace(/[\u0000-\u001f\u007f-\u009f]/g, " ");
    return plain.length > max ? `${plain.slice(0, max)}…` : plain;
  }
}

function positive(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`UnkeyClient: ${name} must be a positive integer`);
  return value;
}

/** Unkey's problem+json error (contract §1.3): `type` as its code (the part after the docs prefix), `detail`. */
function problemOf(body: unknown): { code?: string; detail?: string; requestId?: string } | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const { error, meta } = body as { error?: Record<string, unknown>; meta?: Record<string, unknown> };
  const out: { code?: string; detail?: string; requestId?: string } = {};
  if (error && typeof error === "object") {
    if (typeof error.type === "string") out.code = error.type.startsWith(TYPE_PREFIX) ? error.type.slice(TYPE_PREFIX.length) : error.type;
    if (typeof error.detail === "string" && error.detail !== "") out.detail = error.detail;
    else if (typeof error.title === "string") out.detail = error.title;
  }
  if (meta && typeof meta === "object" && typeof meta.requestId === "string") out.requestId = meta.requestId;
  return out;
}

/**
 * The first problem zod found, as `data[3].credits.remaining: expected int, received number`, with the id of the
 * item it is in (ids are not secrets). Written from the issue's code, not zod's message: an error map installed in
 * the process (validation.messages.ts) may quote the value received, and a value may be meta or a plaintext.
 */
function describeIssue(issue: z.core.$ZodIssue | undefined, body: unknown): string {
  if (!issue) return "not valid";
  const received = typeOf(valueAt(body, issue.path));
  if (issue.path.length === 0) return `the body is not a JSON object (received ${received})`;
  let path = "";
  for (const part of issue.path) path += typeof part === "number" ? `[${part}]` : `${path === "" ? "" : "."}${String(part)}`;
  const [top, index] = issue.path;
  let item = "";
  if (top === "data" && typeof index === "number") {
    const row = valueAt(body, ["data", index]) as Record<string, unknown> | undefined;
    const id = row?.keyId ?? row?.id ?? row?.overrideId;
    if (typeof id === "string" && /^[\w.-]{1,255}$/.test(id)) item = ` (item ${id})`;
  }
  return `${path}: ${expectation(issue)}, received ${received}${item}`;
}

function expectation(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "invalid_type":
      return `expected ${issue.expected}`;
    case "invalid_value":
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(" | ")}`;
    case "too_big":
      return `expected ${issue.origin} at most ${String(issue.maximum)}`;
    case "too_small":
      return `expected ${issue.origin} at least ${String(issue.minimum)}`;
    default:
      return `not valid (${issue.code})`;
  }
}

function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let value = body;
  for (const part of path) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<PropertyKey, unknown>)[part];
  }
  return value;
}

/** The JSON type of a value, never the value. */
function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return value === undefined ? "nothing" : typeof value;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
