import { Writable } from "node:stream";

/** The app's log lines (JSON), to count what it logs: give `logger` as createHarness's logger option. */
export function logCapture() {
  const lines: { msg: string; level: number }[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split("\n")) if (line.trim()) lines.push(JSON.parse(line));
      done();
    },
  });
  return {
    logger: { level: "info", stream },
    count: (msg: string) => lines.filter((l) => l.msg === msg).length,
    clear: () => void lines.splice(0),
    lines,
  };
}
