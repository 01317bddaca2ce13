import { describe, expect } from "vitest";
import { z } from "zod";
import "../src/validation.messages.js";
import { it } from "./fixtures.js";
import { expectError } from "./helper.js";

// v1 validated with zod 3, and its clients show zod 3's messages: keyhaven words zod 4's issues the same way
// (src/validation.messages.ts), as `<path>: <message>` of the first issue. Each case goes through a real route.

// One harness, tenant and API for the file: `h`, `t` and `apiId` of test/fixtures.ts.

describe("zod 3's wording, over the routes", () => {
  type Case = [what: string, route: string, body: (apiId: string) => unknown, message: string];
  const cases: Case[] = [
    ["a missing field", "keys.createKey", () => ({}), "apiId: Required"],
    ["a string too short", "apis.createApi", () => ({ name: "ab" }), "name: String must contain at least 3 character(s)"],
    ["a string too long", "apis.createApi", () => ({ name: "n".repeat(257) }), "name: String must contain at most 256 character(s)"],
    ["a number where a string belongs", "apis.createApi", () => ({ name: 1 }), "name: Expected string, received number"],
    ["null where a string belongs", "apis.createApi", () => ({ name: null }), "name: Expected string, received null"],
    [
      "a float where an integer belongs",
      "keys.createKey",
      (apiId) => ({ apiId, byteLength: 16.5 }),
      "byteLength: Expected integer, received float",
    ],
    [
      "a string where a number belongs",
      "keys.createKey",
      (apiId) => ({ apiId, byteLength: "16" }),
      "byteLength: Expected number, received string",
    ],
    [
      "a number below its minimum",
      "keys.createKey",
      (apiId) => ({ apiId, byteLength: 15 }),
      "byteLength: Number must be greater than or equal to 16",
    ],
    [
      "a number above its maximum",
      "keys.createKey",
      (apiId) => ({ apiId, byteLength: 256 }),
      "byteLength: Number must be less than or equal to 255",
    ],
    [
      "a nested number below its minimum",
      "keys.createKey",
      (apiId) => ({ apiId, ratelimit: { limit: 0, duration: 1000 } }),
      "ratelimit.limit: Number must be greater than or equal to 1",
    ],
    [
      "a string where a boolean belongs",
      "keys.createKey",
      (apiId) => ({ apiId, enabled: "true" }),
      "enabled: Expected boolean, received string",
    ],
    ["an array where an object belongs", "keys.createKey", (apiId) => ({ apiId, meta: [1] }), "meta: Expected object, received array"],
    ["an array for the whole body", "apis.createApi", () => [{ name: "okay" }], ": Expected object, received array"],
    ["an object for the whole array body", "migrations.createKeys", (apiId) => ({ apiId }), ": Expected array, received object"],
    [
      "an unknown enum value",
      "keys.createKey",
      (apiId) => ({ apiId, refill: { interval: "weekly", amount: 1 } }),
      "refill.interval: Invalid enum value. Expected 'daily' | 'monthly', received 'weekly'",
    ],
    [
      "a number where an enum belongs",
      "keys.createKey",
      (apiId) => ({ apiId, ratelimit: { type: 1, limit: 1, duration: 1000 } }),
      "ratelimit.type: Expected 'fast' | 'consistent', received number",
    ],
    [
      "an empty array below its minimum",
      "keys.addPermissions",
      () => ({ keyId: "key_x", permissions: [] }),
      "permissions: Array must contain at least 1 element(s)",
    ],
    [
      "an array above its maximum",
      "migrations.createKeys",
      (apiId) => Array.from({ length: 101 }, () => ({ apiId, plaintext: "x" })),
      ": Array must contain at most 100 element(s)",
    ],
    [
      "an element of an array",
      "keys.createKey",
      (apiId) => ({ apiId, roles: [""] }),
      "roles.0: String must contain at least 1 character(s)",
    ],
    [
      "a value matching no member of a union",
      "permissions.createPermission",
      () => ({ name: "ok.name", description: 5 }),
      "description: Invalid input",
    ],
  ];

  it.for(cases)("%s (%s)", async ([, route, body, message], { h, t, apiId }) => {
    expectError(await h.post(`/v1/${route}`, body(apiId), t.rootKey), 400, "BAD_REQUEST", message);
  });

  it("in query strings too", async ({ h, t }) => {
    expectError(await h.get("/v1/apis.getApi", {}, t.rootKey), 400, "BAD_REQUEST", "apiId: Required");
    expectError(
      await h.get("/v1/keys.getVerifications", { keyId: "key_x", granularity: "hour" }, t.rootKey),
      400,
      "BAD_REQUEST",
      "granularity: Invalid enum value. Expected 'day', received 'hour'",
    );
  });

  it("keeps keyhaven's own messages", async ({ h, t, apiId }) => {
    expectError(
      await h.post("/v1/permissions.createPermission", { name: "has space" }, t.rootKey),
      400,
      "BAD_REQUEST",
      "name: must contain only letters, digits and the characters _ . : -",
    );
    expectError(
      await h.post("/v1/keys.createKey", { apiId, ratelimit: { limit: 1 } }, t.rootKey),
      400,
      "BAD_REQUEST",
      "ratelimit.duration: duration is required (or the deprecated refillInterval)",
    );
  });
});

