import type { FastifyRequest } from "fastify";
import { type AccessPolicy, type Caller, type Origin, rootKeyCaller } from "../../core/caller.js";
import type { RootKeyAuth } from "../../core/auth/rootKeys.authenticator.js";
import { originOf } from "../../http/origin.js";
import type { Services } from "../../services.js";

/**
 * How Unkey v1 decides access: its permission tuples alone (no URNs), checked before the target is looked up (a
 * wrong root key learns nothing of whether an id exists), a refusal answered 403.
 */
export const V1_ACCESS: AccessPolicy = { urnGrants: false, check: "beforeLookup", denied: "forbidden" };

/** Where a v1 request came from, for the audit log. */
export function v1Origin(deps: Services, req: FastifyRequest): Origin {
  return originOf("v1", deps.config.trustProxy, req);
}

/** The caller of a v1 request made with `rootKey`. */
export function v1Caller(deps: Services, req: FastifyRequest, rootKey: RootKeyAuth): Caller {
  return rootKeyCaller(rootKey, V1_ACCESS, v1Origin(deps, req));
}
