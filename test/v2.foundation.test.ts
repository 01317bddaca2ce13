import { randomBytes } from "node:crypto";
import { describe, expect } from "vitest";
import { InvalidInputError } from "../src/errors.js";
import { v2ErrorOf, v2MissingPermissions } from "../src/wire/v2/errors.js";
import { test } from "./fixtures.js";
import { expectV2Error } from "./v2-errors.js";
import type { Harness } from "./helper.js";

// The v2 adapter's common ground (issue 14; contract §1): envelopes, the error model and its content type, schema
// failures, root-key authentication's statuses, and the apis.* routes on the same store as v1.

const v2 = (h: Harness, path: string, body: unknown, rootKey?: string, headers: Record<string, string> = {}) =>
  h.post(path, body, rootKey, headers);

describe("the v2 envelope", () => {
  test("liveness answers GET with meta and data, without authentication", async ({ h }) => {
    const res = await h.app.inject({ method: "GET", url: "/v2/liveness" });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({ meta: { requestId: expect.stringMatching(/^req_/) }, data: { message: "we're cooking" } });
  });

  test("a route answers {meta, data}; an API created through v2 is read through v1 and the reverse", async ({ h, t }) => {
    const created = await v2(h, "/v2/apis.createApi", { name: "billing" }, t.rootKey);
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    expect(created.body).toEqual({ meta: { requestId: expect.stringMatching(/^req_/) }, data: { apiId: expect.stringMatching(/^api_/) } });
    const apiId = created.body.data.apiId as string;
    const viaV1 = await h.get("/v1/apis.getApi", { apiId }, t.rootKey);
    expect(viaV1.body).toMatchObject({ id: apiId, name: "billing", workspaceId: t.workspaceId });

    const v1Api = await h.createApi(t, { name: "made-by-v1" });
    const viaV2 = await v2(h, "/v2/apis.getApi", { apiId: v1Api }, t.rootKey);
    expect(viaV2.status).toBe(200);
    expect(viaV2.body.data).toEqual({ id: v1Api, name: "made-by-v1" });
  });

  test("deleteApi answers data {} and a second delete 404s; a protected API is 412", async ({ h, t }) => {
    const apiId = await h.createApi(t, { name: "to-delete" });
    const deleted = await v2(h, "/v2/apis.deleteApi", { apiId }, t.rootKey);
    expect(deleted.status).toBe(200);
    expect(deleted.body.data).toEqual({});
    expectV2Error(
      await v2(h, "/v2/apis.deleteApi", { apiId }, t.rootKey),
      404,
      "unkey/data/api_not_found",
      "The requested API does not exist or has been deleted.",
    );
    expectV2Error(await v2(h, "/v2/apis.getApi", { apiId }, t.rootKey), 404, "unkey/data/api_not_found");
    const kept = await h.createApi(t, { name: "protected", deleteProtection: true });
    expectV2Error(
      await v2(h, "/v2/apis.deleteApi", { apiId: kept }, t.rootKey),
      412,
      "unkey/application/protected_resource",
      "This API has delete protection enabled. Disable it before attempting to delete.",
    );
  });

  test("another workspace's API is not found", async ({ h, t }) => {
    const other = await h.tenant();
    const apiId = await h.createApi(other);
    expectV2Error(await v2(h, "/v2/apis.getApi", { apiId }, t.rootKey), 404, "unkey/data/api_not_found");
    expectV2Error(await v2(h, "/v2/apis.deleteApi", { apiId }, t.rootKey), 404, "unkey/data/api_not_found");
    expect((await h.get("/v1/apis.getApi", { apiId }, other.rootKey)).status).toBe(200);
  });
});

