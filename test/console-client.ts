import type { FastifyInstance } from "fastify";
import { createHarness, type Harness, type Tenant } from "./helper.js";

/** The host and origin every console request of a test is sent with (the Origin check compares them). */
export const CONSOLE_HOST = "console.test";
export const CONSOLE_ORIGIN = `http://${CONSOLE_HOST}`;

export type Page = { status: number; html: string; headers: Record<string, string | string[] | undefined>; location?: string };

/**
 * A browser of the console over app.inject: a cookie jar of one session cookie, the page's CSRF token read from the
 * last page it got, and the console's Origin on every POST (unless told otherwise).
 */
export type ConsoleClient = {
  /** The session cookie's value, as the browser holds it (undefined before sign-in and after sign-out). */
  cookie: string | undefined;
  /** The CSRF token of the last page that had a form with one. */
  csrf: string;
  get(path: string): Promise<Page>;
  /** POSTs a form; `_csrf` is added unless `fields` has one; `headers` may replace Origin (or drop it: `origin: ""`). */
  post(path: string, fields?: Record<string, string | string[]>, headers?: Record<string, string>): Promise<Page>;
};

export function consoleClient(app: FastifyInstance): ConsoleClient {
  const client: ConsoleClient = {
    cookie: undefined,
    csrf: "",
    async get(path) {
      return remember(await send(app, client, "GET", path, undefined, {}));
    },
    async post(path, fields = {}, headers = {}) {
      const body = new URLSearchParams();
      if (!("_csrf" in fields)) body.append("_csrf", client.csrf);
      for (const [name, value] of Object.entries(fields)) {
        for (const v of Array.isArray(value) ? value : [value]) body.append(name, v);
      }
      return remember(await send(app, client, "POST", path, body.toString(), headers));
    },
  };
  const remember = (page: Page) => {
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.html)?.[1];
    if (csrf) client.csrf = csrf;
    return page;
  };
  return client;
}

async function send(
  app: FastifyInstance,
  client: ConsoleClient,
  method: "GET" | "POST",
  path: string,
  body: string | undefined,
  extra: Record<string, string>,
): Promise<Page> {
  const headers: Record<string, string> = { host: CONSOLE_HOST };
  if (method === "POST") {
    headers.origin = CONSOLE_ORIGIN;
    headers["content-type"] = "application/x-www-form-urlencoded";
  }
  if (client.cookie !== undefined) headers.cookie = `keyhaven_session=${client.cookie}`;
  for (const [name, value] of Object.entries(extra)) {
    if (value === "") delete headers[name];
    else headers[name] = value;
  }
  const res = await app.inject({ method, url: path, headers, ...(body === undefined ? {} : { payload: body }) });
  const setCookie = res.headers["set-cookie"];
  for (const line of Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : []) {
    const match = /^(?:__Host-)?keyhaven_session=([^;]*)/.exec(line);
    if (match) client.cookie = match[1] === "" || /Max-Age=0|Expires=Thu, 01 Jan 1970/i.test(line) ? undefined : match[1];
  }
  const location = res.headers.location;
  return {
    status: res.statusCode,
    html: res.body,
    headers: res.headers as Page["headers"],
    ...(typeof location === "string" ? { location } : {}),
  };
}

/** A console client signed in with `secret` (a root key or the operator token); fails the test if sign-in fails. */
export async function signedIn(app: FastifyInstance, secret: string): Promise<ConsoleClient> {
  const client = consoleClient(app);
  const res = await client.post("/console/sign-in", { secret });
  if (res.status !== 303 || client.cookie === undefined) throw new Error(`sign-in failed: ${res.status} ${res.html.slice(0, 300)}`);
  await client.get("/console/");
  return client;
}

/**
 * What most console test files start from: a harness of their own (with `env`), a tenant, and a console client
 * signed in with the tenant's root key. The file closes `h` in its afterAll.
 */
export async function signedInTenant(env: Record<string, string> = {}): Promise<{ h: Harness; t: Tenant; c: ConsoleClient }> {
  const h = await createHarness(env);
  const t = await h.tenant();
  return { h, t, c: await signedIn(h.app, t.rootKey) };
}

/** The text of an HTML fragment, tags removed and entities of the five escaped characters decoded (for assertions). */
export function textOf(html: string): string {
  return html
    .replace(/<[^>]*>/g, " ")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ")
    .trim();
}
