import { defineConfig } from "vitest/config";

/**
 * Scale and crash scenarios: they spawn keyhaven processes (servers, the import CLI killed with -9, nginx in front
 * of two replicas) or stream hundreds of thousands of keys, and take minutes on 2 cores. `npm test` (the `unit`
 * project) runs everything else; `npm run test:e2e` runs these; CI runs both.
 */
const E2E = [
  "test/cli.import.test.ts",
  "test/cli.import.edge.test.ts",
  "test/data-dir.cli.test.ts",
  "test/deploy.signals.test.ts",
  "test/deploy.nginx.test.ts",
  "test/replicas.test.ts",
  "test/audit.crash.test.ts",
  // kill -9 mid-send, then the dead worker's 2-minute lease: about 2.5 minutes per store.
  "test/webhooks.crash.test.ts",
  // kill -9 during spends, then what the outbox holds: under a minute per store.
  "test/webhooks.alerts.crash.test.ts",
  // The console's whole flow in Chromium (10,000 keys imported, every page through axe): about 90 s.
  "test/console.browser.test.ts",
  // The portal page's whole flow in Chromium (a session minted, keys rerolled, the usage chart, every page through axe).
  "test/portal.browser.test.ts",
];

/** Builds dist/ and the migrated PGlite template (test/global-setup.ts), before the project's first file. */
const SETUP = "test/global-setup.ts";

export default defineConfig({
  test: {
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // The suite runs on 2 cores next to PostgreSQL; more workers only contend.
    maxWorkers: 2,
    projects: [
      // One module graph per worker across its files (isolate: false): importing the app (fastify, drizzle, zod,
      // PGlite's WASM) again for each of ~75 files cost more than the tests (import 219 s of a 595 s run, then 15 s
      // of 268 s). Nothing of the app lives in module state (services.ts); a file's own harness is made by
      // fixtures.ts testWith, never by mutating the shared `test`.
      //
      // The global setup is each project's own, not the root config's: there the root ran it too (a second dist/
      // build check and PGlite template, ~5 s before the first file, since projects that extend the root inherit it).
      { extends: true, test: { name: "unit", include: ["test/**/*.test.ts"], exclude: E2E, isolate: false, globalSetup: [SETUP] } },
      { extends: true, test: { name: "e2e", include: E2E, globalSetup: [SETUP] } },
    ],
  },
});
