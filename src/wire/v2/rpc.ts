import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import { z } from "zod";
import type { RootKeyAuth } from "../../core/auth/rootKeys.authenticator.js";
import { UnauthenticatedError } from "../../errors.js";
import type { Services } from "../../services.js";
import { withRequestDeadline } from "../../storage/deadline.js";
import { V2Error } from "./errors.js";
import type { Caller, Origin } from "../../core/caller.js";
import { secretsEqual } from "../../crypto/hash.js";
import { originOf } from "../../http/origin.js";
import { v2Caller } from "./caller.js";
import { parseCookie } from "cookie";
import { type PortalSession, portalSessionCaller, resolvePortalSession } from "../../core/portals/portals.sessions.js";
import { handleOnce, IdempotentAnswer, type IdempotencyRefusals, idempotencyKeyOf } from "../idempotency.js";

/** Idempotency-Key's refusals in v2's problem+json (wire/idempotency.ts). */
const V2_IDEMPOTENCY_REFUSALS: IdempotencyRefusals = {
  invalid: (message) => new V2Error(400, "unkey/application/invalid_input", message, [{ location: "header.Idempotency-Key", message }]),
  reused: (message) => new V2Error(422, "unkey/application/idempotency_key_reused", message),
  inProgress: (message) => new V2Error(409, "unkey/application/idempotency_key_in_use", message),
};

/**
 * Who may call a v2 route, enforced by registerV2Rpc after the body is validated (v2 validates before it reads the
 * credential) and before the handler:
 * - "rootKey": `Authorization: Bearer <root key>` (v2's 400/401/403 otherwise); the handler gets it as `ctx.rootKey`.
 * - "rootKeyAtEpoch": the same refusals, but the header's form is checked before the handler and the root key is
 *   authenticated when the handler asks, at the store epoch it already read (`ctx.rootKeyAt(epoch)`), so that the hot
 *   path (keys.verifyKey) costs no second epoch read. The handler must ask on every path.
 * - "rootKeyCheckedByWrite": as "rootKey", for a route whose writes re-check the root key themselves (keys.createKey,
 *   keys.updateKey),
 *   as v1's kind of that name (wire/v1/rpc.ts, RootKeyAuthenticator.authorizeWrite).
 * - "rootKeyOrOperator": a root key as "rootKey", or the operator's token (KEYHAVEN_ADMIN_TOKEN, when set) in the same
 *   header; the handler gets `ctx.by`, which of the two called (keyhaven.listAuditLogs).
 * - "portalSession": a customer portal's session, by the `portal_session` cookie the v2 SDK's portal methods send (never
 *   a root key: any Authorization header is refused); the handler gets `ctx.session` and its caller.
 * - "none": anybody (liveness, portal.exchangeCode).
 */
export type V2AuthKind = "rootKey" | "rootKeyCheckedByWrite" | "rootKeyAtEpoch" | "rootKeyOrOperator" | "portalSession" | "none";

/** Who called a "rootKeyOrOperator" route: a root key (with its caller), or the operator, from `origin`. */
export type RootKeyOrOperator =
  | { readonly kind: "rootKey"; readonly rootKey: RootKeyAuth; readonly caller: Caller }
  | { readonly kind: "operator"; readonly origin: Origin };

export type V2Context<A extends V2AuthKind> = {
  deps: Services;
  req: FastifyRequest;
  reply: FastifyReply;
} & (A extends "rootKey" | "rootKeyCheckedByWrite"
  ? { rootKey: RootKeyAuth; caller: Caller }
  : A extends "rootKeyAtEpoch"
    ? { rootKeyAt: (epoch: bigint | undefined) => Promise<RootKeyAuth> }
    : A extends "rootKeyOrOperator"
      ? { by: RootKeyOrOperator }
      : A extends "portalSession"
        ? { session: PortalSession; caller: Caller }
        : Record<never, never>);

/** What a v2 handler returns: the envelope's `data`, and `pagination` on the list routes. */
export type V2Answer<O extends z.ZodType> = { data: z.input<O>; pagination?: { cursor?: string; hasMore: boolean } };

/** The error statuses a v2 route declares (401 and 403 come with "rootKey"; 413 and 500 with every POST). */
export type V2RouteErrorStatus = 400 | 401 | 403 | 404 | 409 | 410 | 412 | 422 | 503;

