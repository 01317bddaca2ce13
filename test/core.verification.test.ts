import { describe, expect } from "vitest";
import { type VerifyRules, verifyKey } from "../src/core/verification/verification.verify.js";
import { V1_VERIFY_RULES } from "../src/wire/v1/keys/v1.keys.verifyKey.js";
import { V2_VERIFY_RULES } from "../src/wire/v2/keys/v2.keys.verifyKey.js";
import { InvalidInputError, WorkspaceDisabledError } from "../src/errors.js";
import { test as it } from "./fixtures.js";
import { v1WordsOfRejection } from "./v1-words.js";

// The verification core called directly, without HTTP: plain inputs, a plain result in the core's words (no v1
// field names, no requestId, no envelope), and domain errors for what v1 answers 400.

describe("core verification", () => {
  it("answers the key's facts apart from the outcome, with no v1 field", async ({ h, apiId, importKey }) => {
    const { key, keyId } = await importKey({ name: "core", remaining: 5 });
    const result = await verifyKey(h.services, { key, apiId, surface: "v1" as const, remainingCost: 2 }, V1_VERIFY_RULES);
    expect(result).toMatchObject({ valid: true, code: "VALID", remaining: 3, key: { keyId, apiId, name: "core", enabled: true } });
    expect(result).not.toHaveProperty("requestId");
    expect(result).not.toHaveProperty("keyId");
    expect(result).not.toHaveProperty("ratelimitSkipped");
  });

  it("answers an unknown key NOT_FOUND with no key facts", async ({ h }) => {
    expect(
      await verifyKey(h.services, { key: "sk_unknown_to_the_core", surface: "v1" as const, remainingCost: 1 }, V1_VERIFY_RULES),
    ).toEqual({
      valid: false,
      code: "NOT_FOUND",
    });
  });

  it("reports an applied rate limit and the limit that refused", async ({ h, importKey }) => {
    const { key } = await importKey();
    const limit = { name: "core-adhoc", limit: 1, duration: 60_000 };
    const first = await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, ratelimits: [limit] }, V1_VERIFY_RULES);
    expect(first.ratelimit).toMatchObject({ state: "applied", report: { limit: 1, remaining: 0 } });
    const second = await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, ratelimits: [limit] }, V1_VERIFY_RULES);
    expect(second).toMatchObject({ valid: false, code: "RATE_LIMITED", triggeredRatelimit: "core-adhoc" });
  });

  it("refuses what v1 answers 400 with InvalidInputError and v1's message", async ({ h, importKey }) => {
    const { key, keyId } = await importKey();
    const bad = verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, permissions: 42 }, V1_VERIFY_RULES);
    await expect(bad).rejects.toBeInstanceOf(InvalidInputError);
    expect(await v1WordsOfRejection(bad)).toContain("permission query is invalid");
    const missing = verifyKey(
      h.services,
      { key, surface: "v1" as const, remainingCost: 1, ratelimits: [{ name: "nope" }] },
      V1_VERIFY_RULES,
    );
    await expect(missing).rejects.toBeInstanceOf(InvalidInputError);
    expect(await v1WordsOfRejection(missing)).toContain(
      `ratelimit "nope" was requested but does not exist for key "${keyId}" and there is no identity connected`,
    );
    const unscoped = verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, requireScope: true }, V1_VERIFY_RULES);
    await expect(unscoped).rejects.toBeInstanceOf(InvalidInputError);
    expect(await v1WordsOfRejection(unscoped)).toMatch(/^apiId is required: /);
  });
});

// The core names no protocol: what differs between surfaces is the rules object each adapter passes (VerifyRules).
describe("core verification, by the surface's rules", () => {
  const textLike: VerifyRules = {
    ...V1_VERIFY_RULES,
    // A surface's own query form: a space-separated list of permissions, all required.
    parsePermissions: (raw) => ({ and: String(raw).split(" ") }),
  };

  it("parses `permissions` with the surface's parser", async ({ h, t, apiId }) => {
    const created = await h.post("/v1/keys.createKey", { apiId, permissions: ["a", "b"] }, t.rootKey);
    expect(created.status).toBe(200);
    const key: string = created.body.key;
    expect(await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, permissions: "a b" }, textLike)).toMatchObject({
      valid: true,
    });
    expect(await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, permissions: "a c" }, textLike)).toMatchObject({
      valid: false,
      code: "INSUFFICIENT_PERMISSIONS",
    });
    // The same text under v1's rules is v1's JSON query: a permission named "a b".
    expect(
      await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, permissions: "a b" }, V1_VERIFY_RULES),
    ).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
    });
  });

  it("parses before the lookup (a malformed query refused for any key) or only for a key in scope", async ({ h }) => {
    const unknown = { key: "sk_unknown_to_the_core", surface: "v1" as const, remainingCost: 1, permissions: "a AND" };
    await expect(verifyKey(h.services, unknown, { ...V2_VERIFY_RULES, parsePermissionsWhen: "beforeLookup" })).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    expect(await verifyKey(h.services, unknown, V2_VERIFY_RULES)).toEqual({ valid: false, code: "NOT_FOUND" });
  });

  it("answers a key of a disabled workspace as its rules say: refused, or FORBIDDEN", async ({ h }) => {
    const t = await h.tenant();
    const { key } = await h.importKey(t, await h.createApi(t));
    await h.disableWorkspace(t.workspaceId);
    await expect(verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1 }, V1_VERIFY_RULES)).rejects.toBeInstanceOf(
      WorkspaceDisabledError,
    );
    const forbidding = { ...V1_VERIFY_RULES, disabledWorkspace: "forbidden" } as const;
    expect(await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1 }, forbidding)).toMatchObject({
      valid: false,
      code: "FORBIDDEN",
    });
  });

  it("requires verify_key of the scope only when its rules say, and reports credits only then", async ({ h, t, importKey }) => {
    const { key } = await importKey({ remaining: 5 });
    const scope = async () => ({ workspaceId: t.workspaceId, permissions: new Set<string>() });
    expect(await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, scope }, V2_VERIFY_RULES)).toEqual({
      valid: false,
      code: "NOT_FOUND",
    });
    const v1 = await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, scope }, V1_VERIFY_RULES);
    expect(v1).toMatchObject({ valid: true, remaining: 4 });
    expect(v1).not.toHaveProperty("credits");
    const holding = async () => ({ workspaceId: t.workspaceId, permissions: new Set(["api.*.verify_key"]) });
    expect(await verifyKey(h.services, { key, surface: "v1" as const, remainingCost: 1, scope: holding }, V2_VERIFY_RULES)).toMatchObject({
      valid: true,
      credits: 3,
    });
  });
});
