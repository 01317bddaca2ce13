import type { Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** The client timeouts of config.http, in milliseconds (docs/operations.md, "Slow clients"). */
export type ClientTimeouts = { headersTimeoutMs: number; requestTimeoutMs: number; keepAliveTimeoutMs: number };

/**
 * How often Node checks the header and request timeouts (30 s by default, which would let a 10 s timeout run to
 * 40 s), and how often a shutdown looks at the connections still open: a tenth of the shorter timeout, 25 ms to 1 s.
 */
export function checkIntervalMs({ headersTimeoutMs, requestTimeoutMs }: ClientTimeouts): number {
  return Math.min(1000, Math.max(25, Math.floor(Math.min(headersTimeoutMs, requestTimeoutMs) / 10)));
}

/** How long a shutdown waits for the first bytes of a connection accepted but silent so far: they may be on the wire. */
export function newConnectionGraceMs({ headersTimeoutMs }: ClientTimeouts): number {
  return Math.min(1000, headersTimeoutMs);
}

const ANSWERED = Symbol("keyhaven.answered");
const BUSY_SINCE = Symbol("keyhaven.busySince");

type Tracked = Socket & {
  /** socket.bytesRead and the time when its last answer was sent: a request has begun since if more has arrived. */
  [ANSWERED]?: { bytesRead: number; at: number };
  /** When a shutdown's sweep first saw a request arriving on it (since its last answer). */
  [BUSY_SINCE]?: number;
  /** Node's: the answer being written on this connection, if any (its own closeIdleConnections reads it too). */
  _httpMessage?: ServerResponse | null;
};

/**
 * When the shutdown first saw the request now arriving on `socket`: no earlier than it began, so no client gets
 * less than the slow-client bounds (one begun before the shutdown gets them again from the shutdown's start).
 */
function busySince(socket: Tracked, now: number): number {
  const seen = socket[BUSY_SINCE];
  if (seen !== undefined && seen >= (socket[ANSWERED]?.at ?? Number.NEGATIVE_INFINITY)) return seen;
  socket[BUSY_SINCE] = now;
  return now;
}

/** Records that an answer goes out on `socket` now (app.ts's onSend hook, for every answer Fastify sends). */
export function noteAnswer(socket: Socket): void {
  (socket as Tracked)[ANSWERED] = { bytesRead: socket.bytesRead, at: performance.now() };
}

/**
 * Gives Node's HTTP server one rule for the connections still open when it closes, the same on every Node version.
 *
 * `server.close()` calls `closeIdleConnections()`. Up to Node 26.3 that left a connection accepted but not yet
 * parsed alone (and nothing bounded it afterwards: Node stops checking its timeouts once closing, so a client that
 * never sent, or sent half a request, held the process open); since Node 26.4 (nodejs/node#63470) it destroys such
 * a connection at once, also when its request is already on the wire, unread: the client got no answer at all
 * (test/http.sockets.test.ts, "requests that arrive while the server shuts down"). Here, from the first call on,
 * every connection is looked at (first after a whole turn of the event loop, then at every check interval) until
 * it is gone:
 * - idle between requests (it was answered, nothing arrived since, no answer pending): closed, as Node does;
 * - accepted and silent: given `newConnectionGraceMs` from the shutdown's start for its first bytes, then closed;
 * - a request begun but its head incomplete, or its body incomplete: served if it arrives within the slow-client
 *   bounds (KEYHAVEN_HEADERS_TIMEOUT_MS, KEYHAVEN_REQUEST_TIMEOUT_MS, counted from when the shutdown first saw it),
 *   else answered as Node answers a timeout (`clientError` with ERR_HTTP_REQUEST_TIMEOUT: app.ts's 408);
 * - a request received, its answer pending: left to finish (the request's own deadlines bound it); the answer
 *   carries `Connection: close` (app.ts), so Node ends the connection after it.
 * Installed on the server Fastify made (not a serverFactory, which would stop Fastify from also listening on the
 * other addresses of a host name such as `localhost`).
 */
export function drainOnClose(server: Server, timeouts: ClientTimeouts): void {
  const open = new Set<Tracked>();
  let drainStart: number | undefined;
  let drainTimer: NodeJS.Timeout | undefined;
  server.on("connection", (socket: Tracked) => {
    open.add(socket);
    socket.once("close", () => open.delete(socket));
  });
  server.once("close", () => clearInterval(drainTimer));

  /** What Node does when a request misses its timeout: a `clientError` (app.ts answers 408), else a reset. */
  const timedOut = (socket: Socket) => {
    const err = Object.assign(new Error("the request was not received in time"), { code: "ERR_HTTP_REQUEST_TIMEOUT" });
    socket.on("error", () => {});
    if (!server.emit("clientError", err, socket)) socket.destroy();
  };

  const sweep = () => {
    const now = performance.now();
    const sinceDrain = now - (drainStart ?? now);
    for (const socket of open) {
      if (socket.destroyed) continue;
      const answered = socket[ANSWERED];
      const response = socket._httpMessage;
      if (response && !response.writableFinished) {
        if (!response.req.complete && now - busySince(socket, now) >= timeouts.requestTimeoutMs) timedOut(socket);
      } else if (socket.bytesRead !== (answered?.bytesRead ?? 0)) {
        if (now - busySince(socket, now) >= timeouts.headersTimeoutMs) timedOut(socket);
      } else if (answered || sinceDrain >= newConnectionGraceMs(timeouts)) {
        socket.destroy();
      }
    }
  };

  // An own property, which Node's close() calls (as it calls the method it shadows).
  server.closeIdleConnections = () => {
    if (drainStart !== undefined) return;
    drainStart = performance.now();
    // The first look after a whole turn of the event loop, so that what this machine has already received is read:
    // a request sent on a connection just before is seen begun, not taken for idle.
    setImmediate(() => setImmediate(sweep));
    drainTimer = setInterval(sweep, checkIntervalMs(timeouts)).unref();
  };
}
