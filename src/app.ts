import type { AddressInfo } from "node:net";
import { STATUS_CODES } from "node:http";
import Fastify, { type FastifyError, type FastifyInstance, type FastifyRequest } from "fastify";
import {
  hasZodFastifySchemaValidationErrors,
  isResponseSerializationError,
  serializerCompiler,
  validatorCompiler,
} from "fastify-type-provider-zod";
import type { Config } from "./config.js";
import { findDependencyFailure } from "./storage/dependency.js";
import type { Services } from "./services.js";
import { DomainError } from "./errors.js";
import { ApiError, type ErrorCode, type ErrorFields, errorEnvelope } from "./http/errors.js";
import { apiErrorOf } from "./wire/v1/errors.js";
import { registerErrorReference } from "./wire/v1/errorReference.js";
import { parseJsonBody } from "./http/jsonBody.js";
import { checkIntervalMs, drainOnClose, noteAnswer } from "./http/server.js";
import { registerMetrics } from "./http/metrics.js";
import { registerOpenApi } from "./wire/v1/openapi.js";
import { newId } from "./ids.js";
import { serializeError } from "./log.js";
import { BULK_BODY_LIMIT, registerRpc } from "./wire/v1/rpc.js";
import { rpcs } from "./wire/v1/routes.js";
import { answerV2Error, answerV2NotFound, isV2Path } from "./wire/v2/answer.js";
import { v2OpenApi } from "./wire/v2/openapi.js";
import { v2Rpcs } from "./wire/v2/routes.js";
import { registerV2Rpc } from "./wire/v2/rpc.js";
import { issueText } from "./validation.messages.js";

/** The timeouts of config.http, as Fastify and Node's HTTP server take them. */
function httpServerOptions(config: Config) {
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = config.http;
  return {
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: keepAliveTimeoutMs,
    // No socket inactivity timeout: it would also cut a slow handler's answer. The three above bound the client.
    connectionTimeout: 0,
    http: { headersTimeout: headersTimeoutMs, connectionsCheckingInterval: checkIntervalMs(config.http) },
  };
}

/** What a client error from Node's HTTP server is answered with. */
function clientErrorAnswer(err: NodeJS.ErrnoException): { status: number; code: ErrorCode; message: string } {
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    return { status: 408, code: "REQUEST_TIMEOUT", message: "the request was not received in time; send it again, whole" };
  }
  if (err.code === "HPE_HEADER_OVERFLOW") {
    return { status: 431, code: "BAD_REQUEST", message: "the request is not valid HTTP" };
  }
  return { status: 400, code: "BAD_REQUEST", message: "the request is not valid HTTP" };
}

export type BuildAppOptions = {
  deps: Services;
  /** Fastify's logger option: pino options, or false to log nothing (tests). */
  logger?: boolean | Record<string, unknown>;
};