describe("v2 errors", () => {
  test("are problem+json when the client accepts it, else application/json", async ({ h, t }) => {
    const missing = "api_doesnotexist1";
    for (const [accept, type] of [
      ["*/*", "application/problem+json"],
      ["application/problem+json", "application/problem+json"],
      ["application/*;q=0.8", "application/problem+json"],
      ["application/json", "application/json"],
    ] as const) {
      const res = await v2(h, "/v2/apis.getApi", { apiId: missing }, t.rootKey, { accept });
      expect(res.status).toBe(404);
      expect(String(res.headers["content-type"])).toContain(type);
    }
    const noAccept = await h.app.inject({
      method: "POST",
      url: "/v2/apis.getApi",
      headers: { "content-type": "application/json", authorization: `Bearer ${t.rootKey}` },
      payload: JSON.stringify({ apiId: missing }),
    });
    expect(noAccept.headers["content-type"]).toContain("application/json");
    expect(noAccept.json().error).toEqual({
      title: "Not Found",
      detail: "The requested API does not exist or has been deleted.",
      status: 404,
      type: "https://unkey.com/docs/errors/unkey/data/api_not_found",
    });
  });

  test("a body that breaks the schema is 400 application/json naming the route, with errors[]; nothing is written", async ({ h, t }) => {
    const before = await h.sql<{ n: string }>("select count(*)::text as n from apis");
    for (const body of [{ name: "ab" }, {}, { name: 3 }, { name: "fine-name", extra: true }, []]) {
      const res = await v2(h, "/v2/apis.createApi", body, t.rootKey, { accept: "*/*" });
      expectV2Error(res, 400, "unkey/application/invalid_input", "POST request body for '/v2/apis.createApi' failed to validate schema");
      expect(String(res.headers["content-type"])).toContain("application/json");
      expect(String(res.headers["content-type"])).not.toContain("problem");
      expect(res.body.error.title).toBe("Bad Request");
      expect(res.body.error.errors).toHaveLength(1);
      expect(res.body.error.errors[0]).toMatchObject({ location: expect.any(String), message: expect.any(String) });
    }
    const unknownField = await v2(h, "/v2/apis.createApi", { name: "fine-name", extra: true }, t.rootKey);
    expect(unknownField.body.error.errors[0].location).toBe("/additionalProperties");
    const tooShort = await v2(h, "/v2/apis.createApi", { name: "ab" }, t.rootKey);
    expect(tooShort.body.error.errors[0].location).toBe("/properties/name/minLength");
    const missingName = await v2(h, "/v2/apis.createApi", {}, t.rootKey);
    expect(missingName.body.error.errors[0].location).toBe("/required");
    const badJson = await h.app.inject({
      method: "POST",
      url: "/v2/apis.createApi",
      headers: { "content-type": "application/json", authorization: `Bearer ${t.rootKey}` },
      payload: "{not json",
    });
    expectV2Error({ status: badJson.statusCode, body: badJson.json(), headers: badJson.headers }, 400, "unkey/application/invalid_input");
    const noType = await h.app.inject({
      method: "POST",
      url: "/v2/apis.createApi",
      headers: { authorization: `Bearer ${t.rootKey}`, "content-type": "text/plain" },
      payload: "hello",
    });
    expect(noType.statusCode).toBe(400);
    expect(noType.json().error.type).toBe("https://unkey.com/docs/errors/unkey/application/invalid_input");
    expect(await h.sql<{ n: string }>("select count(*)::text as n from apis")).toEqual(before);
  });

  test("a body over the route's limit is 413 in the envelope", async ({ h, t }) => {
    const res = await v2(h, "/v2/apis.createApi", { name: "x".repeat(200_000) }, t.rootKey);
    expectV2Error(
      res,
      413,
      "user/bad_request/request_body_too_large",
      /^The request body exceeds the maximum allowed size of \d+ bytes\.$/,
    );
    expect(res.body.error.title).toBe("Request Entity Too Large");
    expect(res.body.error.errors).toEqual([]);
  });

  test("an unknown v2 path is 404 and a wrong method 405, both in v2's envelope", async ({ h }) => {
    const unknown = await v2(h, "/v2/apis.nothingHere", {});
    expect(unknown.status).toBe(404);
    expect(unknown.body.meta.requestId).toMatch(/^req_/);
    expect(unknown.body.error.status).toBe(404);
    const wrongMethod = await h.app.inject({ method: "GET", url: "/v2/apis.getApi" });
    expect(wrongMethod.statusCode).toBe(405);
    expect(wrongMethod.headers.allow).toBe("POST");
    expect(wrongMethod.json().error.status).toBe(405);
  });
});

