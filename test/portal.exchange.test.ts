import { expect } from "vitest";
import type { Caller } from "../src/core/caller.js";
import type { WriteGate } from "../src/core/changes.js";
import { exchangedBy, exchangePortalCode } from "../src/core/portals/portals.sessions.js";
import { hashKey } from "../src/crypto/hash.js";
import { DependencyUnavailableError } from "../src/storage/dependency.js";
import { it } from "./fixtures.js";
import type { Harness, Tenant } from "./helper.js";

// The exchange's one subtle path (issue 39 §1: "a replay of the same exchange is recognised, any other reuse
// refused"): the store commits the redemption and the connection drops before the answer arrives. The exchange must
// then find its own token on the session and answer it, rather than tell the end user the link was used.

async function mint(h: Harness, t: Tenant): Promise<string> {
  const apiId = await h.createApi(t);
  expect(
    (await h.post("/v2/keyhaven.createPortal", { apiId, slug: `p-${apiId.slice(-6).toLowerCase()}`, name: "P" }, t.rootKey)).status,
  ).toBe(200);
  const portal = (await h.sql<{ id: string }>(`select id from portals where api_id = '${apiId}'`))[0]!.id;
  const res = await h.post("/v2/portal.createSession", { portal, externalId: "user_1", scopes: ["keys:read"] }, t.rootKey);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return new URL((res.body.data as { url: string }).url).searchParams.get("code")!;
}

/** The write gate, but every change it commits is answered as if the connection had dropped during COMMIT. */
function gateLosingAnswers(gate: WriteGate): WriteGate {
  return Object.assign(Object.create(gate) as WriteGate, {
    async change<T>(caller: Caller, work: Parameters<WriteGate["change"]>[1]): Promise<T> {
      await gate.change(caller, work);
      throw new DependencyUnavailableError("PostgreSQL", "PostgreSQL is unreachable", "the test dropped the answer of COMMIT");
    },
  });
}

it("answers an exchange whose commit's answer was lost with the token it committed, once", async ({ h }) => {
  const t = await h.tenant();
  const code = await mint(h, t);
  const services = { db: h.services.db, clock: h.services.clock, changes: gateLosingAnswers(h.services.changes) };
  const { accessToken } = await exchangePortalCode(services, code, { surface: "v2" });
  expect(accessToken).toMatch(/^pat_[A-Za-z0-9]{24}$/);
  const [row] = await h.sql<{ token_hash: string }>(`select token_hash from portal_sessions where code_hash = '${hashKey(code)}'`);
  expect(row!.token_hash).toBe(hashKey(accessToken));
  // The token works: it is the one stored.
  const listed = await h.post("/v2/portal.listKeys", {}, undefined, { cookie: `portal_session=${accessToken}` });
  expect(listed.status, JSON.stringify(listed.body)).toBe(200);
  // Any other redemption of the code is refused, as before.
  const again = await h.post("/v2/portal.exchangeCode", { code });
  expect(again.status).toBe(401);
});

it("answers an outage before the commit as an outage, and the code stays good for a retry", async ({ h }) => {
  const t = await h.tenant();
  const code = await mint(h, t);
  const failing = Object.assign(Object.create(h.services.changes) as WriteGate, {
    async change(): Promise<never> {
      throw new DependencyUnavailableError("PostgreSQL", "PostgreSQL is unreachable", "the test failed the transaction");
    },
  });
  await expect(
    exchangePortalCode({ db: h.services.db, clock: h.services.clock, changes: failing }, code, { surface: "v2" }),
  ).rejects.toBeInstanceOf(DependencyUnavailableError);
  const [row] = await h.sql<{ token_hash: string | null }>(`select token_hash from portal_sessions where code_hash = '${hashKey(code)}'`);
  expect(row!.token_hash).toBeNull();
  expect((await h.post("/v2/portal.exchangeCode", { code })).status).toBe(200);
});

it("recognises its own redemption only: another token, an unknown code, a pending session are not it", async ({ h }) => {
  const t = await h.tenant();
  const code = await mint(h, t);
  expect(await exchangedBy(h.services.db, hashKey(code), hashKey("pat_x"))).toBe(false);
  const res = await h.post("/v2/portal.exchangeCode", { code });
  const token = (res.body.data as { accessToken: string }).accessToken;
  expect(await exchangedBy(h.services.db, hashKey(code), hashKey(token))).toBe(true);
  expect(await exchangedBy(h.services.db, hashKey(code), hashKey(`${token}x`))).toBe(false);
  expect(await exchangedBy(h.services.db, hashKey("pst_unknown"), hashKey(token))).toBe(false);
});