export type V2Rpc<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType, A extends V2AuthKind = V2AuthKind> = {
  /** Every v2 route is a POST with a JSON body, except liveness. */
  method: "POST" | "GET";
  /** `/v2/<service>.<method>` */
  path: `/v2/${string}`;
  summary: string;
  /** The JSON body (strict: v2 refuses fields it does not know). Ignored for GET. */
  input: I;
  /** The envelope's `data`. */
  output: O;
  /** A list route: the answer carries `pagination`. */
  paginated?: boolean;
  /** The answer is `{meta}` alone, without `data` (v2's identities.deleteIdentity). */
  noData?: boolean;
  /** What `data` is, in a few words. */
  returns: string;
  auth: A;
  errors: readonly V2RouteErrorStatus[];
  handler: (input: z.output<I>, ctx: V2Context<A>) => Promise<V2Answer<O>>;
  bodyLimit?: number;
  /**
   * Top-level fields whose string is only looked up, never stored: the body parser lets text PostgreSQL cannot hold
   * (a NUL) through there, and the lookup finds nothing (404), as upstream answers (parseJsonBody).
   */
  lookupOnly?: readonly string[];
  /**
   * A bulk route: a body that fails the schema is answered with the failing field's path in `detail`
   * (`keys[3].credits.refill.amount: minimum: got 0, want 1`), so that a client knows which item to fix.
   */
  namedPaths?: boolean;
};

const KIB = 1024;
/** v2's body limits, its own (the same sizes as v1's today): the routes that take a few ids, names and numbers. */
export const DEFAULT_BODY_LIMIT = 64 * KIB;
/** v2's routes that take meta, or lists of roles and permissions. */
export const LARGE_BODY_LIMIT = 256 * KIB;
/** v2's bulk routes (keys.migrateKeys). */
export const BULK_BODY_LIMIT = 1024 * KIB;

export function defineV2Rpc<I extends z.ZodType, O extends z.ZodType, A extends V2AuthKind>(rpc: V2Rpc<I, O, A>): V2Rpc<I, O, A> {
  return rpc;
}

/** `meta` of every v2 answer. */
const meta = z.object({ requestId: z.string().describe("This request's id, to quote when asking for support.") });

const pagination = z.object({
  cursor: z.string().optional().describe("Pass it as `cursor` to read the next page; absent on the last page."),
  hasMore: z.boolean().describe("Whether another page follows."),
});

/** The success envelope of a route: `{meta, data, pagination?}`. */
export function v2Envelope(rpc: V2Rpc): z.ZodType {
  if (rpc.noData) return z.object({ meta });
  return z.object({ meta, data: rpc.output, ...(rpc.paginated && { pagination }) });
}

/**
 * The root key of v2's `Authorization` header (contract §1.4): absent or empty is a 400 (as v2's validator
 * answers it), a header that does not start with `Bearer ` a 400 `malformed`, then the token (trimmed) is
 * authenticated by the core (401 unknown or not a root key, 403 disabled workspace).
 */
export async function authenticateV2(deps: Services, authorization: string | undefined): Promise<RootKeyAuth> {
  return deps.rootKeys.authenticate(bearerTokenV2(authorization));
}

/**
 * A "rootKeyOrOperator" route's caller: the operator when the bearer token is KEYHAVEN_ADMIN_TOKEN (compared in
 * constant time; never when no token is configured), else a root key, refused as any v2 root-key route refuses.
 */
async function authenticateRootKeyOrOperator(deps: Services, req: FastifyRequest): Promise<RootKeyOrOperator> {
  const token = bearerTokenV2(req.headers.authorization);
  const adminToken = deps.config.adminToken;
  if (adminToken !== undefined && secretsEqual(token, adminToken))
    return { kind: "operator", origin: originOf("operator", deps.config.trustProxy, req) };
  const rootKey = await deps.rootKeys.authenticate(token);
  return { kind: "rootKey", rootKey, caller: v2Caller(deps, req, rootKey) };
}

/** The cookie a portal session authenticates with (upstream's OpenAPI security scheme `portalSession`). */
export const PORTAL_SESSION_COOKIE = "portal_session";

/**
 * A "portalSession" route's session: the `portal_session` cookie's access token, resolved by the core. A request
 * with an Authorization header is refused whatever it holds, so a root key never acts on these routes (and, the
 * other way round, this cookie authenticates no root-key route: they read the Authorization header only).
 */
