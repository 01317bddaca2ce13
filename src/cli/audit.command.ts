import { once } from "node:events";
import { parseArgs } from "node:util";
import { loadCliEnv } from "../config.js";
import { AUDIT_SETTLE_MS, MAX_AUDIT_PAGE } from "../core/audit/audit.limits.js";
import { type CallResult, DEFAULT_URL, parseBaseUrl, postJson } from "./http.js";
import { fmt } from "./import/import.progress.js";

export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

const DEFAULT_TIMEOUT_S = 30;
const DEFAULT_ATTEMPTS = 5;
/** Without a terminal, a progress line every this many entries. */
const PROGRESS_EVERY = 1000;

export const AUDIT_HELP = `Usage: keyhaven audit export --since <time> [--until <time>] [--workspace <workspaceId>] [options]

Streams the audit log of a running server to stdout as NDJSON (one entry per line, as POST
/v2/keyhaven.listAuditLogs answers it), oldest first, for a SIEM to append (docs/audit.md).

  --since <time>           Entries written at or after this time (required).
  --until <time>           Entries written before this time (exclusive). Default: now. Entries of the last
                           ${AUDIT_SETTLE_MS / 1000} seconds are left out (they may still be committing): a later export reads them.
                           A time is an ISO 8601 date (2026-12-01, midnight UTC), a date-time with Z or an offset
                           (2026-12-01T08:00:00Z, 2026-12-01T09:00+01:00), or unix milliseconds (1796112000000).
  --workspace <id>         Only this workspace's entries. The operator token reads every workspace's without it;
                           a root key reads its own workspace's only.
  --admin-token <token>    Operator token. Default: the KEYHAVEN_ADMIN_TOKEN environment variable.
  --root-key <key>         A root key with audit.*.read_logs (or *) instead. Default: KEYHAVEN_ROOT_KEY, used when
                           no admin token is given. (Prefer the environment: a command-line argument is visible to
                           other users of the machine.)
  --url <url>              The keyhaven server. Default: ${DEFAULT_URL}
  --timeout <seconds>      Per-request timeout, 1–3600. Default: ${DEFAULT_TIMEOUT_S}.
  --attempts <n>           Attempts per request on connection errors, timeouts, 429 and 502–504, 1–100
                           (backoff 250 ms doubling to 5 s). Default: ${DEFAULT_ATTEMPTS}.
  --quiet                  No progress on stderr. (Progress is shown only when stdout is not a terminal.)
  -h, --help               Show this help.

Exit codes: 0 every entry in the range written, 1 refused by the server (its message is shown) or the server
unavailable after the attempts (the entries written so far are complete lines, oldest first), 2 usage error.
`;

