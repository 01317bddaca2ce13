/**
 * A scripted console user for the benchmarks: signs in to a keyhaven child's console with a root key (as a browser
 * does: the sign-in form, its session cookie, the console's own Origin) and then opens pages, one after another.
 * Each page's `Server-Timing: page;dur=…` (the page's own time in keyhaven: its core calls and the rendering) and
 * its round trip are recorded.
 */
import { type ChildServer, httpCall, type LatencySummary, sleep, summarizeLatencies } from "./lib.js";

export type ConsoleSession = {
  /** GETs a console page (a path under /console); answers its status, the page's server time and round trip in ms. */
  open(path: string): Promise<{ status: number; serverMs: number; roundTripMs: number; html: string }>;
};

/** Signs in with `rootKey`; throws when the console refuses. */
export async function signInToConsole(server: ChildServer, rootKey: string): Promise<ConsoleSession> {
  const origin = new URL(server.url).origin;
  const body = new URLSearchParams({ secret: rootKey, next: "/console/" }).toString();
  const signIn = await rawCall(`${server.url}/console/sign-in`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin },
    body,
  });
  const cookie = /^((?:__Host-)?keyhaven_session=[^;]+)/.exec(signIn.setCookie ?? "")?.[1];
  if (signIn.status !== 303 || cookie === undefined) throw new Error(`console sign-in answered ${signIn.status}`);
  return {
    async open(path) {
      const started = performance.now();
      const res = await rawCall(`${server.url}/console${path}`, { method: "GET", headers: { cookie } });
      const roundTripMs = performance.now() - started;
      const serverMs = Number(/page;dur=([\d.]+)/.exec(res.serverTiming ?? "")?.[1] ?? Number.NaN);
      return { status: res.status, serverMs, roundTripMs, html: res.text };
    },
  };
}

/** httpCall with the two answer headers the console session needs. */
async function rawCall(
  url: string,
  opts: { method: "GET" | "POST"; headers: Record<string, string>; body?: string },
): Promise<{ status: number; text: string; setCookie: string | undefined; serverTiming: string | undefined }> {
  const res = await httpCall(url, { ...opts, withHeaders: true });
  const header = (name: string) => {
    const v = res.headers?.[name];
    return Array.isArray(v) ? v.join(", ") : v;
  };
  return { status: res.status, text: res.text, setCookie: header("set-cookie"), serverTiming: header("server-timing") };
}

/**
 * A console user browsing beside a measurement: opens `paths` in turn, pausing `pauseMs` after each (a person
 * reads a page; 0 browses back to back), until stopped. Answers what it saw.
 */
export function browseConsole(session: ConsoleSession, paths: readonly string[], pauseMs: number) {
  let running = true;
  const serverMs: number[] = [];
  let failures = 0;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const path = paths[i % paths.length]!;
      try {
        const page = await session.open(path);
        if (page.status === 200) serverMs.push(page.serverMs);
        else failures++;
      } catch {
        failures++;
      }
      if (pauseMs > 0 && running) await sleep(pauseMs);
    }
  })();
  return {
    async stop(): Promise<{ pages: number; failures: number; serverMs: LatencySummary | undefined }> {
      running = false;
      await loop;
      return { pages: serverMs.length, failures, serverMs: serverMs.length > 0 ? summarizeLatencies(serverMs) : undefined };
    },
  };
}
