/**
 * bench/lib.ts's load generator: with `bodies`, each request carries one of them chosen at random (the peer
 * benchmark spreads its load over 200 keys this way), and without, every request carries `body`.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync } from "node:fs";
import { type ChildServer, cpuPerRequest, cpuSecondsOf, httpCall, loadJsonPost, median, medianCpu, post } from "../bench/lib.js";

let server: http.Server;
let url: string;
/** Bodies received, per path: each test loads its own path, so a late request of another test does not count. */
const seen = new Map<string, Map<string, number>>();
const bodiesAt = (path: string) => seen.get(path) ?? new Map<string, number>();

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString("utf8");
    });
    req.on("end", () => {
      const atPath = bodiesAt(req.url ?? "");
      atPath.set(body, (atPath.get(body) ?? 0) + 1);
      seen.set(req.url ?? "", atPath);
      if (req.url === "/who") {
        // What `post` sent, and from which local port (the same port twice: one kept-alive connection).
        const who = {
          authorization: req.headers.authorization,
          contentType: req.headers["content-type"],
          port: req.socket.remotePort,
          body,
        };
        return res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify(who));
      }
      if (req.url === "/text") return res.writeHead(502, { "content-type": "text/plain" }).end("bad gateway");
      res.writeHead(200, { "content-type": "application/json" }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("loadJsonPost", () => {
  it("sends one of `bodies` at random with each request, and only those", async () => {
    const bodies = ['{"key":"a"}', '{"key":"b"}', '{"key":"c"}'];
    const load = await loadJsonPost({ url: `${url}/random`, body: '{"key":"fixed"}', bodies, connections: 2, seconds: 1 });
    expect(load.result.non2xx).toBe(0);
    const received = bodiesAt("/random");
    expect([...received.keys()].sort()).toEqual([...bodies].sort());
    // Each body about a third of the time: far from a fixed order's all-or-nothing, with room for chance.
    const total = [...received.values()].reduce((a, b) => a + b, 0);
    for (const body of bodies) expect(received.get(body)! / total).toBeGreaterThan(0.15);
  });

  it("sends `body` with every request when no `bodies` are given", async () => {
    const load = await loadJsonPost({
      url: `${url}/fixed`,
      body: '{"key":"fixed"}',
      connections: 2,
      seconds: 1,
      check: (b) => b === '{"key":"fixed"}',
    });
    expect(load.result.mismatches).toBe(0);
    expect([...bodiesAt("/fixed").keys()]).toEqual(['{"key":"fixed"}']);
  });
});

describe.skipIf(!existsSync("/proc/self/stat"))("cpuSecondsOf", () => {
  it("reads a process's and its main thread's CPU time from /proc, as this process's own clock counts it", () => {
    const process0 = cpuSecondsOf(process.pid);
    const thread0 = cpuSecondsOf(process.pid, process.pid);
    const used0 = process.cpuUsage();
    // Work until this process's own clock counts 300 ms of CPU (user and system), however long that takes.
    let spin = 0;
    for (;;) {
      for (let i = 0; i < 100_000; i++) spin = (spin + i) % 7919;
      const used = process.cpuUsage(used0);
      if (used.user + used.system >= 300_000) break;
    }
    expect(spin).toBeGreaterThanOrEqual(0);
    // /proc counts in clock ticks (10 ms): at least 250 ms of the 300 this thread spent show in both (the test files
    // run in forks, vitest.config.ts: this is the process's main thread).
    expect(cpuSecondsOf(process.pid)! - process0!).toBeGreaterThanOrEqual(0.25);
    expect(cpuSecondsOf(process.pid, process.pid)! - thread0!).toBeGreaterThanOrEqual(0.25);
  });

  it("is undefined for a process that does not exist", () => {
    expect(cpuSecondsOf(2 ** 30)).toBeUndefined();
    expect(cpuSecondsOf(process.pid, 2 ** 30)).toBeUndefined();
  });
});

describe("cpuPerRequest", () => {
  it("divides the CPU between two snapshots by the requests, and the thread's by the seconds for how busy it was", () => {
    const before = {
      thread: 10,
      process: 12,
      backends: new Map([
        [101, 5],
        [102, 7],
      ]),
    };
    // 2,000 requests in 4 s: the thread used 2 s, the process 2.5 s; backend 101 used 0.5 s, 102 ended, 103 started (0.1 s).
    const after = {
      thread: 12,
      process: 14.5,
      backends: new Map([
        [101, 5.5],
        [103, 0.1],
      ]),
    };
    expect(cpuPerRequest(before, after, 2000, 4)).toEqual({ threadUs: 1000, threadBusy: 0.5, processUs: 1250, postgresUs: 300 });
  });

  it("leaves PostgreSQL out without backends, and is undefined without /proc's readings or without requests", () => {
    expect(cpuPerRequest({ thread: 1, process: 1 }, { thread: 2, process: 2 }, 1000, 1)).toEqual({
      threadUs: 1000,
      threadBusy: 1,
      processUs: 1000,
    });
    expect(cpuPerRequest({}, { thread: 2, process: 2 }, 1000, 1)).toBeUndefined();
    expect(cpuPerRequest({ thread: 1, process: 1 }, { thread: 2, process: 2 }, 0, 1)).toBeUndefined();
  });
});

describe("medianCpu", () => {
  it("takes each figure's median over the measurements, and leaves out a figure one of them lacks", () => {
    const cpu = (threadUs: number, postgresUs?: number) => ({ threadUs, threadBusy: threadUs / 100, processUs: threadUs + 1, postgresUs });
    expect(medianCpu([cpu(40, 5), cpu(60, 7), cpu(50, 6)])).toEqual({ threadUs: 50, threadBusy: 0.5, processUs: 51, postgresUs: 6 });
    expect(medianCpu([cpu(40, 5), cpu(60)])).toEqual({ threadUs: 50, threadBusy: 0.5, processUs: 51 });
    expect(medianCpu([cpu(40), undefined])).toEqual({});
    expect(medianCpu([])).toEqual({});
  });
});

describe("median", () => {
  it("is the middle value, or the mean of the two middle ones, whatever the order; NaN for none", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([0.71, 1.2, 1.13])).toBe(1.13);
    expect(median([])).toBeNaN();
    const values = [5, 4];
    median(values);
    expect(values).toEqual([5, 4]);
  });
});

describe("post", () => {
  it("sends the body with the root key, answers the status and the parsed body, on one kept-alive connection", async () => {
    const server = { url } as ChildServer;
    const first = await post(server, "root_abc", "/who", '{"name":"a"}');
    const second = await post(server, "root_abc", "/who", '{"name":"b"}');
    expect(first).toEqual({
      status: 201,
      json: { authorization: "Bearer root_abc", contentType: "application/json", port: expect.any(Number), body: '{"name":"a"}' },
    });
    expect((second.json as { body: string }).body).toBe('{"name":"b"}');
    expect((second.json as { port: number }).port).toBe((first.json as { port: number }).port);
  });

  it("answers a GET without a body (httpCall, as bench:admin-cpu calls)", async () => {
    expect(await httpCall(`${url}/text`, { method: "GET" })).toEqual({ status: 502, text: "bad gateway" });
  });

  it("answers the text of a body that is not JSON", async () => {
    expect(await post({ url } as ChildServer, "root_abc", "/text", "{}")).toEqual({ status: 502, json: "bad gateway" });
  });
});
