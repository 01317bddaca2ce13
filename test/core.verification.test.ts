import { describe, expect } from "vitest";
import { verifyKey } from "../src/core/verification/verification.verify.js";
import { InvalidInputError } from "../src/errors.js";
import { test as it } from "./fixtures.js";
import { v1WordsOfRejection } from "./v1-words.js";

// The verification core called directly, without HTTP: plain inputs, a plain result in the core's words (no v1
// field names, no requestId, no envelope), and domain errors for what v1 answers 400.

describe("core verification", () => {
  it("answers the key's facts apart from the outcome, with no v1 field", async ({ h, apiId, importKey }) => {
    const { key, keyId } = await importKey({ name: "core", remaining: 5 });
    const result = await verifyKey(h.services, { key, apiId, remainingCost: 2 });
    expect(result).toMatchObject({ valid: true, code: "VALID", remaining: 3, key: { keyId, apiId, name: "core", enabled: true } });
    expect(result).not.toHaveProperty("requestId");
    expect(result).not.toHaveProperty("keyId");
    expect(result).not.toHaveProperty("ratelimitSkipped");
  });

  it("answers an unknown key NOT_FOUND with no key facts", async ({ h }) => {
    expect(await verifyKey(h.services, { key: "sk_unknown_to_the_core", remainingCost: 1 })).toEqual({ valid: false, code: "NOT_FOUND" });
  });

  it("reports an applied rate limit and the limit that refused", async ({ h, importKey }) => {
    const { key } = await importKey();
    const limit = { name: "core-adhoc", limit: 1, duration: 60_000 };
    const first = await verifyKey(h.services, { key, remainingCost: 1, ratelimits: [limit] });
    expect(first.ratelimit).toMatchObject({ state: "applied", report: { limit: 1, remaining: 0 } });
    const second = await verifyKey(h.services, { key, remainingCost: 1, ratelimits: [limit] });
    expect(second).toMatchObject({ valid: false, code: "RATE_LIMITED", triggeredRatelimit: "core-adhoc" });
  });

  it("refuses what v1 answers 400 with InvalidInputError and v1's message", async ({ h, importKey }) => {
    const { key, keyId } = await importKey();
    const bad = verifyKey(h.services, { key, remainingCost: 1, permissions: 42 });
    await expect(bad).rejects.toBeInstanceOf(InvalidInputError);
    expect(await v1WordsOfRejection(bad)).toContain("permission query is invalid");
    const missing = verifyKey(h.services, { key, remainingCost: 1, ratelimits: [{ name: "nope" }] });
    await expect(missing).rejects.toBeInstanceOf(InvalidInputError);
    expect(await v1WordsOfRejection(missing)).toContain(
      `ratelimit "nope" was requested but does not exist for key "${keyId}" and there is no identity connected`,
    );
    const unscoped = verifyKey(h.services, { key, remainingCost: 1, requireScope: true });
    await expect(unscoped).rejects.toBeInstanceOf(InvalidInputError);
    expect(await v1WordsOfRejection(unscoped)).toMatch(/^apiId is required: /);
  });
});
