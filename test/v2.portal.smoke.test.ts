import { expect } from "vitest";
import { it } from "./fixtures.js";

it("a portal session end to end", async ({ h }) => {
  const t = await h.tenant();
  const apiId = await h.createApi(t);
  let res = await h.post("/v2/keyhaven.createPortal", { apiId, slug: "acme-portal", name: "Acme" }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  res = await h.post("/v2/identities.createIdentity", { externalId: "user_a" }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  res = await h.post("/v2/keys.createKey", { apiId, externalId: "user_a", name: "mine" }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const mine = res.body.data as { keyId: string; key: string };
  res = await h.post("/v2/keys.createKey", { apiId, name: "other" }, t.rootKey);
  const other = res.body.data as { keyId: string };
  res = await h.post(
    "/v2/portal.createSession",
    { portal: "acme-portal", externalId: "user_a", scopes: ["keys:read", "keys:reroll", "analytics:read"] },
    t.rootKey,
  );
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const { url } = res.body.data as { url: string };
  const code = new URL(url).searchParams.get("code")!;
  res = await h.post("/v2/portal.exchangeCode", { code });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const token = (res.body.data as { accessToken: string }).accessToken;
  res = await h.post("/v2/portal.exchangeCode", { code });
  expect(res.status).toBe(401);
  const cookie = { cookie: `portal_session=${token}` };
  res = await h.post("/v2/portal.listKeys", {}, undefined, cookie);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect((res.body.data as { keyId: string }[]).map((k) => k.keyId)).toEqual([mine.keyId]);
  res = await h.post("/v2/portal.rerollKey", { keyId: other.keyId, expiration: 0 }, undefined, cookie);
  expect(res.status, JSON.stringify(res.body)).toBe(404);
  res = await h.post("/v2/keys.verifyKey", { key: mine.key }, t.rootKey);
  res = await h.post("/v2/portal.rerollKey", { keyId: mine.keyId, expiration: 0 }, undefined, cookie);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const now = Date.now();
  res = await h.post("/v2/portal.getVerifications", { startTime: now - 3600_000, endTime: now + 60_000 }, undefined, cookie);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  res = await h.post("/v2/portal.getVerifications", { startTime: now - 40 * 86400_000, endTime: now }, undefined, cookie);
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  res = await h.post("/v2/apis.listKeys", { apiId }, undefined, cookie);
  expect(res.status).toBe(400);
  res = await h.post("/v2/portal.listKeys", {}, t.rootKey, cookie);
  expect(res.status, JSON.stringify(res.body)).toBe(400);
});
