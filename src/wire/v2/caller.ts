import type { FastifyRequest } from "fastify";
import { type AccessPolicy, type Caller, rootKeyCaller } from "../../core/caller.js";
import type { RootKeyAuth } from "../../core/auth/rootKeys.authenticator.js";
import type { Services } from "../../services.js";
import { originOf } from "../../http/origin.js";

/**
 * How Unkey v2 decides access (contract §1.5): a permission may also be granted by the resource's URN, the target is
 * looked up first (a missing one is a 404 before any 403), a refusal is answered 403. The routes that answer a
 * refused caller as if the target did not exist (keys.whoami, ratelimit.getOverride, …) say so with withAccess.
 */
export const V2_ACCESS: AccessPolicy = { urnGrants: true, check: "afterLookup", denied: "forbidden" };

/** The caller of a v2 request made with `rootKey`. */
export function v2Caller(deps: Services, req: FastifyRequest, rootKey: RootKeyAuth): Caller {
  return rootKeyCaller(rootKey, V2_ACCESS, originOf("v2", deps.config.trustProxy, req));
}
