/**
 * `keyhaven import --from-unkey … --dry-run` (issue 36 §1, its reading half): reads the named APIs of a hosted Unkey
 * workspace through Unkey's v2 API (unkey.client.ts), with every key, the identities, permissions, roles and the
 * named namespaces' overrides, and prints what an import would copy: counts per kind and, for keys, which would
 * verify at once (Unkey returned the plaintext), which would be pending (adopted on first use) and which cannot be
 * held, with why. Writing needs server changes that come later: without --dry-run the command refuses (exit 2)
 * before reading anything. It loads neither the server nor the store.
 */
import { parseArgs } from "node:util";
import { fmt } from "../import/import.progress.js";
import { DEFAULT_UNKEY_URL, parseUnkeyUrl, UnkeyClient, UnkeyDecryptRefused, UnkeyError, type UnkeyPage } from "./unkey.client.js";
import { resolveUnkeyRootKey, UnkeyRootKeyError } from "./unkey.rootKey.js";
import type { UnkeyIdentity, UnkeyKey, UnkeyRatelimit } from "../../unkey/unkey.schemas.js";

const EXIT = { ok: 0, failed: 1, usage: 2, unavailable: 3 } as const;

export const FROM_UNKEY_HELP = `Usage: keyhaven import --from-unkey --api <apiId> [--api <apiId>…] --dry-run [options]

Reads a hosted Unkey workspace through Unkey's v2 API and shows what an import would copy: the named APIs, every
key of them (with its plaintext where Unkey returns it), the identities, permissions, roles and the overrides of
the named rate-limit namespaces. Only --dry-run exists yet: writing into keyhaven comes with issue 36.

Options:
  --api <apiId>                   An Unkey API to read (required, repeatable: Unkey v2 cannot list APIs).
  --ratelimit-namespace <name>    A rate-limit namespace whose overrides to read (repeatable).
  --unkey-url <url>               Unkey's base URL. Default: ${DEFAULT_UNKEY_URL}
  --unkey-root-key-file <path>    A file holding the Unkey root key. Default: the UNKEY_ROOT_KEY environment
                                  variable. The root key is never taken on the command line, nor printed.
  --dry-run                       Read and check everything, write nothing, print the summary (required for now).
  --json                          The summary as one JSON object on stdout.
  -h, --help                      Show this help.

Keys: "verifiable now" when Unkey returned the plaintext (decrypt: true; a root key that may not decrypt, or an
API that stores no encrypted keys, is said once on stderr and the keys are read without), "pending" otherwise
(adopted on first use, later), "skipped" when a field is outside what keyhaven's v2 routes accept (the reason names
the field, never its value).

Exit codes: 0 read and summarised, 1 Unkey refused a read (an unknown --api or namespace, a root key without
permission), 2 usage error (nothing read), 3 Unkey unavailable or answering outside its contract.
`;

