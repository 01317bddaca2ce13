import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CHROMIUM, launchChromium, type PageFaults, seriousAxeViolations, watchedPage } from "./browser.js";
import { ADMIN_TOKEN, createHarness, type Harness, type Tenant } from "./helper.js";

/**
 * The console in Debian's Chromium, as a new user drives it. Screenshots go to KEYHAVEN_SCREENSHOTS when set (`npm run
 * docs:screenshots` sets docs/images, whose pictures docs/console.md shows), else to a temporary directory.
 */
describe.runIf(HAVE_CHROMIUM)("the console in a real browser", () => {
  let h: Harness;
  let t: Tenant;
  let origin: string;
  let browser: Browser;
  let shots: string;
  let tmp: string | undefined;
  beforeAll(async () => {
    h = await createHarness({ KEYHAVEN_ADMIN_TOKEN: ADMIN_TOKEN });
    t = await h.tenant();
    origin = await h.app.listen({ port: 0, host: "127.0.0.1" });
    browser = await launchChromium();
    shots = process.env.KEYHAVEN_SCREENSHOTS ?? (tmp = mkdtempSync(path.join(tmpdir(), "keyhaven-console-")));
    mkdirSync(shots, { recursive: true });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  const shoot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `console-${name}.png`), fullPage: true });
  const expectClean = async (page: Page, faults: PageFaults, where: string) => {
    expect(await seriousAxeViolations(page), `axe on ${where}`).toEqual([]);
    expect(faults, where).toEqual({ foreign: [], failed: [], csp: [], errors: [] });
  };
  const signIn = async (page: Page, secret: string) => {
    await page.goto(`${origin}/console/`);
    expect(new URL(page.url()).pathname).toBe("/console/sign-in");
    await page.getByLabel("Root key or operator token").fill(secret);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL((url) => url.pathname !== "/console/sign-in");
  };

  it("signs in with a root key, passes axe on every page it visits, and signs out for good", async () => {
    const { page, faults } = await watchedPage(browser, origin);
    await page.goto(`${origin}/console/sign-in`);
    await expectClean(page, faults, "sign-in");
    await shoot(page, "sign-in");
    await signIn(page, t.rootKey);
    expect(new URL(page.url()).pathname).toBe("/console/");
    await expectClean(page, faults, "overview");
    await shoot(page, "overview");
    const cookies = await page.context().cookies();
    expect(cookies.map((c) => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite }))).toEqual([
      { name: "keyhaven_session", httpOnly: true, sameSite: "Strict" },
    ]);
    // The page's script cannot read the session cookie.
    expect(await page.evaluate("document.cookie")).toBe("");
    expect(await page.content()).not.toContain(t.rootKey);

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL((url) => url.pathname === "/console/sign-in");
    // The old cookie, put back, opens nothing.
    await page.context().addCookies(cookies);
    await page.goto(`${origin}/console/`);
    expect(new URL(page.url()).pathname).toBe("/console/sign-in");
    await page.context().close();
  }, 120_000);

  it("runs a key's life: create it with credits, a rate limit and a role, see it once, verify it, edit, reroll, revoke, find it among 10,000, audit it", async () => {
    const { page, faults } = await watchedPage(browser, origin);
    page.on("dialog", (dialog) => void dialog.accept());
    await signIn(page, t.rootKey);
    const visit = async (path: string, name: string) => {
      await page.goto(`${origin}/console${path}`);
      await expectClean(page, faults, name);
      await shoot(page, name);
    };

    // An API and a role, through their pages.
    await visit("/apis", "apis");
    await page.getByLabel("Name", { exact: true }).fill("Payments API");
    await page.getByRole("button", { name: "Create API" }).click();
    await page.waitForURL((url) => /^\/console\/apis\/api_/.test(url.pathname));
    const apiId = new URL(page.url()).pathname.split("/")[3]!;
    await visit("/roles", "roles");
    await page.getByLabel("Name", { exact: true }).fill("support");
    await page.getByRole("button", { name: "Create role" }).click();
    await page.waitForLoadState();
    expect(await page.textContent("main")).toContain("support");

    // 10,000 keys beside the one the test follows.
    for (let batch = 0; batch < 100; batch++) {
      const keys = Array.from({ length: 100 }, (_, i) => ({
        apiId,
        name: `bulk-${batch * 100 + i}`,
        externalId: `owner-${batch * 100 + i}`,
        hash: { value: createHash("sha256").update(`bulk-${batch}-${i}`).digest("base64"), variant: "sha256_base64" },
      }));
      expect((await h.post("/v1/migrations.createKeys", keys, t.rootKey)).status).toBe(200);
    }

    // A key with credits, a rate limit and the role: its plaintext shown once.
    await visit(`/apis/${apiId}/keys/new`, "key-new");
    await page.getByLabel("Name", { exact: true }).fill("checkout-service");
    await page.getByLabel("Owner (external id)").fill("acme-corp");
    await page.getByLabel("Credits remaining").fill("10");
    await page.getByLabel("Rate limit 1: name").fill("requests");
    await page.locator("#rl_0_limit").fill("100");
    await page.locator("#rl_0_duration").fill("60000");
    await page.getByLabel("support").check();
    await page.getByRole("button", { name: "Create key" }).click();
    await page.waitForLoadState();
    const plaintext = (await page.textContent("#new-key"))!.trim();
    expect(plaintext.length).toBeGreaterThan(16);
    await expectClean(page, faults, "key-created");
    await shoot(page, "key-created");
    await page.getByRole("link", { name: "Open the new key's page" }).first().click();
    await page.waitForURL((url) => url.pathname.startsWith("/console/keys/"));
    const keyId = new URL(page.url()).pathname.split("/")[3]!;
    expect(await page.content()).not.toContain(plaintext);
    expect(await page.textContent("main")).toContain("never"); // not used yet

    // Verified through v1 and v2: the key page shows the credits spent, the chart and last use.
    const v1 = await fetch(`${origin}/v1/keys.verifyKey`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: plaintext, apiId }),
    });
    expect(((await v1.json()) as { valid: boolean }).valid).toBe(true);
    const v2 = await fetch(`${origin}/v2/keys.verifyKey`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${t.rootKey}` },
      body: JSON.stringify({ key: plaintext }),
    });
    expect(((await v2.json()) as { data: { valid: boolean } }).data.valid).toBe(true);
    await h.jobs.analytics.flush();
    await h.jobs.lastUsed.flush();
    await visit(`/keys/${keyId}`, "key");
    const keyText = (await page.textContent("main"))!;
    expect(keyText).toContain("8 remaining");
    expect(keyText).toMatch(/Last used\s*\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/);
    expect(await page.locator(".chart canvas").count()).toBeGreaterThan(0);

    // Edit: a new name, disabled.
    await page.getByLabel("Name", { exact: true }).fill("checkout-service (paused)");
    await page.getByLabel(/^Enabled/).uncheck();
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.waitForURL((url) => url.search.includes("done=updated"));
    expect(await page.textContent("main")).toContain("checkout-service (paused)");
    const disabled = await fetch(`${origin}/v1/keys.verifyKey`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: plaintext, apiId }),
    });
    expect(((await disabled.json()) as { code: string }).code).toBe("DISABLED");

    // Reroll: a new key shown once; then the new key revoked.
    await page.getByLabel("The old key stops verifying").selectOption({ index: 0 });
    await page.getByRole("button", { name: "Reroll key" }).click();
    await page.waitForLoadState();
    const rerolled = (await page.textContent("#new-key"))!.trim();
    expect(rerolled).not.toBe(plaintext);
    await shoot(page, "key-rerolled");
    const newKeyId = (await h.post("/v2/keys.whoami", { key: rerolled }, t.rootKey)).body.data.keyId as string;
    await visit(`/keys/${newKeyId}`, "key-rerolled-page");
    await page.getByRole("button", { name: /^Delete/ }).click();
    await page.waitForURL((url) => url.search.includes("done=deleted"));
    const revoked = await fetch(`${origin}/v1/keys.verifyKey`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ key: rerolled, apiId }),
    });
    expect(((await revoked.json()) as { code: string }).code).toBe("NOT_FOUND");

    // Found by search among the 10,000 (by name, and by owner).
    await visit(`/apis/${apiId}`, "api");
    await page.getByLabel(/^Search/).fill("bulk-7777");
    await page.getByRole("button", { name: "Search" }).click();
    await page.waitForLoadState();
    const found = (await page.textContent("main"))!;
    expect(found).toContain("bulk-7777");
    expect(found).not.toContain("bulk-7776");
    await expectClean(page, faults, "api-search");
    await page.getByLabel(/^Search/).fill("owner-4242");
    await page.getByRole("button", { name: "Search" }).click();
    await page.waitForLoadState();
    expect(await page.textContent("main")).toContain("bulk-4242");

    // The audit log lists those actions, the root key as actor.
    await visit("/audit", "audit");
    const audit = (await page.textContent("main"))!;
    for (const event of ["api.create", "role.create", "key.create", "key.update", "key.reroll", "key.delete"])
      expect(audit).toContain(event);
    expect(audit).toContain(t.rootKeyId);
    expect(audit).not.toContain(plaintext);
    expect(audit).not.toContain(rerolled);

    // Every other page of the workspace passes axe too.
    for (const [path, name] of [
      ["/identities", "identities"],
      ["/permissions", "permissions"],
      ["/ratelimits", "ratelimits"],
      ["/root-keys", "root-keys"],
      ["/root-keys/new", "root-key-new"],
      ["/imports", "imports"],
      [`/apis/${apiId}/settings`, "api-settings"],
    ] as const) {
      await visit(path, name);
    }
    await page.context().close();
  }, 300_000);

  it("creates an API's portal from its tab, changes it and opens a preview session, each page passing axe", async () => {
    const apiId = await h.createApi(t);
    const { page, faults } = await watchedPage(browser, origin);
    page.on("dialog", (dialog) => void dialog.accept());
    await signIn(page, t.rootKey);
    await page.goto(`${origin}/console/apis/${apiId}`);
    await page.getByRole("link", { name: "Portal", exact: true }).click();
    await page.waitForURL((url) => url.pathname === `/console/apis/${apiId}/portal`);
    await expectClean(page, faults, "portal (none yet)");
    await page.getByLabel("Slug").fill("browser-portal");
    await page.getByLabel("Name", { exact: true }).fill("Browser <portal>");
    await page.getByLabel("Accent colour").fill("#336699");
    await page.getByRole("button", { name: "Create portal" }).click();
    await page.waitForURL((url) => url.search === "?done=created");
    await expectClean(page, faults, "portal");
    expect(await page.textContent("main")).toContain("Browser <portal>");
    await page.getByLabel("Branding title").fill("Your keys");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.waitForURL((url) => url.search === "?done=saved");
    expect(await page.textContent("main")).toContain("Your keys");
    await page.getByLabel("End user (externalId)").fill("user_1");
    await page.getByRole("button", { name: "Open a preview session" }).click();
    await page.waitForLoadState();
    await expectClean(page, faults, "portal preview session");
    const link = page.locator("#preview-url");
    expect(await link.getAttribute("href")).toMatch(/\/portal\/\?code=pst_/);
    // The console's own address never holds the code.
    expect(page.url()).toBe(`${origin}/console/apis/${apiId}/portal/sessions`);
    await page.getByRole("link", { name: "Back to the portal" }).click();
    await page.getByRole("button", { name: "Disable portal" }).click();
    await page.waitForURL((url) => url.search === "?done=disabled");
    await expectClean(page, faults, "portal (disabled)");
    await page.getByRole("button", { name: "Delete portal" }).click();
    await page.waitForURL((url) => url.search === "?done=deleted");
    expect(await page.textContent("main")).toContain("This API has no portal yet");
    await page.context().close();
  }, 120_000);

  it("refuses a root key lacking create_key, and hides the action where the page knows", async () => {
    const apiId = await h.createApi(t);
    const reader = await h.rootKey(t.workspaceId, ["api.*.read_api", "api.*.read_key"]);
    const { page, faults } = await watchedPage(browser, origin);
    await signIn(page, reader);
    await page.goto(`${origin}/console/apis/${apiId}`);
    await expectClean(page, faults, "api (reader)");
    expect(await page.getByRole("link", { name: "New key" }).count()).toBe(0);
    const res = await page.goto(`${origin}/console/apis/${apiId}/keys/new`);
    expect(res?.status()).toBe(403);
    expect(await page.textContent("main")).toMatch(/cannot create keys|may not create/i);
    await expectClean(page, faults, "key-new (reader)");
    await page.context().close();
  }, 120_000);

  it("shows the operator workspaces and status", async () => {
    const { page, faults } = await watchedPage(browser, origin);
    await signIn(page, ADMIN_TOKEN);
    for (const [path, name] of [
      ["/operator/workspaces", "operator-workspaces"],
      [`/operator/workspaces/${t.workspaceId}`, "operator-workspace"],
      ["/operator/status", "operator-status"],
      ["/operator/audit", "operator-audit"],
    ] as const) {
      await page.goto(`${origin}/console${path}`);
      await expectClean(page, faults, name);
      await shoot(page, name);
    }
    await page.context().close();
  }, 120_000);
});
