import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import type { z } from "zod";
import { authenticateAdmin } from "./auth.admin.js";
import type { RootKeyAuth } from "../../core/auth/rootKeys.authenticator.js";
import { bearerToken } from "../../http/bearer.js";
import type { Services } from "../../services.js";
import { withRequestDeadline } from "../../storage/deadline.js";
import type { Caller } from "../../core/caller.js";
import { v1Caller } from "./caller.js";
import { ApiError } from "../../http/errors.js";
import { handleOnce, IdempotentAnswer, type IdempotencyRefusals, idempotencyKeyOf } from "../idempotency.js";

/** Idempotency-Key's refusals in v1's envelope (wire/idempotency.ts). */
const V1_IDEMPOTENCY_REFUSALS: IdempotencyRefusals = {
  invalid: (message) => new ApiError("BAD_REQUEST", message),
  reused: (message) => new ApiError("UNPROCESSABLE_ENTITY", message),
  inProgress: (message) => new ApiError("CONFLICT", message),
};

/**
 * Who may call a route, enforced by registerRpc before the handler runs (after the input is validated, and after
 * the route's `beforeAuth`, if any), and documented in /openapi.json:
 * - "rootKey": `Authorization: Bearer <root key>` of an enabled workspace (v1's 403s otherwise); the handler gets
 *   it as `ctx.rootKey`.
 * - "admin": the operator's KEYHAVEN_ADMIN_TOKEN.
 * - "optionalRootKey": anybody; a valid root key narrows what the route does (keys.verifyKey scopes to its
 *   workspace), anything else in the header is ignored. The handler asks for it with `ctx.optionalRootKey(epoch)`.
 * - "rootKeyCheckedByWrite": as "rootKey", for a route whose writes re-check the root key themselves (keys.createKey,
 *   keys.updateKey, permissions.addPermissionsToRole / removePermissionsFromRole):
 *   a root key in memory is used without reading the epoch first, and the handler runs again, authenticated at a
 *   fresh epoch, when that run throws (RootKeyAuthenticator.authorizeWrite). Its handler passes `ctx.rootKey` to a
 *   core function that applies its `writeGuard`.
 * - "none": anybody (liveness, readiness).
 */
export type AuthKind = "rootKey" | "rootKeyCheckedByWrite" | "admin" | "optionalRootKey" | "none";

/** What every handler, and a route's `beforeAuth`, gets. */
export type BaseContext = {
  deps: Services;
  req: FastifyRequest;
  /** For the few routes that answer with a header of their own (keys.verifyKey's Unkey-Ratelimit-Triggered). */
  reply: FastifyReply;
  /**
   * The store's epoch (storage/epoch.ts), read once per request on first call: a route that reads it before
   * authenticating (ratelimits.limit) has the root key checked at that same epoch, so its own caches cost no
   * second read.
   */
  epoch: () => Promise<bigint>;
};

/** The principal registerRpc hands to the handler, by the route's `auth`. */
export type Principal<A extends AuthKind> = A extends "rootKey" | "rootKeyCheckedByWrite"
  ? { rootKey: RootKeyAuth; caller: Caller }
  : A extends "optionalRootKey"
    ? { optionalRootKey: (epoch: bigint | undefined) => Promise<RootKeyAuth | undefined> }
    : Record<never, never>;

export type RpcContext<A extends AuthKind = AuthKind, P = undefined> = BaseContext &
  Principal<A> & {
    /** What the route's `beforeAuth` returned (undefined without one). */
    checked: P;
  };

export type Rpc<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType, A extends AuthKind = AuthKind, P = unknown> = {
  method: "GET" | "POST";
  /** `/v1/<service>.<method>` */
  path: `/v1/${string}`;
  summary: string;
  /** Query parameters for GET, the JSON body for POST. */
  input: I;
  output: O;
  /** What the success answer is, in a few words: the description of that response in /openapi.json. */
  returns: string;
  /** 200 unless the contract says otherwise (enqueueKeys answers 202). */
  status?: number;
  /** Who may call it (see AuthKind): registerRpc enforces it before the handler runs, and /openapi.json shows it. */
  auth: A;
  /**
   * What the route answers before authenticating, in v1's order: checks of the input alone (a 400 that comes
   * before the 403) or a lookup v1 made first (keys.whoami's 404). It runs after validation; what it returns
   * reaches the handler as `ctx.checked`.
   */
  beforeAuth?: (input: z.output<I>, ctx: BaseContext) => P | Promise<P>;
  /**
   * The error statuses this route can answer, as /openapi.json lists them: what its validation (400), its
   * authentication and permission checks (403), its handler and what the handler calls can throw (404, 409, 412),
   * and 503 when it needs PostgreSQL or Redis. 500 is listed for every route and 413 for every POST, from its body
   * limit. Declared here, next to the handler, so that a change to what the handler throws changes it too.
   */
  errors: readonly RouteErrorStatus[];
  handler: (input: z.output<I>, ctx: RpcContext<A, P>) => Promise<z.input<O>>;
  /**
   * The largest body the route reads, in bytes (POST only). Parsing JSON costs time in proportion to its size
   * (about 60 ms of CPU for a hostile 1 MiB), before authentication, so each route reads only what it needs.
   */
  bodyLimit?: number;
};

