import type { FastifyRequest } from "fastify";
import { type Caller, OPERATOR, trustedCaller } from "../../../core/caller.js";
import type { Services } from "../../../services.js";
import { originOf } from "../../../http/origin.js";
import { idempotencyOf } from "../../idempotency.js";

export { OPERATOR };

/**
 * The caller of an operator route acting in `workspaceId`. A route that creates the workspace passes "" (it acts in
 * none yet): its change names the workspace it touched itself (Change.workspaceId). With the request's
 * Idempotency-Key scope, if it was sent one (wire/idempotency.ts).
 */
export function operatorCaller(deps: Services, req: FastifyRequest, workspaceId: string): Caller {
  const caller = trustedCaller(OPERATOR, workspaceId, originOf("operator", deps.config.trustProxy, req));
  const idempotency = idempotencyOf(req);
  return idempotency === undefined ? caller : Object.assign(caller, { idempotency });
}
