import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness } from "./helper.js";

// Debian's chromium (apt-get install chromium). Without it (a fresh laptop), this file is skipped.
const CHROMIUM = "/usr/bin/chromium";

describe.runIf(existsSync(CHROMIUM))("the API reference in headless Chromium", () => {
  let h: Harness;
  let origin: string;
  let dir: string;
  beforeAll(async () => {
    h = await createHarness();
    origin = await h.app.listen({ port: 0, host: "127.0.0.1" });
    dir = mkdtempSync(path.join(tmpdir(), "keyhaven-docs-"));
  });
  afterAll(async () => {
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("renders /docs from this server alone, listing the routes, and takes a non-trivial screenshot", async () => {
    const { chromium } = await import("playwright-core");
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
      ],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const foreign: string[] = [];
      const failed: string[] = [];
      // Anything not served by keyhaven itself is recorded and refused at once, so that a closed network can
      // neither hang the page nor hide a dependency on the internet.
      await page.route(
        (url) => url.origin !== origin && url.protocol !== "data:" && url.protocol !== "blob:",
        async (route) => {
          foreign.push(route.request().url());
          await route.abort("blockedbyclient");
        },
      );
      page.on("requestfailed", (req) => {
        if (new URL(req.url()).origin === origin) failed.push(`${req.url()} ${req.failure()?.errorText}`);
      });
      page.on("response", (res) => {
        if (res.status() >= 400) failed.push(`${res.url()} ${res.status()}`);
      });

      const response = await page.goto(`${origin}/docs`, { waitUntil: "load" });
      expect(response?.status()).toBe(200);
      expect(page.url()).toBe(`${origin}/docs/`);
      // The sidebar lists operations by their RPC name once the document is loaded and rendered.
      await page.getByText("keys.verifyKey", { exact: true }).first().waitFor({ state: "visible", timeout: 60_000 });
      await expect(page.getByText("migrations.createKeys", { exact: true }).first().isVisible()).resolves.toBe(true);
      // Not "networkidle": it never settles on some machines (CI timed out on it with the page fully rendered).
      // The fonts are the last thing that changes what the screenshot shows.
      await page.evaluate("document.fonts.ready.then(() => true)"); // a string: this file is type-checked without the DOM lib

      const file = path.join(dir, "docs.png");
      await page.screenshot({ path: file, fullPage: false });
      const png = readFileSync(file);
      expect(png.subarray(1, 4).toString("latin1")).toBe("PNG");
      expect(png.readUInt32BE(16)).toBe(1280); // IHDR width
      // A blank or error page compresses to a few KB; the rendered reference is much larger.
      expect(png.length).toBeGreaterThan(30_000);

      // Air-gapped installs: everything the page loads comes from this server.
      expect(foreign).toEqual([]);
      expect(failed).toEqual([]);
    } finally {
      await browser.close();
    }
    // Starting Chromium and rendering the reference takes seconds, and far more while CI loads both cores.
  }, 150_000);
});