const OPTIONS = {
  since: { type: "string" },
  until: { type: "string" },
  workspace: { type: "string" },
  "admin-token": { type: "string" },
  "root-key": { type: "string" },
  url: { type: "string" },
  timeout: { type: "string" },
  attempts: { type: "string" },
  quiet: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

class UsageError extends Error {}

/**
 * A time of --since/--until in unix ms: ISO 8601 date (UTC midnight), date-time with Z or an offset (a time without
 * one would be read in this machine's zone, which a SIEM's range must not depend on), or unix milliseconds.
 */
export function parseTime(option: string, value: string): number {
  const text = value.trim();
  const bad = (why: string) =>
    new UsageError(
      `--${option}: ${why}, got ${JSON.stringify(value)} (an ISO 8601 date like 2026-12-01, a date-time with Z or an offset like 2026-12-01T08:00:00Z, or unix milliseconds)`,
    );
  if (/^\d{1,16}$/.test(text)) {
    const ms = Number(text);
    if (!Number.isSafeInteger(ms)) throw bad("too large");
    return ms;
  }
  const date = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  const dateTime = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?$/i.exec(text);
  const parts = date ?? dateTime;
  if (!parts) throw bad("not a time");
  if (dateTime && dateTime[7] === undefined) throw bad("a date-time needs Z or an offset (+01:00)");
  const [y, mo, d] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  const day = new Date(Date.UTC(y, mo - 1, d));
  if (day.getUTCFullYear() !== y || day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d) throw bad("no such date");
  if (dateTime && (Number(dateTime[4]) > 23 || Number(dateTime[5]) > 59 || Number(dateTime[6] ?? 0) > 59)) throw bad("no such time");
  const ms = Date.parse(date ? `${text}T00:00:00Z` : text);
  if (!Number.isFinite(ms) || ms < 0) throw bad(ms < 0 ? "before 1970" : "not a time");
  return ms;
}

function intOption(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return Number(value);
}

function isHeaderSafe(value: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is this regex's purpose
  return !/[\u0000-\u0008\u000a-\u001f\u007f]|[^\u0000-\u00ff]/.test(value);
}

type Plan = {
  baseUrl: string;
  token: string;
  body: { order: "asc"; limit: number; since: number; until?: number; workspaceId?: string };
  timeoutMs: number;
  attempts: number;
  progress: boolean;
  quiet: boolean;
};

function plan(values: ReturnType<typeof parse>["values"], positionals: string[]): Plan {
  const [sub, ...rest] = positionals;
  if (sub !== "export") {
    throw new UsageError(sub === undefined ? "a command is required: export (see keyhaven audit --help)" : `unknown audit command: ${sub}`);
  }
  if (rest.length > 0) throw new UsageError(`export takes no argument, got ${JSON.stringify(rest[0])}`);
  if (values.since === undefined) throw new UsageError("--since <time> is required");
  const since = parseTime("since", values.since);
  const until = values.until === undefined ? undefined : parseTime("until", values.until);
  if (until !== undefined && until <= since) throw new UsageError("--until must be after --since");
  const workspaceId = values.workspace?.trim();
  if (values.workspace !== undefined && !workspaceId) throw new UsageError("--workspace: an id is required");
  let baseUrl: string;
  try {
    baseUrl = parseBaseUrl(values.url ?? DEFAULT_URL);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values["admin-token"] !== undefined && values["root-key"] !== undefined) {
    throw new UsageError("pass either --admin-token or --root-key, not both");
  }
  const env = loadCliEnv();
  const token =
    values["admin-token"]?.trim() ||
    values["root-key"]?.trim() ||
    (values["admin-token"] === undefined && values["root-key"] === undefined ? (env.adminToken ?? env.rootKey) : undefined);
  if (!token)
    throw new UsageError("a token is required: set KEYHAVEN_ADMIN_TOKEN or KEYHAVEN_ROOT_KEY, or pass --admin-token or --root-key");
  if (!isHeaderSafe(token)) {
    // Never printed: it is a secret, and a pasted value with a line break may hold more than the token.
    throw new UsageError("the token contains a line break, a control character or a character outside Latin-1 (the value is not shown)");
  }
  return {
    baseUrl,
    token,
    body: { order: "asc", limit: MAX_AUDIT_PAGE, since, ...(until !== undefined && { until }), ...(workspaceId && { workspaceId }) },
    timeoutMs: intOption("timeout", values.timeout, DEFAULT_TIMEOUT_S, 1, 3600) * 1000,
    attempts: intOption("attempts", values.attempts, DEFAULT_ATTEMPTS, 1, 100),
    progress: values.quiet !== true && process.stdout.isTTY !== true,
    quiet: values.quiet === true,
  };
}

const parse = (argv: string[]) => parseArgs({ args: argv, options: OPTIONS, allowPositionals: true });

/** `keyhaven audit …`; returns the exit code. */
export async function auditCommand(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    console.error(`keyhaven audit: ${(err as Error).message}\n\n${AUDIT_HELP}`);
    return EXIT.usage;
  }
  if (parsed.values.help) {
    console.log(AUDIT_HELP);
    return EXIT.ok;
  }
  let p: Plan;
  try {
    p = plan(parsed.values, parsed.positionals);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`keyhaven audit: ${err.message}`);
    return EXIT.usage;
  }
  return exportEntries(p);
}

