import net from "node:net";
import { freePort } from "./wait.js";

type Link = { client: net.Socket; upstream: net.Socket | undefined; muted?: boolean; lost?: boolean };

/**
 * A TCP proxy on 127.0.0.1 (a random port) in front of a real server, that the test can break the way outages do:
 * - freeze(): nothing is forwarded any more, but every connection stays open and new ones are accepted (a server
 *   stopped with SIGSTOP, or a network that drops packets);
 * - cut(): every connection is closed and new ones are refused (a server killed, a host down);
 * - muteAnswers(): on the connections open now, what the client sends still reaches the server, but nothing the
 *   server answers comes back (a return path that died, or a server that stopped right after doing the work); new
 *   connections work normally. What a statement's sender cannot tell from a lost statement: it may have been applied;
 * - blackHole(): as freeze(), but what is connected while it lasts is lost for good: those connections are never
 *   forwarded, even after restore() (a network that drops packets, where a connect started during the outage is
 *   answered by nobody: its SYN, or here its startup message, is never answered, and only the client's own
 *   deadline ends it);
 * - restore(): forwarding again (a frozen connection resumes where it was; after a cut, new connections work).
 */
export class FaultProxy {
  private server: net.Server | undefined;
  private readonly links = new Set<Link>();
  private frozen = false;
  private blackHoled = false;

  private constructor(
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {}

  static async start(target: { host: string; port: number }): Promise<FaultProxy> {
    const proxy = new FaultProxy(await freePort(), target);
    await proxy.listen();
    return proxy;
  }

  /** `url` with its host and port replaced by this proxy's. */
  urlFor(url: string): string {
    const u = new URL(url);
    u.hostname = "127.0.0.1";
    u.port = String(this.port);
    return u.toString();
  }

  freeze(): void {
    this.frozen = true;
    for (const link of this.links) this.unlink(link);
  }

  blackHole(): void {
    this.freeze();
    this.blackHoled = true;
  }

  /** How many connections were accepted during a black hole (and are lost). */
  get lostConnections(): number {
    let n = 0;
    for (const link of this.links) if (link.lost) n++;
    return n;
  }

  muteAnswers(): void {
    for (const link of this.links) {
      if (!link.upstream || link.muted) continue;
      link.muted = true;
      link.upstream.unpipe(link.client);
      link.upstream.pause();
    }
  }

  async cut(): Promise<void> {
    this.frozen = false;
    this.blackHoled = false;
    for (const { client, upstream } of this.links) {
      client.destroy();
      upstream?.destroy();
    }
    this.links.clear();
    await this.closeServer();
  }

  async restore(): Promise<void> {
    this.frozen = false;
    this.blackHoled = false;
    if (!this.server) await this.listen();
    for (const link of this.links) if (!link.lost) this.link(link);
  }

  async close(): Promise<void> {
    await this.cut();
  }

  private async listen() {
    this.server = net.createServer((client) => {
      const link: Link = { client, upstream: undefined, lost: this.blackHoled };
      this.links.add(link);
      client.on("error", () => {});
      client.on("close", () => {
        link.upstream?.destroy();
        this.links.delete(link);
      });
      client.pause();
      if (!this.frozen) this.link(link);
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, "127.0.0.1", resolve));
  }

  private link(link: Link) {
    if (link.muted && link.upstream) {
      // Only the answers were held back: the client's side still flows.
      link.muted = false;
      link.upstream.pipe(link.client);
      return;
    }
    if (!link.upstream) {
      const upstream = net.connect(this.target.port, this.target.host);
      upstream.on("error", () => {});
      upstream.on("close", () => link.client.destroy());
      link.upstream = upstream;
    }
    link.client.pipe(link.upstream);
    link.upstream.pipe(link.client);
  }

  private unlink(link: Link) {
    link.muted = false;
    link.client.unpipe();
    link.upstream?.unpipe();
    link.client.pause();
    link.upstream?.pause();
  }

  private closeServer(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    return new Promise((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}