describe("zod 3's wording for the kinds no route raises today", () => {
  const first = (schema: z.ZodType, value: unknown) => {
    const result = schema.safeParse(value);
    return result.success ? "valid" : `${result.error.issues[0]!.path.join(".")}: ${result.error.issues[0]!.message}`;
  };

  it.each<[string, z.ZodType, unknown, string]>([
    [
      "an unknown key of a strict object",
      z.strictObject({ a: z.string() }),
      { a: "x", b: 1, c: 2 },
      ": Unrecognized key(s) in object: 'b', 'c'",
    ],
    ["a literal", z.object({ l: z.literal("x") }), { l: "y" }, 'l: Invalid literal value, expected "x"'],
    ["a positive number", z.object({ p: z.number().positive() }), { p: 0 }, "p: Number must be greater than 0"],
    ["NaN", z.object({ n: z.number() }), { n: Number.NaN }, "n: Expected number, received nan"],
    ["an exact length", z.object({ s: z.string().length(2) }), { s: "abc" }, "s: String must contain exactly 2 character(s)"],
    ["a regex without a message", z.object({ s: z.string().regex(/^a/) }), { s: "b" }, "s: Invalid"],
    ["a string format", z.object({ u: z.url() }), { u: "nope" }, "u: Invalid url"],
    ["a multiple", z.object({ m: z.number().multipleOf(5) }), { m: 3 }, "m: Number must be a multiple of 5"],
    ["a refinement without a message", z.object({ r: z.string().refine(() => false) }), { r: "x" }, "r: Invalid input"],
  ])("%s", (_, schema, value, message) => {
    expect(first(schema, value)).toBe(message);
  });
});

describe("v1's own messages of four routes", () => {
  it("ratelimits overrides without a namespace, an empty one included", async ({ h, t }) => {
    const message = "You must provide a namespaceId or a namespaceName";
    const override = { identifier: "user_1", limit: 1, duration: 60_000 };
    expectError(await h.post("/v1/ratelimits.setOverride", { namespaceId: "", ...override }, t.rootKey), 400, "BAD_REQUEST", message);
    expectError(await h.post("/v1/ratelimits.deleteOverride", { identifier: "user_1" }, t.rootKey), 400, "BAD_REQUEST", message);
    expectError(
      await h.get("/v1/ratelimits.getOverride", { namespaceId: "", identifier: "user_1" }, t.rootKey),
      400,
      "BAD_REQUEST",
      message,
    );
  });

  it("migrations.createKeys: a refillDay with a daily refill, without a path", async ({ h, t, apiId }) => {
    const key = { apiId, plaintext: "daily-refill-key", remaining: 5, refill: { interval: "daily", amount: 5, refillDay: 2 } };
    expectError(
      await h.post("/v1/migrations.createKeys", [key], t.rootKey),
      400,
      "BAD_REQUEST",
      "when interval is set to 'daily', 'refillDay' must be null.",
    );
  });

  it("keys.getVerifications for an unknown keyId", async ({ h, t }) => {
    expectError(
      await h.get("/v1/keys.getVerifications", { keyId: "key_unknown" }, t.rootKey),
      404,
      "NOT_FOUND",
      "key key_unknown not found",
    );
  });

  it("permissions.createPermission for a name the workspace has, naming the name", async ({ h, t }) => {
    expect((await h.post("/v1/permissions.createPermission", { name: "docs.read" }, t.rootKey)).status).toBe(200);
    expectError(
      await h.post("/v1/permissions.createPermission", { name: "docs.read" }, t.rootKey),
      409,
      "CONFLICT",
      'Permission with name "docs.read" already exists in this workspace',
    );
  });
});