async function authenticatePortalSession(deps: Services, req: FastifyRequest): Promise<PortalSession> {
  if (req.headers.authorization !== undefined) {
    throw new V2Error(
      400,
      "unkey/authentication/malformed",
      "Portal routes authenticate with the portal_session cookie only; a request with an Authorization header is refused.",
      [],
    );
  }
  const token = parseCookie(req.headers.cookie ?? "")[PORTAL_SESSION_COOKIE];
  if (token === undefined) {
    throw new V2Error(400, "unkey/application/invalid_input", `API Key ${PORTAL_SESSION_COOKIE} not found in cookies`, [
      {
        location: "security",
        message: "API Key not found in http request cookies for security scheme 'apiKey' with type 'cookie'",
        fix: `Submit an API Key '${PORTAL_SESSION_COOKIE}' as a cookie with the request`,
      },
    ]);
  }
  return resolvePortalSession(deps, token.trim());
}

/** The token of v2's `Authorization: Bearer` header, or v2's 400 for a header that is absent or malformed. */
function bearerTokenV2(authorization: string | undefined): string {
  const header = (authorization ?? "").trim();
  if (header === "") throw new UnauthenticatedError("missing");
  if (!header.startsWith("Bearer ")) {
    throw new V2Error(
      400,
      "unkey/authentication/malformed",
      "You must provide a valid root key in the Authorization header in the format 'Bearer ROOT_KEY'. Your authorization header is missing the 'Bearer ' prefix.",
      [],
    );
  }
  const token = header.slice("Bearer ".length).trim();
  if (token === "") throw new UnauthenticatedError("unknown");
  return token;
}

export function registerV2Rpc(app: FastifyInstance, deps: Services, rpc: V2Rpc): void {
  app.withTypeProvider<ZodTypeProvider>().route({
    method: rpc.method,
    // Relative to the surface's prefix (`/v2`, wire/v2/surface.ts).
    url: rpc.path.slice("/v2".length),
    bodyLimit: rpc.bodyLimit ?? DEFAULT_BODY_LIMIT,
    config: { protocol: "v2", ...(rpc.lookupOnly && { lookupOnly: rpc.lookupOnly }), ...(rpc.namedPaths && { namedPaths: true }) },
    schema: {
      summary: rpc.summary,
      ...(rpc.method === "POST" && { body: rpc.input }),
      response: { 200: v2Envelope(rpc) },
    },
    handler: async (req, reply) => {
      const idempotencyKey = idempotencyKeyOf(req, rpc.path, V2_IDEMPOTENCY_REFUSALS);
      const envelope = (answer: unknown) =>
        rpc.noData ? { meta: { requestId: req.id } } : Object.assign({ meta: { requestId: req.id } }, answer);
      // One deadline for everything the request waits for on PostgreSQL (storage/deadline.ts).
      const answer = await withRequestDeadline(deps.store.requestDeadlineMs, async () => {
        const base = { deps, req, reply };
        let principal = {};
        if (rpc.auth === "rootKey") {
          const rootKey = await authenticateV2(deps, req.headers.authorization);
          principal = { rootKey, caller: v2Caller(deps, req, rootKey) };
        }
        if (rpc.auth === "rootKeyAtEpoch") {
          const token = bearerTokenV2(req.headers.authorization);
          principal = { rootKeyAt: (epoch: bigint | undefined) => deps.rootKeys.authenticate(token, epoch) };
        }
        if (rpc.auth === "rootKeyOrOperator") principal = { by: await authenticateRootKeyOrOperator(deps, req) };
        if (rpc.auth === "portalSession") {
          const session = await authenticatePortalSession(deps, req);
          principal = { session, caller: portalSessionCaller(session, originOf("v2", deps.config.trustProxy, req)) };
        }
        // Object.assign, not `{ ...base, ...principal }` (CONTRIBUTING.md, conventions).
        const handle = (principal: object) => rpc.handler(req.body, Object.assign({}, base, principal) as V2Context<V2AuthKind>);
        // With an Idempotency-Key, the answer is stored with the change, or replayed (wire/idempotency.ts).
        const run = (principal: object) =>
          handleOnce(deps, req, reply, idempotencyKey, { status: 200, refuse: V2_IDEMPOTENCY_REFUSALS, envelope }, principal, handle);
        return rpc.auth === "rootKeyCheckedByWrite"
          ? deps.rootKeys.authorizeWrite(bearerTokenV2(req.headers.authorization), (rootKey) =>
              run({ rootKey, caller: v2Caller(deps, req, rootKey) }),
            )
          : run(principal);
      });
      if (answer instanceof IdempotentAnswer) return answer.send(reply);
      return reply.code(200).send(envelope(answer));
    },
  });
}
