import type { FastifyRequest } from "fastify";
import { type Actor, type Caller, trustedCaller } from "../../../core/caller.js";
import type { Services } from "../../../services.js";
import { originOf } from "../../../http/origin.js";
import { idempotencyOf } from "../../idempotency.js";

/** The operator (KEYHAVEN_ADMIN_TOKEN) as the audit log names it: never the token. */
export const OPERATOR: Actor = { kind: "operator", id: "admin", name: "operator" };

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
