import { expect } from "vitest";
import { MAX_PORTAL_REROLL_GRACE_MS, MAX_REROLLS_PER_SESSION } from "../src/core/portals/portals.access.js";
import { it } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";
import { expectV2Error } from "./v2-errors.js";

// What bounds an end user (issue 39; the brief: no request may hurt another tenant): each portal reroll with a grace
// leaves one more live key, so a session rerolls at most MAX_REROLLS_PER_SESSION keys, each old key verifying at
// most 30 days more.

async function session(h: Harness, t: Tenant) {
  const apiId = await h.createApi(t);
  expect((await h.post("/v2/keyhaven.createPortal", { apiId, slug: "limits", name: "Limits" }, t.rootKey)).status).toBe(200);
  expect((await h.post("/v2/identities.createIdentity", { externalId: "user_1" }, t.rootKey)).status).toBe(200);
  const key = await h.post("/v2/keys.createKey", { apiId, externalId: "user_1" }, t.rootKey);
  const res = await h.post("/v2/portal.createSession", { portal: "limits", externalId: "user_1", scopes: ["keys:reroll"] }, t.rootKey);
  const code = new URL((res.body.data as { url: string }).url).searchParams.get("code")!;
  const token = ((await h.post("/v2/portal.exchangeCode", { code })).body.data as { accessToken: string }).accessToken;
  return { keyId: (key.body.data as { keyId: string }).keyId, cookie: { cookie: `portal_session=${token}` } };
}

it("refuses a grace beyond 30 days, changing nothing", async ({ h }) => {
  const t = await h.tenant();
  const { keyId, cookie } = await session(h, t);
  const res = await h.post("/v2/portal.rerollKey", { keyId, expiration: MAX_PORTAL_REROLL_GRACE_MS + 1 }, undefined, cookie);
  expectV2Error(res, 400, "unkey/application/invalid_input");
  expect(JSON.stringify(res.body)).toContain("at most 2592000000 ms");
  expect(await h.sql(`select id from keys where api_id = (select api_id from keys where id = '${keyId}')`)).toHaveLength(1);
  const ok = await h.post("/v2/portal.rerollKey", { keyId, expiration: MAX_PORTAL_REROLL_GRACE_MS }, undefined, cookie);
  expect(ok.status, JSON.stringify(ok.body)).toBe(200);
});

it(`rerolls at most ${MAX_REROLLS_PER_SESSION} keys per session, then refuses (403) and writes nothing`, async ({ h }) => {
  const t = await h.tenant();
  const { keyId, cookie } = await session(h, t);
  await h.sql(`update portal_sessions set rerolls = ${MAX_REROLLS_PER_SESSION - 1} where workspace_id = '${t.workspaceId}'`);
  const last = await h.post("/v2/portal.rerollKey", { keyId, expiration: 0 }, undefined, cookie);
  expect(last.status, JSON.stringify(last.body)).toBe(200);
  const next = (last.body.data as { keyId: string }).keyId;
  const refused = await h.post("/v2/portal.rerollKey", { keyId: next, expiration: 0 }, undefined, cookie);
  expectV2Error(refused, 403, "unkey/authorization/forbidden");
  expect(JSON.stringify(refused.body)).toContain(`rerolled ${MAX_REROLLS_PER_SESSION} keys`);
  expect(await h.sql(`select id from keys where workspace_id = '${t.workspaceId}' and deleted_at_m is null`)).toHaveLength(2);
  expect(await h.sql(`select rerolls from portal_sessions where workspace_id = '${t.workspaceId}'`)).toEqual([
    { rerolls: MAX_REROLLS_PER_SESSION },
  ]);
});
