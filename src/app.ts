import type { AddressInfo } from "node:net";
import { STATUS_CODES } from "node:http";
import Fastify, { type FastifyError, type FastifyInstance } from "fastify";
import { serializerCompiler, validatorCompiler } from "fastify-type-provider-zod";
import type { Config } from "./config.js";
import type { Services } from "./services.js";
import { type ErrorCode, errorEnvelope } from "./http/errors.js";
import { registerErrorReference } from "./wire/v1/errorReference.js";
import { checkIntervalMs, drainOnClose, noteAnswer } from "./http/server.js";
import { registerMetrics } from "./http/metrics.js";
import { acceptJsonBodies, answerInEnvelope, answerNoRoute } from "./http/surface.js";
import { registerOpenApi } from "./wire/v1/openapi.js";
import { newId } from "./ids.js";
import { serializeError, serializeRequest } from "./log.js";
import { rpcs } from "./wire/v1/routes.js";
import { v1Surface } from "./wire/v1/surface.js";
import { v2OpenApi } from "./wire/v2/openapi.js";
import { v2Rpcs } from "./wire/v2/routes.js";
import { v2Surface } from "./wire/v2/surface.js";
import { consoleSurface } from "./console/surface.js";
import { portalSurface } from "./portal/surface.js";

/** The largest body of a request to none of the surfaces' routes (the host's routes are GETs): 1 MiB. */
const HOST_BODY_LIMIT = 1024 * 1024;

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
            // A URL's query may carry a credential (the portal page's `?code=`): logged with those values redacted.
            serializers: { err: serializeError, req: serializeRequest },
          },
    // Each route sets its own (rpc.ts); this bounds the routes that are not RPCs.
    bodyLimit: HOST_BODY_LIMIT,
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

  // Hooks are callback-style, not async: an async hook costs every request a promise and a turn of the microtask
  // queue (issue 13 §3, the CPU of each call). Added here, they apply to every surface.
  app.addHook("onRequest", (req, reply, done) => {
    reply.header("Unkey-Request-Id", req.id);
    done();
  });
  closeConnectionsOnClose(app);

  // The host's own routes (/openapi.json, /docs, /metrics) and paths outside every surface's prefix: the shared
  // envelope. Each surface sets its own parsers, error handler and 404 in its plugin.
  acceptJsonBodies(app, { lookupOnly: false });
  app.setErrorHandler((err: FastifyError, req, reply) => answerInEnvelope(err, req, reply, origin, HOST_BODY_LIMIT));
  app.setNotFoundHandler((req, reply) => answerNoRoute(req, reply, origin));

  // Both watch routes as they are added (metrics instruments each, swagger documents each): before the routes.
  // Changes of state of PostgreSQL and Redis ("unreachable", "reachable again") go to this app's log.
  deps.store.state.useLogger(app.log);
  deps.ratelimiter.state?.useLogger(app.log);
  registerMetrics(app, deps);
  await registerOpenApi(app, deps.config, rpcs, [v2OpenApi(v2Rpcs)]);
  await app.register(v1Surface, { prefix: "/v1", deps, origin });
  await app.register(v2Surface, { prefix: "/v2", deps, origin });
  // The customer portal page, at the URL portal.createSession answers (always: it needs no setting of its own).
  await app.register(portalSurface, { prefix: "/portal", deps });
  // The web console, here unless it has its own listener (buildConsoleApp) or is turned off.
  if (deps.config.console.enabled && deps.config.console.port === undefined) await registerConsole(app, deps);
  registerErrorReference(app);
  await app.ready();
  return app;
}

/**
 * What drainOnClose needs of a listener's answers, for the API's and the console's own alike: each answer is noted
 * (a connection answered and silent since is idle, closed at once on shutdown; without the note it is taken for a
 * request still arriving, held for the headers timeout and then answered 408), and once shutting down every answer
 * ends its connection, also those of requests that started before: a kept-alive connection would wait for the client
 * (a load balancer's idle timeout, a minute) before the process can exit.
 */
function closeConnectionsOnClose(app: FastifyInstance): void {
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
}

/** The console under /console, and `/` leading there when nothing else is served at the root of its listener. */
async function registerConsole(app: FastifyInstance, deps: Services): Promise<void> {
  await app.register(consoleSurface, { prefix: "/console", deps });
}

/**
 * The console on a listener of its own (KEYHAVEN_CONSOLE_PORT), so an operator can route it apart from the API: the
 * same surface under the same /console prefix, `/` redirecting there, and the API's Node timeouts and client bounds.
 */
export async function buildConsoleApp({ deps, logger = false }: BuildAppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger:
      logger === false
        ? false
        : {
            ...(typeof logger === "object" ? logger : {}),
            redact: ["req.headers.cookie"],
            serializers: { err: serializeError, req: serializeRequest },
          },
    bodyLimit: HOST_BODY_LIMIT,
    genReqId: () => newId("req"),
    requestIdHeader: false,
    forceCloseConnections: "idle",
    trustProxy: deps.config.trustProxy,
    ...httpServerOptions(deps.config),
  });
  app.server.maxConnections = deps.config.http.maxConnections;
  drainOnClose(app.server, deps.config.http);
  closeConnectionsOnClose(app);
  await registerConsole(app, deps);
  app.get("/", (_req, reply) => reply.code(302).header("Location", "/console/").send(""));
  app.setNotFoundHandler((_req, reply) =>
    reply.code(404).type("text/plain; charset=utf-8").send("Not found: the console is under /console/"),
  );
  await app.ready();
  return app;
}

/** `http://<address>:<port>` of a listening socket, or of HOST and PORT before listen (and for app.inject). */
export function listeningOrigin(address: string | AddressInfo | null, config: Pick<Config, "host" | "port">): string {
  const { host, port } = address !== null && typeof address === "object" ? { host: address.address, port: address.port } : config;
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}