/** The error statuses a route declares in `errors`; none answers 429, and 405/408/413/500 are not the route's own. */
export type RouteErrorStatus = 400 | 403 | 404 | 409 | 412 | 503;

export const KIB = 1024;
/** The routes that take a few ids, names and numbers (keys.verifyKey, ratelimits.limit, ...). */
export const DEFAULT_BODY_LIMIT = 64 * KIB;
/** The routes that take a key's or an identity's meta, or lists of roles and permissions. */
export const LARGE_BODY_LIMIT = 256 * KIB;
/** The import routes: a batch of up to 100 keys. */
export const BULK_BODY_LIMIT = 1024 * KIB;

export const bodyLimitOf = (rpc: Rpc): number => rpc.bodyLimit ?? DEFAULT_BODY_LIMIT;

export function defineRpc<I extends z.ZodType, O extends z.ZodType, A extends AuthKind, P = undefined>(
  rpc: Rpc<I, O, A, P>,
): Rpc<I, O, A, P> {
  return rpc;
}

/** Reads the epoch on first call and remembers it; `known` is what was read, if it was. */
function epochOnce(deps: Services): { read: () => Promise<bigint>; known: () => bigint | undefined } {
  let reading: Promise<bigint> | undefined;
  let known: bigint | undefined;
  return {
    read: () => (reading ??= deps.epochs.current().then((epoch) => (known = epoch))),
    known: () => known,
  };
}

/**
 * Enforces a route's `auth`: throws v1's refusal, or returns what the handler gets of the caller. (A
 * "rootKeyCheckedByWrite" route is authenticated around its handler instead: registerRpc.)
 */
async function authenticate(
  auth: Exclude<AuthKind, "rootKeyCheckedByWrite">,
  deps: Services,
  req: FastifyRequest,
  epoch: ReturnType<typeof epochOnce>,
): Promise<Principal<AuthKind>> {
  const authorization = req.headers.authorization;
  switch (auth) {
    case "rootKey": {
      const rootKey = await deps.rootKeys.authenticate(bearerToken(authorization), epoch.known());
      return { rootKey, caller: v1Caller(deps, req, rootKey) };
    }
    case "admin":
      authenticateAdmin(deps.config, authorization);
      return {};
    case "optionalRootKey":
      return {
        optionalRootKey: (at: bigint | undefined) =>
          deps.rootKeys.optional(authorization === undefined ? undefined : bearerToken(authorization), at),
      };
    case "none":
      return {};
  }
}

export function registerRpc(app: FastifyInstance, deps: Services, rpc: Rpc): void {
  const status = rpc.status ?? 200;
  app.withTypeProvider<ZodTypeProvider>().route({
    method: rpc.method,
    // Relative to the surface's prefix (`/v1`, wire/v1/surface.ts).
    url: rpc.path.slice("/v1".length),
    bodyLimit: bodyLimitOf(rpc),
    schema: {
      summary: rpc.summary,
      ...(rpc.method === "GET" ? { querystring: rpc.input } : { body: rpc.input }),
      response: { [status]: rpc.output },
    },
    handler: async (req, reply) => {
      const input = rpc.method === "GET" ? req.query : req.body;
      const idempotencyKey = idempotencyKeyOf(req, rpc.path, V1_IDEMPOTENCY_REFUSALS);
      // One deadline for everything the request waits for on PostgreSQL (storage/deadline.ts).
      const output = await withRequestDeadline(deps.store.requestDeadlineMs, async () => {
        const epoch = epochOnce(deps);
        const base: BaseContext = { deps, req, reply, epoch: epoch.read };
        const checked = rpc.beforeAuth ? await rpc.beforeAuth(input, base) : undefined;
        // Object.assign, not `{ ...base, ...principal, checked }` (CONTRIBUTING.md, conventions).
        const handle = (principal: Principal<AuthKind>) =>
          rpc.handler(input, Object.assign({}, base, principal, { checked }) as RpcContext);
        // With an Idempotency-Key, the answer is stored with the change, or replayed (wire/idempotency.ts).
        const run = (principal: Principal<AuthKind>) =>
          handleOnce(
            deps,
            req,
            reply,
            idempotencyKey,
            { status, refuse: V1_IDEMPOTENCY_REFUSALS, envelope: (output) => output },
            principal,
            handle,
          );
        return rpc.auth === "rootKeyCheckedByWrite"
          ? deps.rootKeys.authorizeWrite(bearerToken(req.headers.authorization), (rootKey) =>
              run({ rootKey, caller: v1Caller(deps, req, rootKey) }),
            )
          : run(await authenticate(rpc.auth, deps, req, epoch));
      });
      if (output instanceof IdempotentAnswer) return output.send(reply);
      return reply.code(status).send(output);
    },
  });
}
