import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createHash } from "node:crypto";

const require = createRequire(import.meta.url);

/**
 * The console's static files: htmx and uPlot as their npm packages ship them (no CDN: keyhaven runs offline), and the
 * console's own script and style sheet (assets/console/, beside src/ and dist/ alike). Each is served under a digest
 * of its bytes, so it can be cached for good (`immutable`) and a new version is a new URL.
 */
const FILES = {
  "htmx.js": { path: require.resolve("htmx.org/dist/htmx.min.js"), type: "text/javascript; charset=utf-8" },
  "uplot.js": { path: require.resolve("uplot/dist/uPlot.iife.min.js"), type: "text/javascript; charset=utf-8" },
  "uplot.css": { path: require.resolve("uplot/dist/uPlot.min.css"), type: "text/css; charset=utf-8" },
  "console.js": { path: new URL("../../assets/console/console.js", import.meta.url), type: "text/javascript; charset=utf-8" },
  "console.css": { path: new URL("../../assets/console/console.css", import.meta.url), type: "text/css; charset=utf-8" },
} as const;

export type AssetName = keyof typeof FILES;

export type Asset = { readonly body: Buffer; readonly type: string; readonly digest: string };

// The files of this installation never change while it runs: read once per process.
let loaded: ReadonlyMap<string, Asset> | undefined;

/** Every asset, read once (on the first page or asset request of the process). */
export function assets(): ReadonlyMap<string, Asset> {
  if (loaded) return loaded;
  const map = new Map<string, Asset>();
  for (const [name, { path, type }] of Object.entries(FILES)) {
    const body = readFileSync(path);
    map.set(name, { body, type, digest: createHash("sha256").update(body).digest("hex").slice(0, 16) });
  }
  loaded = map;
  return map;
}

/** The URL of an asset: its digest in the path. */
export function assetUrl(name: AssetName): string {
  return `/console/assets/${assets().get(name)!.digest}/${name}`;
}
