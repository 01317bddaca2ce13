import { describe, expect } from "vitest";
import { auditEntries } from "./audit-entries.js";
import { test } from "./fixtures.js";

// One rule for where a request came from (src/http/origin.ts), on every HTTP surface: the surface, the request id,
// the client's address and the user agent (cut to 512 characters) that an audit entry records.
describe("a request's origin, as every surface records it", () => {
  test("v1 and v2 record the surface, request id, client address and user agent the same way", async ({ h, t }) => {
    const agent = `origin-test/${"x".repeat(600)}`;
    const v1 = await h.post("/v1/apis.createApi", { name: "origin-v1" }, t.rootKey, { "user-agent": agent });
    expect(v1.status).toBe(200);
    const v2 = await h.post("/v2/apis.createApi", { name: "origin-v2" }, t.rootKey, { "user-agent": agent });
    expect(v2.status).toBe(200);
    const entries = await auditEntries(h, { workspaceId: t.workspaceId, event: "api.create" });
    const bySurface = new Map(entries.map((e) => [e.surface, e]));
    for (const [surface, res] of [
      ["v1", v1],
      ["v2", v2],
    ] as const) {
      const entry = bySurface.get(surface)!;
      expect(entry.userAgent).toBe(agent.slice(0, 512));
      expect(entry.clientAddress).toBeTruthy();
      expect(entry.requestId).toBe(res.headers["unkey-request-id"] ?? entry.requestId);
      expect(entry.requestId).toBeTruthy();
    }
  });
});
