import { v2Rpcs } from "../src/wire/v2/routes.js";

const servedPaths = new Set<string>(v2Rpcs.map((rpc) => rpc.path));

/**
 * Whether keyhaven serves this v2 route yet (it is in src/wire/v2/routes.ts). Tests of a route still being built guard
 * themselves with it (`it.runIf(served("/v2/keys.createKey"))`), so that they run on their own once the route is merged.
 */
export const served = (path: `/v2/${string}`) => servedPaths.has(path);