describe("v2 root-key authentication (contract §1.4)", () => {
  test("no header is 400, a header without 'Bearer ' is 400 malformed, an unknown key 401", async ({ h }) => {
    expectV2Error(
      await v2(h, "/v2/apis.createApi", { name: "abc" }),
      400,
      "unkey/application/invalid_input",
      "Authorization header for 'bearer' scheme",
    );
    for (const authorization of ["Basic abc", "bearer abc", "Bearer"]) {
      expectV2Error(
        await v2(h, "/v2/apis.createApi", { name: "abc" }, undefined, { authorization }),
        400,
        "unkey/authentication/malformed",
        "You must provide a valid root key in the Authorization header in the format 'Bearer ROOT_KEY'. Your authorization header is missing the 'Bearer ' prefix.",
      );
    }
    const unknown = await v2(h, "/v2/apis.createApi", { name: "abc" }, "unkey_not_a_root_key_at_all");
    expectV2Error(
      unknown,
      401,
      "unkey/authentication/key_not_found",
      "The provided root key is invalid. We could not find the requested key.",
    );
    expect(unknown.body.error.title).toBe("Unauthorized");
  });

  test("a bearer that is a live customer key is answered exactly as one nobody holds: it tells nothing of the key", async ({
    h,
    t,
    apiId,
  }) => {
    const { key, keyId } = await h.importKey(t, apiId);
    const deleted = await h.importKey(t, apiId);
    expect((await h.post("/v1/keys.deleteKey", { keyId: deleted.keyId }, t.rootKey)).status).toBe(200);
    const errorOf = async (path: string, body: unknown, bearer: string) => {
      const res = await v2(h, path, body, bearer);
      return { status: res.status, error: res.body.error };
    };
    for (const [path, body] of [
      ["/v2/apis.getApi", { apiId }],
      ["/v2/keys.getKey", { keyId }],
      ["/v2/keys.verifyKey", { key }],
    ] as const) {
      const unknown = await errorOf(path, body, `sk_${randomBytes(16).toString("hex")}`);
      expect(unknown.status).toBe(401);
      expect(await errorOf(path, body, key), path).toEqual(unknown);
      expect(await errorOf(path, body, deleted.key), path).toEqual(unknown);
    }
  });

  test("the body is validated before the credential: a bad body with an unknown key is 400", async ({ h }) => {
    expectV2Error(await v2(h, "/v2/apis.createApi", { name: "a" }, "unkey_not_a_root_key_at_all"), 400, "unkey/application/invalid_input");
  });

  test("extra spaces after 'Bearer ' are trimmed; a customer's key is 401; a disabled workspace is 403", async ({ h, t, apiId }) => {
    const ok = await v2(h, "/v2/apis.getApi", { apiId }, undefined, { authorization: `Bearer    ${t.rootKey}  ` });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const { key } = await h.importKey(t, apiId);
    expectV2Error(
      await v2(h, "/v2/apis.getApi", { apiId }, key),
      401,
      "unkey/authentication/key_not_found",
      "The provided root key is invalid. We could not find the requested key.",
    );
    const other = await h.tenant();
    await h.disableWorkspace(other.workspaceId);
    const disabled = await v2(h, "/v2/apis.createApi", { name: "abc" }, other.rootKey);
    expectV2Error(disabled, 403, "unkey/authorization/workspace_disabled", "The provided root key is invalid. The workspace is disabled.");
    expect(disabled.body.error.title).toBe("Workspace is disabled");
  });

  test("a permission the caller lacks is 403 Insufficient Permissions, in v2's words, before any lookup", async ({ h, t }) => {
    const reader = await h.rootKey(t.workspaceId, ["api.*.read_key"]);
    const denied = await v2(h, "/v2/apis.createApi", { name: "abc" }, reader);
    expectV2Error(denied, 403, "unkey/authorization/insufficient_permissions", "Missing permission: 'api.*.create_api'");
    expect(denied.body.error.title).toBe("Insufficient Permissions");
    expect(denied.body.error.detail).not.toContain("have");
    const missing = await v2(h, "/v2/apis.getApi", { apiId: "api_doesnotexist1" }, reader);
    expectV2Error(
      missing,
      403,
      "unkey/authorization/insufficient_permissions",
      "Missing one of these permissions: api.*.read_api or api.api_doesnotexist1.read_api",
    );
  });

  test("one root key works on both APIs, `*` included", async ({ h, t, apiId }) => {
    expect((await v2(h, "/v2/apis.getApi", { apiId }, t.rootKey)).status).toBe(200);
    expect((await h.get("/v1/apis.getApi", { apiId }, t.rootKey)).status).toBe(200);
    const scoped = await h.rootKey(t.workspaceId, [`api.${apiId}.read_api`]);
    expect((await v2(h, "/v2/apis.getApi", { apiId }, scoped)).status).toBe(200);
  });
});

describe("v2's words for the core's refusals", () => {
  test("a refusal v2 has no words of its own for is told in v1's, never in the core's log text", () => {
    const err = new InvalidInputError({ kind: "remainingNotPositive" });
    const answer = v2ErrorOf(err);
    expect([answer.status, answer.code, answer.detail]).toEqual([
      400,
      "unkey/application/invalid_input",
      "remaining must be greater than 0.",
    ]);
    expect(answer.detail).not.toBe(err.message);
  });
});

describe("v2's permission messages", () => {
  test("render the failing part of the query flat, without keyhaven's `*`", () => {
    const held = new Set(["api.*.update_key"]);
    expect(v2MissingPermissions({ or: ["*", "api.*.create_api"] }, held)).toBe("Missing permission: 'api.*.create_api'");
    expect(v2MissingPermissions({ or: ["*", "api.*.read_api", "api.a.read_api"] }, held)).toBe(
      "Missing one of these permissions: api.*.read_api or api.a.read_api",
    );
    expect(v2MissingPermissions({ and: [{ or: ["api.*.update_key", "api.a.update_key"] }, "rbac.*.add_permission_to_key"] }, held)).toBe(
      "Missing permission: 'rbac.*.add_permission_to_key'",
    );
    expect(
      v2MissingPermissions({ or: ["u#update_key", { and: [{ or: ["api.*.update_key", "api.a.update_key"] }, "rbac.*.x"] }] }, new Set()),
    ).toBe("Missing one of these permissions: u#update_key or api.*.update_key or api.a.update_key and rbac.*.x");
  });
});
