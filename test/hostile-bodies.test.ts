/**
 * No request may hold the process: every POST route of /openapi.json gets the most expensive bodies we know, each
 * filled up to that route's own body limit (learnt from its 413 answer), without credentials and with a root key
 * that holds no permission (a wrong token on operator routes). Meanwhile the event-loop delay is measured
 * (monitorEventLoopDelay) and GET /v1/liveness is probed over another connection. Every answer must be a 4xx in the
 * envelope, nothing may change in the database, and the bounds are generous so that a 2-core machine running
 * several test suites keeps them; the real figures are printed. Before the fix, one such body blocked the loop for
 * 29 s (50-64 s on a loaded machine); after it, a few milliseconds of CPU (about 60-100 ms for the costliest 1 MiB
 * bodies of the import routes, which is JSON parsing itself).
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness } from "./helper.js";
import { tableSnapshot } from "./table-snapshot.js";

/** Event-loop delay and liveness latency allowed, in ms: the costliest body takes ~100 ms of CPU, ×20 for load. */
const BOUND_MS = 2000;

const h: Harness = await createHarness();
const doc = JSON.parse((await h.app.inject({ method: "GET", url: "/openapi.json" })).body);
type Operation = { path: string; admin: boolean; schema: any };
const operations: Operation[] = Object.entries<any>(doc.paths)
  .filter(([, item]) => item.post)
  .map(([path, item]) => ({
    path,
    admin: (item.post.security ?? []).some((s: Record<string, unknown>) => "adminToken" in s),
    schema: item.post.requestBody?.content?.["application/json"]?.schema,
  }))
  .filter((op) => !process.env.HOSTILE_ONLY || process.env.HOSTILE_ONLY.split(",").some((p) => op.path.includes(p)));

let base = "";
let noPermKey = "";
const figures: string[] = [];

beforeAll(async () => {
  base = await h.app.listen({ host: "127.0.0.1", port: 0 });
  const t = await h.tenant();
  noPermKey = await h.rootKey(t.workspaceId, []);
});
afterAll(async () => {
  console.log(`hostile bodies (max event-loop delay, slowest liveness probe, slowest request):\n${figures.join("\n")}`);
  await h.close();
});

/** `prefix` + `item,item,…` + `suffix`, as long as fits in `bytes`. */
function fill(prefix: string, item: string, suffix: string, bytes: number): string {
  const n = Math.max(1, Math.floor((bytes - prefix.length - suffix.length + 1) / (item.length + 1)));
  return prefix + Array(n).fill(item).join(",") + suffix;
}

/** Many properties `"k<i>":0`, as long as fits in `bytes`. */
function manyKeys(prefix: string, suffix: string, bytes: number): string {
  const parts: string[] = [];
  let size = prefix.length + suffix.length;
  for (let i = 0; size < bytes - 16; i++) {
    const p = `"k${i}":0`;
    parts.push(p);
    size += p.length + 1;
  }
  return `${prefix}{${parts.join(",")}}${suffix}`;
}

/** Permission queries that cost the most to reject, filling `bytes`. */
function permissionQueries(bytes: number): Array<[string, string]> {
  const wrap = (q: string) => `{"key":"sk_hostile_0123456789","authorization":{"permissions":${q}}}`;
  const room = bytes - wrap("").length;
  return [
    ["or of {}", wrap(fill('{"or":[', "{}", "]}", room))],
    ["or of permissions", wrap(fill('{"or":[', '"p"', "]}", room))],
    ["and of empty ors", wrap(fill('{"and":[', '{"or":[]}', "]}", room))],
    ["or of ors of {}", wrap(fill('{"or":[', '{"or":[{},{},{},{}]}', "]}", room))],
    ["nested ors with {} siblings", wrap(`${'{"or":[{},'.repeat(60)}"p"${"]}".repeat(60)}`)],
    ["or of nested ors", wrap(fill('{"or":[', `${'{"or":[{},'.repeat(8)}1${"]}".repeat(8)}`, "]}", room))],
  ];
}

