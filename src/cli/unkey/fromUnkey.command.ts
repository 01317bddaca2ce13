/**
 * `keyhaven import --from-unkey` (issue 36 §1): reads the named APIs of a hosted Unkey workspace through Unkey's v2
 * API (unkey.client.ts), with every key, the identities, permissions, roles and the named namespaces' overrides, and
 * - with --dry-run prints what a copy would do (keys verifiable at once, pending, skipped with why); it loads neither
 *   the server nor the store;
 * - without, copies them into a keyhaven through POST /v2/keyhaven.copyFromUnkey (fromUnkey.copy.ts), resumable
 *   through a journal (fromUnkey.journal.ts), and prints a summary;
 * - with --check compares both sides per API (fromUnkey.check.ts).
 */
import { createHash } from "node:crypto";
import { parseArgs } from "node:util";
import { loadCliEnv } from "../../config.js";
import { DEFAULT_URL, isHeaderSafe, parseBaseUrl } from "../http.js";
import { JournalMismatch, lockJournal } from "../import/import.journal.js";
import { duration, fmt, Progress } from "../import/import.progress.js";
import { checkCopy } from "./fromUnkey.check.js";
import { CopyRun, type CopyOutcome, KeyhavenTarget, kindOf } from "./fromUnkey.copy.js";
import { CopyJournal } from "./fromUnkey.journal.js";
import { SECTIONS } from "./fromUnkey.map.js";
import { DEFAULT_UNKEY_URL, parseUnkeyUrl, UnkeyClient, UnkeyDecryptRefused, UnkeyError, type UnkeyPage } from "./unkey.client.js";
import { resolveUnkeyRootKey, UnkeyRootKeyError } from "./unkey.rootKey.js";
import { identityProblems, keyProblems } from "./fromUnkey.problems.js";
import type { UnkeyKey } from "../../unkey/unkey.schemas.js";

const EXIT = { ok: 0, failed: 1, usage: 2, unavailable: 3 } as const;

export const FROM_UNKEY_HELP = `Usage: keyhaven import --from-unkey --api <apiId> [--api <apiId>…] [options]

Copies a hosted Unkey workspace into keyhaven: the named APIs, every key of them, the identities, permissions, roles
and the overrides of the named rate-limit namespaces, ids kept. Read through Unkey's v2 API, written through
keyhaven's POST /v2/keyhaven.copyFromUnkey. A key whose plaintext Unkey returns verifies in keyhaven at once; every
other key is copied pending (all its settings, no hash) and is adopted on first use. Running it again updates what
changed upstream and creates nothing twice.

Options:
  --api <apiId>                   An Unkey API to copy (required, repeatable: Unkey v2 cannot list APIs).
  --ratelimit-namespace <name>    A rate-limit namespace whose overrides to copy (repeatable).
  --unkey-url <url>               Unkey's base URL. Default: ${DEFAULT_UNKEY_URL}
  --unkey-root-key-file <path>    A file holding the Unkey root key. Default: the UNKEY_ROOT_KEY environment
                                  variable. The root key is never taken on the command line, nor printed.
  --url <url>                     The keyhaven server to copy into. Default: ${DEFAULT_URL}
  --root-key <key>                keyhaven root key. Default: the KEYHAVEN_ROOT_KEY environment variable (preferred:
                                  a command-line argument is visible to other users of the machine). Never printed.
  --dry-run                       Read and check everything in Unkey, write nothing, print what would be copied.
  --check                         Write nothing; compare both sides per API: keys upstream vs in keyhaven, pending,
                                  verifiable and adopted, and every field that differs per key (exit 1 if any).
  --journal <path>                Resume journal. Default: .keyhaven-from-unkey-<hash of both URLs>.journal in the
                                  current directory. Re-running the same command resumes a stopped run.
  --batch-size <n>                Records per request to keyhaven, 1–1000. Default: 1000.
  --concurrency <n>               Requests to keyhaven in flight at once, 1–16. Default: 4.
  --attempts <n>                  Attempts per request on transient failures (connection errors, timeouts, 429,
                                  5xx) on either side before the run stops, resumable. Default: 6.
  --timeout <seconds>             Per-request deadline on either side. Default: 60.
  --progress-every <n>            Without a terminal, print a progress line every n batches. Default: 10.
  --quiet                         No progress output; the summary and errors only.
  --json                          The summary (or the dry run's, or the check's) as one JSON object on stdout.
  -h, --help                      Show this help.

Keys: "verifiable now" when Unkey returned the plaintext (decrypt: true; a root key that may not decrypt, or an
API that stores no encrypted keys, is said once on stderr and the keys are read without), "pending" otherwise
(adopted on first use), "skipped" when a field is outside what keyhaven holds (the reason names the field and the
id, never a value).

Exit codes: 0 everything copied (or read, or equal with --check), 1 something was refused or skipped (an unknown
--api, a root key without permission, a record keyhaven cannot hold) or, with --check, something differs, 2 usage
error (nothing read), 3 interrupted, or Unkey or keyhaven unavailable: re-run the same command to resume.
`;

