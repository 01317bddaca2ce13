import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness } from "./helper.js";

let h: Harness;
let port: number;
beforeAll(async () => {
  h = await createHarness();
  const url = await h.app.listen({ port: 0, host: "127.0.0.1" });
  port = Number(new URL(url).port);
});
afterAll(() => h.close());

function rawRequest(text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(text));
    let data = "";
    socket.on("data", (d) => (data += d.toString()));
    socket.on("end", () => resolve(data));
    socket.on("error", reject);
  });
}

describe("requests the HTTP parser rejects", () => {
  it("are answered with the error envelope and a request id, not Fastify's default body", async () => {
    const res = await rawRequest(
      "POST /v1/apis.createApi HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\u0001b\r\nContent-Length: 2\r\n\r\n{}",
    );
    expect(res).toMatch(/^HTTP\/1.1 400 /);
    expect(res).toMatch(/Unkey-Request-Id: req_/);
    const body = JSON.parse(res.slice(res.indexOf("\r\n\r\n") + 4));
    expect(body.error).toMatchObject({ code: "BAD_REQUEST", message: "the request is not valid HTTP" });
    expect(body.error.docs).toMatch(/\/docs\/errors\/BAD_REQUEST$/);
  });

  it("keeps serving after a malformed request", async () => {
    await rawRequest("GARBAGE\r\n\r\n");
    const ok = await fetch(`http://127.0.0.1:${port}/v1/liveness`);
    expect(ok.status).toBe(200);
  });
});

type RawConnection = { socket: Socket; received(): string; closed: Promise<number> };

/** A raw TCP connection to `port`; `closed` resolves, with the milliseconds since connecting, once the server closes it. */
async function openConnection(port: number): Promise<RawConnection> {
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  const start = performance.now();
  let data = "";
  socket.setEncoding("utf8").on("data", (d: string) => (data += d));
  // A connection the server resets (rather than ends) counts as closed too.
  socket.on("error", () => {});
  const closed = new Promise<number>((resolve) => socket.once("close", () => resolve(performance.now() - start)));
  return { socket, received: () => data, closed };
}

function parseResponse(raw: string): { head: string; body: any } {
  const [head, ...rest] = raw.split("\r\n\r\n");
  return { head: head ?? "", body: JSON.parse(rest.join("\r\n\r\n")) };
}

function expectTimeoutAnswer(raw: string) {
  const { head, body } = parseResponse(raw);
  expect(head).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  expect(head).toMatch(/\r\nConnection: close(\r\n|$)/);
  const requestId = head.match(/\r\nUnkey-Request-Id: (req_\w+)/)?.[1];
  expect(requestId).toBeDefined();
  expect(body.error).toMatchObject({
    code: "REQUEST_TIMEOUT",
    requestId,
    message: "the request was not received in time; send it again, whole",
  });
  expect(body.error.docs).toMatch(/\/docs\/errors\/REQUEST_TIMEOUT$/);
}

// Generous: the timeouts below are 300 and 600 ms; a loaded machine may take a few seconds more to close.
const CLOSE_WITHIN_MS = 10_000;