const OPTIONS = {
  "from-unkey": { type: "boolean" },
  api: { type: "string", multiple: true },
  "ratelimit-namespace": { type: "string", multiple: true },
  "unkey-url": { type: "string" },
  "unkey-root-key-file": { type: "string" },
  "dry-run": { type: "boolean" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

/*
 * What keyhaven's v2 routes accept (src/wire/v2: keys.createKey, identities.createIdentity and their shared schemas),
 * restated here rather than imported: this command loads no server code, and the writing half will check the same
 * bounds again on the server.
 */
const MAX_INT32 = 2_147_483_647;
const MAX_EXPIRES = 4_102_444_800_000; // 2100-01-01, V2_MAX_EXPIRES
const MAX_WINDOW_MS = 2_592_000_000; // 30 days
const ID = /^[a-zA-Z0-9_]{3,255}$/;
const EXTERNAL_ID = /^[a-zA-Z0-9_.-]{1,255}$/;
const PERMISSION_SLUG = /^[a-zA-Z0-9_:\-.*]{1,128}$/;
const MAX_IDENTITY_META_JSON = 1_000_000;

/** Why a key or an identity cannot be held as it is, field by field (names and bounds, never a value). */
function ratelimitProblems(field: string, limits: UnkeyRatelimit[] | undefined): string[] {
  if (!limits) return [];
  const out: string[] = [];
  if (limits.length > 50) out.push(`${field}: more than 50 rate limits`);
  limits.forEach((r, i) => {
    if (r.name.length < 3 || r.name.length > 128) out.push(`${field}[${i}].name: must be 3 to 128 characters`);
    if (r.limit < 1 || r.limit > MAX_INT32) out.push(`${field}[${i}].limit: must be 1 to ${MAX_INT32}`);
    if (r.duration < 1000 || r.duration > MAX_WINDOW_MS) out.push(`${field}[${i}].duration: must be 1000 to ${MAX_WINDOW_MS} ms`);
  });
  return out;
}

function metaProblems(field: string, meta: Record<string, unknown> | undefined, maxJson?: number): string[] {
  if (!meta) return [];
  const out: string[] = [];
  if (Object.keys(meta).length > 100) out.push(`${field}: more than 100 properties`);
  if (maxJson !== undefined && JSON.stringify(meta).length > maxJson) out.push(`${field}: larger than ${fmt(maxJson)} bytes as JSON`);
  return out;
}

export function identityProblems(identity: UnkeyIdentity, field = "identity"): string[] {
  const out: string[] = [];
  if (!ID.test(identity.id)) out.push(`${field}.id: not 3 to 255 letters, digits and underscores`);
  if (!EXTERNAL_ID.test(identity.externalId)) out.push(`${field}.externalId: not 1 to 255 letters, digits and _ . -`);
  out.push(...metaProblems(`${field}.meta`, identity.meta, MAX_IDENTITY_META_JSON));
  out.push(...ratelimitProblems(`${field}.ratelimits`, identity.ratelimits));
  return out;
}

export function keyProblems(key: UnkeyKey): string[] {
  const out: string[] = [];
  if (!ID.test(key.keyId)) out.push("keyId: not 3 to 255 letters, digits and underscores");
  if (key.name !== undefined && key.name.length > 255) out.push("name: longer than 255 characters");
  out.push(...metaProblems("meta", key.meta));
  if (key.expires !== undefined && (key.expires < 0 || key.expires > MAX_EXPIRES)) out.push("expires: after 2100-01-01");
  if (key.roles) {
    if (key.roles.length > 100) out.push("roles: more than 100");
    if (key.roles.some((r) => r.length < 1 || r.length > 128)) out.push("roles: a name not 1 to 128 characters");
  }
  if (key.permissions) {
    if (key.permissions.length > 1000) out.push("permissions: more than 1000");
    if (key.permissions.some((p) => !PERMISSION_SLUG.test(p))) out.push("permissions: a slug not 1 to 128 letters, digits and _ : - . *");
  }
  const credits = key.credits;
  if (credits) {
    if (credits.remaining !== null && (credits.remaining < 0 || credits.remaining > MAX_INT32)) {
      out.push(`credits.remaining: must be 0 to ${MAX_INT32}`);
    }
    const refill = credits.refill;
    if (refill) {
      if (refill.amount < 1 || refill.amount > MAX_INT32) out.push(`credits.refill.amount: must be 1 to ${MAX_INT32}`);
      if (refill.interval === "monthly" && (refill.refillDay === undefined || refill.refillDay < 1 || refill.refillDay > 31)) {
        out.push("credits.refill.refillDay: a monthly refill needs a day from 1 to 31");
      }
    }
  }
  out.push(...ratelimitProblems("ratelimits", key.ratelimits));
  if (key.identity) out.push(...identityProblems(key.identity));
  return out;
}

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
    if (!values["dry-run"]) {
      throw new UsageError(
        "writing into keyhaven is not available yet (issue 36 in progress): run with --dry-run to read Unkey and see " +
          "what would be copied. Nothing was read or written.",
      );
    }
    let rootKey: string;
    try {
      rootKey = resolveUnkeyRootKey({ file: values["unkey-root-key-file"] });
    } catch (err) {
      if (err instanceof UnkeyRootKeyError) throw new UsageError(err.message);
      throw err;
    }
    return await dryRun(new UnkeyClient({ rootKey, baseUrl }), baseUrl, apiIds, namespaces, values.json === true);
  } catch (err) {
    if (err instanceof UsageError) {
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