const OPTIONS = {
  "from-unkey": { type: "boolean" },
  api: { type: "string", multiple: true },
  "ratelimit-namespace": { type: "string", multiple: true },
  "unkey-url": { type: "string" },
  "unkey-root-key-file": { type: "string" },
  url: { type: "string" },
  "root-key": { type: "string" },
  "dry-run": { type: "boolean" },
  check: { type: "boolean" },
  journal: { type: "string" },
  "batch-size": { type: "string" },
  concurrency: { type: "string" },
  attempts: { type: "string" },
  timeout: { type: "string" },
  "progress-every": { type: "string" },
  quiet: { type: "boolean" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

type ApiSummary = { id: string; name: string; keys: number; verifiable: number; pending: number; skipped: number };
type Skipped = { kind: "key" | "identity"; id: string; apiId?: string; reasons: string[] };

class UsageError extends Error {}

async function all<T>(pages: AsyncIterable<UnkeyPage<T>>): Promise<T[]> {
  const items: T[] = [];
  for await (const page of pages) items.push(...page.items);
  return items;
}

/** `keyhaven import --from-unkey …`; returns the exit code. */
export async function fromUnkeyCommand(argv: string[]): Promise<number> {
  // Refused before parsing, and never echoed: the value after it is the secret itself.
  if (argv.some((a) => a === "--unkey-root-key" || a.startsWith("--unkey-root-key="))) {
    console.error(
      "keyhaven import --from-unkey: --unkey-root-key is not an option: a command line is visible to other users of the " +
        "machine. Set UNKEY_ROOT_KEY or pass --unkey-root-key-file <path>.",
    );
    return EXIT.usage;
  }
  let values: ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS; allowPositionals: true }>>["values"];
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true }));
  } catch (err) {
    console.error(`keyhaven import --from-unkey: ${(err as Error).message}\n\n${FROM_UNKEY_HELP}`);
    return EXIT.usage;
  }
  if (values.help) {
    console.log(FROM_UNKEY_HELP);
    return EXIT.ok;
  }
  try {
    if (positionals.length > 0) throw new UsageError(`takes no FILE (it reads Unkey), got ${JSON.stringify(positionals[0])}`);
    const apiIds = [...new Set((values.api ?? []).map((a) => a.trim()))];
    if (apiIds.length === 0 || apiIds.includes("")) {
      throw new UsageError("--api <apiId> is required, once per API (Unkey v2 has no route that lists APIs)");
    }
    const namespaces = [...new Set((values["ratelimit-namespace"] ?? []).map((n) => n.trim()))];
    if (namespaces.includes("")) throw new UsageError("--ratelimit-namespace: empty name");
    let baseUrl: string;
    try {
      baseUrl = parseUnkeyUrl(values["unkey-url"] ?? DEFAULT_UNKEY_URL);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    if (values["dry-run"] && values.check) throw new UsageError("--dry-run and --check: choose one (neither writes)");
    let rootKey: string;
    try {
      rootKey = resolveUnkeyRootKey({ file: values["unkey-root-key-file"] });
    } catch (err) {
      if (err instanceof UnkeyRootKeyError) throw new UsageError(err.message);
      throw err;
    }
    const json = values.json === true;
    if (values["dry-run"]) return await dryRun(new UnkeyClient({ rootKey, baseUrl }), baseUrl, apiIds, namespaces, json);

    const batchSize = intOption("batch-size", values["batch-size"], 1000, 1, 1000);
    const concurrency = intOption("concurrency", values.concurrency, 4, 1, 16);
    const attempts = intOption("attempts", values.attempts, 6, 1, 100);
    const timeoutMs = intOption("timeout", values.timeout, 60, 1, 3600) * 1000;
    const every = intOption("progress-every", values["progress-every"], 10, 1, 1_000_000);
    let keyhavenUrl: string;
    try {
      keyhavenUrl = parseBaseUrl(values.url ?? DEFAULT_URL);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    const keyhavenRootKey = values["root-key"]?.trim() || loadCliEnv().rootKey;
    if (!keyhavenRootKey) throw new UsageError("a keyhaven root key is required: set KEYHAVEN_ROOT_KEY or pass --root-key");
    if (!isHeaderSafe(keyhavenRootKey)) {
      throw new UsageError(
        "the keyhaven root key contains a line break, a control character or a character outside Latin-1, so it cannot be " +
          "sent in an HTTP header; check KEYHAVEN_ROOT_KEY or --root-key (the value is not shown)",
      );
    }
    const stopper = new AbortController();
    const quiet = values.quiet === true;
    // Retries and resumption on stderr, unless --quiet (the summary and errors only).
    // Through the progress display once there is one, so that a note never lands in the middle of its line.
    let progress: Progress | undefined;
    const note = (message: string) => {
      if (quiet) return;
      if (progress) progress.note(message);
      else process.stderr.write(`${message}\n`);
    };
    const pageSize = Math.min(100, batchSize);
    const unkey = new UnkeyClient({
      rootKey,
      baseUrl,
      timeoutMs,
      attempts,
      pageSize,
      signal: stopper.signal,
      onRetry: (r) =>
        note(`Unkey ${r.route}: ${r.reason}; attempt ${r.attempt + 1} of ${r.attempts} in ${(r.delayMs / 1000).toFixed(1)} s`),
    });
    const targetOptions = { baseUrl: keyhavenUrl, rootKey: keyhavenRootKey, timeoutMs, attempts, backoffMs: 250 };
    if (values.check) {
      const keyhavenReader = new UnkeyClient({
        rootKey: keyhavenRootKey,
        baseUrl: keyhavenUrl,
        timeoutMs,
        attempts,
        label: "keyhaven",
        signal: stopper.signal,
      });
      const target = new KeyhavenTarget(targetOptions, stopper.signal, note);
      return await checkCopy({ unkey, keyhaven: keyhavenReader, target, apiIds, unkeyUrl: baseUrl, keyhavenUrl, json });
    }
    const journalPath = values.journal ?? defaultJournal(baseUrl, keyhavenUrl);
    const unlock = journalCall(journalPath, () => lockJournal(journalPath));
    let journal: CopyJournal | undefined;
    try {
      journal = journalCall(journalPath, () => CopyJournal.open(journalPath, { unkeyUrl: baseUrl, keyhavenUrl }));
      if (journal.resumedBatches > 0) {
        note(
          `resuming: ${fmt(journal.resumedBatches)} batch${journal.resumedBatches === 1 ? "" : "es"} confirmed by an earlier run are not read again`,
        );
      }
      progress = new Progress(undefined, process.stderr, {
        tty: process.stderr.isTTY === true,
        every,
        enabled: !quiet,
        unit: "records",
      });
      let interrupted: { kind: "interrupted"; message: string } | undefined;
      let signals = 0;
      const onSignal = (signal: NodeJS.Signals) => {
        signals += 1;
        if (signals === 1) {
          console.error(`\n${signal}: finishing the requests in flight, then stopping (again to stop at once)`);
          interrupted = { kind: "interrupted", message: `stopped by ${signal}` };
        } else {
          console.error(`${signal} again: stopping now. Re-run the same command to resume.`);
          stopper.abort();
          process.exit(EXIT.unavailable);
        }
      };
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
      const startedAt = Date.now();
      const run = new CopyRun({
        unkey,
        target: new KeyhavenTarget(targetOptions, stopper.signal, note),
        journal,
        apiIds,
        namespaces,
        batchSize,
        pageSize,
        concurrency,
        progress,
        stopRequested: () => interrupted,
      });
      let outcome: CopyOutcome;
      try {
        outcome = await run.run();
      } catch (err) {
        if (err instanceof UnkeyError) {
          console.error(`keyhaven import --from-unkey: ${err.message}. What was copied before is kept; re-run the same command to resume.`);
          return err.kind === "refused" ? EXIT.failed : EXIT.unavailable;
        }
        throw err;
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
      }
      if (!outcome.stop) journal.finish();
      printDecryptNotes(outcome.decryptRefused);
      printSummary(outcome, { unkeyUrl: baseUrl, keyhavenUrl, json, seconds: (Date.now() - startedAt) / 1000, journal: journalPath });
      if (outcome.stop) {
        console.error(`stopped: ${outcome.stop.message}`);
        if (outcome.stop.kind !== "refused") {
          console.error("resume with the same command: the batches keyhaven confirmed are not sent again");
          return EXIT.unavailable;
        }
        return EXIT.failed;
      }
      return outcome.skipped.length > 0 ? EXIT.failed : EXIT.ok;
    } finally {
      journal?.close();
      unlock();
    }
  } catch (err) {
    if (err instanceof UsageError || err instanceof JournalMismatch) {
      console.error(`keyhaven import --from-unkey: ${err.message}`);
      return EXIT.usage;
    }
    if (err instanceof UnkeyError) {
      // The client's messages never hold the root key (unkey.client.ts redacts them).
      console.error(`keyhaven import --from-unkey: ${err.message}. Nothing was written.`);
      return err.kind === "refused" ? EXIT.failed : EXIT.unavailable;
    }
    throw err;
  }
}

async function dryRun(client: UnkeyClient, baseUrl: string, apiIds: string[], namespaces: string[], json: boolean): Promise<number> {
  const apis: ApiSummary[] = [];
  const skipped: Skipped[] = [];
  // Each refusal of decrypt: true is said once, after the APIs are read, naming every API it concerned.
  const decryptRefused = { forbidden: [] as string[], unavailable: [] as string[] };
  // A root key that may not decrypt may not for any API: asked once, not again for each.
  let decrypt = true;
  for (const apiId of apiIds) {
    const api = await named(`--api ${apiId}`, client.getApi(apiId));
    let keys: UnkeyKey[];
    try {
      keys = decrypt ? await all(client.listKeys(apiId, { decrypt: true })) : await all(client.listKeys(apiId));
    } catch (err) {
      if (!(err instanceof UnkeyDecryptRefused)) throw err;
      if (err.reason === "forbidden") decrypt = false;
      decryptRefused[err.reason].push(apiId);
      keys = await all(client.listKeys(apiId));
    }
    const summary: ApiSummary = { id: api.id, name: api.name, keys: keys.length, verifiable: 0, pending: 0, skipped: 0 };
    for (const key of keys) {
      const reasons = keyProblems(key);
      if (reasons.length > 0) {
        summary.skipped += 1;
        skipped.push({ kind: "key", id: key.keyId, apiId, reasons });
      } else if (key.plaintext !== undefined && key.plaintext !== "") summary.verifiable += 1;
      else summary.pending += 1;
    }
    apis.push(summary);
  }
  printDecryptNotes(decryptRefused);
  const identities = await all(client.listIdentities());
  for (const identity of identities) {
    const reasons = identityProblems(identity, "");
    if (reasons.length > 0) skipped.push({ kind: "identity", id: identity.id, reasons: reasons.map((r) => r.replace(/^\./, "")) });
  }
  const permissions = await all(client.listPermissions());
  const roles = await all(client.listRoles());
  const overrides: { namespace: string; count: number }[] = [];
  for (const namespace of namespaces) {
    overrides.push({ namespace, count: (await named(`--ratelimit-namespace ${namespace}`, all(client.listOverrides(namespace)))).length });
  }

  const sum = (pick: (a: ApiSummary) => number) => apis.reduce((n, a) => n + pick(a), 0);
  const counts = {
    apis: apis.length,
    keys: sum((a) => a.keys),
    keysVerifiableNow: sum((a) => a.verifiable),
    keysPending: sum((a) => a.pending),
    keysSkipped: sum((a) => a.skipped),
    identities: identities.length,
    identitiesSkipped: skipped.filter((s) => s.kind === "identity").length,
    roles: roles.length,
    permissions: permissions.length,
    overrides: overrides.reduce((n, o) => n + o.count, 0),
  };
  if (json) {
    console.log(JSON.stringify({ dryRun: true, unkeyUrl: baseUrl, counts, apis, overrides, skipped, decryptRefused }));
    return EXIT.ok;
  }
  const lines = [
    `Read from ${baseUrl}. Dry run: nothing was written.`,
    `apis:        ${fmt(counts.apis)}`,
    ...apis.map(
      (a) =>
        `  ${a.id} (${a.name}): ${fmt(a.keys)} key${a.keys === 1 ? "" : "s"}: ${fmt(a.verifiable)} verifiable now, ${fmt(a.pending)} pending, ${fmt(a.skipped)} skipped`,
    ),
    `keys:        ${fmt(counts.keys)} (verifiable now: ${fmt(counts.keysVerifiableNow)}, pending: ${fmt(counts.keysPending)}, skipped: ${fmt(counts.keysSkipped)})`,
    `identities:  ${fmt(counts.identities)}${counts.identitiesSkipped > 0 ? ` (skipped: ${fmt(counts.identitiesSkipped)})` : ""}`,
    `roles:       ${fmt(counts.roles)}`,
    `permissions: ${fmt(counts.permissions)}`,
    `overrides:   ${fmt(counts.overrides)}${overrides.length > 0 ? ` (${overrides.map((o) => `${o.namespace}: ${fmt(o.count)}`).join(", ")})` : ""}`,
    ...skipped.map((s) => `skipped ${s.kind} ${s.id}${s.apiId ? ` of ${s.apiId}` : ""}: ${s.reasons.join("; ")}`),
  ];
  console.log(lines.join("\n"));
  return EXIT.ok;
}

function printDecryptNotes(decryptRefused: { forbidden: string[]; unavailable: string[] }): void {
  if (decryptRefused.forbidden.length > 0) {
    console.error(
      "note: the Unkey root key may not decrypt keys (decrypt: true refused with 403): the keys are read without " +
        "their plaintexts, so they will be pending",
    );
  }
  if (decryptRefused.unavailable.length > 0) {
    console.error(
      `note: Unkey cannot decrypt the keys of ${decryptRefused.unavailable.join(", ")} (412: no vault, or the API stores no ` +
        "encrypted keys): they are read without plaintexts, so they will be pending",
    );
  }
}

const LABEL: Record<(typeof SECTIONS)[number], string> = {
  apis: "apis:       ",
  permissions: "permissions:",
  roles: "roles:      ",
  identities: "identities: ",
  keys: "keys:       ",
  overrides: "overrides:  ",
};

function printSummary(
  outcome: CopyOutcome,
  how: { unkeyUrl: string; keyhavenUrl: string; json: boolean; seconds: number; journal: string },
): void {
  const { totals } = outcome;
  if (how.json) {
    console.log(
      JSON.stringify({
        unkeyUrl: how.unkeyUrl,
        keyhavenUrl: how.keyhavenUrl,
        complete: outcome.stop === undefined,
        counts: totals,
        skipped: outcome.skipped.map((s) => ({ kind: kindOf(s.kind), id: s.id, reason: s.reason, by: s.where })),
        resumedBatches: outcome.resumedBatches,
        batches: outcome.batches,
        decryptRefused: outcome.decryptRefused,
        journal: how.journal,
      }),
    );
    return;
  }
  const lines = [`${outcome.stop ? "Stopped copying" : "Copied"} from ${how.unkeyUrl} into ${how.keyhavenUrl}.`];
  for (const section of SECTIONS) {
    const c = totals[section];
    const n = c.created + c.updated + c.unchanged;
    let line = `${LABEL[section]} ${fmt(n)} (created ${fmt(c.created)}, updated ${fmt(c.updated)}, unchanged ${fmt(c.unchanged)}, skipped ${fmt(c.skipped)})`;
    if (section === "keys") line += `: verifiable now ${fmt(totals.verifiable)}, pending ${fmt(totals.pending)}`;
    lines.push(line);
  }
  for (const s of outcome.skipped)
    lines.push(`skipped ${kindOf(s.kind)} ${s.id}${s.where === "keyhaven" ? " (by keyhaven)" : ""}: ${s.reason}`);
  if (outcome.resumedBatches > 0) lines.push(`resumed:     ${fmt(outcome.resumedBatches)} batches confirmed by an earlier run`);
  lines.push(`time:        ${duration(how.seconds)}`);
  console.log(lines.join("\n"));
}

function intOption(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return Number(value);
}

/** The default journal: in the current directory, one per pair of URLs (so two copies never share one). */
function defaultJournal(unkeyUrl: string, keyhavenUrl: string): string {
  const hash = createHash("sha256").update(`${unkeyUrl}\n${keyhavenUrl}`).digest("hex").slice(0, 12);
  return `.keyhaven-from-unkey-${hash}.journal`;
}

/** A journal that cannot be opened or written is a usage error naming its path and the system's code. */
function journalCall<T>(journalPath: string, f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof JournalMismatch) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code) throw new UsageError(`--journal ${journalPath}: cannot use it (${code})`);
    throw err;
  }
}

/** An Unkey refusal of a name the user gave (an unknown API or namespace) says which option named it. */
async function named<T>(option: string, promise: Promise<T>): Promise<T> {
  try {
    return await promise;
  } catch (err) {
    if (err instanceof UnkeyError && err.kind === "refused" && err.status === 404) {
      throw new UnkeyError(
        err.kind,
        err.route,
        `${option}: Unkey has no such ${option.startsWith("--api") ? "API" : "namespace"} (${err.message})`,
        err.info,
      );
    }
    throw err;
  }
}
