import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/**
 * The portal page's static files: uPlot as its npm package ships it, the console's script and style sheet (its charts,
 * copy buttons, tables and forms: the portal's pages use the same markup) and the portal's own additions (assets/portal/). As the
 * console's (src/console/assets.ts), each is served under a digest of its bytes, cached for good.
 */
const FILES = {
  "uplot.js": { path: require.resolve("uplot/dist/uPlot.iife.min.js"), type: "text/javascript; charset=utf-8" },
  "uplot.css": { path: require.resolve("uplot/dist/uPlot.min.css"), type: "text/css; charset=utf-8" },
  "console.js": { path: new URL("../../assets/console/console.js", import.meta.url), type: "text/javascript; charset=utf-8" },
  "console.css": { path: new URL("../../assets/console/console.css", import.meta.url), type: "text/css; charset=utf-8" },
  "portal.css": { path: new URL("../../assets/portal/portal.css", import.meta.url), type: "text/css; charset=utf-8" },
} as const;

export type PortalAssetName = keyof typeof FILES;

export type PortalAsset = { readonly body: Buffer; readonly type: string; readonly digest: string };

let loaded: ReadonlyMap<string, PortalAsset> | undefined;

/** Every asset, read once per process. */
export function portalAssets(): ReadonlyMap<string, PortalAsset> {
  if (loaded) return loaded;
  const map = new Map<string, PortalAsset>();
  for (const [name, { path, type }] of Object.entries(FILES)) {
    const body = readFileSync(path);
    map.set(name, { body, type, digest: createHash("sha256").update(body).digest("hex").slice(0, 16) });
  }
  loaded = map;
  return map;
}

/** The URL of an asset: its digest in the path. */
export function portalAssetUrl(name: PortalAssetName): string {
  return `/portal/assets/${portalAssets().get(name)!.digest}/${name}`;
}
