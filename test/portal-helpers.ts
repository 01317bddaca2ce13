import { randomBytes } from "node:crypto";
import { expect } from "vitest";
import type { Harness, Response, Tenant } from "./helper.js";

/** The test files of the customer portal share these: making a portal, minting and exchanging a session. */

export const ALL_SCOPES = ["keys:read", "keys:reroll", "analytics:read"];

export const uniqueSlug = (prefix = "portal") => `${prefix}-${randomBytes(4).toString("hex")}`;
export const uniqueExternalId = (prefix = "user") => `${prefix}_${randomBytes(4).toString("hex")}`;

/** A portal over `apiId` (a new API of the tenant's unless given), made by keyhaven.createPortal with `*`. */
export async function makePortal(h: Harness, t: Tenant, apiId?: string, fields: Record<string, unknown> = {}) {
  const api = apiId ?? (await h.createApi(t));
  const slug = uniqueSlug();
  const res = await h.post("/v2/keyhaven.createPortal", { apiId: api, slug, name: "Portal", ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { apiId: api, slug, portalId: res.body.data.portalId as string };
}

export const mint = (h: Harness, rootKey: string, body: Record<string, unknown>) => h.post("/v2/portal.createSession", body, rootKey);

/** The exchange code of a session's URL. */
export const codeOf = (url: string) => new URL(url).searchParams.get("code")!;

export const exchange = (h: Harness, code: string) => h.post("/v2/portal.exchangeCode", { code });

/** The `portal_session` cookie header of an access token. */
export const cookieOf = (token: string) => ({ cookie: `portal_session=${token}` });

/** A live session (minted with `rootKey`, default the tenant's, and exchanged) of `portal` for `externalId`. */
export async function liveSession(h: Harness, rootKey: string, portal: string, externalId: string, scopes: string[] = ALL_SCOPES) {
  const minted = await mint(h, rootKey, { portal, externalId, scopes });
  expect(minted.status, JSON.stringify(minted.body)).toBe(200);
  const exchanged = await exchange(h, codeOf(minted.body.data.url));
  expect(exchanged.status, JSON.stringify(exchanged.body)).toBe(200);
  const token = exchanged.body.data.accessToken as string;
  return {
    id: minted.body.data.id as string,
    token,
    expiresAt: exchanged.body.data.expiresAt as number,
    /** A request to a portal route with this session's cookie (and no Authorization). */
    post: (path: string, body: unknown = {}): Promise<Response> => h.post(path, body, undefined, cookieOf(token)),
  };
}

/** A v2 key of `apiId`, optionally owned by the identity `externalId`. */
export async function v2Key(h: Harness, t: Tenant, apiId: string, fields: Record<string, unknown> = {}) {
  const res = await h.post("/v2/keys.createKey", { apiId, ...fields }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { key: string; keyId: string };
}
