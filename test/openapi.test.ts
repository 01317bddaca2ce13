import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { codeToStatus, errorCodes } from "../src/http/errors.js";
import { rpcs } from "../src/wire/v1/routes.js";
import { v2ErrorStatusesOf } from "../src/wire/v2/openapi.js";
import { v2Rpcs } from "../src/wire/v2/routes.js";
import { ADMIN_TOKEN, createHarness, type Harness } from "./helper.js";

let h: Harness;
let doc: any;
beforeAll(async () => {
  h = await createHarness();
  const res = await h.app.inject({ method: "GET", url: "/openapi.json" });
  expect(res.statusCode).toBe(200);
  expect(res.headers["content-type"]).toMatch(/^application\/json/);
  doc = JSON.parse(res.body);
});
afterAll(() => h.close());

const operationOf = (path: string, method: string) => doc.paths[path]?.[method.toLowerCase()];
const operatorPaths = [
  "/v1/workspaces.createWorkspace",
  "/v1/workspaces.updateWorkspace",
  "/v1/workspaces.listWorkspaces",
  "/v1/rootKeys.createRootKey",
  "/v1/rootKeys.deleteRootKey",
  "/v1/rootKeys.listRootKeys",
  "/v1/migrations.retryMigration",
];
const openPaths = ["/v1/liveness", "/v1/readiness", "/v1/keys.verifyKey"];

/** The JSON schema zod itself gives for a route's input, as the provider makes it (unrepresentable `meta` checks become their `.meta()`; @fastify/swagger writes `const: x` as `enum: [x]`). */
function inputJsonSchema(schema: z.ZodType): any {
  const { $schema: _, ...json } = z.toJSONSchema(schema, { target: "draft-2020-12", io: "input", unrepresentable: "any" }) as any;
  const constToEnum = (v: any): any => {
    if (Array.isArray(v)) return v.map(constToEnum);
    if (v === null || typeof v !== "object") return v;
    const out: any = {};
    for (const [k, child] of Object.entries(v)) {
      if (k === "const") out.enum = [child];
      else out[k] = constToEnum(child);
    }
    return out;
  };
  return constToEnum(json);
}

