import { describe, expect } from "vitest";
import { test } from "./fixtures.js";
import { expectV2Error } from "./v2-errors.js";

// v2's analytics.getVerifications (contract §10): the body's validation, authentication and the read_analytics check,
// in that order, before the query is looked at (its subset and refusals: v2.analytics.sql.test.ts; usage queries:
// v2.analytics.queries.test.ts).

const QUERY = { query: "SELECT count(*) FROM key_verifications_v1" };

describe("v2 analytics.getVerifications", () => {
  test("a root key with read_analytics (every API's, one API's, or `*`) gets the query's rows", async ({ h, t, apiId }) => {
    for (const permissions of [
      ["api.*.read_analytics"],
      [`api.${apiId}.read_analytics`],
      ["api.api_does_not_exist.read_analytics"],
      ["*"],
    ]) {
      const res = await h.post("/v2/analytics.getVerifications", QUERY, await h.rootKey(t.workspaceId, permissions));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data).toEqual([{ "count()": 0 }]);
    }
  });

  test("without read_analytics: 403 naming api.*.read_analytics (before the backend is looked at)", async ({ h, t, apiId }) => {
    for (const permissions of [[`api.${apiId}.read_key`], ["rbac.*.read_role"], ["api.*.read_analytics_more"]]) {
      expectV2Error(
        await h.post("/v2/analytics.getVerifications", QUERY, await h.rootKey(t.workspaceId, permissions)),
        403,
        "unkey/authorization/insufficient_permissions",
        "Missing permission: 'api.*.read_analytics'",
      );
    }
  });

  test("the body is validated first (400), then the credential (400 without one, 401 for an unknown one)", async ({ h, t }) => {
    for (const body of [{}, { query: 1 }, [QUERY]]) {
      expectV2Error(await h.post("/v2/analytics.getVerifications", body, t.rootKey), 400, "unkey/application/invalid_input");
    }
    // Other properties are not refused (upstream's schema leaves the body open).
    expect((await h.post("/v2/analytics.getVerifications", { ...QUERY, extra: true }, t.rootKey)).status).toBe(200);
    expectV2Error(
      await h.post("/v2/analytics.getVerifications", QUERY),
      400,
      "unkey/application/invalid_input",
      "Authorization header for 'bearer' scheme",
    );
    expectV2Error(
      await h.post("/v2/analytics.getVerifications", QUERY, "unkey_wrong_token_123456"),
      401,
      "unkey/authentication/key_not_found",
    );
  });
});
