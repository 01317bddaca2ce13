import net from "node:net";

/**
 * The one `freePort` and the one `waitFor` of the tests: every helper and test file uses these rather than a copy of
 * its own. A test waits for the event it needs (a row written, a line printed, a status answered), never for a fixed
 * time; a fixed delay is left only where the delay is the scenario, with a comment saying so.
 */

/** A loopback port nothing listens on: taken from the OS, then released (for a server the test starts on it). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

type Truthy<T> = Exclude<T, false | 0 | "" | null | undefined>;

export type WaitOptions = {
  /** How long before giving up (default 15 s: generous on a loaded 2-core machine, since a pass returns at once). */
  timeoutMs?: number;
  /** How often `check` runs (default 50 ms). */
  intervalMs?: number;
  /** Added to the time-out's message, e.g. a process's output. */
  detail?: () => string;
};

/**
 * Resolves with the first truthy value of `check`, tried again `intervalMs` after each falsy one; fails after
 * `timeoutMs`, naming `what`. A `check` that throws fails the wait at once (e.g. the process it waits on exited).
 * Plain timers, not vitest's `vi.waitUntil`: the benchmarks (bench/) start their redis-server through this module
 * outside vitest. In a test that asserts a value, `expect.poll` says the same more briefly.
 */
export async function waitFor<T>(what: string, check: () => T | Promise<T>, options: WaitOptions = {}): Promise<Truthy<T>> {
  const { timeoutMs = 15_000, intervalMs = 50, detail } = options;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as Truthy<T>;
    if (performance.now() >= deadline) throw new Error(`not ${what} within ${timeoutMs} ms${detail ? `:\n${detail()}` : ""}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
