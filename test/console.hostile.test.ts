import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consolePages } from "../src/console/pages.js";
import { ADMIN_TOKEN, createHarness, type Harness, type Tenant } from "./helper.js";
import { type ConsoleClient, signedIn } from "./console-client.js";

/**
 * Hostile forms (issue 37 with the brief's rule: bad input gets a 4xx and changes nothing, never a 500): every POST
 * route of the console, with real ids where its path names one, is sent malformed bodies by a signed-in session
 * holding `*` (and by the operator for the operator's pages). None may answer 5xx. The routes are read from the console's own list, so a new page is covered at once.
 */
describe("console forms under hostile bodies", () => {
  let h: Harness;
  let t: Tenant;
  let ids: Record<string, string>;
  let rootKeyClient: ConsoleClient;
  let operatorClient: ConsoleClient;

  beforeAll(async () => {
    h = await createHarness({ KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN });
    t = await h.tenant();
    const apiId = await h.createApi(t);
    const { keyId } = await h.importKey(t, apiId, { name: "victim" });
    ids = { apiId, keyId, workspaceId: t.workspaceId, rootKeyId: "rk_missing", identityId: "id_missing" };
    // The API's portal, so that the portal tab's forms (/apis/:apiId/portal/…) get past "this API has no portal".
    const portal = await h.post("/v2/keyhaven.createPortal", { apiId, slug: "hostile-portal", name: "hostile" }, t.rootKey);
    expect(portal.status, JSON.stringify(portal.body)).toBe(200);
    portalShapes.portalId = (portal.body.data as { portalId: string }).portalId;
    rootKeyClient = await signedIn(h.app, t.rootKey);
    operatorClient = await signedIn(h.app, ADMIN_TOKEN);
  });
  afterAll(() => h?.close());

  /** Portal values of the wrong shape, for the portal's current id (set once it is created), so they reach the core. */
  const portalShapes: Record<string, string | string[]> = {
    slug: ["a", "b"],
    accentColor: "#zzzzzz\u0000",
    returnUrl: "javascript:alert(1)",
    logoUrl: "data:text/html,x",
    title: "\u0000",
    externalId: "a\u0000b",
    scopes: ["keys:read", "keys:read", "nope"],
    enabled: "maybe",
  };

  const BODIES: { name: string; fields: Record<string, string | string[]> }[] = [
    { name: "no fields", fields: {} },
    {
      name: "every field huge",
      fields: Object.fromEntries(
        [
          "name",
          "meta",
          "prefix",
          "byteLength",
          "externalId",
          "expires",
          "remaining",
          "limit",
          "duration",
          "q",
          "permissions",
          "secret",
          "slug",
          "returnUrl",
          "title",
          "accentColor",
          "logoUrl",
          "portalId",
          "scopes",
        ].map((n) => [n, "x".repeat(200_000)]),
      ),
    },
    {
      name: "numbers out of range and bad JSON",
      fields: {
        byteLength: "-1",
        remaining: "1e400",
        limit: "NaN",
        duration: "-5",
        meta: "{not json",
        expires: "2026-13-45T99:99",
        amount: "0x10",
      },
    },
    {
      name: "repeated scalars and bracket names",
      fields: { name: ["a", "b"], "meta[a]": "1", "__proto__[x]": "1", constructor: "1", enabled: ["on", "off"], permanent: ["1", "2"] },
    },
    { name: "portal values of the wrong shape", fields: portalShapes },
  ];

  it("never answers 5xx, and the sessions still work afterwards", async () => {
    const routes = consolePages.filter((r) => r.method === "POST" && !r.path.startsWith("/sign-"));
    expect(routes.length).toBeGreaterThan(0);
    for (const route of routes) {
      const client = route.audience === "operator" ? operatorClient : rootKeyClient;
      const path = `/console${route.path.replace(/:(\w+)/g, (_, name: string) => ids[name] ?? `${name}_missing`)}`;
      for (const body of BODIES) {
        const res = await client.post(path, body.fields);
        expect(res.status, `${route.path} with ${body.name}: ${res.html.slice(0, 300)}`).toBeLessThan(500);
      }
      // Not form-encoded at all, or not decodable.
      const raw = await h.app.inject({
        method: "POST",
        url: path,
        headers: {
          host: "console.test",
          origin: "http://console.test",
          cookie: `keyhaven_session=${client.cookie}`,
          "content-type": "application/x-www-form-urlencoded",
        },
        payload: `_csrf=${client.csrf}&name=%ff%fe&meta=%E0%A4%A`,
      });
      expect(raw.statusCode, `${route.path} undecodable: ${raw.body.slice(0, 300)}`).toBeLessThan(500);
    }
    // Sessions still work.
    expect((await rootKeyClient.get("/console/")).status).toBe(200);
    expect((await operatorClient.get("/console/operator/workspaces")).status).toBeLessThan(500);
  });
});