describe("GET /openapi.json", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.info.title).toBe("keyhaven");
    const result = await new Validator().validate(doc);
    expect(result.errors ?? [], JSON.stringify(result.errors)).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it("documents exactly the v1 and v2 routes the app serves, and nothing else", async () => {
    // Every method+path the router knows under /v1 and /v2 (HEAD routes are Fastify's automatic twins of GET).
    const served = new Set<string>();
    for (const line of h.app.printRoutes({ commonPrefix: false }).split("\n")) {
      const m = line.match(/(\/v[12]\/\S+) \(([A-Z, ]+)\)/);
      if (m) for (const method of m[2]!.split(", ")) if (method !== "HEAD") served.add(`${method} ${m[1]}`);
    }
    const documented = new Set<string>();
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const method of Object.keys(item)) documented.add(`${method.toUpperCase()} ${path}`);
    }
    expect(served.size).toBe(rpcs.length + v2Rpcs.length);
    expect([...documented].sort()).toEqual([...served].sort());
    expect(Object.keys(doc.paths).every((p) => p.startsWith("/v1/") || p.startsWith("/v2/"))).toBe(true);
  });

  it("documents each v2 route with its body, its {meta, data} answer and v2's error envelope for each status it declares", () => {
    for (const rpc of v2Rpcs) {
      const op = operationOf(rpc.path, rpc.method);
      expect(op, rpc.path).toBeDefined();
      expect(op.operationId).toBe(`v2.${rpc.path.slice("/v2/".length)}`);
      expect(op.description).toBe(rpc.summary);
      expect(op.tags[0]).toMatch(/^v2 /);
      if (rpc.method === "POST") {
        expect(op.requestBody.content["application/json"].schema, rpc.path).toEqual(inputJsonSchema(rpc.input));
        // v2 refuses unknown fields on every body but identities.createIdentity's, keys.rerollKey's,
        // analytics.getVerifications' and multiLimit's (an array of objects that are not closed either) (contract §1.3),
        // and portal.rerollKey's (keys.rerollKey's schema, upstream's research appendix §4).
        const open = [
          "/v2/identities.createIdentity",
          "/v2/keys.rerollKey",
          "/v2/portal.rerollKey",
          "/v2/analytics.getVerifications",
          "/v2/ratelimit.multiLimit",
        ].includes(rpc.path);
        expect(op.requestBody.content["application/json"].schema.additionalProperties, rpc.path).toBe(open ? undefined : false);
      }
      const success = op.responses["200"].content["application/json"].schema;
      const envelope = rpc.noData ? ["meta"] : rpc.paginated ? ["meta", "data", "pagination"] : ["meta", "data"];
      expect(success.required, rpc.path).toEqual(envelope);
      const statuses = Object.keys(op.responses)
        .filter((s) => s !== "200")
        .map(Number);
      expect(statuses, rpc.path).toEqual(v2ErrorStatusesOf(rpc));
      for (const status of statuses) {
        expect(op.responses[status].content["application/json"].schema.$ref).toBe("#/components/schemas/V2Error");
      }
    }
    expect(doc.components.schemas.V2Error.required.sort()).toEqual(["error", "meta"]);
  });

  it("gives every route its request schema, generated from the zod schema it validates with", () => {
    for (const rpc of rpcs) {
      const op = operationOf(rpc.path, rpc.method);
      expect(op, rpc.path).toBeDefined();
      expect(op.operationId).toBe(rpc.path.slice("/v1/".length));
      expect(op.description).toBe(rpc.summary);
      const expected = inputJsonSchema(rpc.input);
      if (rpc.method === "POST") {
        expect(op.requestBody.required).toBe(true);
        expect(op.requestBody.content["application/json"].schema, rpc.path).toEqual(expected);
      } else {
        const params = (op.parameters ?? []) as any[];
        expect(params.every((p) => p.in === "query")).toBe(true);
        expect(params.map((p) => p.name).sort(), rpc.path).toEqual(Object.keys(expected.properties ?? {}).sort());
        for (const p of params) {
          expect(p.required ?? false, `${rpc.path} ${p.name}`).toBe((expected.required ?? []).includes(p.name));
          // @fastify/swagger moves a parameter's description from its schema to the parameter itself.
          const { description, ...schema } = expected.properties[p.name];
          expect(p.schema, `${rpc.path} ${p.name}`).toEqual(schema);
          expect(p.description, `${rpc.path} ${p.name}`).toBe(description);
        }
      }
      expect(op.responses[String(rpc.status ?? 200)].content["application/json"].schema, rpc.path).toBeDefined();
    }
  });

  it("documents the error envelopes, one component per status, with the codes errors.ts maps to it", () => {
    for (const [status, codes] of [400, 403, 404, 409, 412, 429, 500].map(
      (s) => [s, errorCodes.filter((c) => codeToStatus[c] === s)] as const,
    )) {
      const component = doc.components.schemas[`Error${status}`];
      expect(component, `Error${status}`).toBeDefined();
      expect(component.required).toEqual(["error"]);
      expect(component.properties.error.required.sort()).toEqual(["code", "docs", "message", "requestId"]);
      expect(component.properties.error.properties.code.enum.sort()).toEqual([...codes].sort());
    }
    // v1 answers UNAUTHORIZED with 403; no v1 route ever answers 401, so none documents it (v2 does, with 401).
    const v1Paths = Object.fromEntries(Object.entries(doc.paths).filter(([p]) => p.startsWith("/v1/")));
    expect(JSON.stringify(v1Paths)).not.toMatch(/"401"/);
  });

  it("lists for each route the error statuses it declares, 413 on every POST and 500 on every route", () => {
    for (const rpc of rpcs) {
      const { responses } = operationOf(rpc.path, rpc.method);
      const ref = (status: number) => responses[String(status)]?.content["application/json"].schema.$ref;
      const errorStatuses = Object.keys(responses)
        .map(Number)
        .filter((s) => s >= 400)
        .sort((a, b) => a - b);
      const expected = [...new Set([...rpc.errors, 500, ...(rpc.method === "POST" ? [413] : [])])].sort((a, b) => a - b);
      expect(errorStatuses, rpc.path).toEqual(expected);
      for (const status of errorStatuses) expect(ref(status), `${rpc.path} ${status}`).toBe(`#/components/schemas/Error${status}`);
      expect(ref(500), rpc.path).toBe("#/components/schemas/Error500");
      if (rpc.path === "/v1/liveness" || rpc.path === "/v1/readiness") continue;
      // Every route but health authenticates (or, verifyKey, refuses a disabled workspace's key) and needs the store.
      expect(ref(403), rpc.path).toBe("#/components/schemas/Error403");
      expect(responses["403"].description).toContain("[UNAUTHORIZED](/docs/errors/UNAUTHORIZED)");
      expect(ref(503), rpc.path).toBe("#/components/schemas/Error503");
      if (rpc.method === "POST") {
        expect(ref(400), rpc.path).toBe("#/components/schemas/Error400");
        expect(ref(413), rpc.path).toBe("#/components/schemas/Error413");
      }
    }
    expect(operationOf("/v1/readiness", "GET").responses["503"].content["application/json"].schema.$ref).toBe(
      "#/components/schemas/Error503",
    );
  });

  it("lists a status only on the routes that can answer it: no 429 anywhere, 409 and 412 only where something can conflict or be missing", () => {
    const statusesOf = (path: string) => Object.keys(operationOf(path, path === "/v1/keys.verifyKey" ? "POST" : "GET")?.responses ?? {});
    for (const rpc of rpcs) expect(Object.keys(operationOf(rpc.path, rpc.method).responses), rpc.path).not.toContain("429");
    // Reads and verification cannot conflict.
    for (const path of ["/v1/apis.getApi", "/v1/keys.getKey", "/v1/keys.verifyKey", "/v1/permissions.listRoles", "/v1/liveness"]) {
      expect(statusesOf(path), path).not.toContain("409");
    }
    expect(statusesOf("/v1/apis.getApi")).not.toContain("412");
    expect(statusesOf("/v1/keys.verifyKey")).not.toContain("404"); // an unknown key is a 200 with code NOT_FOUND
    expect(statusesOf("/v1/liveness")).toEqual(["200", "500"]);
    expect(Object.keys(operationOf("/v1/keys.createKey", "POST").responses)).toEqual(
      expect.arrayContaining(["400", "403", "404", "409", "412", "413", "500", "503"]),
    );
    expect(Object.keys(operationOf("/v1/apis.deleteApi", "POST").responses)).toContain("412");
    expect(Object.keys(operationOf("/v1/apis.deleteApi", "POST").responses)).not.toContain("409");
  });

  it("names every route's success answer with the description its definition gives", () => {
    for (const rpc of rpcs) {
      const success = operationOf(rpc.path, rpc.method).responses[String(rpc.status ?? 200)];
      expect(success.description, rpc.path).toBe(rpc.returns);
      expect(success.description, rpc.path).not.toBe("Default Response");
      expect(success.content["application/json"].schema, rpc.path).not.toHaveProperty("x-response-description");
    }
    expect(operationOf("/v1/migrations.enqueueKeys", "POST").responses["202"].description).toMatch(/stored/);
  });

  it("describes every request field of keys.createKey, keys.verifyKey, apis.* and migrations.*, and their main answers", () => {
    const undescribed: string[] = [];
    const described = (schema: any) => typeof schema?.description === "string" && schema.description.length > 0;
    for (const rpc of rpcs.filter((r) => /^\/v1\/(apis\.|migrations\.|keys\.createKey$|keys\.verifyKey$)/.test(r.path))) {
      const op = operationOf(rpc.path, rpc.method);
      if (rpc.method === "GET") {
        for (const p of op.parameters ?? []) if (!p.description) undescribed.push(`${rpc.path} ?${p.name}`);
        continue;
      }
      let body = op.requestBody.content["application/json"].schema;
      if (body.type === "array") {
        if (!described(body)) undescribed.push(`${rpc.path} (the array)`);
        body = body.items;
      }
      for (const [name, field] of Object.entries<any>(body.properties ?? {})) {
        if (!described(field)) undescribed.push(`${rpc.path} ${name}`);
      }
    }
    expect(undescribed).toEqual([]);
    const answer = (path: string) => operationOf(path, "POST").responses["200"].content["application/json"].schema.properties;
    for (const field of ["keyId", "key"]) expect(described(answer("/v1/keys.createKey")[field]), field).toBe(true);
    for (const field of ["valid", "code", "keyId", "remaining", "ratelimit", "permissions"]) {
      expect(described(answer("/v1/keys.verifyKey")[field]), field).toBe(true);
    }
    expect(described(answer("/v1/migrations.createKeys").keyIds)).toBe(true);
  });

  it("answers only statuses it documents: each route without credentials, with an empty request and with malformed JSON", async () => {
    const { rootKey } = await h.tenant();
    const undocumented: string[] = [];
    const check = (rpc: (typeof rpcs)[number], label: string, status: number) => {
      const documented = Object.keys(operationOf(rpc.path, rpc.method).responses).map(Number);
      if (!documented.includes(status)) undocumented.push(`${rpc.method} ${rpc.path} ${label}: ${status}`);
    };
    for (const rpc of rpcs) {
      const admin = rpc.auth === "admin";
      if (rpc.method === "GET") {
        check(rpc, "no credentials", (await h.get(rpc.path, {})).status);
        check(rpc, "empty query", (await h.get(rpc.path, {}, admin ? ADMIN_TOKEN : rootKey)).status);
      } else {
        check(rpc, "no credentials", (await h.post(rpc.path, {})).status);
        check(rpc, "empty body", (await h.post(rpc.path, {}, admin ? ADMIN_TOKEN : rootKey)).status);
        const malformed = await h.app.inject({
          method: "POST",
          url: rpc.path,
          headers: { "content-type": "application/json", authorization: `Bearer ${admin ? ADMIN_TOKEN : rootKey}` },
          payload: "{",
        });
        check(rpc, "malformed JSON", malformed.statusCode);
      }
    }
    expect(undocumented).toEqual([]);
  });

  it("always names a server, so that the examples on /docs have a host: KEYHAVEN_PUBLIC_URL, else the server the document came from", async () => {
    expect(doc.servers).toEqual([{ url: "/", description: expect.any(String) }]);
    const withPublicUrl = await createHarness({ KEYHAVEN_PUBLIC_URL: "https://keys.example.com" });
    try {
      const res = await withPublicUrl.app.inject({ method: "GET", url: "/openapi.json" });
      expect(JSON.parse(res.body).servers).toEqual([{ url: "https://keys.example.com", description: "KEYHAVEN_PUBLIC_URL" }]);
    } finally {
      await withPublicUrl.close();
    }
  });

  it("documents the bearer schemes: root keys on the API, the admin token on operator routes, none on health and verifyKey", () => {
    expect(doc.components.securitySchemes.rootKey).toMatchObject({ type: "http", scheme: "bearer" });
    expect(doc.components.securitySchemes.adminToken).toMatchObject({ type: "http", scheme: "bearer" });
    for (const rpc of rpcs) {
      const { security } = operationOf(rpc.path, rpc.method);
      if (operatorPaths.includes(rpc.path)) expect(security, rpc.path).toEqual([{ adminToken: [] }]);
      else if (openPaths.includes(rpc.path)) expect(security, rpc.path).toEqual([]);
      else expect(security, rpc.path).toEqual([{ rootKey: [] }]);
    }
  });

  it("describes real responses: an error envelope the server sends matches its documented schema", async () => {
    const { default: Ajv } = await import("ajv/dist/2020.js");
    const ajv = new (Ajv as any)({ strict: false });
    for (const [name, schema] of Object.entries<any>(doc.components.schemas)) ajv.addSchema(schema, `#/components/schemas/${name}`);
    const notFound = await h.get("/v1/apis.getApi", { apiId: "api_missing" }, (await h.tenant()).rootKey);
    expect(notFound.status).toBe(404);
    expect(ajv.validate("#/components/schemas/Error404", notFound.body), JSON.stringify(ajv.errors)).toBe(true);
    const live = await h.get("/v1/liveness", {});
    const liveSchema = operationOf("/v1/liveness", "GET").responses["200"].content["application/json"].schema;
    expect(ajv.validate(liveSchema, live.body), JSON.stringify(ajv.errors)).toBe(true);
  });
});

