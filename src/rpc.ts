import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ZodTypeProvider } from "fastify-type-provider-zod";
import type { z } from "zod";
import type { Deps } from "./deps.js";

export type RpcContext = {
  deps: Deps;
  req: FastifyRequest;
  /** For the few routes that answer with a header of their own (keys.verifyKey's Unkey-Ratelimit-Triggered). */
  reply: FastifyReply;
  /** The raw Authorization header, for the routes that authenticate. */
  authorization: string | undefined;
};

export type Rpc<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> = {
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
  /**
   * Who may call it, as documented in /openapi.json: a root key (the default), the operator's
   * KEYHAVEN_ADMIN_TOKEN, or nobody in particular. The handler enforces it; this only describes it.
   */
  auth?: "rootKey" | "admin" | "none";
  /**
   * The error statuses this route can answer, as /openapi.json lists them: what its validation (400), its
   * authentication and permission checks (403), its handler and what the handler calls can throw (404, 409, 412),
   * and 503 when it needs PostgreSQL or Redis. 500 is listed for every route and 413 for every POST, from its body
   * limit. Declared here, next to the handler, so that a change to what the handler throws changes it too.
   */
  errors: readonly RouteErrorStatus[];
  handler: (input: z.output<I>, ctx: RpcContext) => Promise<z.input<O>>;
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

export function defineRpc<I extends z.ZodType, O extends z.ZodType>(rpc: Rpc<I, O>): Rpc<I, O> {
  return rpc;
}

export function registerRpc(app: FastifyInstance, deps: Deps, rpc: Rpc): void {
  const status = rpc.status ?? 200;
  app.withTypeProvider<ZodTypeProvider>().route({
    method: rpc.method,
    url: rpc.path,
    bodyLimit: bodyLimitOf(rpc),
    schema: {
      summary: rpc.summary,
      ...(rpc.method === "GET" ? { querystring: rpc.input } : { body: rpc.input }),
      response: { [status]: rpc.output },
    },
    handler: async (req, reply) => {
      const input = rpc.method === "GET" ? req.query : req.body;
      const output = await rpc.handler(input, { deps, req, reply, authorization: req.headers.authorization });
      return reply.code(status).send(output);
    },
  });
}
