import type { FastifyReply, FastifyRequest } from "fastify";
import type { Caller, IdempotencyScope } from "../core/caller.js";
import type { IdempotentRequest, RequestScope, StoredAnswer } from "../core/idempotency/idempotency.js";
import { sha256Hex } from "../crypto/hash.js";
import { bodyDigestOf } from "../http/surface.js";
import type { Services } from "../services.js";
import { isMutatingRoute } from "./writes.js";

/** The header, and what a replayed answer carries. */
export const IDEMPOTENCY_KEY_HEADER = "idempotency-key";
export const IDEMPOTENCY_REPLAYED_HEADER = "Idempotency-Replayed";

/** 1 to 255 visible ASCII characters (no space, no control character). */
const VALID_KEY = /^[\x21-\x7e]{1,255}$/;

/** How a surface words the refusals of Idempotency-Key, each in its own error shape. */
export type IdempotencyRefusals = {
  /** The header is malformed: a 400. */
  invalid(message: string): Error;
  /** The key was used for another request: a 422. */
  reused(message: string): Error;
  /** A concurrent request with the key has not answered yet: a 409. */
  inProgress(message: string): Error;
};

/** A request's answer decided by its Idempotency-Key: stored with its change, or replayed from a first request. */
export class IdempotentAnswer {
  constructor(
    readonly answer: StoredAnswer,
    readonly replayed: boolean,
  ) {}

  send(reply: FastifyReply): FastifyReply {
    if (this.replayed) reply.header(IDEMPOTENCY_REPLAYED_HEADER, "true");
    return reply.code(this.answer.status).type(this.answer.contentType).send(this.answer.body);
  }
}

/**
 * The Idempotency-Key of a request to a mutating route (wire/writes.ts), or undefined without one or on another
 * route (which ignores it: nothing there could apply twice). Checked before authentication, as input is.
 */
export function idempotencyKeyOf(req: FastifyRequest, path: string, refuse: IdempotencyRefusals): string | undefined {
  if (!isMutatingRoute(path)) return undefined;
  const header = req.headers[IDEMPOTENCY_KEY_HEADER];
  if (header === undefined) return undefined;
  if (Array.isArray(header)) throw refuse.invalid("Idempotency-Key: send the header once");
  if (!VALID_KEY.test(header)) {
    throw refuse.invalid(
      `Idempotency-Key: must be 1 to 255 visible ASCII characters (no spaces), got ${header.length === 0 ? "an empty value" : `${header.length} characters`}`,
    );
  }
  return header;
}

/** Who a key belongs to: a root key of its workspace, or the operator. Keys of two callers never meet. */
export function idempotencyScopeOf(caller: Caller | undefined): string {
  if (caller === undefined || caller.actor.kind === "operator") return "operator";
  return `${caller.workspaceId}:${caller.actor.kind}:${caller.actor.id}`;
}

const scopes = new WeakMap<FastifyRequest, IdempotencyScope>();

/** The idempotency scope of `req`, for a handler that builds its caller itself (the operator routes). */
export function idempotencyOf(req: FastifyRequest): IdempotencyScope | undefined {
  return scopes.get(req);
}

/**
 * Runs a route's handler for `principal` (what its auth gave: a root key and its caller, …): at once without an
 * Idempotency-Key (`key` undefined), else once per key through answerOnce, the handler's principal then carrying the
 * caller with the request's scope. Both surfaces' rpc.ts call it, so the two paths are written once.
 */
export function handleOnce<P extends object, T>(
  deps: Services,
  req: FastifyRequest,
  reply: FastifyReply,
  key: string | undefined,
  how: { status: number; refuse: IdempotencyRefusals; envelope: (output: unknown) => unknown },
  principal: P,
  handle: (principal: P) => Promise<T>,
): Promise<T | IdempotentAnswer> {
  if (key === undefined) return handle(principal);
  const caller = (principal as { caller?: Caller }).caller;
  return answerOnce(deps, req, reply, Object.assign({ key, caller }, how), (scoped) =>
    handle(scoped === undefined ? principal : (Object.assign({}, principal, { caller: scoped }) as P)),
  );
}

/**
 * Answers a request made with Idempotency-Key `key` once: a stored answer of the same request is replayed (no second
 * change), of another request refused (422). Else `run` runs with the scope on its caller, its changes held in one
 * transaction; a 2xx answer (`envelope` of what `run` returns, serialized by the route) is stored in it and committed
 * before it is sent; an error rolls everything back and stores nothing, so that a retry runs afresh. Bounded by the
 * request's deadline (PostgreSQL) or its timeout (PGlite): past it, the transaction is rolled back, the answer a 503.
 */
export async function answerOnce(
  deps: Services,
  req: FastifyRequest,
  reply: FastifyReply,
  how: { key: string; caller: Caller | undefined; status: number; refuse: IdempotencyRefusals; envelope: (output: unknown) => unknown },
  run: (caller: Caller | undefined) => Promise<unknown>,
): Promise<IdempotentAnswer> {
  const path = req.url.split("?")[0] ?? "";
  const request: IdempotentRequest = {
    scope: idempotencyScopeOf(how.caller),
    key: how.key,
    fingerprint: sha256Hex(`${req.method} ${path}\n${bodyDigestOf(req)}`),
  };
  const found = await deps.idempotency.find(request);
  if (found?.kind === "mismatch") {
    throw how.refuse.reused(
      "Idempotency-Key: this key was used for another request (another route or body) in the last 24 hours; send a new key for a new request",
    );
  }
  if (found?.kind === "replay") return new IdempotentAnswer(found.answer, true);
  const scope: RequestScope = deps.idempotency.begin(request, deps.store.requestDeadlineMs ?? deps.config.http.requestTimeoutMs);
  scopes.set(req, scope);
  try {
    const caller = how.caller && (Object.assign({}, how.caller, { idempotency: scope }) as Caller);
    const output = await Promise.race([run(caller), scope.expiry]);
    reply.code(how.status);
    const body = reply.serialize(how.envelope(output)) as string;
    const contentType = String(reply.getHeader("content-type") ?? "application/json; charset=utf-8");
    const committed = await Promise.race([scope.commit({ status: how.status, contentType, body }), scope.expiry]);
    if (committed.kind === "inProgress") {
      throw how.refuse.inProgress("Idempotency-Key: a request with this key is still being answered; retry it once that one has answered");
    }
    return new IdempotentAnswer(committed.answer, committed.replayed);
  } catch (err) {
    await scope.rollback().catch(() => {});
    throw err;
  } finally {
    scopes.delete(req);
  }
}