/** Builds the whole HTTP application. It never listens: main.ts (or a test) decides that. */
export async function buildApp({ deps, logger = false }: BuildAppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger:
      logger === false
        ? false
        : {
            ...(typeof logger === "object" ? logger : {}),
            // Secrets travel in headers and bodies; neither is logged, and these paths are redacted in case.
            redact: ["req.headers.authorization", "req.headers.cookie"],
            // A failed query's error carries its parameters (key hashes, ciphertexts): logged without them.
            serializers: { err: serializeError },
          },
    // Each route sets its own (rpc.ts); this bounds the routes that are not RPCs.
    bodyLimit: BULK_BODY_LIMIT,
    genReqId: () => newId("req"),
    requestIdHeader: false,
    // A request that still reaches a closing server on a kept-alive connection is served (with `Connection: close`),
    // not answered 503 outside the envelope, which a load balancer cannot retry for a POST.
    return503OnClosing: false,
    forceCloseConnections: "idle",
    routerOptions: { ignoreTrailingSlash: false },
    // Whose X-Forwarded-For gives request.ip (the caller's address for IP allow-lists): nobody's unless configured.
    trustProxy: deps.config.trustProxy,
    ...httpServerOptions(deps.config),
    // Node reports requests its HTTP parser rejects (bad header bytes, ...) and clients too slow to send theirs
    // here, before any route: answered in the envelope too, wherever HTTP still allows an answer.
    clientErrorHandler: (err, socket) => {
      const response = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
      // A reset connection, or an answer already begun on it: writing now would corrupt what the client reads.
      if (!socket.writable || response?.headersSent) return socket.destroy(err);
      const { status, code, message } = clientErrorAnswer(err as NodeJS.ErrnoException);
      const requestId = newId("req");
      const body = JSON.stringify(errorEnvelope(code, message, requestId, origin()));
      socket.end(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
          `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `Unkey-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
      );
    },
  });
  // Beyond this, Node closes a new connection at once: memory and file descriptors stay bounded.
  app.server.maxConnections = deps.config.http.maxConnections;
  // When it closes: idle connections are closed, a request still arriving is served within the slow-client bounds,
  // the same on every Node version (Node 26.4 began to drop requests on the wire but unread).
  drainOnClose(app.server, deps.config.http);

  // The origin of error.docs links. Never the Host header: any client could make the link point at a site of its
  // choosing. Without KEYHAVEN_PUBLIC_URL it is the address this server listens on (the configured one until then).
  const origin = () => deps.config.publicUrl ?? listeningOrigin(app.server.address(), deps.config);

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) => {
    try {
      // A route may name fields whose text is only looked up (v2's lookupOnly): NUL there is a "not found", not a 400.
      const lookupOnly = (req.routeOptions.config as { lookupOnly?: readonly string[] } | undefined)?.lookupOnly;
      done(null, parseJsonBody(body as string, lookupOnly));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  app.addContentTypeParser("*", (req, _payload, done) => {
    done(new ApiError("BAD_REQUEST", `Content-Type must be application/json, got ${req.headers["content-type"] ?? "none"}`), undefined);
  });

  // Hooks are callback-style, not async: an async hook costs every request a promise and a turn of the microtask
  // queue (issue 13 §3, the CPU of each call).
  app.addHook("onRequest", (req, reply, done) => {
    reply.header("Unkey-Request-Id", req.id);
    done();
  });
  // Once shutting down, every answer ends its connection, also those of requests that started before: a kept-alive
  // connection would wait for the client (a load balancer's idle timeout, a minute) before the process can exit.
  let closing = false;
  app.addHook("preClose", (done) => {
    closing = true;
    done();
  });
  app.addHook("onSend", (req, reply, payload, done) => {
    if (closing) reply.header("Connection", "close");
    noteAnswer(req.raw.socket);
    done(null, payload);
  });
  // The body parser refuses these in JSON; query strings get the same rule, for every GET route at once.
  app.addHook("preValidation", (req, _reply, done) => {
    for (const [name, value] of Object.entries((req.query ?? {}) as Record<string, unknown>)) {
      for (const v of Array.isArray(value) ? value : [value]) {
        if (typeof v === "string" && (v.includes("\u0000") || !v.isWellFormed())) {
          return done(new ApiError("BAD_REQUEST", `${name}: must not contain the NUL character or unpaired surrogates`));
        }
      }
    }
    done();
  });

  const sendError = (req: FastifyRequest, code: ErrorCode, message: string, fields?: ErrorFields) =>
    errorEnvelope(code, message, req.id, origin(), fields);

  app.setErrorHandler((err: FastifyError, req, reply) => {
    // v2 requests are answered in v2's error model, worded by its adapter (wire/v2).
    if (isV2Path(req.url)) return answerV2Error(err, req, reply);
    // The core throws domain errors; here, and only here, they become v1's codes and statuses (apiErrorOf).
    const answered = err instanceof DomainError ? apiErrorOf(err) : err;
    if (answered instanceof ApiError) {
      return reply.code(answered.status).send(sendError(req, answered.code, answered.message, answered.fields));
    }
    if (hasZodFastifySchemaValidationErrors(err)) {
      // v1 answered with the first issue only.
      const first = err.validation[0];
      const path = first ? first.instancePath.replace(/^\//, "").replaceAll("/", ".") : "";
      const params = (first?.params as { params?: unknown } | undefined)?.params;
      // A bulk route's body is an array: the first step of the path is the index of the key refused.
      const index = Array.isArray(req.body) ? /^\/(\d+)(?:\/|$)/.exec(first?.instancePath ?? "")?.[1] : undefined;
      const fields = index === undefined ? undefined : { keyIndex: Number(index) };
      return reply.code(400).send(sendError(req, "BAD_REQUEST", issueText(path, first?.message ?? "invalid input", params), fields));
    }
    if (err.statusCode === 413) {
      return reply
        .code(413)
        .send(sendError(req, "PAYLOAD_TOO_LARGE", `Request body is larger than ${req.routeOptions.bodyLimit ?? BULK_BODY_LIMIT} bytes`));
    }
    if (!isResponseSerializationError(err) && err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      // Fastify's own client errors (bad content length, unsupported media type, ...).
      const code: ErrorCode = err.statusCode === 404 ? "NOT_FOUND" : err.statusCode === 405 ? "METHOD_NOT_ALLOWED" : "BAD_REQUEST";
      return reply.code(err.statusCode === 404 || err.statusCode === 405 ? err.statusCode : 400).send(sendError(req, code, err.message));
    }
    // PostgreSQL or Redis could not serve: logged once per change of state by the store or the limiter.
    const unavailable = findDependencyFailure(err);
    if (unavailable) {
      return reply.code(503).send(sendError(req, "SERVICE_UNAVAILABLE", unavailable.publicMessage));
    }
    req.log.error({ err }, "unhandled error");
    return reply.code(500).send(sendError(req, "INTERNAL_SERVER_ERROR", "internal server error"));
  });

  const knownPaths = new Set(rpcs.map((r) => r.path));
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0] ?? "";
    if (isV2Path(path)) {
      return answerV2NotFound(
        req,
        reply,
        v2Rpcs.filter((r) => r.path === path).map((r) => r.method),
      );
    }
    if (knownPaths.has(path as `/v1/${string}`)) {
      const allowed = rpcs.filter((r) => r.path === path).map((r) => r.method);
      return reply
        .code(405)
        .header("Allow", allowed.join(", "))
        .send(sendError(req, "METHOD_NOT_ALLOWED", `${req.method} is not allowed on ${path}; use ${allowed.join(" or ")}`));
    }
    return reply.code(404).send(sendError(req, "NOT_FOUND", `no route ${req.method} ${path}`));
  });

  // Both watch routes as they are added (metrics instruments each, swagger documents each): before the routes.
  // Changes of state of PostgreSQL and Redis ("unreachable", "reachable again") go to this app's log.
  deps.store.state.useLogger(app.log);
  deps.ratelimiter.state?.useLogger(app.log);
  registerMetrics(app, deps);
  await registerOpenApi(app, deps.config, rpcs, [v2OpenApi(v2Rpcs)]);
  for (const rpc of rpcs) registerRpc(app, deps, rpc);
  for (const rpc of v2Rpcs) registerV2Rpc(app, deps, rpc);
  registerErrorReference(app);
  await app.ready();
  return app;
}

/** `http://<address>:<port>` of a listening socket, or of HOST and PORT before listen (and for app.inject). */
export function listeningOrigin(address: string | AddressInfo | null, config: Pick<Config, "host" | "port">): string {
  const { host, port } = address !== null && typeof address === "object" ? { host: address.address, port: address.port } : config;
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}
