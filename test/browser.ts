import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { Browser, Page } from "playwright-core";

/** Debian's chromium (apt-get install chromium). Without it (a fresh laptop), the browser tests are skipped. */
export const CHROMIUM = "/usr/bin/chromium";
export const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM) {
  console.warn(`browser tests skipped: ${CHROMIUM} is missing (apt-get install chromium; CI installs it)`);
}

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import("playwright-core");
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
      "--disable-sync",
    ],
  });
}

/** What a page did wrong while a test drove it: requests off the server, failed loads, CSP violations, script errors. */
export type PageFaults = { foreign: string[]; failed: string[]; csp: string[]; errors: string[] };

/**
 * A page of `origin` that refuses (and records) every request elsewhere, and records failed requests, Content
 * Security Policy violations and uncaught script errors, for the test to assert none happened.
 */
export async function watchedPage(browser: Browser, origin: string): Promise<{ page: Page; faults: PageFaults }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const faults: PageFaults = { foreign: [], failed: [], csp: [], errors: [] };
  await page.route(
    (url) => url.origin !== origin && url.protocol !== "data:" && url.protocol !== "blob:",
    async (route) => {
      faults.foreign.push(route.request().url());
      await route.abort("blockedbyclient");
    },
  );
  page.on("requestfailed", (req) => {
    if (new URL(req.url()).origin === origin) faults.failed.push(`${req.url()} ${req.failure()?.errorText}`);
  });
  page.on("console", (msg) => {
    if (/Content Security Policy|Refused to/i.test(msg.text())) faults.csp.push(msg.text());
  });
  page.on("pageerror", (err) => faults.errors.push(String(err)));
  return { page, faults };
}

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

export type AxeViolation = { id: string; impact: string | null; help: string; nodes: { target: string[] }[] };

/**
 * axe-core's serious and critical violations on the page as it is now (WCAG 2.1 A and AA rules). axe is evaluated
 * through the DevTools protocol, which the page's CSP does not govern: the page itself is tested as served.
 */
export async function seriousAxeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(
    `axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } }).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) })))`,
  )) as AxeViolation[];
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical");
}
