import { test as base } from "vitest";
import { createHarness } from "./helper.js";

/**
 * The prologue most test files share, as vitest fixtures of the file's scope instead of `let h; beforeAll(...)`
 * copied into each: a test names what it needs and gets the file's one copy, made at its first use and closed after
 * the file's last test.
 * - `h`: the real app on a fresh, migrated database of the file's own (createHarness()).
 * - `t`: a workspace of it with a root key holding `*`.
 * - `apiId`: an API of that workspace.
 *
 *   import { test } from "./fixtures.js";
 *   test("creates an API", async ({ h, t }) => { ... });
 *
 * A file with fixtures of its own (helpers over `h`) extends `test` once, at its top: an `extend` inside a describe
 * is another test API, whose tests would get a second file-scoped harness.
 */
export const test = base
  .extend("h", { scope: "file" }, async ({}, { onCleanup }) => {
    const h = await createHarness();
    onCleanup(() => h.close());
    return h;
  })
  .extend("t", { scope: "file" }, async ({ h }) => h.tenant())
  .extend("apiId", { scope: "file" }, async ({ h, t }) => h.createApi(t));

export const it = test;