describe("GET /docs", () => {
  it("redirects /docs to the reference page, which loads Scalar's script from this server, not a CDN", async () => {
    const redirect = await h.app.inject({ method: "GET", url: "/docs" });
    expect(redirect.statusCode).toBe(301);
    expect(redirect.headers.location).toBe("/docs/");
    const page = await h.app.inject({ method: "GET", url: "/docs/" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toMatch(/^text\/html/);
    expect(page.body).toContain('<script src="js/scalar.js"></script>');
    expect(page.body).toContain('"url": "/openapi.json"');
    expect(page.body).not.toMatch(/https?:\/\//);
    const script = await h.app.inject({ method: "GET", url: "/docs/js/scalar.js" });
    expect(script.statusCode).toBe(200);
    expect(script.headers["content-type"]).toMatch(/^application\/javascript/);
    expect(script.body.length).toBeGreaterThan(1_000_000);
  });

  it("leaves the error reference at /docs/errors working", async () => {
    const index = await h.app.inject({ method: "GET", url: "/docs/errors" });
    expect(index.statusCode).toBe(200);
    expect(index.body).toContain('id="NOT_FOUND"');
    const one = await h.app.inject({ method: "GET", url: "/docs/errors/SERVICE_UNAVAILABLE" });
    expect(one.statusCode).toBe(200);
    expect(one.body).toContain("HTTP 503");
    // Codes v1 defines as errors but keyhaven answers only as verification outcomes: no page blames a root key.
    for (const code of ["DISABLED", "USAGE_EXCEEDED", "EXPIRED", "RATE_LIMITED"]) {
      const outcome = await h.app.inject({ method: "GET", url: `/docs/errors/${code}` });
      expect(outcome.body, code).toContain("only as the outcome of <code>keys.verifyKey</code>");
      expect(outcome.body, code).not.toMatch(/root key (is|has|was)/);
    }
    const unknown = await h.app.inject({ method: "GET", url: "/docs/errors/NOPE" });
    expect(unknown.statusCode).toBe(404);
  });
});