describe("slow clients (headers within 300 ms, the whole request within 600 ms, idle keep-alive 300 ms)", () => {
  let slow: Harness;
  let slowPort: number;
  beforeAll(async () => {
    slow = await createHarness({
      KEYHAVEN_HEADERS_TIMEOUT_MS: "300",
      KEYHAVEN_REQUEST_TIMEOUT_MS: "600",
      KEYHAVEN_KEEP_ALIVE_TIMEOUT_MS: "300",
    });
    slowPort = Number(new URL(await slow.app.listen({ port: 0, host: "127.0.0.1" })).port);
  });
  afterAll(() => slow.close());

  it("answers a connection that sends part of its headers with 408 in the envelope, and closes it", async () => {
    const c = await openConnection(slowPort);
    c.socket.write("POST /v1/apis.createApi HTTP/1.1\r\nHost: x\r\n");
    const ms = await c.closed;
    console.log(`partial headers: closed after ${Math.round(ms)} ms`);
    expect(ms).toBeLessThan(CLOSE_WITHIN_MS);
    expectTimeoutAnswer(c.received());
  });

  it("answers a connection that sends nothing with 408, and closes it", async () => {
    const c = await openConnection(slowPort);
    const ms = await c.closed;
    console.log(`silent connection: closed after ${Math.round(ms)} ms`);
    expect(ms).toBeLessThan(CLOSE_WITHIN_MS);
    expectTimeoutAnswer(c.received());
  });

  it("answers a request whose body stops half-way with 408, and writes nothing of it", async () => {
    const tenant = await slow.tenant();
    const name = `half-sent-${Date.now()}`;
    const body = JSON.stringify({ name });
    const c = await openConnection(slowPort);
    c.socket.write(
      `POST /v1/apis.createApi HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tenant.rootKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 5)}`,
    );
    const ms = await c.closed;
    console.log(`headers and half a body: closed after ${Math.round(ms)} ms`);
    expect(ms).toBeLessThan(CLOSE_WITHIN_MS);
    expectTimeoutAnswer(c.received());
    expect(await slow.sql(`select 1 from apis where name = '${name}'`)).toEqual([]);
  });

  it("answers a body that keeps trickling in past the request timeout with 408", async () => {
    const c = await openConnection(slowPort);
    c.socket.write("POST /v1/apis.createApi HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n");
    // A byte every 50 ms: never idle, never done.
    const trickle = setInterval(() => c.socket.writable && c.socket.write(" "), 50);
    try {
      const ms = await c.closed;
      console.log(`trickling body: closed after ${Math.round(ms)} ms`);
      expect(ms).toBeLessThan(CLOSE_WITHIN_MS);
    } finally {
      clearInterval(trickle);
    }
    expectTimeoutAnswer(c.received());
  });

  it("closes a keep-alive connection left idle after an answer, without another answer", async () => {
    const c = await openConnection(slowPort);
    c.socket.write("GET /v1/liveness HTTP/1.1\r\nHost: x\r\n\r\n");
    await expect.poll(() => c.received(), { timeout: CLOSE_WITHIN_MS }).toMatch(/^HTTP\/1\.1 200 [\s\S]*\r\n\r\n\{.*\}$/);
    const answered = c.received();
    const ms = await c.closed;
    console.log(`idle keep-alive: closed ${Math.round(ms)} ms after connecting`);
    expect(ms).toBeLessThan(CLOSE_WITHIN_MS);
    expect(c.received()).toBe(answered);
    expect(answered).toMatch(/\r\nKeep-Alive: timeout=0\r\n|\r\nConnection: keep-alive\r\n/i);
  });

  it("still answers a client that sends its request in time", async () => {
    const res = await fetch(`http://127.0.0.1:${slowPort}/v1/liveness`);
    expect(res.status).toBe(200);
  });
});

describe("the connection cap (KEYHAVEN_MAX_CONNECTIONS=2)", () => {
  let capped: Harness;
  let cappedPort: number;
  beforeAll(async () => {
    capped = await createHarness({ KEYHAVEN_MAX_CONNECTIONS: "2" });
    cappedPort = Number(new URL(await capped.app.listen({ port: 0, host: "127.0.0.1" })).port);
  });
  afterAll(() => capped.close());

  const liveness = "GET /v1/liveness HTTP/1.1\r\nHost: x\r\n\r\n";
  const answers = (c: RawConnection) => c.received().match(/HTTP\/1\.1 200 /g)?.length ?? 0;

  it("closes a connection beyond the cap at once and keeps serving the ones it holds", async () => {
    const held = [await openConnection(cappedPort), await openConnection(cappedPort)];
    // Once each has been answered, the server has accepted both.
    for (const c of held) {
      c.socket.write(liveness);
      await expect.poll(() => answers(c), { timeout: CLOSE_WITHIN_MS }).toBe(1);
    }
    const extra = await openConnection(cappedPort);
    extra.socket.write(liveness);
    const ms = await extra.closed;
    console.log(`connection beyond the cap: closed after ${Math.round(ms)} ms`);
    expect(ms).toBeLessThan(CLOSE_WITHIN_MS);
    expect(extra.received()).toBe("");

    for (const c of held) {
      c.socket.write(liveness);
      await expect.poll(() => answers(c), { timeout: CLOSE_WITHIN_MS }).toBe(2);
      c.socket.destroy();
      await c.closed;
    }
    // Below the cap again: new connections are served.
    await expect
      .poll(async () => (await fetch(`http://127.0.0.1:${cappedPort}/v1/liveness`)).status, { timeout: CLOSE_WITHIN_MS })
      .toBe(200);
  });
});