/** The worst bodies for a route, each close to `limit` bytes. */
function hostileBodies(op: Operation, limit: number): Array<[string, string]> {
  const size = limit - 64;
  const out: Array<[string, string]> = [];
  const isArray = op.schema?.type === "array";
  const props = Object.keys((isArray ? op.schema.items : op.schema)?.properties ?? {});
  const wrap = (prop: string, value: string) => (isArray ? `[{"${prop}":${value}}]` : `{"${prop}":${value}}`);
  for (const prop of props) {
    const room = size - wrap(prop, "").length;
    out.push([`${prop}: array of {}`, wrap(prop, fill("[", "{}", "]", room))]);
    out.push([`${prop}: array of strings`, wrap(prop, fill("[", '"x"', "]", room))]);
    out.push([`${prop}: array of arrays`, wrap(prop, fill("[", "[[]]", "]", room))]);
    out.push([`${prop}: object of many keys`, manyKeys(isArray ? `[{"${prop}":` : `{"${prop}":`, isArray ? "}]" : "}", size)]);
    out.push([`${prop}: long string`, wrap(prop, `"${"x".repeat(room - 2)}"`)]);
  }
  out.push(["body: many unknown properties", manyKeys("", "", size)]);
  out.push(["body: array of {}", fill("[", "{}", "]", size)]);
  out.push(["body: array of objects with many wrong fields", fill("[", `{${props.map((p) => `"${p}":[]`).join(",")}}`, "]", size)]);
  if (op.path === "/v1/keys.verifyKey") out.push(...permissionQueries(size));
  return out;
}

async function post(path: string, body: string, authorization?: string) {
  const started = performance.now();
  const res = await fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...(authorization && { authorization }) },
    body,
  });
  const text = await res.text();
  return { status: res.status, text, ms: performance.now() - started };
}

/** Probes liveness over its own connections until stopped: the slowest answer, in ms. */
function probeLiveness() {
  let stopped = false;
  let slowest = 0;
  let probes = 0;
  const done = (async () => {
    while (!stopped) {
      const started = performance.now();
      const res = await fetch(`${base}/v1/liveness`);
      await res.text();
      slowest = Math.max(slowest, performance.now() - started);
      probes++;
      // A real delay: the probe's pace (one liveness request every few ms for the whole barrage), not a wait.
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await done;
      return { slowest, probes };
    },
  };
}

describe("hostile bodies: no request blocks the event loop or liveness, whatever its body", () => {
  it("covers every POST operation of /openapi.json", () => {
    expect(operations.length).toBeGreaterThan(process.env.HOSTILE_ONLY ? 0 : 30);
  });

  for (const op of operations) {
    it(`POST ${op.path}`, async () => {
      const tooBig = await post(op.path, JSON.stringify({ padding: "p".repeat(2 * 1024 * 1024) }));
      expect(tooBig.status).toBe(413);
      // v1 says `larger than N bytes` in error.message; v2 `maximum allowed size of N bytes` in error.detail.
      const refusal = JSON.parse(tooBig.text).error;
      const limit = Number(/(?:larger than|maximum allowed size of) (\d+) bytes/.exec(refusal.message ?? refusal.detail)?.[1]);
      expect(limit).toBeGreaterThan(1000);

      const bodies = hostileBodies(op, limit);
      const auths = [undefined, `Bearer ${op.admin ? "wrong-admin-token-0123456789" : noPermKey}`];
      const before = await tableSnapshot(h);
      const failures: string[] = [];
      let slowestRequest = { ms: 0, label: "" };
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      const probe = probeLiveness();
      for (const [label, body] of bodies) {
        expect(Buffer.byteLength(body), label).toBeLessThanOrEqual(limit);
        for (const authorization of auths) {
          const res = await post(op.path, body, authorization);
          const tag = `${label} (${authorization ? "no permission" : "no credentials"}, ${body.length} bytes)`;
          if (res.ms > slowestRequest.ms) slowestRequest = { ms: res.ms, label: tag };
          const error = JSON.parse(res.text).error;
          if (res.status < 400 || res.status >= 500 || !(error?.message ?? error?.detail)) {
            failures.push(`${tag} -> ${res.status} ${res.text.slice(0, 200)}`);
          }
        }
      }
      const liveness = await probe.stop();
      delay.disable();
      const maxDelayMs = delay.max / 1e6;
      figures.push(
        `  ${op.path} (limit ${limit} B, ${bodies.length * auths.length} requests): loop ${maxDelayMs.toFixed(1)} ms, ` +
          `liveness ${liveness.slowest.toFixed(1)} ms over ${liveness.probes} probes, slowest ${slowestRequest.ms.toFixed(1)} ms [${slowestRequest.label}]`,
      );
      expect(failures, failures.join("\n")).toEqual([]);
      expect(await tableSnapshot(h)).toEqual(before);
      expect(maxDelayMs, `event loop blocked; slowest request: ${slowestRequest.label}`).toBeLessThan(BOUND_MS);
      expect(liveness.slowest, "liveness answered late").toBeLessThan(BOUND_MS);
    }, 120_000);
  }
});
