#!/usr/bin/env node
// Runs the compiled CLI, dist/cli/main.js, in this process: plain node, no TypeScript loader. `npm ci` builds dist/
// (the package's `prepare` script runs `npm run build`); `npm run dev` runs the sources through tsx instead.
import { existsSync } from "node:fs";

const main = new URL("../dist/cli/main.js", import.meta.url);
if (!existsSync(main)) {
  console.error("keyhaven: dist/cli/main.js is missing: run `npm run build` first (`npm ci` runs it).");
  process.exit(1);
}
await import(main.href);
