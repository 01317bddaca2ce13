import Fastify, { type FastifyError, type FastifyInstance, type FastifyRequest } from "fastify";
import {
  hasZodFastifySchemaValidationErrors,
  isResponseSerializationError,
  serializerCompiler,
  validatorCompiler,
} from "fastify-type-provider-zod";
import type { Deps } from "./deps.js";
import { ApiError, type ErrorCode, errorEnvelope } from "./errors.js";
import { registerErrorReference } from "./http/error-reference.js";
import { parseJsonBody } from "./http/json-body.js";
import { registerMetrics } from "./http/metrics.js";
import { registerOpenApi } from "./http/openapi.js";
import { newId } from "./ids.js";
import { serializeError } from "./log.js";
import { registerRpc } from "./rpc.js";
import { rpcs } from "./routes.js";

export const BODY_LIMIT_BYTES = 1024 * 1024;

export type BuildAppOptions = {
  deps: Deps;
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
    bodyLimit: BODY_LIMIT_BYTES,
    genReqId: () => newId("req"),
    requestIdHeader: false,
    // A request that still reaches a closing server on a kept-alive connection is served (with `Connection: close`),
    // not answered 503 outside the envelope, which a load balancer cannot retry for a POST.
    return503OnClosing: false,
    forceCloseConnections: "idle",
    routerOptions: { ignoreTrailingSlash: false },
    // Requests Node's HTTP parser rejects (bad header bytes, ...) never reach a route; answer them in the envelope too.
    clientErrorHandler: (err, socket) => {
      if (!socket.writable) return socket.destroy(err);
      const requestId = newId("req");
      const status = (err as { code?: string }).code === "HPE_HEADER_OVERFLOW" ? 431 : 400;
      const body = JSON.stringify(
        errorEnvelope("BAD_REQUEST", "the request is not valid HTTP", requestId, deps.config.publicUrl ?? ""),
      );
      socket.end(
        `HTTP/1.1 ${status} ${status === 431 ? "Request Header Fields Too Large" : "Bad Request"}\r\n` +
          `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `Unkey-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
      );
    },
  });

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_req, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  app.addContentTypeParser("*", (req, _payload, done) => {
    done(
      new ApiError("BAD_REQUEST", `Content-Type must be application/json, got ${req.headers["content-type"] ?? "none"}`),
      undefined,
    );
  });

  app.addHook("onRequest", async (req, reply) => {
    reply.header("Unkey-Request-Id", req.id);
  });
  // Once shutting down, every answer ends its connection, also those of requests that started before: a kept-alive
  // connection would wait for the client (a load balancer's idle timeout, a minute) before the process can exit.
  let closing = false;
  app.addHook("preClose", (done) => {
    closing = true;
    done();
  });
  app.addHook("onSend", (_req, reply, payload, done) => {
    if (closing) reply.header("Connection", "close");
    done(null, payload);
  });
  // The body parser refuses these in JSON; query strings get the same rule, for every GET route at once.
  app.addHook("preValidation", async (req) => {
    for (const [name, value] of Object.entries((req.query ?? {}) as Record<string, unknown>)) {
      for (const v of Array.isArray(value) ? value : [value]) {
        if (typeof v === "string" && (v.includes("\u0000") || !v.isWellFormed())) {
          throw new ApiError("BAD_REQUEST", `${name}: must not contain the NUL character or unpaired surrogates`);
        }
      }
    }
  });

  const origin = (req: FastifyRequest) => deps.config.publicUrl ?? `${req.protocol}://${req.host}`;
  const sendError = (req: FastifyRequest, code: ErrorCode, message: string) =>
    errorEnvelope(code, message, req.id, origin(req));

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof ApiError) {
      return reply.code(err.status).send(sendError(req, err.code, err.message));
    }
    if (hasZodFastifySchemaValidationErrors(err)) {
      const first = err.validation[0];
      const path = first ? first.instancePath.replace(/^\//, "").replaceAll("/", ".") : "";
      return reply.code(400).send(sendError(req, "BAD_REQUEST", `${path}: ${first?.message ?? "invalid input"}`));
    }
    if (err.statusCode === 413) {
      return reply
        .code(413)
        .send(sendError(req, "PAYLOAD_TOO_LARGE", `Request body is larger than ${BODY_LIMIT_BYTES} bytes`));
    }
    if (!isResponseSerializationError(err) && err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      // Fastify's own client errors (bad content length, unsupported media type, ...).
      const code: ErrorCode = err.statusCode === 404 ? "NOT_FOUND" : err.statusCode === 405 ? "METHOD_NOT_ALLOWED" : "BAD_REQUEST";
      return reply.code(err.statusCode === 404 || err.statusCode === 405 ? err.statusCode : 400).send(sendError(req, code, err.message));
    }
    req.log.error({ err }, "unhandled error");
    return reply.code(500).send(sendError(req, "INTERNAL_SERVER_ERROR", "internal server error"));
  });

  const knownPaths = new Set(rpcs.map((r) => r.path));
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0] ?? "";
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
  const metrics = registerMetrics(app, deps);
  await registerOpenApi(app, deps.config, rpcs);
  const appDeps: Deps = { ...deps, metrics };
  for (const rpc of rpcs) registerRpc(app, appDeps, rpc);
  registerErrorReference(app);
  await app.ready();
  return app;
}
