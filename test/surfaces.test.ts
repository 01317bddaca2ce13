import { describe, expect } from "vitest";
import { operatorRpcs, v1OwnRpcs } from "../src/wire/v1/routes.js";
import { v2Rpcs } from "../src/wire/v2/routes.js";
import { test } from "./fixtures.js";

/** The same fault sent to each surface: each answers it in its own envelope (its plugin's error handler and 404). */
const faults = {
  "bad JSON": { method: "POST", payload: '{"name": "x"', headers: { "content-type": "application/json" } },
  "a wrong content type": { method: "POST", payload: "name=x", headers: { "content-type": "text/plain" } },
  "a body over the limit": {
    method: "POST",
    payload: JSON.stringify({ name: "x".repeat(2 * 1024 * 1024) }),
    headers: { "content-type": "application/json" },
  },
} as const;

describe("each surface answers a fault in its own shape", () => {
  test.for(Object.entries(faults))("v1 answers %s in its envelope, v2 in its own", async ([, fault], { h }) => {
    const v1 = await h.app.inject({ url: "/v1/apis.createApi", ...fault });
    const v2 = await h.app.inject({ url: "/v2/apis.createApi", ...fault });
    expect(v1.json().error.code).toMatch(/^(BAD_REQUEST|PAYLOAD_TOO_LARGE)$/);
    expect(v1.json().meta).toBeUndefined();
    expect(v2.json().meta.requestId).toBe(v2.headers["unkey-request-id"]);
    expect(v2.json().error.type).toMatch(/^https:\/\/unkey\.com\/docs\/errors\//);
    expect(v2.json().error.code).toBeUndefined();
    expect(v2.statusCode).toBe(v1.statusCode);
  });

  test("an unknown route under each prefix is its surface's 404, and one outside every prefix the shared envelope's", async ({ h }) => {
    const v1 = await h.app.inject({ method: "POST", url: "/v1/nope.nope" });
    const v2 = await h.app.inject({ method: "POST", url: "/v2/nope.nope" });
    const outside = await h.app.inject({ method: "POST", url: "/v3/nope.nope" });
    expect([v1.statusCode, v2.statusCode, outside.statusCode]).toEqual([404, 404, 404]);
    expect(v1.json().error.code).toBe("NOT_FOUND");
    expect(v2.json().error.status).toBe(404);
    expect(v2.json().meta.requestId).toMatch(/^req_/);
    expect(outside.json().error.code).toBe("NOT_FOUND");
  });

  test("v2's parser lets a lookup-only field through, v1's parser reads no route's lookupOnly", async ({ h, t }) => {
    const v2 = await h.app.inject({
      method: "POST",
      url: "/v2/apis.listKeys",
      payload: '{"apiId":"api_\\u0000"}',
      headers: { "content-type": "application/json", authorization: `Bearer ${t.rootKey}` },
    });
    expect(v2.statusCode).toBe(404);
    const v1 = await h.app.inject({
      method: "POST",
      url: "/v1/apis.createApi",
      payload: '{"name":"a\\u0000"}',
      headers: { "content-type": "application/json", authorization: `Bearer ${t.rootKey}` },
    });
    expect(v1.statusCode).toBe(400);
  });
});

describe("the operator surface", () => {
  test("is a plugin of its own within the v1 surface, and only its routes take the admin token alone", async ({ h }) => {
    const tree = h.app.printPlugins();
    const v1 = tree.indexOf("v1Surface");
    const operator = tree.indexOf("operatorSurface");
    expect(v1).toBeGreaterThanOrEqual(0);
    expect(operator).toBeGreaterThan(v1);
    expect(operatorRpcs.map((r) => r.auth)).toEqual(operatorRpcs.map(() => "admin"));
    expect(v1OwnRpcs.filter((r) => r.auth === "admin").map((r) => r.path)).toEqual([]);
    expect(v2Rpcs.filter((r) => (r.auth as string) === "admin").map((r) => r.path)).toEqual([]);
  });

  test("its routes keep their /v1 paths and v1's envelope: a refusal and an unknown method alike", async ({ h, t }) => {
    const refused = await h.post("/v1/workspaces.createWorkspace", { name: "x" }, t.rootKey);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBeDefined();
    const wrongMethod = await h.app.inject({ method: "GET", url: "/v1/rootKeys.createRootKey" });
    expect(wrongMethod.statusCode).toBe(405);
    expect(wrongMethod.json().error.code).toBe("METHOD_NOT_ALLOWED");
  });
});
