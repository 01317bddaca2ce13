import type { FastifyInstance } from "fastify";
import type { Harness, Tenant } from "./helper.js";

/** The host and origin every portal page request of a test is sent with (the Origin check compares them). */
export const PORTAL_HOST = "portal.test";
export const PORTAL_ORIGIN = `http://${PORTAL_HOST}`;

export type PortalPage = { status: number; html: string; headers: Record<string, string | string[] | undefined>; location?: string };

/**
 * A browser of the portal page over app.inject: a jar of the portal's one cookie (with the Set-Cookie lines last
 * received), the CSRF token of the last page with a form, and the portal's Origin on every POST (unless told otherwise).
 */
export type PortalClient = {
  cookie: string | undefined;
  setCookies: string[];
  csrf: string;
  get(path: string): Promise<PortalPage>;
  post(path: string, fields?: Record<string, string>, headers?: Record<string, string>): Promise<PortalPage>;
};

export function portalClient(app: FastifyInstance): PortalClient {
  const client: PortalClient = {
    cookie: undefined,
    setCookies: [],
    csrf: "",
    get: (path) => send("GET", path, undefined, {}),
    post: (path, fields = {}, headers = {}) => {
      const body = new URLSearchParams();
      if (!("_csrf" in fields)) body.append("_csrf", client.csrf);
      for (const [name, value] of Object.entries(fields)) body.append(name, value);
      return send("POST", path, body.toString(), headers);
    },
  };
  async function send(method: "GET" | "POST", path: string, body: string | undefined, extra: Record<string, string>): Promise<PortalPage> {
    const headers: Record<string, string> = { host: PORTAL_HOST };
    if (method === "POST") {
      headers.origin = PORTAL_ORIGIN;
      headers["content-type"] = "application/x-www-form-urlencoded";
    }
    if (client.cookie !== undefined) headers.cookie = `keyhaven_portal=${client.cookie}`;
    for (const [name, value] of Object.entries(extra)) {
      if (value === "") delete headers[name];
      else headers[name] = value;
    }
    const res = await app.inject({ method, url: path, headers, ...(body === undefined ? {} : { payload: body }) });
    const setCookie = res.headers["set-cookie"];
    client.setCookies = Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : [];
    for (const line of client.setCookies) {
      const match = /^keyhaven_portal=([^;]*)/.exec(line);
      if (match) client.cookie = match[1] === "" || /Max-Age=0|Expires=Thu, 01 Jan 1970/i.test(line) ? undefined : match[1];
    }
    const csrf = /name="_csrf" value="([^"]+)"/.exec(res.body)?.[1];
    if (csrf) client.csrf = csrf;
    const location = res.headers.location;
    return {
      status: res.statusCode,
      html: res.body,
      headers: res.headers as PortalPage["headers"],
      ...(typeof location === "string" ? { location } : {}),
    };
  }
  return client;
}

/** A portal over a new API of `t` (with `settings`: returnUrl, branding, …): the API's and the portal's ids. */
export async function portalOf(h: Harness, t: Tenant, slug: string, settings: Record<string, unknown> = {}) {
  const apiId = await h.createApi(t);
  const res = await h.post("/v2/keyhaven.createPortal", { apiId, slug, name: `Portal ${slug}`, ...settings }, t.rootKey);
  if (res.status !== 200) throw new Error(`createPortal: ${res.status} ${JSON.stringify(res.body)}`);
  return { apiId, portalId: res.body.data.portalId as string };
}

/** A key of `externalId` (its identity made first when missing) in `apiId`, created through v2. */
export async function keyOf(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown>) {
  if (typeof fields.externalId === "string") await h.post("/v2/identities.createIdentity", { externalId: fields.externalId }, t.rootKey);
  const res = await h.post("/v2/keys.createKey", { apiId, ...fields }, t.rootKey);
  if (res.status !== 200) throw new Error(`createKey: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data as { keyId: string; key: string };
}

/** The URL portal.createSession answers for `externalId` with `scopes` (and any other input). */
export async function sessionUrl(
  h: Harness,
  t: Tenant,
  portal: string,
  externalId: string,
  scopes: string[],
  more: Record<string, unknown> = {},
) {
  const res = await h.post("/v2/portal.createSession", { portal, externalId, scopes, ...more }, t.rootKey);
  if (res.status !== 200) throw new Error(`createSession: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data.url as string;
}

/** A portal client that has opened `url` (exchanged its code); fails unless the exchange set the cookie. */
export async function openedSession(app: FastifyInstance, url: string): Promise<PortalClient> {
  const client = portalClient(app);
  const u = new URL(url);
  const res = await client.get(`${u.pathname}${u.search}`);
  if (res.status !== 303 || client.cookie === undefined) throw new Error(`exchange failed: ${res.status} ${res.html.slice(0, 300)}`);
  return client;
}

/** Whether `key` verifies now (v2's keys.verifyKey with the tenant's root key), and its code. */
export async function verifies(h: Harness, t: Tenant, key: string): Promise<{ valid: boolean; code: string }> {
  const res = await h.post("/v2/keys.verifyKey", { key }, t.rootKey);
  if (res.status !== 200) throw new Error(`verifyKey: ${res.status} ${JSON.stringify(res.body)}`);
  return { valid: res.body.data.valid, code: res.body.data.code };
}
