import type net from "node:net";

/** How long a connect may go unanswered before a probe checks whether PostgreSQL answers others. */
export const RECONNECT_WAIT_MS = 500;

// What a client sends first to ask for TLS (length 8, code 80877103). PostgreSQL (and PgBouncer) answer it with one
// byte, 'S' or 'N', before any authentication; PostgreSQL logs no complaint when the client then hangs up (only the
// connection itself, with log_connections on).
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 4, 210, 22, 47]);

/** Dials a new TCP connection to PostgreSQL, as the pool's connections are dialled (a host, a port or a path). */
export type Dial = () => net.Socket;

/**
 * Connects into a black hole (issue 34 §6): when the network drops packets, or PostgreSQL is frozen, a connect is
 * answered by nobody and only DATABASE_CONNECT_TIMEOUT_MS (3 s by default) ends it. Every pool connection the outage
 * made dial again is such a connect, and once PostgreSQL answers again every request still waits behind them, since
 * the pool opens no more connections than it has: serving resumed 2.2–2.7 s after PostgreSQL answered, not on the
 * first request.
 *
 * The pool's sockets report here from when they are dialled until PostgreSQL's first byte on them. While one has
 * gone unanswered for RECONNECT_WAIT_MS, a probe (a connection of its own, outside the pool: a TLS request, answered
 * with one byte) is dialled every RECONNECT_WAIT_MS; once one is answered, or once a later pool socket is, PostgreSQL
 * answers connects again, and every pool socket dialled before it and unanswered for RECONNECT_WAIT_MS is lost in the
 * black hole: it is destroyed, and the pool dials again at once for what waited on it. Nothing is cut on a timer alone: on a slow
 * network a connect that is merely slow is answered before any connect dialled after it.
 */
export class ConnectWatch {
  /** Pool sockets not yet answered, with when they were dialled. */
  private readonly unanswered = new Map<net.Socket, number>();
  private timer: NodeJS.Timeout | undefined;
  private probe: net.Socket | undefined;
  private closed = false;
  /** How many unanswered pool sockets were found lost and destroyed (for tests and logs). */
  lost = 0;

  constructor(
    private readonly dial: Dial,
    private readonly waitMs = RECONNECT_WAIT_MS,
  ) {}

  /** A pool socket just dialled. */
  track(socket: net.Socket): void {
    const dialled = performance.now();
    this.unanswered.set(socket, dialled);
    socket.once("data", () => {
      if (this.unanswered.delete(socket)) this.answered(dialled);
    });
    socket.once("close", () => {
      this.unanswered.delete(socket);
    });
    this.schedule();
  }

  /** Stops probing (the store closes). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.probe?.destroy();
  }

  /**
   * PostgreSQL answered a connect dialled at `dialled`: those dialled before it, still unanswered and waiting for
   * RECONNECT_WAIT_MS already, are lost (the wait spares connects of the same moment answered in another order).
   */
  private answered(dialled: number) {
    const now = performance.now();
    for (const [socket, at] of this.unanswered) {
      if (at > dialled || now - at < this.waitMs) continue;
      this.unanswered.delete(socket);
      this.lost++;
      socket.destroy();
    }
  }

  private schedule() {
    if (this.timer || this.closed || this.unanswered.size === 0) return;
    this.timer = setTimeout(() => this.tick(), this.waitMs);
    this.timer.unref();
  }

  private tick() {
    this.timer = undefined;
    if (this.closed || this.unanswered.size === 0) return this.stopProbe();
    const oldest = Math.min(...this.unanswered.values());
    if (performance.now() - oldest >= this.waitMs) this.startProbe();
    this.schedule();
  }

  /** One probe at a time: one still unanswered after RECONNECT_WAIT_MS is replaced, as it may be lost too. */
  private startProbe() {
    this.stopProbe();
    let socket: net.Socket;
    try {
      socket = this.dial();
    } catch {
      return;
    }
    this.probe = socket;
    const dialled = performance.now();
    socket.on("error", () => {});
    socket.once("connect", () => socket.write(SSL_REQUEST));
    socket.once("data", () => {
      socket.destroy();
      if (this.probe === socket) this.probe = undefined;
      this.answered(dialled);
    });
    socket.once("close", () => {
      if (this.probe === socket) this.probe = undefined;
    });
  }

  private stopProbe() {
    this.probe?.destroy();
    this.probe = undefined;
  }
}