const RETRIED = new Set([408, 429, 502, 503, 504]);

/** One page, tried up to `attempts` times on what a later attempt can get past (a read: retrying changes nothing). */
async function page(p: Plan, cursor: string | undefined): Promise<CallResult> {
  const body = JSON.stringify({ ...p.body, ...(cursor !== undefined && { cursor }) });
  for (let attempt = 1; ; attempt++) {
    const res = await postJson(p.baseUrl, "/v2/keyhaven.listAuditLogs", p.token, body, p.timeoutMs);
    const transient = res.kind === "network" || (res.kind === "error" && RETRIED.has(res.status));
    if (!transient || attempt >= p.attempts) return res;
    if (!p.quiet) process.stderr.write(`keyhaven audit: ${describe(p, res)}; retrying (attempt ${attempt + 1} of ${p.attempts})\n`);
    const ceiling = Math.min(5000, 250 * 2 ** (attempt - 1));
    const retryAfter = res.kind === "error" ? Math.min(res.retryAfterMs ?? 0, 30_000) : 0;
    await new Promise((resolve) => setTimeout(resolve, Math.max(Math.random() * ceiling, retryAfter)));
  }
}

function describe(p: Plan, res: Exclude<CallResult, { kind: "ok" }>): string {
  return res.kind === "network" ? `${p.baseUrl} did not answer: ${res.message}` : `${res.status} ${res.code}: ${res.message}`;
}

async function exportEntries(p: Plan): Promise<number> {
  let written = 0;
  let shown = 0;
  let cursor: string | undefined;
  // A reader that stops reading (`| head`) ends the export quietly: what it took is complete lines. Any other
  // failure to write (a full disk) is an error.
  let outError: NodeJS.ErrnoException | undefined;
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    outError ??= err;
  });
  const stopped = (): number | undefined => {
    if (outError === undefined) return undefined;
    if (outError.code === "EPIPE") return EXIT.ok;
    console.error(`keyhaven audit: stdout: ${outError.code ?? outError.message}`);
    return EXIT.failed;
  };
  for (;;) {
    const res = await page(p, cursor);
    if (res.kind !== "ok") {
      if (p.progress && written > 0) process.stderr.write(`keyhaven audit: ${fmt(written)} entries written before the failure\n`);
      console.error(`keyhaven audit: ${describe(p, res)}`);
      return EXIT.failed;
    }
    const answer = res.body as { data?: unknown[]; pagination?: { hasMore?: boolean; cursor?: string } } | undefined;
    const next = answer?.pagination?.hasMore === true ? answer.pagination.cursor : undefined;
    // Something else at --url (a proxy's page, another service) must not pass for an empty log, nor loop forever.
    if (!Array.isArray(answer?.data) || (answer.pagination?.hasMore === true && (typeof next !== "string" || next === cursor))) {
      console.error(`keyhaven audit: ${p.baseUrl} did not answer as keyhaven.listAuditLogs does (is --url a keyhaven server?)`);
      return EXIT.failed;
    }
    const entries = answer.data;
    if (entries.length > 0) {
      const text = `${entries.map((e) => JSON.stringify(e)).join("\n")}\n`;
      if (!process.stdout.write(text) && outError === undefined) {
        // once() rejects on an 'error' event: outError has it, and stopped() tells what it means.
        await Promise.race([once(process.stdout, "drain"), once(process.stdout, "close")]).catch(() => {});
      }
      const stop = stopped();
      if (stop !== undefined) return stop;
      written += entries.length;
    }
    if (p.progress && written - shown >= PROGRESS_EVERY) {
      shown = written;
      process.stderr.write(`${fmt(written)} entries\n`);
    }
    if (next === undefined) break;
    cursor = next;
  }
  if (p.progress) process.stderr.write(`${fmt(written)} entries exported\n`);
  return EXIT.ok;
}