describe("requests that arrive while the server shuts down", () => {
  it("are served, with a request id and Connection: close, never Fastify's bare 503", async () => {
    const closing = await createHarness();
    try {
      const closingPort = Number(new URL(await closing.app.listen({ port: 0, host: "127.0.0.1" })).port);
      const c = await openConnection(closingPort);
      // The request has begun (so the connection is not idle) when the shutdown starts, and ends after it.
      c.socket.write("GET /v1/liveness HTTP/1.1\r\nHost: x\r\n");
      const connections = () => new Promise<number>((resolve) => closing.app.server.getConnections((_, n) => resolve(n)));
      await expect.poll(connections).toBe(1);
      const closed = closing.app.close();
      await expect.poll(() => closing.app.server.listening).toBe(false);
      c.socket.write("\r\n");
      await c.closed;
      await closed;
      const { head, body } = parseResponse(c.received());
      expect(head).toMatch(/^HTTP\/1\.1 200 /);
      expect(head).toMatch(/\r\nconnection: close(\r\n|$)/i);
      expect(head).toMatch(/\r\nunkey-request-id: req_\w+/i);
      expect(body).toMatchObject({ status: expect.any(String) });
    } finally {
      await closing.close();
    }
  });

  it("are bounded: a silent connection is closed, half a request answered 408, a begun one on a kept-alive connection served", async () => {
    const closing = await createHarness({
      KEYHAVEN_HEADERS_TIMEOUT_MS: "300",
      KEYHAVEN_REQUEST_TIMEOUT_MS: "600",
      KEYHAVEN_KEEP_ALIVE_TIMEOUT_MS: "300",
    });
    try {
      const closingPort = Number(new URL(await closing.app.listen({ port: 0, host: "127.0.0.1" })).port);
      const liveness = "GET /v1/liveness HTTP/1.1\r\nHost: x\r\n\r\n";
      const [silent, half, idle, again] = [
        await openConnection(closingPort),
        await openConnection(closingPort),
        await openConnection(closingPort),
        await openConnection(closingPort),
      ];
      for (const c of [idle, again]) {
        c.socket.write(liveness);
        await expect.poll(() => c.received(), { timeout: CLOSE_WITHIN_MS }).toMatch(/^HTTP\/1\.1 200 [\s\S]*\}$/);
      }
      const answered = idle.received();
      half.socket.write("POST /v1/apis.createApi HTTP/1.1\r\nHost: x\r\n");
      // The next request has begun on a kept-alive connection: it is not idle.
      again.socket.write("GET /v1/liveness HTTP/1.1\r\n");
      const connections = () => new Promise<number>((resolve) => closing.app.server.getConnections((_, n) => resolve(n)));
      await expect.poll(connections).toBe(4);
      const started = performance.now();
      const closed = closing.app.close().then(() => performance.now() - started);
      await expect.poll(() => closing.app.server.listening).toBe(false);
      again.socket.write("Host: x\r\n\r\n");
      // Before, on Node 20 the silent connection and on every Node the half request held the server open for ever.
      const ms = await Promise.race([closed, new Promise<string>((r) => setTimeout(() => r("still open"), CLOSE_WITHIN_MS))]);
      console.log(`shutdown with a silent connection and half a request: closed after ${typeof ms === "number" ? Math.round(ms) : ms} ms`);
      expect(ms).toBeTypeOf("number");
      await Promise.all([silent.closed, half.closed, idle.closed, again.closed]);
      expect(silent.received()).toBe("");
      expectTimeoutAnswer(half.received());
      expect(idle.received()).toBe(answered);
      const [, second] = again.received().split(/(?=HTTP\/1\.1 )/);
      expect(second).toMatch(/^HTTP\/1\.1 200 [\s\S]*\r\nconnection: close\r\n/i);
    } finally {
      await closing.close();
    }
  });
});
