import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAVE_CHROMIUM, launchChromium, type PageFaults, seriousAxeViolations, watchedPage } from "./browser.js";
import { createHarness, type Harness, type Tenant } from "./helper.js";

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
    h = await createHarness();
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
});
