import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { Unkey } from "unkey-api-v2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CHROMIUM, launchChromium, type PageFaults, seriousAxeViolations, watchedPage } from "./browser.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";

/**
 * The customer portal page in Debian's Chromium, as an end user meets it: the team's backend mints a session with
 * its root key, the user opens the URL, sees only its keys, rerolls them, and reads its usage. Screenshots go to
 * KEYHAVEN_SCREENSHOTS when set (`npm run docs:screenshots` sets docs/images, whose pictures docs/portal.md shows),
 * else to a temporary directory.
 */
describe.runIf(HAVE_CHROMIUM)("the portal page in a real browser", () => {
  let h: Harness;
  let t: Tenant;
  let origin: string;
  let browser: Browser;
  let shots: string;
  let tmp: string | undefined;
  beforeAll(async () => {
    h = await createHarness();
    t = await h.tenant();
    origin = await h.app.listen({ port: 0, host: "127.0.0.1" });
    browser = await launchChromium();
    shots = process.env.KEYHAVEN_SCREENSHOTS ?? (tmp = mkdtempSync(path.join(tmpdir(), "keyhaven-portal-")));
    mkdirSync(shots, { recursive: true });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await h?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  const shoot = (page: Page, name: string) => page.screenshot({ path: path.join(shots, `portal-${name}.png`), fullPage: true });
  const expectClean = async (page: Page, faults: PageFaults, where: string) => {
    expect(await seriousAxeViolations(page), `axe on ${where}`).toEqual([]);
    expect(faults, where).toEqual({ foreign: [], failed: [], csp: [], errors: [] });
  };
  /** What the team's backend does: one call with its root key (here over the network, as its SDK would). */
  const backend = async (route: string, body: unknown) => {
    const res = await fetch(`${origin}${route}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${t.rootKey}` },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as { data: any; error?: unknown };
    expect(res.status, `${route}: ${JSON.stringify(json)}`).toBe(200);
    return json.data;
  };
  let verifications = 0;
  const verify = async (key: string): Promise<{ valid: boolean; code: string }> => {
    verifications++;
    return backend("/v2/keys.verifyKey", { key });
  };

  it("mints a session, shows only the user's keys, rerolls one with a grace period and one at once, and charts the verifications", async () => {
    const apiId = (await backend("/v2/apis.createApi", { name: "payments" })).apiId as string;
    await backend("/v2/keyhaven.createPortal", {
      apiId,
      slug: "acme-payments",
      name: "Acme payments",
      returnUrl: "https://app.example/settings",
      branding: { title: "Acme Cloud — API keys", accentColor: "#6d28d9" },
    });
    await backend("/v2/identities.createIdentity", { externalId: "customer_42" });
    await backend("/v2/identities.createIdentity", { externalId: "customer_7" });
    const prod = await backend("/v2/keys.createKey", {
      apiId,
      externalId: "customer_42",
      name: "production",
      credits: { remaining: 1000 },
    });
    const staging = await backend("/v2/keys.createKey", {
      apiId,
      externalId: "customer_42",
      name: "staging",
      expires: Date.now() + 90 * 86_400_000,
    });
    await backend("/v2/keys.createKey", { apiId, externalId: "customer_7", name: "another customer's key" });
    await backend("/v2/keys.createKey", { apiId, name: "internal key" });
    for (let i = 0; i < 4; i++) expect((await verify(prod.key)).valid).toBe(true);
    expect((await verify(staging.key)).valid).toBe(true);
    await h.jobs.analytics.flush();
    await h.jobs.lastUsed.flush();

    const { url } = await backend("/v2/portal.createSession", {
      portal: "acme-payments",
      externalId: "customer_42",
      scopes: ["keys:read", "keys:reroll", "analytics:read"],
    });
    expect(url.startsWith(`${origin}/portal/?code=pst_`)).toBe(true);

    const { page, faults } = await watchedPage(browser, origin);
    await page.goto(url);
    // The code left the address bar: the page is the keys tab.
    expect(page.url()).toBe(`${origin}/portal/keys`);
    const cookies = await page.context().cookies();
    expect(cookies.map((c) => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite, path: c.path }))).toEqual([
      { name: "keyhaven_portal", httpOnly: true, sameSite: "Strict", path: "/portal" },
    ]);
    expect(await page.evaluate("document.cookie")).toBe("");
    const keysText = (await page.textContent("main"))!;
    expect(keysText).toContain("production");
    expect(keysText).toContain("staging");
    expect(keysText).toContain("996"); // 1000 credits, 4 spent
    expect(keysText).not.toContain("another customer's key");
    expect(keysText).not.toContain("internal key");
    expect(await page.locator("svg.spark").count()).toBe(2);
    expect(await page.locator("tr", { hasText: "production" }).locator("svg.spark").getAttribute("aria-label")).toMatch(/^4 verifications/);
    expect(await page.locator("tr", { hasText: "staging" }).locator("svg.spark").getAttribute("aria-label")).toMatch(/^1 verification in/);
    // The theme sheet applied the accent colour (no inline style).
    expect(await page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--accent').trim()")).toBe("#6d28d9");
    await expectClean(page, faults, "keys");
    await shoot(page, "keys");

    // A reload of the code's URL: recognised, back on the keys.
    await page.goto(url);
    expect(page.url()).toBe(`${origin}/portal/keys`);

    // Reroll production, the old key kept for an hour.
    await page.getByRole("link", { name: "Reroll production" }).click();
    await page.waitForURL((u) => u.pathname.endsWith("/reroll"));
    await expectClean(page, faults, "reroll");
    await shoot(page, "reroll");
    await page.getByLabel("The old key stops verifying").selectOption({ label: "In 1 hour" });
    await page.getByRole("button", { name: "Reroll key" }).click();
    await page.waitForLoadState();
    const newProd = (await page.textContent("#new-key"))!.trim();
    expect(newProd.length).toBeGreaterThan(16);
    expect(newProd).not.toBe(prod.key);
    expect(new URL(page.url()).pathname).toBe(`/portal/keys/${prod.keyId}/reroll`);
    await expectClean(page, faults, "new key");
    await shoot(page, "new-key");
    expect((await verify(newProd)).valid).toBe(true);
    expect((await verify(prod.key)).valid).toBe(true); // within its hour of grace
    // Shown once: back on the list, the new key is there by name only.
    await page.getByRole("link", { name: "Back to your keys" }).click();
    await page.waitForURL((u) => u.pathname === "/portal/keys");
    expect(await page.content()).not.toContain(newProd);

    // Reroll staging with no grace: the old key stops at once, the new one verifies.
    await page.getByRole("link", { name: "Reroll staging" }).click();
    await page.waitForURL((u) => u.pathname.endsWith("/reroll"));
    await page.getByLabel("The old key stops verifying").selectOption({ label: "Now" });
    await page.getByRole("button", { name: "Reroll key" }).click();
    await page.waitForLoadState();
    const newStaging = (await page.textContent("#new-key"))!.trim();
    const old = await verify(staging.key);
    expect(old.valid).toBe(false);
    expect(old.code).toBe("EXPIRED");
    expect((await verify(newStaging)).valid).toBe(true);

    // The usage tab charts every verification of the user's keys, by outcome.
    await h.jobs.analytics.flush();
    await page.getByRole("link", { name: "Usage" }).click();
    await page.waitForURL((u) => u.pathname === "/portal/usage");
    await page.getByRole("link", { name: "Last 24 hours" }).click();
    await page.waitForURL((u) => u.search === "?range=24h");
    expect(await page.textContent("#usage-total")).toContain(`${verifications} verifications`);
    expect(await page.locator(".chart canvas").count()).toBeGreaterThan(0);
    expect(await page.locator("details th", { hasText: "Expired" }).count()).toBe(1);
    await expectClean(page, faults, "usage");
    await shoot(page, "usage");

    // Sign out: the session is over, in this browser and for its old cookie alike.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForLoadState();
    expect(await page.textContent("main")).toContain("You have signed out");
    await expectClean(page, faults, "signed out");
    await page.context().addCookies(cookies);
    const res = await page.goto(`${origin}/portal/keys`);
    expect(res?.status()).toBe(401);
    expect(await page.textContent("main")).toContain("Your session has ended");
    expect(await page.getByRole("link", { name: "Go back to sign in again" }).getAttribute("href")).toBe(
      "https://app.example/settings?reason=session_expired",
    );
    await expectClean(page, faults, "session ended");
    await shoot(page, "session-ended");
    await page.context().close();
  }, 180_000);

  it("refuses a used link in another browser, and shows a preview session's banner (minted by the v2 SDK, as docs/portal.md shows)", async () => {
    const unkey = new Unkey({ rootKey: t.rootKey, serverURL: origin, retryConfig: { strategy: "none" } });
    const { result } = await unkey.portal.createSession({
      portal: "acme-payments",
      externalId: "customer_42",
      scopes: ["keys:read"],
      preview: true,
      returnUrl: "https://app.example/settings",
    });
    const url = result.data.url;
    expect(result.data.id).toMatch(/^ps_/);
    const first = await watchedPage(browser, origin);
    await first.page.goto(url);
    expect(await first.page.getByRole("note").textContent()).toContain("Preview");
    expect(await first.page.getByRole("link", { name: "Usage" }).count()).toBe(0);
    expect(await first.page.getByRole("link", { name: /^Reroll/ }).count()).toBe(0);
    await expectClean(first.page, first.faults, "preview");
    await first.page.context().close();

    const second = await watchedPage(browser, origin);
    const res = await second.page.goto(url);
    expect(res?.status()).toBe(401);
    expect(await second.page.textContent("main")).toContain("This link is invalid, expired or has already been used; ask for a new one");
    await expectClean(second.page, second.faults, "invalid link");
    await shoot(second.page, "invalid-link");
    await second.page.context().close();
  }, 120_000);

  it("works without JavaScript: the exchange, the keys, a reroll and the usage numbers", async () => {
    const apiId = (await backend("/v2/apis.createApi", { name: "no-js" })).apiId as string;
    await backend("/v2/keyhaven.createPortal", { apiId, slug: "no-js-portal", name: "No JS" });
    await backend("/v2/identities.createIdentity", { externalId: "customer_nojs" });
    const key = await backend("/v2/keys.createKey", { apiId, externalId: "customer_nojs", name: "plain" });
    expect((await verify(key.key)).valid).toBe(true);
    await h.jobs.analytics.flush();
    const { url } = await backend("/v2/portal.createSession", {
      portal: "no-js-portal",
      externalId: "customer_nojs",
      scopes: ["keys:read", "keys:reroll", "analytics:read"],
    });
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(url);
    expect(page.url()).toBe(`${origin}/portal/keys`);
    expect(await page.textContent("main")).toContain("plain");
    await page.getByRole("link", { name: "Reroll plain" }).click();
    await page.getByLabel("The old key stops verifying").selectOption({ label: "Now" });
    await page.getByRole("button", { name: "Reroll key" }).click();
    await page.waitForLoadState();
    const rerolled = (await page.textContent("#new-key"))!.trim();
    expect((await verify(rerolled)).valid).toBe(true);
    expect((await verify(key.key)).valid).toBe(false);
    await page.goto(`${origin}/portal/usage?range=24h`);
    expect(await page.locator(".chart canvas").count()).toBe(0); // no script: no canvas, but the numbers
    await page.getByText("Verifications by outcome: the numbers").click();
    expect(await page.locator("details tbody tr").count()).toBeGreaterThan(0);
    expect(await page.textContent("#usage-total")).toContain("1 verification of your keys");
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForLoadState();
    expect(await page.textContent("main")).toContain("You have signed out");
    await context.close();
  }, 120_000);
});
