import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One request a receiver got: its headers and its raw body, as a webhook consumer would verify them. */
export type Received = { headers: IncomingHttpHeaders; body: string; path: string };

/**
 * A real HTTP server on 127.0.0.1 that records every request and answers each with what `answer` says (default
 * 204), for the webhook tests: keyhaven's worker sends to it over a real socket.
 */
export class WebhookReceiver {
  readonly received: Received[] = [];
  /** The status of the next answers, in order; once spent, `status`. */
  readonly statuses: number[] = [];
  status = 204;
  /** Holds every answer until released (a slow receiver). */
  hold: Promise<void> | undefined;
  /**
   * Requests received and not answered yet (nor given up by their sender), and the most there ever were at once. A
   * request counts from its last byte until just before its answer is written: within the time its sender holds it,
   * so `maxOpen` never counts one the sender had already finished with.
   */
  open = 0;
  maxOpen = 0;
  private server: Server | undefined;
  url = "";

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", async () => {
        this.received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), path: req.url ?? "" });
        let done = false;
        const finish = () => {
          if (done) return;
          done = true;
          this.open--;
        };
        this.open++;
        this.maxOpen = Math.max(this.maxOpen, this.open);
        res.on("close", finish);
        if (this.hold) await this.hold;
        finish();
        res.statusCode = this.statuses.shift() ?? this.status;
        res.end(res.statusCode >= 400 ? "receiver says no" : "");
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
    return this;
  }

  /** The requests of message `id` (the `webhook-id` header). */
  of(id: string): Received[] {
    return this.received.filter((r) => r.headers["webhook-id"] === id);
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
