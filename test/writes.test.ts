import { describe, expect, test } from "vitest";
import { rpcs } from "../src/wire/v1/routes.js";
import { v2Rpcs } from "../src/wire/v2/routes.js";
import { MUTATING_ROUTES } from "../src/wire/writes.js";

const routes = [...rpcs, ...v2Rpcs];
const WRITE_NAME = /^(create|update|delete|set|add|remove|reroll|migrate|enqueue|retry|replay)/;
const nameOf = (path: string) => path.slice(path.lastIndexOf(".") + 1);

describe("the list of mutating routes (src/wire/writes.ts)", () => {
  test("every route of the registries whose name reads as a write is listed, so a new write cannot be forgotten", () => {
    const missing = routes.map((r) => r.path).filter((path) => WRITE_NAME.test(nameOf(path)) && !MUTATING_ROUTES.has(path));
    expect(missing).toEqual([]);
  });

  test("every listed route exists in a registry and is a POST", () => {
    for (const path of MUTATING_ROUTES) {
      const route = routes.find((r) => r.path === path);
      expect(route, path).toBeDefined();
      expect(route?.method, path).toBe("POST");
    }
  });

  test("verification and rate limiting count, they change nothing: they are not listed", () => {
    for (const path of [
      "/v1/keys.verifyKey",
      "/v2/keys.verifyKey",
      "/v1/ratelimits.limit",
      "/v2/ratelimit.limit",
      "/v2/ratelimit.multiLimit",
    ]) {
      expect(MUTATING_ROUTES.has(path), path).toBe(false);
    }
  });
});
